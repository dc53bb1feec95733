"""Producer-state snapshot format: `ProducerSnapshot` <-> bytes.

Why snapshots: rebuilding producer state by scanning a whole partition at start would cost time
proportional to the log; Kafka writes `<offset>.snapshot` files at segment rolls and clean
shutdown and replays only the batch headers after the newest one. The storage layer owns the
files; this module owns only the bytes, so it stays testable without a disk.

Layout (big-endian; our own, versioned, CRC-protected like Kafka's):

    magic      4 bytes  b"KPPS"
    version    int16    SNAPSHOT_VERSION (1)
    crc        uint32   CRC32C of everything after this field
    last_map_offset int64
    entry count int32, then per entry:
        producer_id int64, producer_epoch int16, coordinator_epoch int32, last_timestamp int64,
        current_txn_first_offset int64 (-1: none), batch count int8 (0..5), then per batch:
            first_seq int32, last_seq int32, first_offset int64, last_offset int64, timestamp int64
    unreplicated count int32, then per completed transaction:
        producer_id int64, first_offset int64, last_offset int64, is_aborted int8 (0 or 1)

Decoding trusts nothing: a short, oversized, trailing, out-of-range or CRC-mismatched input raises
`CorruptSnapshotError` (the caller then discards the file and replays from an older snapshot or
the log start); a future version raises it too, naming the version.
"""

from __future__ import annotations

import struct

from kafkapy.coordinator.idempotence.producer_state import (
    MAX_CACHED_BATCHES,
    BatchMetadata,
    CompletedTxn,
    ProducerSnapshot,
    ProducerStateEntry,
)
from kafkapy.protocol.crc import crc32c
from kafkapy.protocol.errors import ErrorCode, ProtocolError

__all__ = [
    "SNAPSHOT_MAGIC",
    "SNAPSHOT_VERSION",
    "CorruptSnapshotError",
    "decode_snapshot",
    "encode_snapshot",
]

SNAPSHOT_MAGIC = b"KPPS"
SNAPSHOT_VERSION = 1

_HEADER = struct.Struct(">4shI")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_ENTRY = struct.Struct(">qhiqqb")
_BATCH = struct.Struct(">iiqqq")
_TXN = struct.Struct(">qqqb")


class CorruptSnapshotError(ProtocolError):
    """Snapshot bytes that cannot be trusted; discard the file and rebuild from the log."""

    error_code = ErrorCode.CORRUPT_MESSAGE


def encode_snapshot(snapshot: ProducerSnapshot) -> bytes:
    """Serialize; entries keep their order (the manager exports them sorted by producer id)."""
    body = bytearray(_I64.pack(snapshot.last_map_offset))
    body += _I32.pack(len(snapshot.entries))
    for e in snapshot.entries:
        if len(e.batches) > MAX_CACHED_BATCHES:
            raise ValueError(f"producer {e.producer_id} caches {len(e.batches)} batches")
        first = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            e.coordinator_epoch,
            e.last_timestamp,
            first,
            len(e.batches),
        )
        for b in e.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
    body += _I32.pack(len(snapshot.unreplicated))
    for t in snapshot.unreplicated:
        body += _TXN.pack(t.producer_id, t.first_offset, t.last_offset, int(t.is_aborted))
    header = _HEADER.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, crc32c(bytes(body)))
    return header + bytes(body)


class _Reader:
    """Bounds-checked cursor: every read checks the bytes remaining first."""

    __slots__ = ("_buf", "_pos")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self._buf = buf
        self._pos = pos

    def unpack(self, st: struct.Struct) -> tuple[int, ...]:
        end = self._pos + st.size
        if end > len(self._buf):
            raise CorruptSnapshotError(f"snapshot truncated at byte {self._pos}")
        values: tuple[int, ...] = st.unpack_from(self._buf, self._pos)
        self._pos = end
        return values

    def count(self, item_size: int, what: str) -> int:
        (n,) = self.unpack(_I32)
        if n < 0 or n * item_size > len(self._buf) - self._pos:
            raise CorruptSnapshotError(f"snapshot {what} count {n} exceeds the bytes left")
        return n

    @property
    def remaining(self) -> int:
        return len(self._buf) - self._pos


def decode_snapshot(data: bytes | bytearray | memoryview) -> ProducerSnapshot:
    """Parse and verify a snapshot; raises `CorruptSnapshotError` on anything wrong."""
    buf = memoryview(data).cast("B")
    if len(buf) < _HEADER.size:
        raise CorruptSnapshotError(f"snapshot of {len(buf)} bytes is shorter than its header")
    magic, version, crc = _HEADER.unpack_from(buf, 0)
    if magic != SNAPSHOT_MAGIC:
        raise CorruptSnapshotError(f"not a producer-state snapshot (magic {bytes(magic)!r})")
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unsupported producer-state snapshot version {version}")
    if crc32c(bytes(buf[_HEADER.size :])) != crc:
        raise CorruptSnapshotError("producer-state snapshot CRC mismatch")
    r = _Reader(buf, _HEADER.size)
    (last_map_offset,) = r.unpack(_I64)
    entries: list[ProducerStateEntry] = []
    seen: set[int] = set()
    for _ in range(r.count(_ENTRY.size, "entry")):
        pid, epoch, coord_epoch, last_ts, txn_first, n_batches = r.unpack(_ENTRY)
        if not 0 <= n_batches <= MAX_CACHED_BATCHES:
            raise CorruptSnapshotError(f"producer {pid} has {n_batches} cached batches")
        if pid < 0 or pid in seen:
            raise CorruptSnapshotError(f"bad or repeated producer id {pid}")
        seen.add(pid)
        batches = [BatchMetadata(*r.unpack(_BATCH)) for _ in range(n_batches)]
        entries.append(
            ProducerStateEntry(
                pid, epoch, batches, coord_epoch, last_ts, None if txn_first < 0 else txn_first
            )
        )
    unreplicated: list[CompletedTxn] = []
    for _ in range(r.count(_TXN.size, "transaction")):
        pid, first, last, aborted = r.unpack(_TXN)
        if aborted not in (0, 1):
            raise CorruptSnapshotError(f"bad aborted flag {aborted}")
        unreplicated.append(CompletedTxn(pid, first, last, bool(aborted)))
    if r.remaining:
        raise CorruptSnapshotError(f"{r.remaining} trailing bytes after the snapshot")
    return ProducerSnapshot(last_map_offset, tuple(entries), tuple(unreplicated))
