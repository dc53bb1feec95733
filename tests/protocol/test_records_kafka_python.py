"""Interop with a real client library: batches built by kafka-python parse, CRC-check and
decode here; batches built here are accepted by kafka-python's reader (MemoryRecords)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch

from kafkapy.protocol.compression import XERIAL_MAGIC, Compression
from kafkapy.protocol.records import (
    BATCH_HEADER_SIZE,
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    iter_batches,
    parse_control_record,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
    validate_batch,
)
from tests.protocol.batches.capture_kafka_python import (
    BASE_TIMESTAMP,
    CODEC_NAMES,
    EXPECTED,
    PRODUCER,
    build,
    fixture_path,
    kafka_python_snappy,
)

CODECS = list(Compression)


@pytest.fixture(autouse=True)
def _snappy_for_kafka_python() -> Iterator[None]:
    with kafka_python_snappy():
        yield


def _check_kafka_python_batch(data: bytes, codec: Compression, *, idempotent: bool) -> None:
    [(pos, header)] = list(iter_batches(data))
    validate_batch(data, pos, header)
    assert header.compression is codec
    assert header.records_count == len(EXPECTED)
    assert header.last_offset_delta == len(EXPECTED) - 1
    assert header.base_timestamp == BASE_TIMESTAMP
    assert header.max_timestamp == max(t for t, *_ in EXPECTED)
    assert header.timestamp_type == 0
    expected_producer = PRODUCER if idempotent else (-1, -1, -1)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == expected_producer
    records = decode_records(data, pos, header)
    assert [
        (header.base_timestamp + r.timestamp_delta, r.key, r.value, r.headers) for r in records
    ] == EXPECTED
    assert [r.offset_delta for r in records] == list(range(len(EXPECTED)))


@pytest.mark.parametrize("codec", CODECS, ids=[CODEC_NAMES[c] for c in CODECS])
def test_stored_kafka_python_batches(codec: Compression) -> None:
    data = fixture_path(codec).read_bytes()
    _check_kafka_python_batch(data, codec, idempotent=True)
    if codec is Compression.SNAPPY:
        assert data[BATCH_HEADER_SIZE:].startswith(XERIAL_MAGIC)  # kafka-python writes xerial


@pytest.mark.parametrize("idempotent", [True, False])
@pytest.mark.parametrize("codec", CODECS, ids=[CODEC_NAMES[c] for c in CODECS])
def test_fresh_kafka_python_batches(codec: Compression, idempotent: bool) -> None:
    _check_kafka_python_batch(build(codec, idempotent=idempotent), codec, idempotent=idempotent)


def _expected_records() -> list[Record]:
    return [
        Record(i, t - BASE_TIMESTAMP, k, v, list(h)) for i, (t, k, v, h) in enumerate(EXPECTED)
    ]


def _kafka_python_read(data: bytes | bytearray) -> list[DefaultRecordBatch]:
    batches = []
    records = MemoryRecords(bytes(data))
    while records.has_next():
        batch = records.next_batch()
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc()
        batches.append(batch)
    return batches


@pytest.mark.parametrize("codec", CODECS, ids=[CODEC_NAMES[c] for c in CODECS])
def test_kafka_python_reads_our_batches(codec: Compression) -> None:
    ours = build_batch(
        _expected_records(),
        base_offset=1000,
        base_timestamp=BASE_TIMESTAMP,
        compression=codec,
        producer_id=PRODUCER[0],
        producer_epoch=PRODUCER[1],
        base_sequence=PRODUCER[2],
        partition_leader_epoch=3,
    )
    [batch] = _kafka_python_read(ours)
    assert batch.compression_type == codec
    assert (batch.base_offset, batch.leader_epoch, batch.records_count) == (1000, 3, len(EXPECTED))
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == PRODUCER
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert got == [(1000 + i, t, k, v, h) for i, (t, k, v, h) in enumerate(EXPECTED)]


@pytest.mark.parametrize("codec", CODECS, ids=[CODEC_NAMES[c] for c in CODECS])
def test_reencoded_kafka_python_batches_read_back_identically(codec: Compression) -> None:
    """kafka-python batch -> our decode -> our build -> kafka-python reader: same records."""
    original = build(codec)
    [(pos, header)] = list(iter_batches(original))
    rebuilt = build_batch(
        decode_records(original, pos, header),
        base_timestamp=header.base_timestamp,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    if codec is Compression.NONE:
        assert rebuilt == original  # no compressor in between: byte-identical
    [theirs] = _kafka_python_read(original)
    [again] = _kafka_python_read(rebuilt)
    fields = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in again] == fields


def test_kafka_python_sees_broker_patches() -> None:
    """What the broker does on append (offsets, leader epoch, LogAppendTime) reads correctly."""
    buf = bytearray(build(Compression.LZ4) + build(Compression.NONE))
    batches = list(iter_batches(buf))
    next_offset = 500
    for pos, header in batches:
        validate_batch(buf, pos, header)
        set_base_offset(buf, pos, next_offset)
        set_partition_leader_epoch(buf, pos, 9)
        set_max_timestamp(buf, pos, 1_800_000_000_000, True)
        next_offset += header.records_count
    read = _kafka_python_read(buf)
    assert [b.base_offset for b in read] == [500, 500 + len(EXPECTED)]
    for batch in read:
        assert batch.leader_epoch == 9
        assert batch.timestamp_type == 1
        assert {r.timestamp for r in batch} == {1_800_000_000_000}
    offsets = [r.offset for batch in _kafka_python_read(buf) for r in batch]
    assert offsets == list(range(500, 500 + 2 * len(EXPECTED)))


@pytest.mark.parametrize("commit", [True, False])
def test_kafka_python_reads_our_control_batches(commit: bool) -> None:
    ours = build_control_batch(
        commit, producer_id=11, producer_epoch=2, coordinator_epoch=5, base_offset=77,
        timestamp_ms=BASE_TIMESTAMP,
    )
    [batch] = _kafka_python_read(ours)
    assert batch.is_control_batch
    assert batch.is_transactional
    [marker] = list(batch)
    assert (marker.commit, marker.abort, marker.version) == (commit, not commit, 0)
    assert marker.offset == 77
    assert struct.unpack(">hi", marker.value) == (0, 5)
    [(pos, header)] = list(iter_batches(ours))
    assert parse_control_record(decode_records(ours, pos, header)[0]) == (commit, 5)
