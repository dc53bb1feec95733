"""Every role answers every request, and ignores every answer it did not ask for, by its own
rules: one table row per (role, event). A role's step only overrides what the role does
differently, so these rows pin what each role inherits too - a Fetch to anyone but the leader
names the leader it knows, a Vote of a leader's epoch is refused by all but an unattached voter,
a response to a request of an earlier role changes nothing."""

from __future__ import annotations

import random

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    MemoryRaftLog,
    QuorumState,
    RaftCore,
    RaftRequest,
    RaftResponse,
    Role,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from tests.raft.helpers import (
    ELECTION_MS,
    FETCH_INTERVAL_MS,
    FETCH_TIMEOUT_MS,
    campaign,
    elect,
    make,
)

OBSERVER_ID = 100


def _prospective() -> RaftCore:
    core = RaftCore(
        1, frozenset({1, 2, 3}), MemoryRaftLog(), QuorumState(3), now_ms=0,
        rng=random.Random(0), election_timeout_ms=ELECTION_MS, fetch_timeout_ms=FETCH_TIMEOUT_MS,
        fetch_interval_ms=FETCH_INTERVAL_MS, pre_vote=True,
    )  # fmt: skip
    core.tick(core.next_deadline_ms())
    return core


def in_role(role: Role) -> RaftCore:
    """Node 1 of voters {1, 2, 3} (node 100 for the observer) in `role`, its requests polled.
    Followers follow node 2; candidates and leaders are in epoch 4, the others in epoch 3."""
    core: RaftCore
    match role:
        case Role.UNATTACHED:
            core = make(state=QuorumState(3))
        case Role.FOLLOWER:
            core = make(state=QuorumState(3, None, 2))
        case Role.OBSERVER:
            core = make(OBSERVER_ID, state=QuorumState(3, None, 2))
        case Role.CANDIDATE:
            core = make(state=QuorumState(3))
            campaign(core)
        case Role.PROSPECTIVE:
            core = _prospective()
        case Role.LEADER:
            core = make(state=QuorumState(3))
            elect(core)
        case Role.RESIGNED:
            core = make(state=QuorumState(3, 1, 1))
    core.poll()
    assert core.role is role
    return core


def _now(core: RaftCore) -> int:
    """A time at which none of the role's own timers fires."""
    return core.next_deadline_ms() - 1


ALL_ROLES = list(Role)
NOT_LEADER = [r for r in Role if r is not Role.LEADER]


def test_the_table_covers_every_role() -> None:
    for role in Role:
        assert in_role(role).next_deadline_ms() > 0


# ---------------------------------------------------------------- requests


@pytest.mark.parametrize("role", NOT_LEADER)
def test_fetch_to_a_non_leader_names_the_leader_it_knows(role: Role) -> None:
    core = in_role(role)
    leader, epoch = core.leader_id, core.epoch
    resp = core.handle_request(3, FetchRequest(3, 0, 0, epoch), _now(core))
    assert resp == FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader, epoch, 0)
    assert (core.role, core.epoch) == (role, epoch)


@pytest.mark.parametrize("role", NOT_LEADER)
def test_fetch_snapshot_to_a_non_leader_names_the_leader_it_knows(role: Role) -> None:
    core = in_role(role)
    leader, epoch = core.leader_id, core.epoch
    sid = SnapshotId(1, 1)
    resp = core.handle_request(3, FetchSnapshotRequest(3, sid, 0, epoch), _now(core))
    assert resp == FetchSnapshotResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader, epoch, sid)
    assert (core.role, core.epoch) == (role, epoch)


def test_the_leader_serves_fetch_and_fetch_snapshot() -> None:
    core = in_role(Role.LEADER)
    now = _now(core)
    resp = core.handle_request(3, FetchRequest(3, 0, 0, 4), now)
    assert isinstance(resp, FetchResponse)
    assert (resp.error, resp.leader_id, [e.offset for e in resp.entries]) == (
        ErrorCode.NONE,
        1,
        [0],
    )
    sid = SnapshotId(1, 4)
    snap = core.handle_request(3, FetchSnapshotRequest(3, sid, 0, 4), now)
    assert snap == FetchSnapshotResponse(ErrorCode.SNAPSHOT_NOT_FOUND, 1, 4, sid)


@pytest.mark.parametrize(
    ("role", "error", "role_after", "leader_after"),
    [
        (Role.UNATTACHED, ErrorCode.NONE, Role.FOLLOWER, 3),
        (Role.FOLLOWER, ErrorCode.NONE, Role.FOLLOWER, 2),
        (Role.OBSERVER, ErrorCode.NONE, Role.OBSERVER, 2),
        (Role.CANDIDATE, ErrorCode.NONE, Role.FOLLOWER, 3),
        (Role.PROSPECTIVE, ErrorCode.NONE, Role.FOLLOWER, 3),
        # two leaders in one epoch cannot happen: the epoch's own leader refuses
        (Role.LEADER, ErrorCode.INVALID_REQUEST, Role.LEADER, 1),
        (Role.RESIGNED, ErrorCode.INVALID_REQUEST, Role.RESIGNED, None),
    ],
)
def test_begin_quorum_epoch_of_the_current_epoch(
    role: Role, error: ErrorCode, role_after: Role, leader_after: int | None
) -> None:
    core = in_role(role)
    epoch = core.epoch
    resp = core.handle_request(3, BeginQuorumEpochRequest(3, epoch), _now(core))
    assert resp.error == error
    assert (core.role, core.epoch, core.leader_id) == (role_after, epoch, leader_after)


@pytest.mark.parametrize("role", ALL_ROLES)
def test_requests_of_an_older_epoch_are_fenced_by_every_role(role: Role) -> None:
    core = in_role(role)
    leader, epoch = core.leader_id, core.epoch
    old = epoch - 1
    for request in (BeginQuorumEpochRequest(3, old), EndQuorumEpochRequest(3, old, (1,))):
        resp = core.handle_request(3, request, _now(core))
        assert (resp.error, resp.leader_id, resp.leader_epoch) == (
            ErrorCode.FENCED_LEADER_EPOCH,
            leader,
            epoch,
        )
    if role is Role.OBSERVER:
        return
    vote = core.handle_request(3, VoteRequest(old, 3, 99, 99), _now(core))
    assert vote == VoteResponse(ErrorCode.NONE, leader, epoch, False)
    assert (core.role, core.epoch, core.leader_id) == (role, epoch, leader)


@pytest.mark.parametrize(
    ("role", "error", "granted", "role_after"),
    [
        (Role.UNATTACHED, ErrorCode.NONE, True, Role.UNATTACHED),
        # a real vote ends a pre-vote round: answered as the unattached voter it was
        (Role.PROSPECTIVE, ErrorCode.NONE, True, Role.UNATTACHED),
        (Role.FOLLOWER, ErrorCode.NONE, False, Role.FOLLOWER),
        (Role.CANDIDATE, ErrorCode.NONE, False, Role.CANDIDATE),
        (Role.LEADER, ErrorCode.NONE, False, Role.LEADER),
        (Role.RESIGNED, ErrorCode.NONE, False, Role.RESIGNED),
        (Role.OBSERVER, ErrorCode.INCONSISTENT_VOTER_SET, False, Role.OBSERVER),
    ],
)
def test_vote_of_the_current_epoch(
    role: Role, error: ErrorCode, granted: bool, role_after: Role
) -> None:
    core = in_role(role)
    epoch = core.epoch
    resp = core.handle_request(3, VoteRequest(epoch, 3, 99, 99), _now(core))
    assert resp == VoteResponse(error, core.leader_id, epoch, granted)
    assert (core.role, core.epoch) == (role_after, epoch)
    assert (core.voted_for == 3) is granted


@pytest.mark.parametrize(
    ("role", "error", "granted"),
    [
        (Role.UNATTACHED, ErrorCode.NONE, True),
        (Role.PROSPECTIVE, ErrorCode.NONE, True),
        (Role.CANDIDATE, ErrorCode.NONE, True),
        (Role.RESIGNED, ErrorCode.NONE, True),
        (Role.FOLLOWER, ErrorCode.NONE, False),  # its leader answered within the fetch timeout
        (Role.LEADER, ErrorCode.NONE, False),  # the live leader
        (Role.OBSERVER, ErrorCode.INCONSISTENT_VOTER_SET, False),
    ],
)
def test_pre_vote_of_the_next_epoch_changes_nothing(
    role: Role, error: ErrorCode, granted: bool
) -> None:
    core = in_role(role)
    leader, epoch, quorum = core.leader_id, core.epoch, core.quorum_state
    resp = core.handle_request(3, VoteRequest(epoch + 1, 3, 99, 99, pre_vote=True), _now(core))
    assert resp == VoteResponse(error, leader, epoch, granted)
    assert (core.role, core.quorum_state) == (role, quorum)
    assert core.poll().state is None


@pytest.mark.parametrize(
    ("role", "role_after"),
    [
        # a voter of the resigned leader's epoch that is its preferred successor stands at once
        (Role.UNATTACHED, Role.CANDIDATE),
        (Role.FOLLOWER, Role.CANDIDATE),
        (Role.CANDIDATE, Role.CANDIDATE),
        (Role.PROSPECTIVE, Role.PROSPECTIVE),
        # only followers act on it: the others just learn the epoch's leader, if they wait for one
        (Role.OBSERVER, Role.OBSERVER),
        (Role.LEADER, Role.LEADER),
        (Role.RESIGNED, Role.RESIGNED),
    ],
)
def test_end_quorum_epoch_naming_us_first(role: Role, role_after: Role) -> None:
    core = in_role(role)
    epoch = core.epoch
    resp = core.handle_request(2, EndQuorumEpochRequest(2, epoch, (1, 3)), _now(core))
    assert resp.error == ErrorCode.NONE
    assert core.role is role_after
    assert core.epoch == (epoch + 1 if role_after is Role.CANDIDATE else epoch)


# ---------------------------------------------------------------- responses


def _unasked(epoch: int) -> list[tuple[RaftRequest, RaftResponse]]:
    """Answers to requests the node never sent (a request object is matched by identity)."""
    sid = SnapshotId(1, 1)
    return [
        (VoteRequest(epoch, 1, 0, 0), VoteResponse(ErrorCode.NONE, None, epoch, True)),
        (FetchRequest(1, 0, 0, epoch), FetchResponse(ErrorCode.NONE, None, epoch, 5)),
        (
            FetchSnapshotRequest(1, sid, 0, epoch),
            FetchSnapshotResponse(ErrorCode.NONE, None, epoch, sid, 1, 0, b"x"),
        ),
    ]


@pytest.mark.parametrize("role", ALL_ROLES)
def test_answers_to_requests_not_in_flight_change_nothing(role: Role) -> None:
    core = in_role(role)
    before = (core.role, core.quorum_state, core.high_watermark, core.next_deadline_ms())
    now = _now(core)
    for request, response in _unasked(core.epoch):
        core.handle_response(2, request, response, now)
        core.request_failed(2, request, now, refused=True)
    after = (core.role, core.quorum_state, core.high_watermark, core.next_deadline_ms())
    assert after == before
    ready = core.poll()
    assert (ready.state, ready.requests, ready.committed) == (None, [], [])
