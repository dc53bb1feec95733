"""The remote metadata cache against a model: lookups, log start, retention, transitions."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.protocol.errors import ProtocolError
from kafkapy.storage.remote.layout import RemoteLogSegmentId, TopicIdPartition
from kafkapy.storage.remote.metadata import (
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    RemotePartitionDeleteState,
    encode_remote_log_metadata,
)
from kafkapy.storage.remote.metadata_cache import (
    RemoteLogMetadataCache,
    RemoteLogMetadataStore,
    RemoteMetadataError,
)

TP = TopicIdPartition("t", uuid.UUID(int=1), 0)
S = RemoteLogSegmentState


def segment(n: int, start: int, end: int, *, size: int = 100, ts: int = 0, epoch: int = 0
            ) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(
        RemoteLogSegmentId(TP, uuid.UUID(int=n + 1)), start, end, broker_id=0,
        max_timestamp_ms=ts, event_timestamp_ms=0, segment_leader_epochs=((epoch, start),),
        segment_size_in_bytes=size)


def update(seg: RemoteLogSegmentMetadata, state: RemoteLogSegmentState) -> RemoteLogSegmentMetadataUpdate:
    return RemoteLogSegmentMetadataUpdate(seg.segment_id, 0, 0, state)


def finished(cache: RemoteLogMetadataCache, seg: RemoteLogSegmentMetadata) -> None:
    cache.apply(seg)
    cache.apply(update(seg, S.COPY_SEGMENT_FINISHED))


# contiguous segments: (length, size, max timestamp, target state) each
layouts = st.lists(
    st.tuples(st.integers(1, 50), st.integers(0, 500), st.integers(0, 10_000), st.sampled_from(S)),
    max_size=12)


def build(layout: list[tuple[int, int, int, RemoteLogSegmentState]], first: int = 0
          ) -> tuple[RemoteLogMetadataCache, list[tuple[RemoteLogSegmentMetadata, RemoteLogSegmentState]]]:
    cache = RemoteLogMetadataCache(TP)
    out = []
    start = first
    for n, (length, size, ts, state) in enumerate(layout):
        seg = segment(n, start, start + length - 1, size=size, ts=ts)
        cache.apply(seg)
        path = {S.COPY_SEGMENT_STARTED: [], S.COPY_SEGMENT_FINISHED: [S.COPY_SEGMENT_FINISHED],
                S.DELETE_SEGMENT_STARTED: [S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED],
                S.DELETE_SEGMENT_FINISHED: [S.DELETE_SEGMENT_STARTED, S.DELETE_SEGMENT_FINISHED]}
        for step in path[state]:
            cache.apply(update(seg, step))
        out.append((seg, state))
        start += length
    return cache, out


@given(layouts, st.integers(0, 20), st.integers(-5, 700))
def test_lookups_see_exactly_the_finished_copies(layout, first, offset) -> None:  # type: ignore[no-untyped-def]
    cache, segs = build(layout, first)
    readable = [s for s, state in segs if state is S.COPY_SEGMENT_FINISHED]
    found = cache.segment_for_offset(offset)
    holders = [s.segment_id for s in readable if s.start_offset <= offset <= s.end_offset]
    assert (found.segment_id if found else None) == (holders[0] if holders else None)
    assert found is None or found.state is S.COPY_SEGMENT_FINISHED
    assert cache.log_start_offset() == (readable[0].start_offset if readable else None)
    assert cache.highest_copied_offset() == (readable[-1].end_offset if readable else -1)
    assert cache.size_bytes() == sum(s.segment_size_in_bytes for s in readable)
    assert len(cache) == sum(state is not S.DELETE_SEGMENT_FINISHED for _, state in segs)
    nxt = cache.next_segment_after(offset)
    expected = next((s.segment_id for s in readable if s.start_offset > offset), None)
    assert (nxt.segment_id if nxt else None) == expected


@given(layouts, st.integers(-1, 3000), st.integers(-1, 12_000), st.integers(0, 1000),
       st.integers(0, 12_000), st.integers(0, 700))
def test_retention_deletes_the_oldest_prefix_and_no_more(  # type: ignore[no-untyped-def]
        layout, retention_bytes, retention_ms, local_only, now, log_start) -> None:
    cache, _ = build(layout)
    readable = cache.readable_segments()
    going = cache.segments_past_retention(
        now_ms=now, retention_ms=retention_ms, retention_bytes=retention_bytes,
        local_only_bytes=local_only, log_start_offset=log_start)
    assert going == readable[:len(going)]  # an oldest-first prefix: no hole in the remote log
    total = local_only + sum(s.segment_size_in_bytes for s in readable)
    kept = total - sum(s.segment_size_in_bytes for s in going)
    for s in going:  # every one breaks a rule
        assert (s.end_offset < log_start
                or (retention_ms >= 0 and s.max_timestamp_ms < now - retention_ms)
                or retention_bytes >= 0)
    if retention_bytes >= 0 and len(going) < len(readable):
        nxt = readable[len(going)]
        expired = retention_ms >= 0 and nxt.max_timestamp_ms < now - retention_ms
        if not expired and nxt.end_offset >= log_start:
            assert kept - nxt.segment_size_in_bytes < retention_bytes  # keeping it was needed
    if retention_bytes >= 0 and retention_ms < 0 and log_start == 0:
        assert not going or kept >= retention_bytes  # size alone never cuts below the limit


def test_a_started_copy_is_not_readable_until_finished() -> None:
    cache = RemoteLogMetadataCache(TP)
    seg = segment(0, 0, 9)
    cache.apply(seg)
    assert cache.segment_for_offset(5) is None
    assert cache.highest_copied_offset() == -1
    cache.apply(update(seg, S.COPY_SEGMENT_FINISHED))
    assert cache.segment_for_offset(5) == seg.with_update(update(seg, S.COPY_SEGMENT_FINISHED))
    cache.apply(update(seg, S.COPY_SEGMENT_FINISHED))  # replayed: no-op
    cache.apply(update(seg, S.DELETE_SEGMENT_STARTED))
    assert cache.segment_for_offset(5) is None  # hidden while its objects go
    cache.apply(update(seg, S.DELETE_SEGMENT_FINISHED))
    assert len(cache) == 0
    cache.apply(update(seg, S.DELETE_SEGMENT_FINISHED))  # replayed after it was forgotten


def test_a_replay_trailing_the_leaders_own_deletes_keeps_the_segment_forgotten() -> None:
    """The leader applies its records once replicated; its replay of the metadata topic meets
    them again after the segment was deleted: every one is a no-op, none is refused, and the
    deleted segment is never readable again on the way."""
    cache = RemoteLogMetadataCache(TP)
    seg = segment(0, 0, 9)
    history = [seg, update(seg, S.COPY_SEGMENT_FINISHED), update(seg, S.DELETE_SEGMENT_STARTED),
               update(seg, S.DELETE_SEGMENT_FINISHED)]
    for record in history:
        cache.apply(record)
    for record in history:  # the replay, from the segment's add or from its delete
        cache.apply(record)
        assert cache.segment_for_offset(5) is None
        assert len(cache) == 0
    cache.apply(update(seg, S.DELETE_SEGMENT_STARTED))


@pytest.mark.parametrize(("path", "illegal"), [
    ([], S.DELETE_SEGMENT_FINISHED),
    ([S.COPY_SEGMENT_FINISHED], S.COPY_SEGMENT_STARTED),
    ([S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED], S.COPY_SEGMENT_FINISHED),
])
def test_illegal_transitions_are_refused_and_change_nothing(path, illegal) -> None:  # type: ignore[no-untyped-def]
    cache = RemoteLogMetadataCache(TP)
    seg = segment(0, 0, 9)
    cache.apply(seg)
    for step in path:
        cache.apply(update(seg, step))
    before = cache.segments()
    with pytest.raises(RemoteMetadataError, match="cannot move"):
        cache.apply(update(seg, illegal))
    assert cache.segments() == before


def test_unknown_segments_and_other_partitions_are_refused() -> None:
    cache = RemoteLogMetadataCache(TP)
    with pytest.raises(RemoteMetadataError, match="unknown"):
        cache.apply(update(segment(0, 0, 9), S.COPY_SEGMENT_FINISHED))
    other = TopicIdPartition("t", uuid.UUID(int=2), 0)  # same name, another incarnation
    with pytest.raises(RemoteMetadataError, match="applied to the cache"):
        cache.apply(RemotePartitionDeleteMetadata(other, 0, 0, RemotePartitionDeleteState.DELETE_PARTITION_MARKED))


def test_overlap_after_unclean_election_prefers_the_later_epoch() -> None:
    cache = RemoteLogMetadataCache(TP)
    old, new = segment(0, 0, 99, epoch=1), segment(1, 50, 120, epoch=2)
    finished(cache, old)
    finished(cache, new)
    assert cache.segment_for_offset(40).segment_id == old.segment_id  # type: ignore[union-attr]
    assert cache.segment_for_offset(60).segment_id == new.segment_id  # type: ignore[union-attr]


def test_partition_delete_hides_then_forgets_everything() -> None:
    cache = RemoteLogMetadataCache(TP)
    finished(cache, segment(0, 0, 9))
    mark = RemotePartitionDeleteState.DELETE_PARTITION_MARKED
    cache.apply(RemotePartitionDeleteMetadata(TP, 0, 0, mark))
    assert cache.segment_for_offset(3) is None
    assert len(cache) == 1
    done = RemotePartitionDeleteState.DELETE_PARTITION_FINISHED
    cache.apply(RemotePartitionDeleteMetadata(TP, 0, 0, done))
    assert len(cache) == 0


def test_the_store_routes_record_values_to_each_partitions_cache() -> None:
    store = RemoteLogMetadataStore()
    other = TopicIdPartition("t", uuid.UUID(int=1), 1)
    seg = segment(0, 0, 9)
    store.apply_value(encode_remote_log_metadata(seg))
    store.apply_value(encode_remote_log_metadata(update(seg, S.COPY_SEGMENT_FINISHED)))
    assert store.partitions() == [TP]
    cache = store.cache(TP)
    assert cache is not None
    assert cache.highest_copied_offset() == 9
    assert store.cache(other) is None
    stray = RemotePartitionDeleteMetadata(other, 0, 0, RemotePartitionDeleteState.DELETE_PARTITION_MARKED)
    with pytest.raises(RemoteMetadataError):
        store.apply(stray)
    assert store.partitions() == [TP]
    with pytest.raises(ProtocolError):
        store.apply_value(b"\x07\x00")
    store.forget(TP)
    assert store.partitions() == []
