"""Metadata records: the only way cluster state changes (modelled on Kafka's KRaft records).

Why records and not direct mutation: every node replays the same committed records from the
`__cluster_metadata` Raft log into its `MetadataImage`, so the active controller and every
broker agree on brokers, topics, partition leaders and ISRs without any other channel.

Wire form of one record (one Kafka record value in the metadata log), all integers varints:
`frame version (uvarint, 0) | record type (uvarint) | record version (uvarint, 0) | fields`.
Fields are written in declaration order by kind (zigzag varints for signed integers, 16 raw
bytes for UUIDs, 8 big-endian bytes for doubles, length+1 uvarint prefixes for strings, bytes
and lists with 0 meaning null). The parser is bounded: every count is checked against the bytes
left, varints are capped at ten bytes and integer ranges are checked, so garbage raises
`ProtocolError`, never anything else.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
import uuid
from collections.abc import Callable
from typing import Any

from kafkapy.protocol.config_types import ConfigResourceType
from kafkapy.protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "AccessControlEntryRecord",
    "BrokerRegistrationChangeRecord",
    "ClientQuotaRecord",
    "ConfigRecord",
    "ConfigResourceType",
    "Endpoint",
    "FeatureLevelRecord",
    "FenceBrokerRecord",
    "MetadataRecord",
    "NoOpRecord",
    "PartitionChangeRecord",
    "PartitionRecord",
    "ProducerIdsRecord",
    "QuotaEntity",
    "RecordType",
    "RegisterBrokerRecord",
    "RemoveAccessControlEntryRecord",
    "RemoveTopicRecord",
    "RemoveUserScramCredentialRecord",
    "TopicRecord",
    "UnfenceBrokerRecord",
    "UnregisterBrokerRecord",
    "UserScramCredentialRecord",
    "decode_record",
    "encode_record",
]

FRAME_VERSION = 0
NO_LEADER = -1


class RecordType(enum.IntEnum):
    """Record type ids; the numbers are Kafka's metadata record api keys."""

    REGISTER_BROKER = 0
    UNREGISTER_BROKER = 1
    TOPIC = 2
    PARTITION = 3
    CONFIG = 4
    PARTITION_CHANGE = 5
    FENCE_BROKER = 7
    UNFENCE_BROKER = 8
    REMOVE_TOPIC = 9
    USER_SCRAM_CREDENTIAL = 11
    FEATURE_LEVEL = 12
    CLIENT_QUOTA = 14
    PRODUCER_IDS = 15
    BROKER_REGISTRATION_CHANGE = 17
    ACCESS_CONTROL_ENTRY = 18
    REMOVE_ACCESS_CONTROL_ENTRY = 19
    NO_OP = 20
    REMOVE_USER_SCRAM_CREDENTIAL = 22


@dataclasses.dataclass(frozen=True, slots=True)
class Endpoint:
    """One listener a broker advertises (`security_protocol` 0 = PLAINTEXT)."""

    name: str
    host: str
    port: int
    security_protocol: int = 0


@dataclasses.dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    """A broker (re)registered: a new incarnation gets a new broker epoch and starts fenced."""

    broker_id: int
    incarnation_id: uuid.UUID
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool = True


@dataclasses.dataclass(frozen=True, slots=True)
class UnregisterBrokerRecord:
    broker_id: int
    broker_epoch: int


@dataclasses.dataclass(frozen=True, slots=True)
class FenceBrokerRecord:
    id: int
    epoch: int


@dataclasses.dataclass(frozen=True, slots=True)
class UnfenceBrokerRecord:
    id: int
    epoch: int


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerRegistrationChangeRecord:
    """Fence/unfence or enter controlled shutdown; None leaves that attribute as it is."""

    broker_id: int
    broker_epoch: int
    fenced: bool | None = None
    in_controlled_shutdown: bool | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionRecord:
    """A whole partition state (creation); `leader` -1 means no leader."""

    partition_id: int
    topic_id: uuid.UUID
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # an ongoing reassignment (Kafka's AddingReplicas / RemovingReplicas): written as record
    # version 1, only when not empty, so every other record keeps its version 0 bytes
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A partition change; None fields are unchanged.

    `leader` set (even to -1, no leader) bumps the leader epoch; every change record bumps the
    partition epoch, which is what AlterPartition compares against.
    """

    partition_id: int
    topic_id: uuid.UUID
    isr: tuple[int, ...] | None = None
    leader: int | None = None
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None  # record version 1 when set (see above)
    removing_replicas: tuple[int, ...] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    topic_id: uuid.UUID


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigRecord:
    """A config set (value) or removed (None) on a topic, a broker ("" = cluster default) or a
    group (KIP-848 group configs)."""

    resource_type: int
    resource_name: str
    name: str
    value: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids handed to a broker; `next_producer_id` is the first one free."""

    broker_id: int
    broker_epoch: int
    next_producer_id: int


#: a client quota entity: (entity type, name) pairs sorted by type; a None name = the default
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclasses.dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """One client quota set (`remove` False) or removed on an entity: (entity type, name)
    pairs, types `user` / `client-id`, a None name meaning the type's default (`<default>`)."""

    entity: QuotaEntity
    key: str
    value: float
    remove: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential for one mechanism (Kafka's ScramMechanism type: 1 =
    SCRAM-SHA-256, 2 = SCRAM-SHA-512), added or replaced: what RFC 5802 says a server keeps,
    never the password nor the salted password."""

    name: str
    mechanism: int
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        # the keys let whoever holds them verify guesses offline: kept out of logs
        return (
            f"UserScramCredentialRecord(name={self.name!r}, mechanism={self.mechanism}, "
            f"iterations={self.iterations})"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    name: str
    mechanism: int


@dataclasses.dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """One ACL binding (Kafka's StandardAclWithId), under the id RemoveAccessControlEntryRecord
    names. The int8 fields hold Kafka's codes: ResourceType, PatternType (LITERAL / PREFIXED),
    AclOperation and AclPermissionType; `principal` is `Type:name`, `host` an address or `*`."""

    id: uuid.UUID
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclasses.dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    id: uuid.UUID


@dataclasses.dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    """A cluster-wide finalized feature level (KIP-584/KIP-778): `feature_level` 0 takes the
    feature's finalization away, as in Kafka."""

    name: str
    feature_level: int


@dataclasses.dataclass(frozen=True, slots=True)
class NoOpRecord:
    pass


MetadataRecord = (
    RegisterBrokerRecord
    | UnregisterBrokerRecord
    | FenceBrokerRecord
    | UnfenceBrokerRecord
    | BrokerRegistrationChangeRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ConfigRecord
    | ProducerIdsRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
    | ClientQuotaRecord
    | FeatureLevelRecord
    | NoOpRecord
)


class _Kind(enum.Enum):
    """How one field is written; the ranges are checked when decoding."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    BOOL = "bool"
    OPT_BOOL = "bool?"
    OPT_INT32 = "int32?"
    UUID = "uuid"
    STRING = "string"
    OPT_STRING = "string?"
    BYTES = "bytes"
    INT32S = "int32[]"
    OPT_INT32S = "int32[]?"
    ENDPOINTS = "endpoints"
    FLOAT64 = "float64"
    ENTITY = "entity"


_K = _Kind
_SCHEMAS: dict[type[Any], tuple[RecordType, tuple[tuple[str, _Kind], ...]]] = {
    RegisterBrokerRecord: (
        RecordType.REGISTER_BROKER,
        (
            ("broker_id", _K.INT32),
            ("incarnation_id", _K.UUID),
            ("broker_epoch", _K.INT64),
            ("endpoints", _K.ENDPOINTS),
            ("rack", _K.OPT_STRING),
            ("fenced", _K.BOOL),
        ),
    ),
    UnregisterBrokerRecord: (
        RecordType.UNREGISTER_BROKER,
        (("broker_id", _K.INT32), ("broker_epoch", _K.INT64)),
    ),
    FenceBrokerRecord: (RecordType.FENCE_BROKER, (("id", _K.INT32), ("epoch", _K.INT64))),
    UnfenceBrokerRecord: (RecordType.UNFENCE_BROKER, (("id", _K.INT32), ("epoch", _K.INT64))),
    BrokerRegistrationChangeRecord: (
        RecordType.BROKER_REGISTRATION_CHANGE,
        (
            ("broker_id", _K.INT32),
            ("broker_epoch", _K.INT64),
            ("fenced", _K.OPT_BOOL),
            ("in_controlled_shutdown", _K.OPT_BOOL),
        ),
    ),
    TopicRecord: (RecordType.TOPIC, (("name", _K.STRING), ("topic_id", _K.UUID))),
    PartitionRecord: (
        RecordType.PARTITION,
        (
            ("partition_id", _K.INT32),
            ("topic_id", _K.UUID),
            ("replicas", _K.INT32S),
            ("isr", _K.INT32S),
            ("leader", _K.INT32),
            ("leader_epoch", _K.INT32),
            ("partition_epoch", _K.INT32),
        ),
    ),
    PartitionChangeRecord: (
        RecordType.PARTITION_CHANGE,
        (
            ("partition_id", _K.INT32),
            ("topic_id", _K.UUID),
            ("isr", _K.OPT_INT32S),
            ("leader", _K.OPT_INT32),
            ("replicas", _K.OPT_INT32S),
        ),
    ),
    RemoveTopicRecord: (RecordType.REMOVE_TOPIC, (("topic_id", _K.UUID),)),
    ConfigRecord: (
        RecordType.CONFIG,
        (
            ("resource_type", _K.INT8),
            ("resource_name", _K.STRING),
            ("name", _K.STRING),
            ("value", _K.OPT_STRING),
        ),
    ),
    ProducerIdsRecord: (
        RecordType.PRODUCER_IDS,
        (("broker_id", _K.INT32), ("broker_epoch", _K.INT64), ("next_producer_id", _K.INT64)),
    ),
    UserScramCredentialRecord: (
        RecordType.USER_SCRAM_CREDENTIAL,
        (
            ("name", _K.STRING),
            ("mechanism", _K.INT8),
            ("salt", _K.BYTES),
            ("stored_key", _K.BYTES),
            ("server_key", _K.BYTES),
            ("iterations", _K.INT32),
        ),
    ),
    RemoveUserScramCredentialRecord: (
        RecordType.REMOVE_USER_SCRAM_CREDENTIAL,
        (("name", _K.STRING), ("mechanism", _K.INT8)),
    ),
    AccessControlEntryRecord: (
        RecordType.ACCESS_CONTROL_ENTRY,
        (
            ("id", _K.UUID),
            ("resource_type", _K.INT8),
            ("resource_name", _K.STRING),
            ("pattern_type", _K.INT8),
            ("principal", _K.STRING),
            ("host", _K.STRING),
            ("operation", _K.INT8),
            ("permission_type", _K.INT8),
        ),
    ),
    RemoveAccessControlEntryRecord: (RecordType.REMOVE_ACCESS_CONTROL_ENTRY, (("id", _K.UUID),)),
    ClientQuotaRecord: (
        RecordType.CLIENT_QUOTA,
        (("entity", _K.ENTITY), ("key", _K.STRING), ("value", _K.FLOAT64), ("remove", _K.BOOL)),
    ),
    FeatureLevelRecord: (
        RecordType.FEATURE_LEVEL,
        (("name", _K.STRING), ("feature_level", _K.INT16)),
    ),
    NoOpRecord: (RecordType.NO_OP, ()),
}

# Fields a record type gained in version 1, written after the version 0 fields, with the value
# that means "absent": a record whose extra fields all hold it is written as version 0.
_V1_FIELDS: dict[type[Any], tuple[tuple[str, _Kind, Any], ...]] = {
    PartitionRecord: (("adding_replicas", _K.INT32S, ()), ("removing_replicas", _K.INT32S, ())),
    PartitionChangeRecord: (
        ("adding_replicas", _K.OPT_INT32S, None),
        ("removing_replicas", _K.OPT_INT32S, None),
    ),
}

_DOUBLE = struct.Struct(">d")

# Ten 7-bit groups cover a 64-bit zigzag value; longer varints are garbage.
_MAX_VARINT_BYTES = 10
_RANGES = {
    _K.INT8: (-(1 << 7), (1 << 7) - 1),
    _K.INT16: (-(1 << 15), (1 << 15) - 1),
    _K.INT32: (-(1 << 31), (1 << 31) - 1),
    _K.OPT_INT32: (-(1 << 31), (1 << 31) - 1),
    _K.INT32S: (-(1 << 31), (1 << 31) - 1),
    _K.OPT_INT32S: (-(1 << 31), (1 << 31) - 1),
    _K.INT64: (-(1 << 63), (1 << 63) - 1),
}


def _uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _varint(out: bytearray, value: int) -> None:
    _uvarint(out, (value << 1) ^ (value >> 63) if value < 0 else value << 1)


def _string(out: bytearray, value: str | None) -> None:
    if value is None:
        _uvarint(out, 0)
        return
    data = value.encode()
    _uvarint(out, len(data) + 1)
    out += data


def _write(out: bytearray, kind: _Kind, value: Any) -> None:
    match kind:
        case _K.INT8 | _K.INT16 | _K.INT32 | _K.INT64:
            _varint(out, value)
        case _K.BOOL:
            out.append(1 if value else 0)
        case _K.OPT_BOOL:
            out.append(2 if value is None else (1 if value else 0))
        case _K.OPT_INT32:
            if value is None:
                out.append(0)
            else:
                out.append(1)
                _varint(out, value)
        case _K.UUID:
            out += value.bytes
        case _K.STRING | _K.OPT_STRING:
            _string(out, value)
        case _K.BYTES:
            _uvarint(out, len(value) + 1)
            out += value
        case _K.INT32S | _K.OPT_INT32S:
            if value is None:
                _uvarint(out, 0)
            else:
                _uvarint(out, len(value) + 1)
                for item in value:
                    _varint(out, item)
        case _K.FLOAT64:
            out += _DOUBLE.pack(value)
        case _K.ENTITY:
            _uvarint(out, len(value) + 1)
            for entity_type, entity_name in value:
                _string(out, entity_type)
                _string(out, entity_name)
        case _K.ENDPOINTS:
            _uvarint(out, len(value) + 1)
            for ep in value:
                _string(out, ep.name)
                _string(out, ep.host)
                _varint(out, ep.port)
                _varint(out, ep.security_protocol)


def encode_record(record: MetadataRecord) -> bytes:
    """The bytes of one record, as stored in one Kafka record value of the metadata log."""
    rtype, fields = _SCHEMAS[type(record)]
    extra = _V1_FIELDS.get(type(record), ())
    v1 = any(getattr(record, name) != absent for name, _, absent in extra)
    out = bytearray()
    _uvarint(out, FRAME_VERSION)
    _uvarint(out, int(rtype))
    _uvarint(out, 1 if v1 else 0)
    for name, kind in fields:
        _write(out, kind, getattr(record, name))
    if v1:
        for name, kind, _ in extra:
            _write(out, kind, getattr(record, name))
    return bytes(out)


class _Reader:
    """A bounded cursor: every read checks the bytes left before it takes them."""

    __slots__ = ("buf", "pos")

    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.buf = bytes(data)
        self.pos = 0

    def left(self) -> int:
        return len(self.buf) - self.pos

    def byte(self) -> int:
        if self.pos >= len(self.buf):
            raise _bad("record is truncated")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def take(self, n: int) -> bytes:
        if n > self.left():
            raise _bad("record is truncated")
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data

    def uvarint(self) -> int:
        pos = self.pos
        if pos < len(self.buf) and self.buf[pos] < 0x80:  # the common one-byte case
            self.pos = pos + 1
            return self.buf[pos]
        value = shift = 0
        for _ in range(_MAX_VARINT_BYTES):
            b = self.byte()
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
        raise _bad("varint is longer than ten bytes")

    def varint(self, kind: _Kind) -> int:
        raw = self.uvarint()
        value = (raw >> 1) ^ -(raw & 1)
        low, high = _RANGES[kind]
        if not low <= value <= high:
            raise _bad(f"{value} is out of range for {kind.value}")
        return value

    def count(self, min_item_bytes: int) -> int | None:
        """A length+1 prefix: None for 0, else a count no larger than the bytes can hold."""
        raw = self.uvarint()
        if raw == 0:
            return None
        n = raw - 1
        if n * min_item_bytes > self.left():
            raise _bad(f"length {n} exceeds the {self.left()} bytes left")
        return n

    def string(self, nullable: bool) -> str | None:
        n = self.count(1)
        if n is None:
            if not nullable:
                raise _bad("null string in a non-nullable field")
            return None
        try:
            return self.take(n).decode()
        except UnicodeDecodeError as exc:
            raise _bad("string is not UTF-8") from exc

    def text(self) -> str:
        value = self.string(False)
        assert value is not None  # string(False) raises on null
        return value

    def flag(self, allow_none: bool) -> bool | None:
        b = self.byte()
        if b == 2 and allow_none:
            return None
        if b > 1:
            raise _bad(f"bad boolean byte {b}")
        return b == 1


def _bad(message: str) -> ProtocolError:
    return ProtocolError(f"bad metadata record: {message}", ErrorCode.CORRUPT_MESSAGE)


def _read_list(r: _Reader, kind: _Kind) -> tuple[int, ...] | None:
    n = r.count(1)
    if n is None:
        if kind is _K.INT32S:
            raise _bad("null list in a non-nullable field")
        return None
    return tuple([r.varint(kind) for _ in range(n)])


def _read_endpoints(r: _Reader) -> tuple[Endpoint, ...]:
    n = r.count(4)
    if n is None:
        raise _bad("null endpoint list")
    endpoints = []
    for _ in range(n):
        name = r.text()
        host = r.text()
        port = r.varint(_K.INT32)
        if not 0 <= port <= 0xFFFF:
            raise _bad(f"port {port} is out of range")
        proto = r.varint(_K.INT32)
        endpoints.append(Endpoint(name, host, port, proto))
    return tuple(endpoints)


def _read_bytes(r: _Reader) -> bytes:
    n = r.count(1)
    if n is None:
        raise _bad("null bytes in a non-nullable field")
    return r.take(n)


def _read_entity(r: _Reader) -> QuotaEntity:
    n = r.count(2)
    if n is None:
        raise _bad("null quota entity")
    return tuple((r.text(), r.string(True)) for _ in range(n))


def _read_opt_int32(r: _Reader) -> int | None:
    return r.varint(_K.OPT_INT32) if r.flag(False) else None


# One reader per kind (a table lookup is cheaper than matching on every field of every record).
_READERS: dict[_Kind, Callable[[_Reader], Any]] = {
    _K.INT8: lambda r: r.varint(_K.INT8),
    _K.INT16: lambda r: r.varint(_K.INT16),
    _K.INT32: lambda r: r.varint(_K.INT32),
    _K.INT64: lambda r: r.varint(_K.INT64),
    _K.BOOL: lambda r: r.flag(False),
    _K.OPT_BOOL: lambda r: r.flag(True),
    _K.OPT_INT32: _read_opt_int32,
    _K.UUID: lambda r: uuid.UUID(bytes=r.take(16)),
    _K.STRING: lambda r: r.text(),
    _K.OPT_STRING: lambda r: r.string(True),
    _K.BYTES: _read_bytes,
    _K.INT32S: lambda r: _read_list(r, _K.INT32S),
    _K.OPT_INT32S: lambda r: _read_list(r, _K.OPT_INT32S),
    _K.ENDPOINTS: _read_endpoints,
    _K.FLOAT64: lambda r: _DOUBLE.unpack(r.take(8))[0],
    _K.ENTITY: _read_entity,
}
_Readers = tuple[tuple[str, Callable[[_Reader], Any]], ...]
_DECODERS: dict[int, tuple[type[Any], _Readers, _Readers | None]] = {
    int(t): (
        cls,
        tuple((name, _READERS[kind]) for name, kind in fields),
        tuple((name, _READERS[kind]) for name, kind, _ in _V1_FIELDS[cls])
        if cls in _V1_FIELDS
        else None,
    )
    for cls, (t, fields) in _SCHEMAS.items()
}


def decode_record(data: bytes | bytearray | memoryview) -> MetadataRecord:
    """Parse one record; raises `ProtocolError` (CORRUPT_MESSAGE) for anything malformed."""
    r = _Reader(data)
    frame_version = r.uvarint()
    if frame_version != FRAME_VERSION:
        raise _bad(f"unknown frame version {frame_version}")
    rtype = r.uvarint()
    decoder = _DECODERS.get(rtype)
    if decoder is None:
        raise _bad(f"unknown record type {rtype}")
    version = r.uvarint()
    cls, readers, v1_readers = decoder
    if version != 0 and (version != 1 or v1_readers is None):
        raise _bad(f"unknown version {version} of record type {rtype}")
    values = {name: read(r) for name, read in readers}
    if version == 1 and v1_readers is not None:
        values.update((name, read(r)) for name, read in v1_readers)
    if r.left():
        raise _bad(f"{r.left()} bytes after the record")
    record: MetadataRecord = cls(**values)
    return record
