"""Shared builders for storage tests: real v2 batches from `kafkapy.protocol.records`."""

from __future__ import annotations

from collections.abc import Sequence

from kafkapy.protocol.records import Record, build_batch, decode_records, iter_batches
from kafkapy.storage import PartitionLog

BASE_TS = 1_700_000_000_000


def batch(
    values: Sequence[bytes | None],
    *,
    keys: Sequence[bytes | None] | None = None,
    ts: int = BASE_TS,
    producer_id: int = -1,
    producer_epoch: int = -1,
    transactional: bool = False,
) -> bytes:
    """A batch of len(values) records (offsets 0..n-1 relative, timestamps ts + i)."""
    ks = list(keys) if keys is not None else [None] * len(values)
    records = [
        Record(offset_delta=i, timestamp_delta=i, key=k, value=v)
        for i, (k, v) in enumerate(zip(ks, values, strict=True))
    ]
    return build_batch(
        records,
        base_timestamp=ts,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=0 if producer_id >= 0 else -1,
        is_transactional=transactional,
    )


def offset_batch(base_offset: int, count: int, *, ts: int = BASE_TS) -> bytearray:
    """A batch of `count` records already carrying `base_offset`, as the log stamps it (for
    the layers below `PartitionLog`, which write batches as given)."""
    records = [Record(offset_delta=i, timestamp_delta=i, key=None, value=b"v%d" % i)
               for i in range(count)]
    return bytearray(build_batch(records, base_offset=base_offset, base_timestamp=ts))


def records_of(data: bytes) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in a byte run of whole batches."""
    out = []
    for pos, header in iter_batches(data):
        for r in decode_records(data, pos, header):
            out.append((header.base_offset + r.offset_delta, r.key, r.value))
    return out


def batch_offsets(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of every batch in `data`."""
    return [(h.base_offset, h.last_offset) for _, h in iter_batches(data)]


def read_all(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    """Every record from the log start to the end, following batch last offsets (as a consumer
    does: a compacted batch may end with removed offsets)."""
    out: list[tuple[int, bytes | None, bytes | None]] = []
    offset = plog.log_start_offset
    for _ in range(100_000):
        if offset >= plog.log_end_offset:
            break
        data = plog.read_bytes(offset, 1 << 20)
        out += [r for r in records_of(data) if r[0] >= offset]
        offset = batch_offsets(data)[-1][1] + 1
    return out
