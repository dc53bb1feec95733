"""Snapshot rules of the Raft core (KIP-630), one at a time: the log starts at a snapshot, a
leader sends fetchers below its log start to the snapshot, FetchSnapshot serves it in chunks,
a follower installs it and goes on from its end; plus `MemoryRaftLog`'s snapshot model."""

from __future__ import annotations

import random

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft import (
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    MemoryRaftLog,
    QuorumState,
    RaftCore,
    SnapshotId,
)
from tests.raft.helpers import ELECTION_MS, FETCH_INTERVAL_MS, FETCH_TIMEOUT_MS, elect, fetch, sent


def _log(epochs: list[int]) -> MemoryRaftLog:
    return MemoryRaftLog([Entry(i, e, b"%d" % i) for i, e in enumerate(epochs)])


def _core(log: MemoryRaftLog, node_id: int = 1, state: QuorumState | None = None) -> RaftCore:
    return RaftCore(
        node_id,
        frozenset({1, 2, 3}),
        log,
        state or QuorumState(0),
        now_ms=0,
        rng=random.Random(0),
        election_timeout_ms=ELECTION_MS,
        fetch_timeout_ms=FETCH_TIMEOUT_MS,
        fetch_interval_ms=FETCH_INTERVAL_MS,
        max_snapshot_chunk_bytes=4,
    )


# ---------------------------------------------------------------- the log


def test_adopting_a_snapshot_keeps_the_matching_tail_and_survives_a_crash() -> None:
    log = _log([1, 1, 2, 2, 2])
    log.flush()
    sid = SnapshotId(3, 2)
    log.store_snapshot(sid, b"state")
    log.adopt_snapshot(sid)
    assert (log.start_offset(), log.end_offset()) == (3, 5)
    assert log.epoch_at(2) == 2  # the snapshot stands for the entry before the start
    assert log.epoch_at(1) is None
    assert log.end_offset_for_epoch(2) == (2, 5)
    assert log.end_offset_for_epoch(1) == (0, 3)  # older than the snapshot: all diverges
    with pytest.raises(ValueError, match="below the log start"):
        log.read(2, 1)
    restarted = log.crash()  # the start was never flushed: the snapshot is adopted again
    assert (restarted.start_offset(), restarted.end_offset()) == (3, 5)
    assert restarted.read(3, 5) == log.read(3, 5)
    log.flush()
    again = log.crash()
    assert (again.start_offset(), again.end_offset(), again.latest_snapshot()) == (3, 5, sid)


def test_a_snapshot_that_does_not_match_the_log_replaces_it_whole() -> None:
    log = _log([1, 1, 1])  # entry 3 would be epoch 1 here; the snapshot says epoch 4
    sid = SnapshotId(4, 4)
    log.store_snapshot(sid, b"s")
    log.adopt_snapshot(sid)
    assert (log.start_offset(), log.end_offset(), log.last_epoch()) == (4, 4, 4)
    assert log.end_offset_for_epoch(7) == (4, 4)


def test_read_snapshot_in_chunks_and_unknown_ones() -> None:
    log = MemoryRaftLog()
    sid = SnapshotId(2, 1)
    log.store_snapshot(sid, b"abcdefghij")
    assert log.read_snapshot(sid, 0, 4) == (b"abcd", 10)
    assert log.read_snapshot(sid, 8, 4) == (b"ij", 10)
    assert log.read_snapshot(sid, 11, 4) is None
    assert log.read_snapshot(SnapshotId(9, 1), 0, 4) is None


# ---------------------------------------------------------------- the core


def _leader_with_snapshot() -> RaftCore:
    core = _core(MemoryRaftLog())
    elect(core)  # noop@0, epoch 1
    core.propose([b"a", b"b", b"c"], 10)
    core.poll()
    fetch(core, 2, 4, 1, 11)  # follower 2 has it all: committed
    assert len(core.poll().committed) == 4
    sid = SnapshotId(4, 1)
    core.log.store_snapshot(sid, b"0123456789")
    core.snapshot_written(sid)
    assert core.log.start_offset() == 4
    return core


def test_snapshot_beyond_the_applied_offset_is_refused() -> None:
    core = _core(MemoryRaftLog())
    elect(core)
    core.log.store_snapshot(SnapshotId(1, 1), b"x")
    with pytest.raises(ValueError, match="beyond the applied"):
        core.snapshot_written(SnapshotId(1, 1))


def test_fetch_below_the_log_start_gets_the_snapshot_id() -> None:
    core = _leader_with_snapshot()
    resp = fetch(core, 3, 0, 0, 20)
    assert isinstance(resp, FetchResponse)
    assert resp.snapshot_id == SnapshotId(4, 1)
    assert resp.entries == []
    resp = fetch(core, 3, 4, 1, 21)  # at the log start with the snapshot's epoch: fine
    assert isinstance(resp, FetchResponse)
    assert resp.snapshot_id is None
    assert resp.diverging_epoch is None


def test_fetch_snapshot_serves_chunks_and_refuses_bad_positions() -> None:
    core = _leader_with_snapshot()
    sid = SnapshotId(4, 1)
    resp = core.handle_request(3, FetchSnapshotRequest(3, sid, 8, core.epoch), 20)
    assert isinstance(resp, FetchSnapshotResponse)
    clock = resp.leader_clock_ms  # the leader's clock, for the fetcher to echo
    assert clock >= 20
    assert resp == FetchSnapshotResponse(ErrorCode.NONE, 1, core.epoch, sid, 10, 8, b"89", clock)
    resp = core.handle_request(3, FetchSnapshotRequest(3, sid, 2, core.epoch, max_bytes=3), 20)
    assert resp == FetchSnapshotResponse(ErrorCode.NONE, 1, core.epoch, sid, 10, 2, b"234", clock)
    resp = core.handle_request(3, FetchSnapshotRequest(3, sid, 11, core.epoch), 20)
    assert isinstance(resp, FetchSnapshotResponse)
    assert resp.error == ErrorCode.SNAPSHOT_NOT_FOUND
    resp = core.handle_request(3, FetchSnapshotRequest(3, sid, -1, core.epoch), 20)
    assert isinstance(resp, FetchSnapshotResponse)
    assert resp.error == ErrorCode.POSITION_OUT_OF_RANGE
    resp = core.handle_request(3, FetchSnapshotRequest(3, sid, 0, core.epoch - 1), 20)
    assert isinstance(resp, FetchSnapshotResponse)
    assert resp.error == ErrorCode.FENCED_LEADER_EPOCH


def test_follower_fetches_installs_and_continues_from_the_snapshot_end() -> None:
    leader = _leader_with_snapshot()
    follower = _core(_log([1]), node_id=3, state=QuorumState(leader.epoch, None, 1))
    now = 30
    for _ in range(20):  # bounded: a Fetch, three 4-byte chunks, then the tail
        ready = follower.poll()
        if ready.snapshot is not None:
            break
        reqs = sent(ready, FetchRequest) + sent(ready, FetchSnapshotRequest)
        if not reqs:
            now += FETCH_INTERVAL_MS
            follower.tick(now)
            continue
        ((dst, req),) = reqs
        resp = leader.handle_request(3, req, now)
        follower.handle_response(dst, req, resp, now)
    assert ready.snapshot == SnapshotId(4, 1)
    assert ready.committed == []
    got = follower.log.read_snapshot(SnapshotId(4, 1), 0, 100)
    assert got == (b"0123456789", 10)
    assert (follower.log.start_offset(), follower.log.end_offset()) == (4, 4)
    assert follower.high_watermark == 4
    ((dst, req),) = sent(ready, FetchRequest) or sent(follower.poll(), FetchRequest)
    # echoing the clock of the last chunk's answer: the follower heard from the leader then
    assert isinstance(resp, FetchSnapshotResponse)
    assert resp.leader_clock_ms >= 30
    assert req == FetchRequest(3, 4, 1, leader.epoch, resp.leader_clock_ms)


def test_a_broken_chunk_sends_the_follower_back_to_fetch() -> None:
    follower = _core(MemoryRaftLog(), node_id=3, state=QuorumState(1, None, 1))
    ((dst, req),) = sent(follower.poll(), FetchRequest)
    follower.handle_response(
        dst, req, FetchResponse(ErrorCode.NONE, 1, 1, 4, snapshot_id=SnapshotId(4, 1)), 5
    )
    ((dst, req),) = sent(follower.poll(), FetchSnapshotRequest)
    assert req == FetchSnapshotRequest(3, SnapshotId(4, 1), 0, 1)
    bad = FetchSnapshotResponse(ErrorCode.NONE, 1, 1, SnapshotId(4, 1), 10, 0, b"x" * 11)
    follower.handle_response(dst, req, bad, 6)
    follower.tick(6 + FETCH_INTERVAL_MS)
    ((dst, req),) = sent(follower.poll(), FetchRequest)
    assert follower.log.latest_snapshot() is None


def test_restart_starts_at_the_snapshot_with_it_committed() -> None:
    log = _log([1, 1, 1, 1])
    log.store_snapshot(SnapshotId(3, 1), b"s")
    log.adopt_snapshot(SnapshotId(3, 1))
    core = _core(log.crash(), node_id=2, state=QuorumState(1, None, 1))
    assert core.high_watermark == 3
    ready = core.poll()
    assert ready.committed == []  # the driver loads the snapshot; nothing below is re-applied
