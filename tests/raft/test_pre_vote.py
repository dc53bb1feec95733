"""Pre-vote (KIP-996): a voter stands in a new epoch only after a majority said it would vote
for it, so a node cut off from a working quorum cannot depose its leader when it rejoins."""

from __future__ import annotations

import random

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    MemoryRaftLog,
    QuorumState,
    RaftCore,
    Role,
    VoteRequest,
    VoteResponse,
)
from tests.raft.helpers import ELECTION_MS, FETCH_INTERVAL_MS, FETCH_TIMEOUT_MS, sent
from tests.raft.simulation import FETCH_TIMEOUT_MS as FETCH_TIMEOUT_MS_SIM
from tests.raft.simulation import Simulation
from tests.raft.test_simulation import _heal_and_commit


def _core(node_id: int = 1, state: QuorumState | None = None) -> RaftCore:
    return RaftCore(
        node_id, frozenset({1, 2, 3}), MemoryRaftLog(), state or QuorumState(0), now_ms=0,
        rng=random.Random(0), election_timeout_ms=ELECTION_MS, fetch_timeout_ms=FETCH_TIMEOUT_MS,
        fetch_interval_ms=FETCH_INTERVAL_MS, pre_vote=True,
    )  # fmt: skip


def test_timeout_asks_for_pre_votes_without_bumping_the_epoch() -> None:
    core = _core(state=QuorumState(4))
    core.poll()
    now = core.next_deadline_ms()
    core.tick(now)
    assert core.role is Role.PROSPECTIVE
    assert core.epoch == 4
    ready = core.poll()
    assert ready.state is None  # nothing persisted: no vote, no epoch
    reqs = sent(ready, VoteRequest)
    assert [r for _, r in reqs] == [VoteRequest(5, 1, 0, 0, pre_vote=True)] * 2
    (dst, req) = reqs[0]
    core.handle_response(dst, req, VoteResponse(ErrorCode.NONE, None, 4, True), now)
    assert core.role is Role.CANDIDATE  # a majority (itself + one): the real election
    assert core.epoch == 5
    assert core.poll().state == QuorumState(5, 1, None)


def test_a_follower_with_a_live_leader_refuses_pre_votes_and_changes_nothing() -> None:
    core = _core(node_id=2, state=QuorumState(3, None, 1))
    ((dst, req),) = sent(core.poll(), FetchRequest)
    core.handle_response(dst, req, FetchResponse(ErrorCode.NONE, 1, 3, 0), 10)
    resp = core.handle_request(3, VoteRequest(4, 3, 0, 0, pre_vote=True), 20)
    assert resp == VoteResponse(ErrorCode.NONE, 1, 3, False)
    assert (core.role, core.epoch) == (Role.FOLLOWER, 3)
    assert core.poll().state is None
    # once the leader has been silent for the fetch timeout, the same pre-vote is granted
    late = 10 + FETCH_TIMEOUT_MS
    resp = core.handle_request(3, VoteRequest(4, 3, 0, 0, pre_vote=True), late)
    assert isinstance(resp, VoteResponse)
    assert resp.vote_granted


def test_pre_vote_needs_an_up_to_date_log_and_a_newer_epoch() -> None:
    core = _core(state=QuorumState(3))
    core.log.append([])
    assert not core.handle_request(2, VoteRequest(3, 2, 0, 0, pre_vote=True), 1).vote_granted  # type: ignore[union-attr]
    assert core.handle_request(2, VoteRequest(4, 2, 0, 0, pre_vote=True), 1).vote_granted  # type: ignore[union-attr]
    assert core.quorum_state == QuorumState(3)  # a granted pre-vote records nothing


def _partition_a_follower(pre_vote: bool) -> tuple[int, int, int, int, Simulation]:
    sim = Simulation(seed=11, voters=3, observers=0, loss=0.0, pre_vote=pre_vote)
    sim.run_until(3_000)
    (leader,) = sim.leaders()
    epoch = sim.nodes[leader].core.epoch
    cut = max(n for n in sim.nodes if n != leader)
    sim.split({cut})
    for _ in range(40):  # the others keep committing while it is away
        sim.propose_to_leaders()
        sim.run_until(sim.now + 100)
    sim.heal()
    sim.run_until(sim.now + 3_000)
    return leader, epoch, cut, max(n.core.epoch for n in sim.nodes.values()), sim


def test_a_partitioned_voter_rejoining_does_not_disrupt_the_leader() -> None:
    leader, epoch, cut, epoch_after, sim = _partition_a_follower(pre_vote=True)
    assert sim.leaders() == [leader]
    assert epoch_after == epoch
    assert sim.nodes[cut].core.role is Role.FOLLOWER
    assert sim.nodes[cut].applied == sim.committed


def test_without_pre_vote_the_rejoining_voter_bumps_the_epoch() -> None:
    """The same scenario without pre-vote: the cut-off node's elections bumped the epoch and
    its return deposes the leader (what the test above guards against)."""
    _, epoch, _, epoch_after, _ = _partition_a_follower(pre_vote=False)
    assert epoch_after > epoch


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("seed", range(12))
def test_chaos_with_pre_vote_stays_safe_and_heals(voters: int, seed: int) -> None:
    sim = Simulation(seed, voters, observers=1, loss=0.05, pre_vote=True)
    sim.chaos(until_ms=12_000)
    assert sim.committed
    _heal_and_commit(sim)


def _follower_of_1(node_id: int, seed: int) -> RaftCore:
    """Voter `node_id` following leader 1 in epoch 3 after its BeginQuorumEpoch at t=0 (the
    way every voter learns of a new leader at nearly the same instant)."""
    core = RaftCore(
        node_id, frozenset({1, 2, 3}), MemoryRaftLog(), QuorumState(2), now_ms=0,
        rng=random.Random(seed), election_timeout_ms=ELECTION_MS,
        fetch_timeout_ms=FETCH_TIMEOUT_MS, fetch_interval_ms=FETCH_INTERVAL_MS, pre_vote=True,
    )  # fmt: skip
    core.handle_request(1, BeginQuorumEpochRequest(1, 3), 0)
    assert (core.role, core.leader_id) == (Role.FOLLOWER, 1)
    core.poll()
    return core


def _stands_at(core: RaftCore) -> int:
    """Tick a follower whose leader stays silent until it stands; when that happened."""
    for _ in range(100):
        at = core.next_deadline_ms()
        core.tick(at)
        if core.role is not Role.FOLLOWER:
            return at
        core.poll()
    raise AssertionError("the follower never stood")


def test_followers_of_one_leader_stand_at_different_times_after_the_fetch_timeout() -> None:
    """After the leader dies, followers whose fetch timers were reset by the same answers must
    not stand within a round trip of each other: each would vote for itself, and the split vote
    costs another whole election timeout of metadata stall. Each stands at a random point of
    the half election timeout after the fetch timeout."""
    stand_at = [_stands_at(_follower_of_1(2, seed)) for seed in range(20)]
    assert all(FETCH_TIMEOUT_MS <= at < FETCH_TIMEOUT_MS + ELECTION_MS // 2 for at in stand_at)
    assert len(set(stand_at)) >= 10


def test_first_voter_to_stand_after_a_leader_crash_wins_in_one_round() -> None:
    """The later follower grants the pre-vote and the vote from the fetch timeout on (the
    leader counts as dead then), before its own jittered stand: one election, no split."""
    seeds = sorted(range(20), key=lambda seed: _stands_at(_follower_of_1(2, seed)))
    early, late = _follower_of_1(2, seeds[0]), _follower_of_1(3, seeds[-1])
    first = _stands_at(early)
    assert first < _stands_at(_follower_of_1(3, seeds[-1]))
    assert early.role is Role.PROSPECTIVE
    late.tick(first)
    assert late.role is Role.FOLLOWER  # it has not stood itself
    late.poll()
    ((dst, pre),) = [(d, r) for d, r in sent(early.poll(), VoteRequest) if d == 3]
    resp = late.handle_request(2, pre, first)
    assert isinstance(resp, VoteResponse)
    assert resp.vote_granted
    assert late.role is Role.FOLLOWER  # granting a pre-vote changes nothing
    early.handle_response(dst, pre, resp, first + 1)
    assert (early.role, early.epoch) == (Role.CANDIDATE, 4)
    ((dst, vote),) = [(d, r) for d, r in sent(early.poll(), VoteRequest) if d == 3]
    resp = late.handle_request(2, vote, first + 2)
    assert isinstance(resp, VoteResponse)
    assert resp.vote_granted
    early.handle_response(dst, vote, resp, first + 3)
    assert (early.role, early.epoch) == (Role.LEADER, 4)


def _following(node_id: int, leader: int) -> tuple[RaftCore, FetchRequest]:
    """A follower of `leader` in epoch 3 that had one answer at 10 ms and has its next fetch
    in flight."""
    core = _core(node_id=node_id, state=QuorumState(3, None, leader))
    ((dst, req),) = sent(core.poll(), FetchRequest)
    core.handle_response(dst, req, FetchResponse(ErrorCode.NONE, leader, 3, 0), 10)
    core.tick(10 + FETCH_INTERVAL_MS)
    ((_, nxt),) = sent(core.poll(), FetchRequest)
    assert isinstance(nxt, FetchRequest)
    return core, nxt


@pytest.mark.parametrize("refused", [True, False])
def test_a_leader_that_refuses_connections_is_replaced_before_the_fetch_timeout(refused: bool) -> None:
    """A SIGKILLed leader's port refuses connections: its followers grant pre-votes and stand
    at once (within the election jitter), so the controller moves in well under the 2 s fetch
    timeout. A failure without a refusal (a timeout: the leader may only be slow or paused)
    changes nothing: the leader keeps its whole fetch timeout."""
    now = 10 + FETCH_INTERVAL_MS + 5
    voter, fetch = _following(3, leader=1)
    voter.request_failed(1, fetch, now, refused=refused)
    asked = voter.handle_request(2, VoteRequest(4, 2, 0, 0, pre_vote=True), now)
    assert isinstance(asked, VoteResponse)
    assert asked.vote_granted is refused
    follower, fetch = _following(2, leader=1)
    follower.request_failed(1, fetch, now, refused=refused)
    follower.tick(now + ELECTION_MS // 2)  # its stand jitter is below half an election timeout
    if refused:
        assert follower.role is Role.PROSPECTIVE
    else:
        assert follower.role is Role.FOLLOWER
        follower.tick(10 + FETCH_TIMEOUT_MS - 1)
        assert follower.role is Role.FOLLOWER


def test_a_refusal_from_another_voter_does_not_depose_the_leader() -> None:
    """Only the leader's refusal counts: a follower whose request to another voter was refused
    still refuses pre-votes while its leader answers."""
    core, fetch = _following(2, leader=1)
    core.request_failed(3, fetch, 70, refused=True)
    asked = core.handle_request(3, VoteRequest(4, 3, 0, 0, pre_vote=True), 70)
    assert isinstance(asked, VoteResponse)
    assert not asked.vote_granted


def test_a_follower_with_a_live_leader_refuses_a_real_vote_and_keeps_its_epoch() -> None:
    """With pre-vote a candidate of a newer epoch won the pre-votes, but a voter whose leader
    answered it since (a leader that resumed after a pause) keeps that leader: a vote now would
    elect a successor while the leader counts this voter as in touch (`has_quorum_contact`,
    leader leases). Once the leader has been silent for the fetch timeout the vote is granted."""
    core = _core(node_id=2, state=QuorumState(3, None, 1))
    ((dst, req),) = sent(core.poll(), FetchRequest)
    core.handle_response(dst, req, FetchResponse(ErrorCode.NONE, 1, 3, 0, leader_clock_ms=10), 10)
    resp = core.handle_request(3, VoteRequest(4, 3, 0, 0), 20)
    assert resp == VoteResponse(ErrorCode.NONE, 1, 3, False)
    assert (core.role, core.epoch, core.leader_id) == (Role.FOLLOWER, 3, 1)
    assert core.poll().state is None
    later = 10 + FETCH_TIMEOUT_MS
    resp = core.handle_request(3, VoteRequest(4, 3, 0, 0), later)
    assert resp == VoteResponse(ErrorCode.NONE, None, 4, True)
    assert core.poll().state == QuorumState(4, 3, None)


def test_a_new_leader_has_quorum_contact_only_once_a_majority_confirmed_it() -> None:
    """The votes that elected a leader do not stop a newer candidate's: the voters may vote
    again in a newer epoch at once. Contact starts with the first confirmed answer."""
    core = _core(node_id=1, state=QuorumState(3))
    core.poll()
    now = core.next_deadline_ms()
    core.tick(now)
    (dst, req) = sent(core.poll(), VoteRequest)[0]
    core.handle_response(dst, req, VoteResponse(ErrorCode.NONE, None, 3, True), now)
    (dst, req) = sent(core.poll(), VoteRequest)[0]
    core.handle_response(dst, req, VoteResponse(ErrorCode.NONE, None, 4, True), now)
    assert core.is_leader
    assert not core.has_quorum_contact(now)
    resp = core.handle_request(2, FetchRequest(2, 0, 0, core.epoch), now + 1)
    assert isinstance(resp, FetchResponse)
    assert not core.has_quorum_contact(now + 1)
    core.handle_request(2, FetchRequest(2, 1, 4, core.epoch, resp.leader_clock_ms), now + 2)
    assert core.has_quorum_contact(now + 2)


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("seed", range(16))
def test_a_leader_paused_past_the_fetch_timeout_has_no_quorum_contact_once_replaced(
    voters: int, seed: int
) -> None:
    """SIGSTOP on the leader for three to five fetch timeouts: the others elect a successor,
    and everything they sent it meanwhile is read when it resumes. Checked after every event
    (`Simulation._check_quorum_contact`): no leader with quorum contact while a newer epoch
    has a leader - the reads after the resume must not pass for contact."""
    sim = Simulation(seed, voters, observers=1, loss=0.05, pre_vote=True)
    sim.run_until(2_000)
    (leader,) = sim.leaders()
    epoch = sim.nodes[leader].core.epoch
    resume = sim.now + sim.rng.randint(3 * FETCH_TIMEOUT_MS_SIM, 5 * FETCH_TIMEOUT_MS_SIM)
    sim.pause(leader, resume)
    t = sim.now
    while t < resume + 3_000:
        t += sim.rng.randint(20, 120)
        sim._push(t, "propose")
    sim.run_until(resume)
    assert max(sim.leaders_by_epoch) > epoch  # a successor was elected during the pause
    sim.run_until(resume + 3_000)
    _heal_and_commit(sim)
