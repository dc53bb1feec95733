"""Record layouts the transaction coordinator writes to `__transaction_state`.

Why our own layout: the topic is internal and compacted, so only kafkapy reads it back. What
matters is that every key and value carries a version (a later kafkapy must read what an earlier
one wrote, and refuse clearly what it cannot), and that a key names exactly one piece of state so
compaction keeps the latest value of each.

Keys (big-endian; string = int16 length + UTF-8):

- key type 0, transaction metadata: `int16 0, string transactional_id`
- key type 1, producer-id block watermark: `int16 1` (one key: the latest reservation wins)

Values start with an int16 value version (0 today); a `None` value is a tombstone (the
transactional id expired).

- metadata v0: `int64 producer_id, int64 last_producer_id, int64 next_producer_id,
  int16 producer_epoch, int16 last_producer_epoch, int32 txn_timeout_ms, int8 state,
  int8 transaction_version, int64 txn_start_timestamp, int64 txn_last_update_timestamp,
  int32 topic count`, then per topic `string topic, int32 partition count, int32 partition...`
  (topics and partitions sorted, so equal state encodes to equal bytes)
- producer-id block v0: `int64 next_block_start, int32 block_size` - ids below
  `next_block_start` are reserved; the block being handed out is the `block_size` before it.

Decoding never trusts lengths: anything short, oversized, trailing or out of range raises
`TxnRecordError` naming the problem.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from kafkapy.coordinator.txn.state import TopicPartition, TransactionMetadata, TxnState
from kafkapy.protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "METADATA_VALUE_VERSION",
    "PRODUCER_ID_BLOCK_VALUE_VERSION",
    "ProducerIdBlock",
    "RecordKeyType",
    "TxnRecordError",
    "decode_key",
    "decode_metadata_value",
    "decode_producer_id_block_value",
    "encode_metadata_key",
    "encode_metadata_value",
    "encode_producer_id_block_key",
    "encode_producer_id_block_value",
]

METADATA_VALUE_VERSION = 0
PRODUCER_ID_BLOCK_VALUE_VERSION = 0

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_METADATA = struct.Struct(">hqqqhhibbqqi")
_BLOCK = struct.Struct(">hqi")


class TxnRecordError(ProtocolError):
    """A `__transaction_state` record this kafkapy cannot read."""

    error_code = ErrorCode.CORRUPT_MESSAGE


class RecordKeyType(enum.IntEnum):
    TRANSACTION_METADATA = 0
    PRODUCER_ID_BLOCK = 1


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """Ids below `next_block_start` are reserved; the current block is the last `block_size`."""

    next_block_start: int
    block_size: int


def _string(value: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes does not fit an int16 length")
    return _I16.pack(len(data)) + data


class _Reader:
    __slots__ = ("_buf", "_pos")

    def __init__(self, buf: bytes) -> None:
        self._buf = buf
        self._pos = 0

    def unpack(self, st: struct.Struct) -> tuple[int, ...]:
        end = self._pos + st.size
        if end > len(self._buf):
            raise TxnRecordError(f"record truncated at byte {self._pos}")
        values: tuple[int, ...] = st.unpack_from(self._buf, self._pos)
        self._pos = end
        return values

    def string(self) -> str:
        (n,) = self.unpack(_I16)
        if n < 0 or self._pos + n > len(self._buf):
            raise TxnRecordError(f"string length {n} at byte {self._pos - 2} is out of range")
        raw = self._buf[self._pos : self._pos + n]
        self._pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TxnRecordError(f"string is not UTF-8: {exc}") from None

    def count(self, min_item_size: int) -> int:
        (n,) = self.unpack(_I32)
        if n < 0 or n * min_item_size > len(self._buf) - self._pos:
            raise TxnRecordError(f"count {n} exceeds the bytes left")
        return n

    def end(self) -> None:
        if self._pos != len(self._buf):
            raise TxnRecordError(f"{len(self._buf) - self._pos} trailing bytes in record")


def encode_metadata_key(transactional_id: str) -> bytes:
    return _I16.pack(RecordKeyType.TRANSACTION_METADATA) + _string(transactional_id)


def encode_producer_id_block_key() -> bytes:
    return _I16.pack(RecordKeyType.PRODUCER_ID_BLOCK)


def decode_key(data: bytes) -> tuple[RecordKeyType, str | None]:
    """(key type, transactional id or None for the producer-id block key)."""
    r = _Reader(bytes(data))
    (key_type,) = r.unpack(_I16)
    if key_type == RecordKeyType.TRANSACTION_METADATA:
        tid = r.string()
        r.end()
        return RecordKeyType.TRANSACTION_METADATA, tid
    if key_type == RecordKeyType.PRODUCER_ID_BLOCK:
        r.end()
        return RecordKeyType.PRODUCER_ID_BLOCK, None
    raise TxnRecordError(f"unknown __transaction_state key type {key_type}")


def encode_metadata_value(md: TransactionMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in md.partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = bytearray(
        _METADATA.pack(
            METADATA_VALUE_VERSION,
            md.producer_id,
            md.last_producer_id,
            md.next_producer_id,
            md.producer_epoch,
            md.last_producer_epoch,
            md.txn_timeout_ms,
            md.state.code,
            md.transaction_version,
            md.txn_start_timestamp,
            md.txn_last_update_timestamp,
            len(by_topic),
        )
    )
    for topic in sorted(by_topic):
        parts = sorted(by_topic[topic])
        out += _string(topic)
        out += _I32.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
    return bytes(out)


def decode_metadata_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    r = _Reader(bytes(data))
    (version,) = r.unpack(_I16)
    if version != METADATA_VALUE_VERSION:
        raise TxnRecordError(f"unsupported transaction metadata value version {version}")
    r = _Reader(bytes(data))
    (
        _,
        pid,
        last_pid,
        next_pid,
        epoch,
        last_epoch,
        timeout,
        state_code,
        txn_version,
        start,
        last_update,
        n_topics,
    ) = r.unpack(_METADATA)
    try:
        state = TxnState.from_code(state_code)
    except KeyError:
        raise TxnRecordError(f"unknown transaction state code {state_code}") from None
    if n_topics < 0 or n_topics * 6 > len(data):
        raise TxnRecordError(f"topic count {n_topics} exceeds the bytes left")
    partitions: set[TopicPartition] = set()
    for _ in range(n_topics):
        topic = r.string()
        for _ in range(r.count(4)):
            (partition,) = r.unpack(_I32)
            partitions.add(TopicPartition(topic, partition))
    r.end()
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=pid,
        producer_epoch=epoch,
        last_producer_id=last_pid,
        last_producer_epoch=last_epoch,
        next_producer_id=next_pid,
        txn_timeout_ms=timeout,
        state=state,
        partitions=frozenset(partitions),
        txn_start_timestamp=start,
        txn_last_update_timestamp=last_update,
        transaction_version=txn_version,
    )


def encode_producer_id_block_value(block: ProducerIdBlock) -> bytes:
    return _BLOCK.pack(PRODUCER_ID_BLOCK_VALUE_VERSION, block.next_block_start, block.block_size)


def decode_producer_id_block_value(data: bytes) -> ProducerIdBlock:
    r = _Reader(bytes(data))
    (version,) = r.unpack(_I16)
    if version != PRODUCER_ID_BLOCK_VALUE_VERSION:
        raise TxnRecordError(f"unsupported producer-id block value version {version}")
    r = _Reader(bytes(data))
    _, next_block_start, block_size = r.unpack(_BLOCK)
    r.end()
    if block_size <= 0 or next_block_start < block_size:
        raise TxnRecordError(f"bad producer-id block {next_block_start}/{block_size}")
    return ProducerIdBlock(next_block_start, block_size)
