"""Record layouts the group coordinator writes to `__consumer_offsets`.

Why our own layout: the topic is internal, so only kafkapy reads it back; what matters is that
every key and value carries a version so a later kafkapy can read what an earlier one wrote, and
that keys are stable so the log cleaner keeps exactly the latest value per key (compaction).

Keys (big-endian, Kafka string = int16 length + UTF-8, -1 for null):

- key version 1, offset commit: `int16 1, string group, string topic, int32 partition`
- key version 2, group metadata: `int16 2, string group`
- key version 3, consumer group (KIP-848): `int16 3, string group`
- key version 4, consumer group member (KIP-848): `int16 4, string group, string member_id`

Values start with their own int16 version (0 today). A `None` value is a tombstone: the offset
was deleted or expired, or the group was deleted.

- offset commit value v0: `int64 offset, int32 leader_epoch, nullable string metadata,
  int64 commit_timestamp_ms, int64 expire_timestamp_ms`
- group metadata value v0: `string protocol_type, int32 generation, nullable string protocol,
  nullable string leader, int64 state_timestamp_ms, int32 member count`, then per member
  `string member_id, nullable string group_instance_id, string client_id, string client_host,
  int32 rebalance_timeout_ms, int32 session_timeout_ms, bytes subscription, bytes assignment`
  (bytes = int32 length + data).

- consumer group value v0: `int32 group_epoch, int32 assignment_epoch, int32 topic count`,
  then per subscribed topic `string topic, int32 partition count` (the metadata the target
  assignment was computed from: a change bumps the group epoch)
- consumer member value v0: `nullable string instance_id, nullable string rack_id,
  string client_id, string client_host, int32 rebalance_timeout_ms, nullable string
  server_assignor, int32 topic count + strings (subscribed topic names), int32 member_epoch,
  int32 previous_member_epoch, int16 state`, then three partition sets (assigned, pending
  revocation, target), each `int32 topic count` + per topic `string topic, int32 count, int32...`.
  Why one record per member where Kafka writes three (metadata, current and target
  assignment): a heartbeat rarely changes only one of them here, and one key per member keeps
  compaction and replay trivially consistent.

Decoding never trusts lengths: anything short, oversized or trailing raises `GroupRecordError`.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field

from kafkapy.coordinator.group.partitioning import (
    CONSUMER_OFFSETS_TOPIC,
    java_string_hash,
    offsets_partition_for,
)
from kafkapy.protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "CONSUMER_OFFSETS_TOPIC",
    "ConsumerGroupKey",
    "ConsumerGroupValue",
    "ConsumerMemberKey",
    "ConsumerMemberValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupRecord",
    "GroupRecordError",
    "KeyVersion",
    "MemberMetadataValue",
    "OffsetCommitKey",
    "OffsetCommitValue",
    "PartitionSet",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "java_string_hash",
    "offsets_partition_for",
]

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_OFFSET_VALUE_HEAD = struct.Struct(">hqi")  # version, offset, leader epoch


class GroupRecordError(ProtocolError):
    """A `__consumer_offsets` record kafkapy cannot read (corrupt or from a newer version)."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class KeyVersion(enum.IntEnum):
    """The first two bytes of every key: which record type follows."""

    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    CONSUMER_GROUP = 3
    CONSUMER_MEMBER = 4


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    state_timestamp_ms: int
    members: tuple[MemberMetadataValue, ...] = field(default_factory=tuple)


# topic -> sorted partitions, sorted by topic; empty topics left out (one spelling per set,
# so equal assignments compare equal)
PartitionSet = tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class ConsumerMemberKey:
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ConsumerGroupValue:
    group_epoch: int
    assignment_epoch: int
    # subscribed topic -> partition count when the target assignment was last computed
    topics: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerMemberValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    server_assignor: str | None
    subscribed_topics: tuple[str, ...]
    member_epoch: int
    previous_member_epoch: int
    state: int  # consumer.MemberState
    assigned: PartitionSet = ()
    pending_revocation: PartitionSet = ()
    target: PartitionSet = ()


Key = OffsetCommitKey | GroupMetadataKey | ConsumerGroupKey | ConsumerMemberKey
Value = OffsetCommitValue | GroupMetadataValue | ConsumerGroupValue | ConsumerMemberValue


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """One record for `__consumer_offsets`: the decoded key/value plus the group it belongs to.

    The coordinator hands these out and replays them; the server encodes them with
    `encode_key`/`encode_value` and appends them to partition `offsets_partition_for(group_id)`.
    """

    key: Key
    value: Value | None
    # a TxnOffsetCommit's records belong to the producer's transaction: they are written as a
    # transactional batch and count only once the transaction's commit marker is replayed
    producer_id: int = -1
    producer_epoch: int = -1

    @property
    def group_id(self) -> str:
        return self.key.group_id


# -- encoding ------------------------------------------------------------------------------


def _str(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    data = s.encode("utf-8")
    if len(data) > 0x7FFF:
        raise GroupRecordError("string longer than 32767 bytes", ErrorCode.INVALID_REQUEST)
    return _I16.pack(len(data)) + data


def _bytes(b: bytes) -> bytes:
    return _I32.pack(len(b)) + b


def _partition_set(ps: PartitionSet) -> bytes:
    parts = [_I32.pack(len(ps))]
    for topic, partitions in ps:
        parts.append(_str(topic) + _I32.pack(len(partitions)))
        parts += [_I32.pack(p) for p in partitions]
    return b"".join(parts)


def _encode_consumer(value: ConsumerGroupValue | ConsumerMemberValue) -> bytes:
    if isinstance(value, ConsumerGroupValue):
        parts = [_I16.pack(0), _I32.pack(value.group_epoch), _I32.pack(value.assignment_epoch)]
        parts.append(_I32.pack(len(value.topics)))
        parts += [_str(t) + _I32.pack(n) for t, n in value.topics]
        return b"".join(parts)
    parts = [
        _I16.pack(0),
        _str(value.instance_id),
        _str(value.rack_id),
        _str(value.client_id),
        _str(value.client_host),
        _I32.pack(value.rebalance_timeout_ms),
        _str(value.server_assignor),
        _I32.pack(len(value.subscribed_topics)),
    ]
    parts += [_str(t) for t in value.subscribed_topics]
    parts += [
        _I32.pack(value.member_epoch),
        _I32.pack(value.previous_member_epoch),
        _I16.pack(value.state),
        _partition_set(value.assigned),
        _partition_set(value.pending_revocation),
        _partition_set(value.target),
    ]
    return b"".join(parts)


def encode_key(key: Key) -> bytes:
    if isinstance(key, ConsumerGroupKey):
        return _I16.pack(KeyVersion.CONSUMER_GROUP) + _str(key.group_id)
    if isinstance(key, ConsumerMemberKey):
        return _I16.pack(KeyVersion.CONSUMER_MEMBER) + _str(key.group_id) + _str(key.member_id)
    if isinstance(key, OffsetCommitKey):
        return (
            _I16.pack(KeyVersion.OFFSET_COMMIT)
            + _str(key.group_id)
            + _str(key.topic)
            + _I32.pack(key.partition)
        )
    return _I16.pack(KeyVersion.GROUP_METADATA) + _str(key.group_id)


def encode_value(value: Value | None) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, ConsumerGroupValue | ConsumerMemberValue):
        return _encode_consumer(value)
    if isinstance(value, OffsetCommitValue):
        return (
            _OFFSET_VALUE_HEAD.pack(0, value.offset, value.leader_epoch)
            + _str(value.metadata)
            + _I64.pack(value.commit_timestamp_ms)
            + _I64.pack(value.expire_timestamp_ms)
        )
    parts = [
        _I16.pack(0),
        _str(value.protocol_type),
        _I32.pack(value.generation),
        _str(value.protocol),
        _str(value.leader),
        _I64.pack(value.state_timestamp_ms),
        _I32.pack(len(value.members)),
    ]
    for m in value.members:
        parts += [
            _str(m.member_id),
            _str(m.group_instance_id),
            _str(m.client_id),
            _str(m.client_host),
            _I32.pack(m.rebalance_timeout_ms),
            _I32.pack(m.session_timeout_ms),
            _bytes(m.subscription),
            _bytes(m.assignment),
        ]
    return b"".join(parts)


# -- decoding ------------------------------------------------------------------------------


class _Reader:
    """Bounds-checked cursor: every read raises GroupRecordError instead of slicing short."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise GroupRecordError(f"record truncated at byte {self.pos} (need {n})")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        v: int = _I16.unpack(self._take(2))[0]
        return v

    def i32(self) -> int:
        v: int = _I32.unpack(self._take(4))[0]
        return v

    def i64(self) -> int:
        v: int = _I64.unpack(self._take(8))[0]
        return v

    def nullable_str(self) -> str | None:
        n = self.i16()
        if n == -1:
            return None
        if n < 0:
            raise GroupRecordError(f"negative string length {n}")
        try:
            return self._take(n).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GroupRecordError(f"string is not UTF-8: {exc}") from None

    def str(self) -> str:
        s = self.nullable_str()
        if s is None:
            raise GroupRecordError("null where a string is required")
        return s

    def bytes(self) -> bytes:
        n = self.i32()
        if n < 0:
            raise GroupRecordError(f"negative bytes length {n}")
        return self._take(n)

    def done(self) -> None:
        if self.pos != len(self.buf):
            raise GroupRecordError(f"{len(self.buf) - self.pos} trailing bytes in record")


def decode_key(data: bytes) -> Key:
    r = _Reader(bytes(data))
    version = r.i16()
    key: Key
    if version == KeyVersion.OFFSET_COMMIT:
        key = OffsetCommitKey(r.str(), r.str(), r.i32())
    elif version == KeyVersion.GROUP_METADATA:
        key = GroupMetadataKey(r.str())
    elif version == KeyVersion.CONSUMER_GROUP:
        key = ConsumerGroupKey(r.str())
    elif version == KeyVersion.CONSUMER_MEMBER:
        key = ConsumerMemberKey(r.str(), r.str())
    else:
        raise GroupRecordError(f"unknown __consumer_offsets key version {version}")
    r.done()
    return key


def _count(r: _Reader, min_item_size: int) -> int:
    """An item count that the remaining bytes can hold, so a corrupt count allocates nothing."""
    n = r.i32()
    if n < 0 or n * min_item_size > len(r.buf) - r.pos:
        raise GroupRecordError(f"bad item count {n}")
    return n


def _read_partition_set(r: _Reader) -> PartitionSet:
    out: list[tuple[str, tuple[int, ...]]] = []
    for _ in range(_count(r, 6)):
        topic = r.str()
        out.append((topic, tuple(r.i32() for _ in range(_count(r, 4)))))
    return tuple(out)


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """Decode the value for `key` (its type decides the layout); None stays a tombstone."""
    if data is None:
        return None
    r = _Reader(bytes(data))
    version = r.i16()
    if version != 0:
        raise GroupRecordError(f"unknown value version {version} for {type(key).__name__}")
    value: Value
    if isinstance(key, OffsetCommitKey):
        value = OffsetCommitValue(r.i64(), r.i32(), r.nullable_str(), r.i64(), r.i64())
    elif isinstance(key, ConsumerGroupKey):
        epoch, assignment_epoch = r.i32(), r.i32()
        topics = tuple((r.str(), r.i32()) for _ in range(_count(r, 6)))
        value = ConsumerGroupValue(epoch, assignment_epoch, topics)
    elif isinstance(key, ConsumerMemberKey):
        head = (r.nullable_str(), r.nullable_str(), r.str(), r.str(), r.i32(), r.nullable_str())
        subscribed = tuple(r.str() for _ in range(_count(r, 2)))
        epoch, previous, state = r.i32(), r.i32(), r.i16()
        sets = (_read_partition_set(r), _read_partition_set(r), _read_partition_set(r))
        value = ConsumerMemberValue(*head, subscribed, epoch, previous, state, *sets)
    else:
        protocol_type = r.str()
        generation = r.i32()
        protocol = r.nullable_str()
        leader = r.nullable_str()
        state_ts = r.i64()
        count = r.i32()
        # each member needs at least 24 bytes, so a huge count cannot make us allocate much
        if count < 0 or count * 24 > len(r.buf) - r.pos:
            raise GroupRecordError(f"bad member count {count}")
        members = tuple(
            MemberMetadataValue(
                r.str(), r.nullable_str(), r.str(), r.str(), r.i32(), r.i32(), r.bytes(), r.bytes()
            )
            for _ in range(count)
        )
        value = GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)
    r.done()
    return value
