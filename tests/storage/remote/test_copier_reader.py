"""Copy real segments written by `kafkapy.storage` to a real S3 server and read them back."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol.records import build_control_batch, iter_batches
from kafkapy.storage import AbortedTxnEntry, LogConfig, PartitionLog
from kafkapy.storage.remote.copier import (
    CopierLag,
    CopyBackoff,
    LocalSegmentFiles,
    RemoteLogSegmentCopier,
    copier_lag,
)
from kafkapy.storage.remote.layout import TopicIdPartition, partition_prefix
from kafkapy.storage.remote.metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentState,
)
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataCache
from kafkapy.storage.remote.object_store import ObjectStoreUnavailableError
from kafkapy.storage.remote.reader import RemoteLogReader
from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.storage.txn_index import write_snapshot
from kafkapy.testing.cluster import free_ports
from kafkapy.testing.object_store import S3Server
from tests.storage.helpers import BASE_TS, batch, records_of

TOPIC_ID = uuid.UUID(int=0xC0FFEE)
TP = TopicIdPartition("orders", TOPIC_ID, 0)
CONFIG = LogConfig(segment_bytes=6000, index_interval_bytes=300)
PRODUCER = 7


def _write_log(directory: Path) -> PartitionLog:
    """Batches of varying size over several segments, an aborted transaction in the first,
    a producer snapshot at a segment end, and leader epochs 0 then 3."""
    plog = PartitionLog(directory, CONFIG, topic_id=TOPIC_ID, now_ms=BASE_TS)
    for i in range(60):
        epoch = 0 if i < 25 else 3
        if i == 5:
            first = plog.log_end_offset
            txn = batch([b"aborted-1", b"aborted-2"], producer_id=PRODUCER, producer_epoch=0,
                        transactional=True)
            plog.append(txn, now_ms=BASE_TS, leader_epoch=epoch)
            marker = build_control_batch(False, producer_id=PRODUCER, producer_epoch=0,
                                         coordinator_epoch=0, timestamp_ms=BASE_TS)
            last = plog.append(marker, now_ms=BASE_TS, from_client=False, leader_epoch=epoch).base_offset
            plog.append_aborted_txn(PRODUCER, first, last, last + 1)
        values = [f"v{i}-{j}".encode() * (1 + (i * 7 + j) % 40) for j in range(1 + i % 5)]
        plog.append(batch(values, ts=BASE_TS + i), now_ms=BASE_TS, leader_epoch=epoch)
    plog.roll(BASE_TS)
    plog.flush()
    return plog


def _rolled(plog: PartitionLog) -> list[LocalSegmentFiles]:
    out = []
    for seg in plog.segments[:-1]:
        files = LocalSegmentFiles.in_directory(
            plog.directory, seg.base_offset, end_offset=seg.next_offset - 1,
            max_timestamp_ms=seg.largest_timestamp(), leader_epochs=plog.leader_epochs.entries)
        out.append(files)
    return out


@pytest.fixture
def copied(tmp_path: Path, s3_store: S3ObjectStore
           ) -> tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]]:
    plog = _write_log(tmp_path / "orders-0")
    write_snapshot(plog.directory, plog.segments[1].base_offset, b"producer-state")
    published: list[RemoteLogMetadata] = []
    cache = RemoteLogMetadataCache(TP)

    def publish(record: RemoteLogMetadata) -> None:
        published.append(record)
        cache.apply(record)

    copier = RemoteLogSegmentCopier(s3_store, broker_id=1)
    for files in _rolled(plog):
        copier.copy(TP, files, leader_epoch=3, publish=publish, now_ms=BASE_TS)
    return plog, cache, published


def test_copy_publishes_started_then_finished_with_every_object(
        copied: tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]],
        s3_store: S3ObjectStore) -> None:
    plog, cache, published = copied
    segments = plog.segments[:-1]
    assert len(segments) >= 3
    assert [type(r).__name__ for r in published] == [
        "RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate"] * len(segments)
    assert cache.highest_copied_offset() == plog.segments[-1].base_offset - 1
    assert cache.log_start_offset() == 0
    first = cache.readable_segments()[0]
    assert not first.txn_index_empty  # the aborted transaction's marker is in it
    assert cache.readable_segments()[1].txn_index_empty
    keys = [o.key for o in s3_store.list(partition_prefix(TP))]
    stem = f"{partition_prefix(TP)}{0:020d}-"
    first_keys = sorted(k[len(stem) + 22:] for k in keys if k.startswith(stem))
    assert first_keys == [".index", ".leader_epoch_checkpoint", ".log", ".snapshot", ".timeindex",
                          ".txnindex"]
    assert s3_store.get(next(k for k in keys if k.startswith(stem) and k.endswith(".snapshot"))) \
        == b"producer-state"
    for seg, meta in zip(segments, cache.readable_segments(), strict=True):
        assert meta.segment_size_in_bytes == seg.size
        log_key = next(k for k in keys if k.endswith(".log") and f"{seg.base_offset:020d}-" in k)
        assert s3_store.get(log_key) == seg.log_path.read_bytes()


def test_reads_from_any_offset_are_byte_exact_whole_batches(
        copied: tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]],
        s3_store: S3ObjectStore) -> None:
    plog, cache, _ = copied
    reader = RemoteLogReader(s3_store, chunk_bytes=1024, cache_bytes=16 << 10)
    end = cache.highest_copied_offset()
    for offset in [0, 1, 2, 5, 6, 7, 31, end // 2, end - 1, end]:
        for max_bytes in (1, 700, 5000, 1 << 20):
            segment = cache.segment_for_offset(offset)
            assert segment is not None
            result = reader.read(segment, offset, max_bytes)
            expected = plog.read_bytes(offset, max_bytes, max_offset=segment.end_offset + 1)
            assert result.records == expected, (offset, max_bytes)
            last = [h.base_offset + h.last_offset_delta for _, h in iter_batches(result.records)]
            assert result.next_offset == last[-1] + 1
    assert reader.cache.size <= 16 << 10
    assert reader.cache.hits > 0


def test_a_consumer_reads_the_whole_remote_tier_in_order(
        copied: tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]],
        s3_store: S3ObjectStore) -> None:
    plog, cache, _ = copied
    reader = RemoteLogReader(s3_store, chunk_bytes=2048, cache_bytes=8 << 10)
    offset, remote = 0, b""
    while (segment := cache.segment_for_offset(offset)) is not None:
        result = reader.read(segment, offset, 900)
        remote += result.records
        offset = result.next_offset
    assert offset == plog.segments[-1].base_offset
    local = b"".join(seg.log_path.read_bytes() for seg in plog.segments[:-1])
    assert remote == local
    assert records_of(remote)[0] == (0, None, b"v0-0")


def test_aborted_transactions_come_from_the_copied_transaction_index(
        copied: tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]],
        s3_store: S3ObjectStore) -> None:
    plog, cache, _ = copied
    reader = RemoteLogReader(s3_store)
    first, second = cache.readable_segments()[:2]
    expected = plog.aborted_transactions(0, first.end_offset + 1)
    assert [e.producer_id for e in expected] == [PRODUCER]
    assert reader.aborted_transactions(first, 0, first.end_offset + 1) == expected
    entry: AbortedTxnEntry = expected[0]
    assert reader.aborted_transactions(first, entry.last_offset + 1, first.end_offset + 1) == []
    assert reader.aborted_transactions(second, second.start_offset, second.end_offset + 1) == []


def test_offset_for_timestamp_answers_as_the_local_log_from_the_copied_time_index(
        copied: tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]],
        s3_store: S3ObjectStore) -> None:
    plog, cache, _ = copied
    reader = RemoteLogReader(s3_store, chunk_bytes=1024, cache_bytes=16 << 10)
    segments = cache.readable_segments()
    for timestamp in [BASE_TS - 5, BASE_TS, BASE_TS + 1, BASE_TS + 7, BASE_TS + 30, BASE_TS + 44]:
        expected = plog.offset_for_timestamp(timestamp)
        assert expected is not None
        found = next(hit for s in segments if s.max_timestamp_ms >= timestamp
                     if (hit := reader.offset_for_timestamp(s, timestamp, 0)) is not None)
        assert found == expected, timestamp
    last = segments[-1]
    assert reader.offset_for_timestamp(last, last.max_timestamp_ms + 1, 0) is None
    # from a later start offset (DeleteRecords moved the log start into the segment)
    hit = reader.offset_for_timestamp(segments[0], BASE_TS, 3)
    assert hit is not None
    assert hit[0] == 3


def test_leader_epochs_of_each_segment_are_recorded(
        copied: tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]]) -> None:
    plog, cache, _ = copied
    epochs = [s.segment_leader_epochs for s in cache.readable_segments()]
    assert epochs[0][0] == (0, 0)
    switch = dict((e, o) for e, o in plog.leader_epochs.entries)[3]
    holder = cache.segment_for_offset(switch)
    assert holder is not None
    assert (3, switch) in holder.segment_leader_epochs
    assert all(e == ((3, s.start_offset),) for s, e in zip(cache.readable_segments(), epochs, strict=True)
               if s.start_offset > switch)


def test_a_copy_that_fails_is_never_readable_and_is_cleaned_up(
        tmp_path: Path, s3_server: S3Server, s3_store: S3ObjectStore) -> None:
    plog = _write_log(tmp_path / "orders-0")
    (dead_port,) = free_ports(1)
    down = S3ObjectStore(s3_server.config(
        key_prefix=s3_store.config.key_prefix, endpoint_url=f"http://127.0.0.1:{dead_port}",
        connect_timeout_s=0.3, max_attempts=1))
    cache = RemoteLogMetadataCache(TP)
    files = _rolled(plog)[0]
    with pytest.raises(ObjectStoreUnavailableError):
        RemoteLogSegmentCopier(down, broker_id=1).copy(
            TP, files, leader_epoch=0, publish=cache.apply, now_ms=BASE_TS)
    (started,) = cache.segments()
    assert started.state is RemoteLogSegmentState.COPY_SEGMENT_STARTED
    assert cache.segment_for_offset(0) is None
    assert cache.highest_copied_offset() == -1
    # an attempt that got some objects up before failing, then abandoned
    copier = RemoteLogSegmentCopier(s3_store, broker_id=1)
    half: RemoteLogSegmentMetadata = copier.copy(
        TP, files, leader_epoch=0, publish=lambda r: None, now_ms=BASE_TS)
    copier.delete(started, publish=cache.apply, now_ms=BASE_TS)
    copier.delete(half, publish=lambda r: None, now_ms=BASE_TS)
    assert len(cache) == 0
    assert s3_store.list(partition_prefix(TP)) == []


def test_a_read_while_the_store_is_down_is_retriable(
        copied: tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]],
        s3_server: S3Server, s3_store: S3ObjectStore) -> None:
    _, cache, _ = copied
    (dead_port,) = free_ports(1)
    down = S3ObjectStore(s3_server.config(
        key_prefix=s3_store.config.key_prefix, endpoint_url=f"http://127.0.0.1:{dead_port}",
        connect_timeout_s=0.3, max_attempts=1))
    segment = cache.segment_for_offset(0)
    assert segment is not None
    with pytest.raises(ObjectStoreUnavailableError) as info:
        RemoteLogReader(down).read(segment, 0, 1000)
    assert info.value.retriable


@given(st.integers(1, 40), st.floats(0, 1, exclude_max=True))
def test_backoff_grows_to_its_cap_within_its_jitter(failures: int, unit: float) -> None:
    policy = CopyBackoff(initial_ms=500, max_ms=30_000, jitter=0.2)
    delay = policy.delay_ms(failures, unit)
    base = min(30_000, 500 * 2 ** (failures - 1))
    assert 0.8 * base - 1 <= delay <= min(30_000, 1.2 * base + 1)
    assert policy.delay_ms(failures + 1, 0.5) >= policy.delay_ms(failures, 0.5)


def test_copier_lag_counts_rolled_segments_not_yet_copied() -> None:
    rolled = [(0, 99, 1000), (100, 199, 2000), (200, 299, 4000)]
    assert copier_lag(rolled, -1) == CopierLag(3, 7000)
    assert copier_lag(rolled, 99) == CopierLag(2, 6000)
    assert copier_lag(rolled, 299) == CopierLag(0, 0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_chunk_size_offset_and_limit_reads_what_the_local_log_reads(
        copied: tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]],
        s3_store: S3ObjectStore, data: st.DataObject) -> None:
    plog, cache, _ = copied
    chunk = data.draw(st.integers(61, 9000), label="chunk_bytes")
    reader = RemoteLogReader(s3_store, chunk_bytes=chunk, cache_bytes=data.draw(st.integers(0, 20_000)))
    offset = data.draw(st.integers(0, cache.highest_copied_offset()), label="offset")
    max_bytes = data.draw(st.integers(1, 12_000), label="max_bytes")
    segment = cache.segment_for_offset(offset)
    assert segment is not None
    expected = plog.read_bytes(offset, max_bytes, max_offset=segment.end_offset + 1)
    assert reader.read(segment, offset, max_bytes).records == expected
    assert reader.cache.size <= reader.cache.capacity


def test_retention_deletes_the_oldest_remote_segments_from_the_bucket(
        copied: tuple[PartitionLog, RemoteLogMetadataCache, list[RemoteLogMetadata]],
        s3_store: S3ObjectStore) -> None:
    _, cache, _ = copied
    readable = cache.readable_segments()
    keep = readable[-1].segment_size_in_bytes
    going = cache.segments_past_retention(now_ms=BASE_TS, retention_ms=-1, retention_bytes=keep)
    assert going == readable[:-1]
    copier = RemoteLogSegmentCopier(s3_store, broker_id=1)
    for segment in going:
        copier.delete(segment, publish=cache.apply, now_ms=BASE_TS)
    assert cache.log_start_offset() == readable[-1].start_offset
    keys = [o.key for o in s3_store.list(partition_prefix(TP))]
    assert keys
    assert all(f"{readable[-1].start_offset:020d}-" in k for k in keys)
