"""kafkapy's private tagged fields on controller traffic, between kafkapy nodes only: the
metadata offset a controller's answer committed at, and the suspects a broker's heartbeat
reports. Here, below both ends, because the controller listener's handlers (kafkapy.broker)
write and read them as the server's ControllerChannel and liveness checks do."""

from __future__ import annotations

from typing import Any

__all__ = [
    "METADATA_OFFSET_TAG",
    "SUSPECTS_TAG",
    "decode_suspects",
    "encode_suspects",
    "pop_metadata_offset",
    "set_metadata_offset",
]

#: Tagged field the controller adds to its answers: the metadata offset the change committed at
#: (int64, big-endian). The ControllerChannel removes it and waits until the local image has
#: applied that offset, so a broker that forwarded CreateTopics sees the topic in its own
#: Metadata right away. Only nodes of this cluster see it: the channel strips it before a
#: response is forwarded to a client.
METADATA_OFFSET_TAG = 0x6B70


def set_metadata_offset(message: Any, offset: int) -> None:
    if offset >= 0:
        message.unknown_tagged_fields[METADATA_OFFSET_TAG] = offset.to_bytes(8, "big", signed=True)


def pop_metadata_offset(message: Any) -> int:
    """The offset set by `set_metadata_offset` (removed from the message), or -1."""
    raw = message.unknown_tagged_fields.pop(METADATA_OFFSET_TAG, None)
    if raw is None or len(raw) != 8:
        return -1
    return int.from_bytes(raw, "big", signed=True)


#: private tagged field of BrokerHeartbeatRequest between kafkapy nodes: node ids the sender
#: saw refuse or drop connections (int32 each, big-endian)
SUSPECTS_TAG = 0x6B71


def encode_suspects(node_ids: list[int]) -> bytes:
    return b"".join(int(i).to_bytes(4, "big", signed=True) for i in node_ids)


def decode_suspects(raw: bytes | None) -> list[int]:
    if not raw or len(raw) % 4:
        return []
    return [int.from_bytes(raw[i : i + 4], "big", signed=True) for i in range(0, len(raw), 4)]
