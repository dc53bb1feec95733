"""The remote log start as DeleteRecords moves it (rule 6), and a partition tiered again after
its remote data was deleted (rule 7, KIP-950)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.storage.remote.metadata import (
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
)
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataCache, RemoteLogMetadataStore
from tests.storage.remote.test_metadata_cache import TP, S, finished, segment, update


def _three() -> RemoteLogMetadataCache:
    cache = RemoteLogMetadataCache(TP)
    for n, (start, end) in enumerate([(0, 9), (10, 19), (20, 29)]):
        finished(cache, segment(n, start, end))
    return cache


@given(st.lists(st.integers(0, 40), max_size=6))
def test_the_log_start_is_the_highest_delete_records_offset_never_lower(offsets: list[int]) -> None:
    cache = _three()
    for offset in offsets:
        cache.advance_log_start(offset)
    assert cache.log_start_offset() == max([0, *offsets])
    below = cache.segments_below_log_start()
    assert [s.start_offset for s in below] == [s for s in (0, 10, 20) if s + 9 < max([0, *offsets])]


def test_a_segment_copied_after_the_partition_was_deleted_is_readable() -> None:
    cache = _three()
    cache.advance_log_start(15)
    for state in (RemotePartitionDeleteState.DELETE_PARTITION_MARKED,
                  RemotePartitionDeleteState.DELETE_PARTITION_FINISHED):
        cache.apply(RemotePartitionDeleteMetadata(TP, 0, 0, state))
    assert cache.log_start_offset() is None
    finished(cache, segment(9, 40, 49))
    assert [s.start_offset for s in cache.readable_segments()] == [40]
    assert cache.log_start_offset() == 40


def test_the_replay_starts_from_the_checkpointed_log_start() -> None:
    store = RemoteLogMetadataStore(persisted_log_start=lambda tp: 15 if tp == TP else -1)
    for n, (start, end) in enumerate([(0, 9), (10, 19)]):
        store.apply(segment(n, start, end))
        store.apply(update(segment(n, start, end), S.COPY_SEGMENT_FINISHED))
    cache = store.cache(TP)
    assert cache is not None
    assert cache.log_start_offset() == 15
    assert not cache.advance_log_start(12)  # never lower
    assert [s.start_offset for s in cache.segments_below_log_start()] == [0]
