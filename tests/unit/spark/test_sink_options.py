"""The sink's options: the connection options are the source's (one parser), the sink's own are checked with their
names, and read options are refused with the list of what a sink takes."""

from __future__ import annotations

import pytest

from kinesis_spout import AwsCredentials, ConfigError
from kinesis_spout.spark.sink import parse_sink_options


def test_options_match_case_insensitively_and_take_the_source_s_connection_settings() -> None:
    opts = parse_sink_options({"streamname": "out", "region": "eu-west-1", "endpointurl": "http://127.0.0.1:1",
                               "awsprofile": "writer", "aggregate": "TRUE", "putdeadlines": "5",
                               "partitionkeycolumn": "k", "checkpointLocation": "/tmp/ck", "path": "x"})
    assert (opts.stream_name, opts.config.region, opts.config.endpoint_url) == ("out", "eu-west-1",
                                                                                "http://127.0.0.1:1")
    assert opts.config.credentials == AwsCredentials(profile="writer")
    assert (opts.aggregate, opts.put_deadline_s, opts.partition_key_column) == (True, 5.0, "k")
    assert opts.partition_key is None and opts.dead_letter_path is None


@pytest.mark.parametrize(("options", "message"), [
    ({}, r"option 'streamName' is required"),
    ({"streamName": "s", "initialPosition": "LATEST"},
     r"option 'initialPosition' is not an option of the kinesis_spout sink .* its options are: aggregate, "),
    ({"streamName": "s", "aggregate": "maybe"}, r"option 'aggregate' must be true or false, got 'maybe'"),
    ({"streamName": "s", "putDeadlineS": "0"}, r"option 'putDeadlineS' must be a number of seconds above 0"),
    ({"streamName": "s", "putDeadlineS": "nan"}, r"option 'putDeadlineS' must be a number of seconds above 0"),
    ({"streamName": "s", "partitionKey": "k" * 257},
     r"option 'partitionKey' must be 1 to 256 UTF-16 code units long .* got 257"),
    ({"streamName": "s", "partitionKey": "\U0001F600" * 200},
     r"option 'partitionKey' must be 1 to 256 UTF-16 code units long .* an emoji, counts 2\), got 400"),
    ({"streamName": "s", "partitionKey": "k", "partitionKeyColumn": "c"}, r"exclude each other"),
    ({"streamName": "s", "awsRoleDurationS": "soon"}, r"option 'awsRoleDurationS' must be a whole number"),
])
def test_bad_options_are_refused_naming_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_sink_options(options)


def test_a_constant_key_of_256_utf16_units_is_taken() -> None:
    assert parse_sink_options({"streamName": "s", "partitionKey": "\U0001F600" * 128}).partition_key == \
        "\U0001F600" * 128
