"""Option names of the AWS Scala connector for Structured Streaming, accepted where they mean the same here.

PURE: no Spark, no I/O. Users of that connector switch by changing the format name: the options below are read
under this source's own names; those whose meaning differs here are refused with a message that says what to use
instead (never silently ignored, never taken with another meaning). Names match case-insensitively, as Spark hands
a Python data source its options lower-cased.

=======================================  =======================  ==================================================
connector option                         here                     note
=======================================  =======================  ==================================================
``kinesis.streamName``                   ``streamName``
``kinesis.region``                       ``region``
``kinesis.endpointUrl``                  ``endpointUrl``
``kinesis.startingPosition``             ``initialPosition``      ``EARLIEST`` is ``TRIM_HORIZON``;
                                                                  ``AT_TIMESTAMP <time>`` sets ``initialTimestamp``
``kinesis.getRecords.numberOfRecordsPerFetch``  ``maxRecordsPerCall``
``kinesis.describeShardInterval``        ``shardSyncIntervalS``   ``1s``, ``500ms``, ``2m`` or seconds
``kinesis.awsAccessKeyId``               ``awsAccessKeyId``       with ``kinesis.awsSecretKey``
``kinesis.awsSecretKey``                 ``awsSecretAccessKey``
``kinesis.stsRoleArn``                   ``awsRoleArn``           a role to assume (``awsExternalId`` if asked)
``kinesis.stsSessionName``               ``awsRoleSessionName``
``kinesis.stsEndpointUrl``               ``awsStsEndpointUrl``
``kinesis.consumerType``                 ``retrieval``            ``GetRecords`` is ``polling``, ``SubscribeToShard``
                                                                  is ``fanout`` (enhanced fan-out)
``kinesis.consumerName``                 ``consumerName``         the fan-out consumer; refused on a polling read
=======================================  =======================  ==================================================

Options of Spark's Kafka source (``startingOffsets``, ``maxOffsetsPerTrigger``, ``failOnDataLoss``, ``subscribe``,
``kafka.bootstrap.servers``...) are refused with the option that does the job here (:data:`KAFKA`).
"""

from __future__ import annotations

from typing import Mapping

from kinesis_spout.errors import ConfigError

__all__ = ["ALIASES", "CONSUMER_TYPES", "KAFKA", "REFUSED", "resolve_aliases"]

#: connector option (lower case) -> this source's option
ALIASES: dict[str, str] = {
    "kinesis.streamname": "streamName",
    "kinesis.region": "region",
    "kinesis.endpointurl": "endpointUrl",
    "kinesis.startingposition": "initialPosition",
    "kinesis.getrecords.numberofrecordsperfetch": "maxRecordsPerCall",
    "kinesis.describeshardinterval": "shardSyncIntervalS",
    "kinesis.awsaccesskeyid": "awsAccessKeyId",
    "kinesis.awssecretkey": "awsSecretAccessKey",
    "kinesis.stsrolearn": "awsRoleArn",
    "kinesis.stssessionname": "awsRoleSessionName",
    "kinesis.stsendpointurl": "awsStsEndpointUrl",
    "kinesis.consumertype": "retrieval",
    "kinesis.consumername": "consumerName",
}

#: ``kinesis.consumerType`` values (lower case) -> ``retrieval``
CONSUMER_TYPES: dict[str, str] = {"getrecords": "polling", "subscribetoshard": "fanout"}

#: connector options whose meaning differs here (lower case) -> what to use instead
REFUSED: dict[str, str] = {
    "kinesis.maxfetchrecordspershard": "it limits each shard; here maxRecordsPerTrigger limits the whole batch and "
                                       "is shared fairly across the shards",
    "kinesis.maxfetchtimepershardsec": "batches here end at the read limit or at the tip; use maxRecordsPerTrigger "
                                       "or maxBytesPerTrigger",
    "kinesis.failondataloss": "a shard whose records expired is reported as an error here, always",
    "kinesis.metadatacommittertype": "this source keeps its batch metadata in Spark's checkpoint location and its "
                                     "checkpoints in ZooKeeper (options zookeeper, appName)",
    "kinesis.metadatapath": "batch metadata lives in Spark's checkpoint location; checkpoints in ZooKeeper "
                            "(options zookeeper, appName)",
}


#: options of Spark's Kafka source (lower case) -> what does the job here. Refused, never taken: their values do not
#: carry over (offsets are not sequence numbers, brokers are not an endpoint URL).
KAFKA: dict[str, str] = {
    "startingoffsets": "use initialPosition: 'earliest' is TRIM_HORIZON, 'latest' is LATEST, and AT_TIMESTAMP with "
                       "initialTimestamp starts at a time (a restarted query resumes from its checkpoint location)",
    "startingoffsetsbytimestamp": "use initialPosition AT_TIMESTAMP with initialTimestamp (one time for every shard)",
    "endingoffsets": "a stream read has no end; a batch read (spark.read) ends at endingTimestamp",
    "maxoffsetspertrigger": "use maxRecordsPerTrigger (records per micro-batch, shared fairly across the shards; "
                            "maxBytesPerTrigger limits the bytes)",
    "failondataloss": "there is no such switch here: records that expired before they were read are reported as an "
                      "error, always, and the query stops (restart it with a new checkpoint location, or reset the "
                      "checkpoints with `kinesis-spout checkpoints reset`, to go on without them)",
    "subscribe": "use streamName (one stream, or several separated by commas as subscribe takes topics)",
    "subscribepattern": "use streamName (one stream, or several separated by commas; no patterns)",
    "assign": "use streamName (a query reads every shard of its stream)",
    "kafka.bootstrap.servers": "use endpointUrl (an http:// or https:// URL, for an emulator or a VPC endpoint; leave "
                               "it out for AWS) and region",
    "kafka.group.id": "use appName (the app whose checkpoints in ZooKeeper the query shares)",
    "groupidprefix": "use appName (the app whose checkpoints in ZooKeeper the query shares)",
    "minpartitions": "a micro-batch has one partition per shard with records",
}


def _duration_s(option: str, value: str) -> str:
    text = str(value).strip().lower()
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix) and text[:-len(suffix)].replace(".", "", 1).isdigit():
            return repr(float(text[:-len(suffix)]) * factor)
    if text.replace(".", "", 1).isdigit():
        return text
    raise ConfigError(f"option {option!r} must be a duration such as 1s, 500ms or 2m, got {value!r}")


def _starting_position(option: str, value: str) -> dict[str, str]:
    text = str(value).strip()
    upper = text.upper()
    if upper == "EARLIEST":
        return {"initialPosition": "TRIM_HORIZON"}
    if upper in ("LATEST", "TRIM_HORIZON"):
        return {"initialPosition": upper}
    if upper.startswith("AT_TIMESTAMP"):
        when = text[len("AT_TIMESTAMP"):].strip()
        if when:
            return {"initialPosition": "AT_TIMESTAMP", "initialTimestamp": when}
    raise ConfigError(f"option {option!r} must be LATEST, TRIM_HORIZON, EARLIEST or 'AT_TIMESTAMP <ISO-8601 time>', "
                      f"got {value!r}")


def resolve_aliases(options: Mapping[str, str]) -> dict[str, str]:
    """``options`` with the connector's names replaced by this source's; ``ConfigError`` for a refused one, or for an
    alias given next to the option it stands for (which one would win is not obvious)."""
    given = {str(name).lower(): str(name) for name in options if str(name).lower() not in ALIASES}
    out: dict[str, str] = {}
    for raw_name, value in options.items():
        name = str(raw_name)
        lowered = name.lower()
        if lowered in REFUSED:
            raise ConfigError(f"option {name!r} of the AWS Scala connector has no equivalent here: {REFUSED[lowered]}")
        if lowered in KAFKA:
            raise ConfigError(f"option {name!r} is Kafka's, not this source's: {KAFKA[lowered]}")
        if lowered not in ALIASES:
            out[name] = value
            continue
        if lowered == "kinesis.startingposition":
            translated = _starting_position(name, value)
        elif lowered == "kinesis.describeshardinterval":
            translated = {ALIASES[lowered]: _duration_s(name, value)}
        elif lowered == "kinesis.consumertype":
            translated = {ALIASES[lowered]: _consumer_type(name, value)}
        else:
            translated = {ALIASES[lowered]: value}
        for target, text in translated.items():
            if target.lower() in given:
                raise ConfigError(f"options {name!r} and {given[target.lower()]!r} both set {target}; keep one")
            out[target] = text
    _check_consumer_name(options, out)
    return out


def _consumer_type(option: str, value: str) -> str:
    retrieval = CONSUMER_TYPES.get(str(value).strip().lower())
    if retrieval is None:
        raise ConfigError(f"option {option!r} must be GetRecords (polling) or SubscribeToShard (enhanced fan-out), "
                          f"got {value!r}")
    return retrieval


def _check_consumer_name(options: Mapping[str, str], out: Mapping[str, str]) -> None:
    """Refuse the connector's ``kinesis.consumerName`` on a read that polls: there it would name nothing (fan-out is
    billed per consumer, so it is never turned on by a name alone)."""
    name = next((str(n) for n in options if str(n).lower() == "kinesis.consumername"), None)
    if name is None:
        return
    retrieval = next((str(v).strip().lower() for k, v in out.items() if k.lower() == "retrieval"), "polling")
    if retrieval != "fanout":
        raise ConfigError(f"option {name!r} names an enhanced fan-out consumer, but this read polls (GetRecords): "
                          f"add .option('kinesis.consumerType', 'SubscribeToShard') (or this source's "
                          f".option('retrieval', 'fanout')) to read through the consumer, or leave {name!r} out")
