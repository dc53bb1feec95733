"""Batches that real clients put on the wire (the captured Produce requests in
`tests/protocol/golden/`: librdkafka via confluent-kafka, kafka-python, aiokafka, each codec)
parse, CRC-check and decompress here, and re-encoded with our `build_batch` they read back
identically through kafka-python's and aiokafka's own batch readers.

librdkafka's batches matter most: it writes raw snappy (no xerial framing), lz4 frames with
independent blocks and zstd frames without a content size, none of which our own compressor or
the Python clients produce.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch as AioBatch
from kafka.record.default_records import DefaultRecordBatch as KafkaPythonBatch

from kafkapy.protocol import decode_request
from kafkapy.protocol.compression import XERIAL_MAGIC, Compression
from kafkapy.protocol.records import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    build_batch,
    decode_records,
    iter_batches,
    validate_batch,
)
from tests.protocol.batches.capture_kafka_python import kafka_python_snappy

GOLDEN = Path(__file__).parent / "golden"
CAPTURES = sorted(GOLDEN.glob("produce_request_v*_*.hex"))

pytestmark = pytest.mark.skipif(not CAPTURES, reason="no captured Produce requests in golden/")


def _batches(path: Path) -> tuple[dict[str, Any], list[bytes]]:
    meta = json.loads(path.with_suffix(".json").read_text())
    _, request = decode_request(bytes.fromhex(path.read_text()))
    runs = [
        bytes(partition.records)
        for topic in request.topic_data  # type: ignore[attr-defined]
        for partition in topic.partition_data
        if partition.records
    ]
    return meta, runs


def _rebuild(data: bytes, pos: int, header: BatchHeader) -> bytes:
    return build_batch(
        decode_records(data, pos, header),
        base_offset=header.base_offset,
        base_timestamp=header.base_timestamp,
        compression=header.compression,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
        max_timestamp=header.max_timestamp,
    )


@pytest.fixture(autouse=True)
def _snappy_for_kafka_python() -> Iterator[None]:
    with kafka_python_snappy():
        yield


@pytest.mark.parametrize("path", CAPTURES, ids=[p.stem for p in CAPTURES])
def test_captured_batches_decode_and_reencode(path: Path) -> None:
    meta, runs = _batches(path)
    codec = Compression[meta["expect"]["compression"].upper()]
    assert runs
    for data in runs:
        found = list(iter_batches(data))
        assert found
        for pos, header in found:
            validate_batch(data, pos, header)
            assert header.compression is codec
            records = decode_records(data, pos, header)
            assert len(records) == header.records_count
            assert {r.value.decode() for r in records if r.value} <= set(meta["expect"]["values"])
            if meta["client_label"] == "confluent-kafka" and codec is Compression.SNAPPY:
                assert not data[pos + BATCH_HEADER_SIZE :].startswith(XERIAL_MAGIC)

            ours = _rebuild(data, pos, header)
            if codec is Compression.NONE:
                # No compressor in between: our encoder must write the client's exact bytes.
                assert ours == data[pos : pos + header.size]
            [(_, again)] = list(iter_batches(ours))
            validate_batch(ours, 0, again)
            assert decode_records(ours, 0, again) == records

            original = data[pos : pos + header.size]
            for reader in (KafkaPythonBatch, AioBatch):
                theirs, mine = reader(original), reader(ours)
                assert mine.validate_crc()
                fields = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
                assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in mine] == fields
