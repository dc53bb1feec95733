"""Small builders for driving one `RaftCore` by hand in the rule tests."""

from __future__ import annotations

import random
from collections.abc import Iterable

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft import (
    Entry,
    FetchRequest,
    MemoryRaftLog,
    QuorumState,
    RaftCore,
    RaftRequest,
    Ready,
    VoteRequest,
    VoteResponse,
)

ELECTION_MS = 1000
FETCH_TIMEOUT_MS = 2000
FETCH_INTERVAL_MS = 50


def log_of(epochs: Iterable[int]) -> MemoryRaftLog:
    """A log whose entry i has epoch epochs[i] and data b"<i>"."""
    return MemoryRaftLog([Entry(i, e, str(i).encode()) for i, e in enumerate(epochs)])


def make(
    node_id: int = 1,
    voters: Iterable[int] = (1, 2, 3),
    *,
    epochs: Iterable[int] = (),
    state: QuorumState | None = None,
    seed: int = 0,
) -> RaftCore:
    return RaftCore(
        node_id,
        frozenset(voters),
        log_of(epochs),
        state or QuorumState(0),
        now_ms=0,
        rng=random.Random(seed),
        election_timeout_ms=ELECTION_MS,
        fetch_timeout_ms=FETCH_TIMEOUT_MS,
        fetch_interval_ms=FETCH_INTERVAL_MS,
    )


def sent(ready: Ready, kind: type[RaftRequest]) -> list[tuple[int, RaftRequest]]:
    return [(dst, r) for dst, r in ready.requests if isinstance(r, kind)]


def campaign(core: RaftCore) -> Ready:
    """Let the election timer of `core` fire; the Ready of its candidacy."""
    core.poll()
    core.tick(core.next_deadline_ms())
    return core.poll()


def elect(core: RaftCore) -> Ready:
    """Make `core` the leader with votes from every other voter; the Ready of its leadership."""
    ready = campaign(core)
    now = core.next_deadline_ms() - ELECTION_MS  # any time before the election deadline
    for dst, req in sent(ready, VoteRequest):
        assert isinstance(req, VoteRequest)
        if core.is_leader:
            break
        core.handle_response(
            dst, req, VoteResponse(ErrorCode.NONE, None, req.candidate_epoch, True), now
        )
    assert core.is_leader
    return core.poll()


def fetch(
    core: RaftCore, replica: int, offset: int, last_epoch: int, now: int, clock: int = -1
) -> object:
    """`replica` fetches from `core` at `now`, echoing the leader clock `clock` of the last
    answer it accepted (-1: none)."""
    return core.handle_request(
        replica, FetchRequest(replica, offset, last_epoch, core.epoch, clock), now
    )
