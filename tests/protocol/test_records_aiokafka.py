"""Interop with aiokafka's record code: a second, independent client implementation (its
C-accelerated builder and reader when available, and the pure-Python ones), with every codec.
aiokafka compresses snappy itself (xerial framing over cramjam), so no stand-in is needed."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.record import default_records as aio_records
from aiokafka.record.memory_records import MemoryRecords

from kafkapy.protocol.compression import XERIAL_MAGIC, Compression
from kafkapy.protocol.records import (
    BATCH_HEADER_SIZE,
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batches,
    set_base_offset,
    validate_batch,
)

CODECS = list(Compression)
BASE_TS = 1_650_000_000_000
ROWS: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = [
    (BASE_TS + 3 * i, b"k%d" % i if i % 3 else None,
     b"payload-%d;" % i * 30 if i != 2 else None,
     [("hop", b"%d" % i), ("none", None)][: i % 3])
    for i in range(25)
]

BUILDERS: list[Any] = [aio_records.DefaultRecordBatchBuilder]
READERS: list[Any] = [aio_records.DefaultRecordBatch]
if aio_records.DefaultRecordBatchBuilder is not aio_records._DefaultRecordBatchBuilderPy:
    BUILDERS.append(aio_records._DefaultRecordBatchBuilderPy)
    READERS.append(aio_records._DefaultRecordBatchPy)


def _aiokafka_batch(builder_cls: Any, codec: int, producer: tuple[int, int, int]) -> bytes:
    builder = builder_cls(2, codec, 0, *producer, 1 << 20)
    for offset, (ts, key, value, headers) in enumerate(ROWS):
        assert builder.append(offset, ts, key, value, headers) is not None
    return bytes(builder.build())


@pytest.mark.parametrize("builder_cls", BUILDERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_aiokafka_built_batches_parse_and_decode(builder_cls: Any, codec: Compression) -> None:
    producer = (99, 4, 17)
    data = _aiokafka_batch(builder_cls, codec, producer)
    [(pos, header)] = list(iter_batches(data))
    validate_batch(data, pos, header)
    assert header.compression is codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == producer
    assert (header.records_count, header.last_offset_delta) == (len(ROWS), len(ROWS) - 1)
    if codec is Compression.SNAPPY:
        assert data[BATCH_HEADER_SIZE:].startswith(XERIAL_MAGIC)
    records = decode_records(data, pos, header)
    got = [(header.base_timestamp + r.timestamp_delta, r.key, r.value, r.headers) for r in records]
    assert got == ROWS


@pytest.mark.parametrize("reader_cls", READERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name.lower())
def test_aiokafka_reads_our_batches(reader_cls: Any, codec: Compression) -> None:
    records = [Record(i, ts - BASE_TS, k, v, list(h)) for i, (ts, k, v, h) in enumerate(ROWS)]
    buf = bytearray(build_batch(records, base_timestamp=BASE_TS, compression=codec))
    set_base_offset(buf, 0, 3000)
    batch = reader_cls(bytes(buf))
    assert batch.validate_crc()
    assert batch.compression_type == codec
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert got == [(3000 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(ROWS)]


@pytest.mark.parametrize("commit", [True, False])
def test_aiokafka_reads_our_control_batches(commit: bool) -> None:
    from aiokafka.record.control_record import ABORT_MARKER, COMMIT_MARKER, ControlRecord

    data = build_control_batch(commit, producer_id=5, producer_epoch=1, coordinator_epoch=2,
                               timestamp_ms=BASE_TS)
    records = MemoryRecords(data)
    batch = records.next_batch()
    assert batch is not None
    assert batch.validate_crc()
    assert batch.is_control_batch
    [marker] = list(batch)
    assert ControlRecord.parse(marker.key) == (COMMIT_MARKER if commit else ABORT_MARKER)
    assert not records.has_next()
