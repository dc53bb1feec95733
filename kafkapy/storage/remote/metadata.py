"""The records of Kafka's `__remote_log_metadata` topic, and their bytes.

Why a topic of its own (not the controller's metadata log): one record per copied segment grows
with data volume, and the controller's log must stay small enough to replay at start-up. Kafka
keys these records by partition into an internal topic; every broker replays it, so a new
leader knows which segments are remote (`metadata_cache.RemoteLogMetadataCache`).

Three records, Kafka's `RemoteLogMetadataSerde` encoding so the bytes are Kafka's:
`api key (uvarint) | version (uvarint) | message`, the message in the flexible encoding of the
JSON schemas (compact strings and arrays, 16-byte UUIDs, big-endian fixed-width integers, a
tagged-field section after every struct). Version 1 is written; 0 and 1 are read.

- api key 0, `RemoteLogSegmentMetadata`: a copy started (state COPY_SEGMENT_STARTED) with
  everything known about the segment.
- api key 1, `RemoteLogSegmentMetadataUpdate`: a segment's state moved on (copy finished,
  delete started / finished).
- api key 2, `RemotePartitionDeleteMetadata`: a partition's remote data is being deleted.

Decoding is bounded like every kafkapy parser: garbage raises `ProtocolError`, nothing else.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from collections.abc import Callable
from typing import Any

from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.primitives import (
    Frame,
    r_carray_len,
    r_cnbytes,
    r_cstring,
    r_int8,
    r_int32,
    r_int64,
    r_tags,
    r_uuid,
    r_uvarint,
    remaining,
    tag_value,
    w_bool,
    w_carray_len,
    w_cnbytes,
    w_cstring,
    w_int8,
    w_int32,
    w_int64,
    w_tags,
    w_uuid,
    w_uvarint,
)
from kafkapy.storage.remote.layout import RemoteLogSegmentId, TopicIdPartition

__all__ = [
    "RemoteLogMetadata",
    "RemoteLogSegmentMetadata",
    "RemoteLogSegmentMetadataUpdate",
    "RemoteLogSegmentState",
    "RemotePartitionDeleteMetadata",
    "RemotePartitionDeleteState",
    "decode_remote_log_metadata",
    "encode_remote_log_metadata",
    "metadata_partition",
    "murmur2",
]

_VERSION = 1
_LEADER_EPOCH_ENTRY_MIN = 13  # int32 + int64 + empty tag section


class RemoteLogSegmentState(enum.IntEnum):
    """Kafka's `RemoteLogSegmentState` ids; `can_move_to` is its transition rule."""

    COPY_SEGMENT_STARTED = 0
    COPY_SEGMENT_FINISHED = 1
    DELETE_SEGMENT_STARTED = 2
    DELETE_SEGMENT_FINISHED = 3

    def can_move_to(self, target: RemoteLogSegmentState) -> bool:
        return target in _SEGMENT_TRANSITIONS[self]


_S = RemoteLogSegmentState
_SEGMENT_TRANSITIONS: dict[RemoteLogSegmentState, frozenset[RemoteLogSegmentState]] = {
    _S.COPY_SEGMENT_STARTED: frozenset({_S.COPY_SEGMENT_FINISHED, _S.DELETE_SEGMENT_STARTED}),
    _S.COPY_SEGMENT_FINISHED: frozenset({_S.DELETE_SEGMENT_STARTED}),
    _S.DELETE_SEGMENT_STARTED: frozenset({_S.DELETE_SEGMENT_FINISHED}),
    _S.DELETE_SEGMENT_FINISHED: frozenset(),
}


class RemotePartitionDeleteState(enum.IntEnum):
    """Kafka's `RemotePartitionDeleteState` ids."""

    DELETE_PARTITION_MARKED = 0
    DELETE_PARTITION_STARTED = 1
    DELETE_PARTITION_FINISHED = 2


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadata:
    """A segment whose copy started (api key 0).

    `segment_leader_epochs`: (leader epoch, start offset) of each epoch within the segment, in
    offset order - what a follower rebuilding its leader-epoch cache from the remote tier needs.
    `end_offset` is inclusive (the segment's last offset), as in Kafka.
    """

    segment_id: RemoteLogSegmentId
    start_offset: int
    end_offset: int
    broker_id: int
    max_timestamp_ms: int
    event_timestamp_ms: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    segment_size_in_bytes: int
    state: RemoteLogSegmentState = RemoteLogSegmentState.COPY_SEGMENT_STARTED
    custom_metadata: bytes | None = None
    txn_index_empty: bool = False
    broker_leader_epoch: int = 0

    API_KEY = 0

    def with_update(self, update: RemoteLogSegmentMetadataUpdate) -> RemoteLogSegmentMetadata:
        """This segment as the update leaves it (state, event time, custom metadata)."""
        return dataclasses.replace(
            self, state=update.state, event_timestamp_ms=update.event_timestamp_ms,
            broker_id=update.broker_id, custom_metadata=update.custom_metadata)


@dataclasses.dataclass(frozen=True, slots=True)
class RemoteLogSegmentMetadataUpdate:
    """A copied segment's state moved on (api key 1)."""

    segment_id: RemoteLogSegmentId
    broker_id: int
    event_timestamp_ms: int
    state: RemoteLogSegmentState
    custom_metadata: bytes | None = None
    broker_leader_epoch: int = -1
    end_offset: int = -1

    API_KEY = 1


@dataclasses.dataclass(frozen=True, slots=True)
class RemotePartitionDeleteMetadata:
    """A partition's remote data is being deleted (api key 2): the topic was deleted."""

    partition: TopicIdPartition
    broker_id: int
    event_timestamp_ms: int
    state: RemotePartitionDeleteState
    broker_leader_epoch: int = 0
    end_offset: int = 0

    API_KEY = 2


RemoteLogMetadata = (
    RemoteLogSegmentMetadata | RemoteLogSegmentMetadataUpdate | RemotePartitionDeleteMetadata)


# --- encoding -------------------------------------------------------------------------------

def _w_tp(io: Any, tp: TopicIdPartition) -> None:
    w_cstring(io, tp.topic)
    w_uuid(io, tp.topic_id)
    w_int32(io, tp.partition)
    w_tags(io, [], {})


def _w_segment_id(io: Any, segment_id: RemoteLogSegmentId) -> None:
    _w_tp(io, segment_id.partition)
    w_uuid(io, segment_id.id)
    w_tags(io, [], {})


def _tags(*fields: tuple[int, Any, object, object]) -> list[tuple[int, bytes]]:
    """(tag, writer, value, schema default): the tagged fields that differ from the default."""
    return [(tag, tag_value(w, v)) for tag, w, v, default in fields if v != default]


def encode_remote_log_metadata(record: RemoteLogMetadata) -> bytes:
    """The record value Kafka writes to `__remote_log_metadata` for `record`."""
    io = Frame()
    w_uvarint(io, record.API_KEY)
    w_uvarint(io, _VERSION)
    if isinstance(record, RemoteLogSegmentMetadata):
        _w_segment_id(io, record.segment_id)
        for value in (record.start_offset, record.end_offset):
            w_int64(io, value)
        w_int32(io, record.broker_id)
        w_int64(io, record.max_timestamp_ms)
        w_int64(io, record.event_timestamp_ms)
        w_carray_len(io, list(record.segment_leader_epochs), False)
        for epoch, offset in record.segment_leader_epochs:
            w_int32(io, epoch)
            w_int64(io, offset)
            w_tags(io, [], {})
        w_int32(io, record.segment_size_in_bytes)
        w_cnbytes(io, record.custom_metadata)
        w_int8(io, record.state)
        w_tags(io, _tags((0, w_bool, record.txn_index_empty, False),
                         (1, w_int32, record.broker_leader_epoch, 0)), {})
    elif isinstance(record, RemoteLogSegmentMetadataUpdate):
        _w_segment_id(io, record.segment_id)
        w_int32(io, record.broker_id)
        w_int64(io, record.event_timestamp_ms)
        w_cnbytes(io, record.custom_metadata)
        w_int8(io, record.state)
        w_tags(io, _tags((0, w_int32, record.broker_leader_epoch, -1),
                         (1, w_int64, record.end_offset, -1)), {})
    else:
        _w_tp(io, record.partition)
        w_int32(io, record.broker_id)
        w_int64(io, record.event_timestamp_ms)
        w_int8(io, record.state)
        w_tags(io, _tags((0, w_int32, record.broker_leader_epoch, 0),
                         (1, w_int64, record.end_offset, 0)), {})
    return io.getvalue()


# --- decoding -------------------------------------------------------------------------------

def _r_tp(io: Any) -> TopicIdPartition:
    tp = TopicIdPartition(r_cstring(io), r_uuid(io), r_int32(io))
    r_tags(io)
    return tp


def _r_segment_id(io: Any) -> RemoteLogSegmentId:
    tp = _r_tp(io)
    segment_id = RemoteLogSegmentId(tp, r_uuid(io))
    r_tags(io)
    return segment_id


def _tag(tags: dict[int, bytes], tag: int, fmt: str, default: Any) -> Any:
    raw = tags.get(tag)
    if raw is None:
        return default
    if len(raw) != struct.calcsize(fmt):
        raise ProtocolError(f"tagged field {tag} has {len(raw)} bytes")
    return struct.unpack(fmt, raw)[0]


def _enum(kind: type[enum.IntEnum], value: int) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise ProtocolError(f"unknown {kind.__name__} {value}") from None


def _r_segment(io: Any) -> RemoteLogSegmentMetadata:
    segment_id = _r_segment_id(io)
    start, end, broker = r_int64(io), r_int64(io), r_int32(io)
    max_ts, event_ts = r_int64(io), r_int64(io)
    epochs = []
    for _ in range(r_carray_len(io, False, _LEADER_EPOCH_ENTRY_MIN)):
        epochs.append((r_int32(io), r_int64(io)))
        r_tags(io)
    size, custom = r_int32(io), r_cnbytes(io)
    state = _enum(RemoteLogSegmentState, r_int8(io))
    tags = r_tags(io)
    return RemoteLogSegmentMetadata(
        segment_id, start, end, broker, max_ts, event_ts, tuple(epochs), size, state, custom,
        bool(_tag(tags, 0, ">?", False)), _tag(tags, 1, ">i", 0))


def _r_update(io: Any) -> RemoteLogSegmentMetadataUpdate:
    segment_id = _r_segment_id(io)
    broker, event_ts, custom = r_int32(io), r_int64(io), r_cnbytes(io)
    state = _enum(RemoteLogSegmentState, r_int8(io))
    tags = r_tags(io)
    return RemoteLogSegmentMetadataUpdate(
        segment_id, broker, event_ts, state, custom, _tag(tags, 0, ">i", -1),
        _tag(tags, 1, ">q", -1))


def _r_partition_delete(io: Any) -> RemotePartitionDeleteMetadata:
    tp = _r_tp(io)
    broker, event_ts = r_int32(io), r_int64(io)
    state = _enum(RemotePartitionDeleteState, r_int8(io))
    tags = r_tags(io)
    return RemotePartitionDeleteMetadata(
        tp, broker, event_ts, state, _tag(tags, 0, ">i", 0), _tag(tags, 1, ">q", 0))


_READERS: dict[int, Callable[[Any], RemoteLogMetadata]] = {0: _r_segment, 1: _r_update, 2: _r_partition_delete}


def decode_remote_log_metadata(data: bytes) -> RemoteLogMetadata:
    """The record in a `__remote_log_metadata` record value; ProtocolError for anything else."""
    io = Frame(data)
    api_key, version = r_uvarint(io), r_uvarint(io)
    reader = _READERS.get(api_key)
    if reader is None:
        raise ProtocolError(f"unknown remote log metadata api key {api_key}")
    if version > _VERSION:
        raise ProtocolError(f"unsupported remote log metadata version {version}")
    record = reader(io)
    if remaining(io):
        raise ProtocolError(f"{remaining(io)} bytes after the remote log metadata record")
    return record


# --- which partition of __remote_log_metadata carries a partition's records -----------------

_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2` (32-bit MurmurHash2, seed 0x9747b28c), as a signed int32."""
    m, r = 0x5BD1E995, 24
    h = (0x9747B28C ^ len(data)) & _MASK32
    body = len(data) - len(data) % 4
    for i in range(0, body, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & _MASK32
        k ^= k >> r
        k = (k * m) & _MASK32
        h = ((h * m) & _MASK32) ^ k
    tail = data[body:]
    if tail:
        for i in reversed(range(len(tail))):
            h ^= tail[i] << (8 * i)
        h = (h * m) & _MASK32
    h ^= h >> 13
    h = (h * m) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


def _java_long_hash(value: int) -> int:
    unsigned = value & 0xFFFFFFFFFFFFFFFF
    return (unsigned ^ (unsigned >> 32)) & _MASK32


def metadata_partition(tp: TopicIdPartition, partitions: int) -> int:
    """The `__remote_log_metadata` partition of `tp`'s records, by the algorithm of Kafka's
    `RemoteLogMetadataTopicPartitioner` (murmur2 of the Java `Objects.hash` of the topic id's
    halves and the partition): keyed by topic id, not name, so every record of one partition
    lands in one metadata partition and is replayed in order. (No Kafka-computed vector checks
    the whole mapping yet; murmur2 itself is checked against Kafka's.)"""
    most = int.from_bytes(tp.topic_id.bytes[:8], "big", signed=True)
    least = int.from_bytes(tp.topic_id.bytes[8:], "big", signed=True)
    h = 1
    for element in (_java_long_hash(least), _java_long_hash(most), tp.partition & _MASK32):
        h = (31 * h + element) & _MASK32
    return (murmur2(h.to_bytes(4, "big")) & 0x7FFFFFFF) % partitions
