"""SubscribeToShard event-stream messages built as Kinesis frames them: what the event-stream decoder's unit tests
and the integration tests serving recorded subscription shapes feed the readers."""

from __future__ import annotations

import binascii
import json
import struct


def encode(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message (string headers only), framed as the AWS event-stream format specifies."""
    head = b""
    for name, value in headers.items():
        raw_name, raw_value = name.encode(), value.encode()
        head += struct.pack("!B", len(raw_name)) + raw_name + b"\x07" + struct.pack("!H", len(raw_value)) + raw_value
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack("!II", total, len(head))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    body = prelude + head + payload
    return body + struct.pack("!I", binascii.crc32(body) & 0xFFFFFFFF)


def event(payload: dict[str, object]) -> bytes:
    """A ``SubscribeToShardEvent`` message holding ``payload`` as JSON."""
    return encode({":message-type": "event", ":event-type": "SubscribeToShardEvent",
                   ":content-type": "application/json"}, json.dumps(payload).encode())


#: The initial response real Kinesis sends first on a subscription (kinesis-mock and kinesis-local do not).
INITIAL = encode({":message-type": "event", ":event-type": "initial-response"}, b"{}")
