"""Raft rules one at a time, each citing the section of the Raft paper (Ongaro & Ousterhout,
"In Search of an Understandable Consensus Algorithm") or the KRaft design (KIP-595) it checks,
as etcd's raft_paper_test does."""

from __future__ import annotations

import pytest

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    Entry,
    FetchRequest,
    FetchResponse,
    NotLeaderError,
    QuorumState,
    Role,
    VoteRequest,
    VoteResponse,
)
from tests.raft.helpers import (
    ELECTION_MS,
    FETCH_INTERVAL_MS,
    FETCH_TIMEOUT_MS,
    campaign,
    elect,
    fetch,
    make,
    sent,
)

# ---------------------------------------------------------------- elections (paper 5.2)


def test_voter_starts_unattached_and_stands_after_election_timeout() -> None:
    """5.2: a server that hears from no leader within its election timeout becomes a
    candidate: epoch + 1, votes for itself (persisted), asks every other voter."""
    core = make()
    assert core.role is Role.UNATTACHED
    deadline = core.next_deadline_ms()
    assert ELECTION_MS <= deadline < 2 * ELECTION_MS
    core.tick(deadline - 1)
    assert core.role is Role.UNATTACHED
    ready = campaign(core)
    assert core.role is Role.CANDIDATE
    assert core.epoch == 1
    assert ready.state == QuorumState(1, voted_for=1, leader_id=None)
    votes = sent(ready, VoteRequest)
    assert sorted(dst for dst, _ in votes) == [2, 3]
    assert all(r == VoteRequest(1, 1, 0, 0) for _, r in votes)


def test_election_timeouts_are_randomised() -> None:
    """5.2: randomised election timeouts make split votes rare."""
    deadlines = {make(seed=s).next_deadline_ms() for s in range(20)}
    assert len(deadlines) > 10
    assert all(ELECTION_MS <= d < 2 * ELECTION_MS for d in deadlines)


def test_follower_stands_when_leader_silent_for_fetch_timeout() -> None:
    """5.2 (KIP-595): a follower that got no fetch answer within fetch.timeout starts an
    election."""
    core = make(state=QuorumState(3, None, 2))
    assert core.role is Role.FOLLOWER
    assert core.leader_id == 2
    ready = core.poll()
    ((dst, req),) = sent(ready, FetchRequest)
    assert dst == 2
    assert req == FetchRequest(1, 0, 0, 3)
    core.tick(FETCH_TIMEOUT_MS - 1)
    assert core.role is Role.FOLLOWER
    core.tick(FETCH_TIMEOUT_MS)
    assert core.role is Role.CANDIDATE
    assert core.epoch == 4


def test_candidate_with_majority_becomes_leader_and_writes_noop() -> None:
    """5.2 + 5.4.2: a majority of votes wins; the new leader appends an empty entry of its
    epoch and announces itself with BeginQuorumEpoch."""
    core = make(epochs=[1, 1], state=QuorumState(1))
    ready = campaign(core)
    (dst, req), _ = sent(ready, VoteRequest)
    assert isinstance(req, VoteRequest)
    assert req.last_offset_epoch == 1
    assert req.last_offset == 2
    core.handle_response(dst, req, VoteResponse(ErrorCode.NONE, None, req.candidate_epoch, True), 1)
    assert core.is_leader
    assert core.leader_id == 1
    ready = core.poll()
    assert ready.state == QuorumState(2, 1, 1)
    assert ready.flush_log
    assert ready.leader_changed
    assert core.log.read(2, 5) == [Entry(2, 2, b"")]
    assert sorted(d for d, _ in sent(ready, BeginQuorumEpochRequest)) == [2, 3]


def test_candidate_without_majority_stays_then_stands_again() -> None:
    """5.2: with votes split no one wins; the election times out and a new epoch starts."""
    core = make(voters=(1, 2, 3, 4, 5))
    ready = campaign(core)
    votes = sent(ready, VoteRequest)
    (d1, r1), (d2, r2) = votes[:2]
    core.handle_response(d1, r1, VoteResponse(ErrorCode.NONE, None, 1, True), 10)
    core.handle_response(d2, r2, VoteResponse(ErrorCode.NONE, None, 1, False), 10)
    assert core.role is Role.CANDIDATE
    core.tick(core.next_deadline_ms())
    assert core.role is Role.CANDIDATE
    assert core.epoch == 2


def test_failed_vote_request_is_retried() -> None:
    """5.2: a candidate keeps asking a voter whose request failed (until the election ends)."""
    core = make()
    t = core.next_deadline_ms()
    ready = campaign(core)
    (dst, req), _ = sent(ready, VoteRequest)
    core.request_failed(dst, req, t + 10)
    core.tick(t + 10 + FETCH_INTERVAL_MS - 1)
    assert sent(core.poll(), VoteRequest) == []
    core.tick(t + 10 + FETCH_INTERVAL_MS)
    again = sent(core.poll(), VoteRequest)
    assert [d for d, _ in again] == [dst]


def test_vote_granted_once_per_epoch_and_persisted_first() -> None:
    """5.2: each server votes for at most one candidate per epoch, first come first served;
    the vote is in the state to persist (before the response may be sent)."""
    core = make(node_id=3)
    resp = core.handle_request(1, VoteRequest(5, 1, 0, 0), 10)
    assert resp == VoteResponse(ErrorCode.NONE, None, 5, True)
    assert core.poll().state == QuorumState(5, 1, None)
    assert core.handle_request(2, VoteRequest(5, 2, 0, 0), 11) == VoteResponse(
        ErrorCode.NONE, None, 5, False
    )
    # the same candidate asking again gets the same answer (a retried request)
    assert core.handle_request(1, VoteRequest(5, 1, 0, 0), 12).vote_granted  # type: ignore[union-attr]


def test_restarted_voter_remembers_its_vote() -> None:
    """5.2 (persistent state): a restarted voter cannot vote twice in one epoch."""
    core = make(node_id=3, state=QuorumState(5, 1, None))
    assert not core.handle_request(2, VoteRequest(5, 2, 0, 0), 0).vote_granted  # type: ignore[union-attr]
    assert core.handle_request(1, VoteRequest(5, 1, 0, 0), 0).vote_granted  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("last_epoch", "last_offset", "granted"),
    [(1, 3, False), (2, 2, False), (2, 3, True), (2, 9, True), (3, 1, True)],
)
def test_vote_only_for_up_to_date_log(last_epoch: int, last_offset: int, granted: bool) -> None:
    """5.4.1: a vote is denied when the voter's log is more up to date (later last epoch, or
    same last epoch and longer)."""
    core = make(node_id=3, epochs=[1, 2, 2])
    resp = core.handle_request(1, VoteRequest(4, 1, last_epoch, last_offset), 0)
    assert resp.vote_granted is granted  # type: ignore[union-attr]
    assert core.epoch == 4


def test_vote_from_older_epoch_rejected() -> None:
    """5.1: a request with a stale epoch is rejected and tells the sender the newer epoch."""
    core = make(node_id=3, state=QuorumState(7, None, 2))
    resp = core.handle_request(1, VoteRequest(6, 1, 9, 9), 0)
    assert resp == VoteResponse(ErrorCode.NONE, 2, 7, False)
    assert core.epoch == 7
    assert core.role is Role.FOLLOWER


def test_follower_does_not_vote_in_its_leaders_epoch() -> None:
    """KIP-595: a voter that knows the leader of the epoch grants no vote in it."""
    core = make(node_id=3, state=QuorumState(7, None, 2))
    assert not core.handle_request(1, VoteRequest(7, 1, 9, 9), 0).vote_granted  # type: ignore[union-attr]


def test_higher_epoch_vote_deposes_leader() -> None:
    """5.1: a leader that sees a higher epoch steps down (and may then vote)."""
    core = make()
    elect(core)
    resp = core.handle_request(2, VoteRequest(core.epoch + 1, 2, 9, 9), 5)
    assert resp.vote_granted  # type: ignore[union-attr]
    assert core.role is Role.UNATTACHED
    assert not core.is_leader
    assert core.poll().leader_changed


def test_non_voters_are_refused() -> None:
    """KIP-595: a vote request from (or to) a node outside the voter set is an error."""
    core = make(node_id=3)
    resp = core.handle_request(9, VoteRequest(1, 9, 0, 0), 0)
    assert resp.error == ErrorCode.INCONSISTENT_VOTER_SET  # type: ignore[union-attr]
    observer = make(node_id=9)
    assert observer.role is Role.OBSERVER
    resp = observer.handle_request(1, VoteRequest(1, 1, 0, 0), 0)
    assert resp.error == ErrorCode.INCONSISTENT_VOTER_SET  # type: ignore[union-attr]


def test_candidate_follows_announced_leader_of_its_epoch() -> None:
    """5.2: a candidate that hears from a leader of its epoch (BeginQuorumEpoch) follows it."""
    core = make()
    campaign(core)
    resp = core.handle_request(2, BeginQuorumEpochRequest(2, core.epoch), 5)
    assert resp == BeginQuorumEpochResponse(ErrorCode.NONE, 2, 1)
    assert core.role is Role.FOLLOWER
    assert core.leader_id == 2
    assert core.poll().state == QuorumState(1, 1, 2)


def test_begin_epoch_from_old_epoch_is_fenced() -> None:
    """5.1: an announcement of an older epoch is refused."""
    core = make(state=QuorumState(4, None, 3))
    resp = core.handle_request(2, BeginQuorumEpochRequest(2, 3), 0)
    assert resp == BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, 3, 4)
    assert core.leader_id == 3


def test_stale_vote_response_is_ignored() -> None:
    """5.1: an answer to a vote request of a past candidacy does not count."""
    core = make()
    ready = campaign(core)
    (dst, old), _ = sent(ready, VoteRequest)
    core.tick(core.next_deadline_ms())  # second candidacy, epoch 2
    assert core.epoch == 2
    core.handle_response(
        dst, old, VoteResponse(ErrorCode.NONE, None, 1, True), core.next_deadline_ms() - 1
    )
    assert core.role is Role.CANDIDATE


# ---------------------------------------------------------------- replication (paper 5.3, KIP-595)


def _leader_with_followers() -> tuple[object, int]:
    core = make(epochs=[1, 1, 1])
    elect(core)
    return core, core.epoch


def test_leader_answers_fetch_with_entries_and_counts_progress() -> None:
    """5.3: the leader sends what the follower lacks; HW moves once a majority has it."""
    core = make()
    elect(core)  # log: [noop@0 epoch 1]
    core.propose([b"a", b"b"], 10)
    core.poll()
    resp = fetch(core, 2, 0, 0, 11)
    assert isinstance(resp, FetchResponse)
    assert resp.error == ErrorCode.NONE
    assert [e.data for e in resp.entries] == [b"", b"a", b"b"]
    assert resp.high_watermark == 0
    resp = fetch(core, 2, 3, 1, 12)  # follower 2 has everything: majority with the leader
    assert isinstance(resp, FetchResponse)
    assert resp.high_watermark == 3
    assert resp.entries == []
    ready = core.poll()
    assert [e.data for e in ready.committed] == [b"", b"a", b"b"]


def test_leader_counts_only_its_flushed_log() -> None:
    """KIP-595: the leader's own replica counts towards the HW only as far as it is flushed."""
    core = make()
    elect(core)
    core.propose([b"a"], 10)
    resp = fetch(core, 2, 2, 1, 11)  # follower already has 0..1, leader has not flushed 1 yet
    assert isinstance(resp, FetchResponse)
    assert resp.high_watermark == 1
    ready = core.poll()
    assert ready.flush_log
    assert core.high_watermark == 2
    assert [e.data for e in ready.committed] == [b"", b"a"]


def test_hw_only_advances_over_current_epoch_entry() -> None:
    """5.4.2 (Figure 8): a leader never commits entries of an earlier epoch by counting
    replicas; only an entry of its own epoch reaching a majority commits them."""
    core = make(epochs=[1, 2, 2], state=QuorumState(2, None, None))
    elect(core)  # epoch 3, no-op at offset 3
    core.poll()
    fetch(core, 2, 3, 2, 10)  # follower 2 has offsets 0..2 (epochs 1, 2, 2): a majority
    assert core.high_watermark == 0
    assert core.poll().committed == []
    fetch(core, 2, 4, 3, 11)  # now it has the no-op of epoch 3 too
    assert core.high_watermark == 4
    assert [e.offset for e in core.poll().committed] == [0, 1, 2, 3]


def test_diverging_fetch_gets_diverging_epoch() -> None:
    """5.3 (log matching, KIP-595): a fetch whose (offset, last epoch) does not match the
    leader's log gets the end of the largest matching epoch instead of entries."""
    core = make(epochs=[1, 1, 3, 3], state=QuorumState(3, None, None))
    elect(core)  # epoch 4
    resp = fetch(core, 2, 4, 2, 10)  # follower wrote entries of epoch 2 the leader never had
    assert isinstance(resp, FetchResponse)
    assert resp.diverging_epoch == (1, 2)
    assert resp.entries == []
    resp = fetch(core, 2, 6, 3, 10)  # epoch 3 matches, but the follower's log is longer
    assert isinstance(resp, FetchResponse)
    assert resp.diverging_epoch == (3, 4)


def test_follower_truncates_on_diverging_epoch_then_catches_up() -> None:
    """5.3: a follower deletes its conflicting suffix and takes the leader's entries."""
    core = make(node_id=2, epochs=[1, 1, 2, 2], state=QuorumState(3, None, 1))
    ((dst, req),) = sent(core.poll(), FetchRequest)
    assert req == FetchRequest(2, 4, 2, 3)
    core.handle_response(
        dst, req, FetchResponse(ErrorCode.NONE, 1, 3, 2, diverging_epoch=(1, 2)), 5
    )
    assert core.log.end_offset() == 2
    ready = core.poll()
    assert ready.flush_log  # the truncation is made durable before the next fetch leaves
    ((dst, req),) = sent(ready, FetchRequest)
    assert req == FetchRequest(2, 2, 1, 3)
    leader_entries = [Entry(2, 3, b"x"), Entry(3, 3, b"y")]
    core.handle_response(
        dst, req, FetchResponse(ErrorCode.NONE, 1, 3, 3, entries=leader_entries), 6
    )
    assert core.log.read(0, 10)[2:] == leader_entries
    assert core.high_watermark == 3  # min(leader HW, own log end)
    ready = core.poll()
    assert ready.flush_log
    assert [e.offset for e in ready.committed] == [0, 1, 2]


def test_follower_hw_never_passes_its_log_end() -> None:
    """KIP-595: a follower takes min(leader HW, its log end) as its HW."""
    core = make(node_id=2, state=QuorumState(3, None, 1))
    ((dst, req),) = sent(core.poll(), FetchRequest)
    core.handle_response(
        dst, req, FetchResponse(ErrorCode.NONE, 1, 3, 10, entries=[Entry(0, 3, b"")]), 5
    )
    assert core.high_watermark == 1


def test_fetch_with_old_epoch_is_fenced_and_follower_catches_up() -> None:
    """5.1 (KIP-595): a fetch from an older epoch is refused with FENCED_LEADER_EPOCH; the
    answer names the leader, and the fetcher follows it."""
    leader = make()
    elect(leader)
    leader.handle_request(2, VoteRequest(2, 2, 0, 0), 0)  # steps down: epoch 2, then win it again
    elect(leader)
    assert leader.epoch == 3
    resp = leader.handle_request(2, FetchRequest(2, 0, 0, 1), 10)
    assert isinstance(resp, FetchResponse)
    assert resp.error == ErrorCode.FENCED_LEADER_EPOCH
    follower = make(node_id=2, state=QuorumState(1, None, 1))
    ((dst, req),) = sent(follower.poll(), FetchRequest)
    follower.handle_response(dst, req, resp, 10)
    assert follower.epoch == 3
    assert follower.leader_id == 1


def test_fetch_to_non_leader_names_leader() -> None:
    """KIP-595: a voter that is not the leader refuses fetches and says who leads."""
    core = make(node_id=3, state=QuorumState(5, None, 2))
    resp = core.handle_request(9, FetchRequest(9, 0, 0, -1), 0)
    assert isinstance(resp, FetchResponse)
    assert (resp.error, resp.leader_id, resp.leader_epoch) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        2,
        5,
    )


def test_committed_entries_delivered_once_in_order() -> None:
    """State machine safety: each committed entry is handed out exactly once, in order."""
    core = make()
    elect(core)
    delivered: list[int] = []
    for i in range(5):
        core.propose([f"{i}".encode()], 10 + i)
        delivered += [e.offset for e in core.poll().committed]
        fetch(core, 2, core.log.end_offset(), core.epoch, 10 + i)
        delivered += [e.offset for e in core.poll().committed]
        delivered += [e.offset for e in core.poll().committed]
    assert delivered == list(range(6))


def test_propose_on_non_leader_raises() -> None:
    """5.1: only the leader takes writes; a follower says which leader to go to."""
    core = make(node_id=2, state=QuorumState(3, None, 1))
    with pytest.raises(NotLeaderError) as err:
        core.propose([b"x"], 0)
    assert err.value.leader_id == 1
    assert err.value.epoch == 3


def test_follower_fetches_again_after_interval_when_idle() -> None:
    """KIP-595: an empty answer means "nothing yet": the next fetch follows after the fetch
    interval; an answer with entries is followed at once."""
    core = make(node_id=2, state=QuorumState(3, None, 1))
    ((dst, req),) = sent(core.poll(), FetchRequest)
    core.handle_response(dst, req, FetchResponse(ErrorCode.NONE, 1, 3, 0), 100)
    assert sent(core.poll(), FetchRequest) == []
    assert core.next_deadline_ms() == 100 + FETCH_INTERVAL_MS
    core.tick(100 + FETCH_INTERVAL_MS)
    ((dst, req),) = sent(core.poll(), FetchRequest)
    core.handle_response(
        dst, req, FetchResponse(ErrorCode.NONE, 1, 3, 0, entries=[Entry(0, 3, b"")]), 200
    )
    assert len(sent(core.poll(), FetchRequest)) == 1


# ---------------------------------------------------------------- leadership changes


def test_leader_restarts_resigned_then_stands() -> None:
    """KIP-595: a leader's volatile state does not survive a restart; it comes back resigned
    (no fetches served in its old epoch) and stands in the next epoch - after a fetch timeout,
    so a newer leader's BeginQuorumEpoch usually reaches it before it disrupts that leader."""
    core = make(state=QuorumState(4, 1, 1), epochs=[4])
    assert (
        core.next_deadline_ms() >= FETCH_TIMEOUT_MS + ELECTION_MS
    )  # a newer leader may call first
    assert core.role is Role.RESIGNED
    assert not core.is_leader
    resp = core.handle_request(2, FetchRequest(2, 1, 4, 4), 0)
    assert resp.error == ErrorCode.NOT_LEADER_OR_FOLLOWER  # type: ignore[union-attr]
    core.tick(core.next_deadline_ms())
    assert core.role is Role.CANDIDATE
    assert core.epoch == 5


def test_sole_voter_leads_at_once_without_an_election_timeout() -> None:
    """KIP-595 (KRaft's `isOnlyVoter`): a quorum of one has nobody to wait for, so the voter
    stands and wins when it starts - a single node is ready without sitting out an election
    timeout - and commits its epoch's no-op and proposals with no peer involved."""
    core = make(voters=(1,), epochs=[2, 2], state=QuorumState(2))
    assert core.is_leader
    assert core.epoch == 3
    ready = core.poll()
    assert ready.state == QuorumState(3, 1, 1)  # persisted before anything depends on it
    assert ready.leader_changed
    assert ready.flush_log
    assert ready.requests == []
    assert core.log.read(2, 5) == [Entry(2, 3, b"")]
    assert core.high_watermark == 3
    assert [e.offset for e in ready.committed] == [0, 1, 2]
    assert core.propose([b"a"], 5) == 3
    ready = core.poll()
    assert [e.data for e in ready.committed] == [b"a"]


def test_sole_voter_restarted_as_leader_leads_the_next_epoch_at_once() -> None:
    """A restarted sole voter does not come back resigned for a fetch timeout (no newer leader
    can exist): it leads the next epoch as soon as it starts."""
    core = make(voters=(1,), state=QuorumState(4, 1, 1), epochs=[4])
    assert core.is_leader
    assert core.epoch == 5
    assert core.poll().state == QuorumState(5, 1, 1)


def test_resign_names_successors_most_caught_up_first() -> None:
    """KIP-595 graceful shutdown: EndQuorumEpoch lists the successors by progress."""
    core = make()
    elect(core)
    core.propose([b"a"], 5)
    core.poll()
    fetch(core, 3, 2, 1, 6)
    fetch(core, 2, 1, 1, 6)
    core.resign(7)
    assert core.role is Role.RESIGNED
    ready = core.poll()
    assert ready.leader_changed
    ends = sent(ready, EndQuorumEpochRequest)
    assert sorted(d for d, _ in ends) == [2, 3]
    assert all(r == EndQuorumEpochRequest(1, 1, (3, 2)) for _, r in ends)


def test_preferred_successor_stands_at_once() -> None:
    """KIP-595: the first preferred successor starts an election without waiting."""
    core = make(node_id=3, state=QuorumState(1, None, 1))
    core.handle_request(1, EndQuorumEpochRequest(1, 1, (3, 2)), 100)
    assert core.role is Role.CANDIDATE
    assert core.epoch == 2
    second = make(node_id=2, state=QuorumState(1, None, 1))
    second.handle_request(1, EndQuorumEpochRequest(1, 1, (3, 2)), 100)
    assert second.role is Role.FOLLOWER
    assert 100 + ELECTION_MS <= second.next_deadline_ms() < 100 + 2 * ELECTION_MS


def test_leader_without_quorum_resigns() -> None:
    """Check quorum: a leader that no majority heard from for 1.5 fetch timeouts resigns."""
    core = make()
    elect(core)
    start = core.next_deadline_ms() - ELECTION_MS
    fetch(core, 2, 1, 1, start + 100, clock=start + 100)
    core.tick(start + 100 + FETCH_TIMEOUT_MS * 3 // 2 - 1)
    assert core.is_leader
    core.tick(start + 100 + FETCH_TIMEOUT_MS * 3 // 2)
    assert core.role is Role.RESIGNED


def test_leader_loses_quorum_contact_one_fetch_timeout_after_its_last_majority_fetch() -> None:
    """A leader resumed after a pause or cut off still holds LeaderState until its check-quorum
    tick runs (1.5 fetch timeouts); what it answers without a commit (broker heartbeats) must
    not count meanwhile: a successor can be elected a fetch timeout after the last fetch a
    majority made to it. A later fetch of any follower (with the leader, a majority of three)
    restores contact; a non-leader never has it; a sole voter always has it."""
    core = make()
    elect(core)
    start = core.next_deadline_ms() - ELECTION_MS
    fetch(core, 2, 1, 1, start + 100, clock=start + 100)
    assert core.has_quorum_contact(start + 100 + FETCH_TIMEOUT_MS - 1)
    # no tick in between (the paused process): still leader, but no contact any more
    assert not core.has_quorum_contact(start + 100 + FETCH_TIMEOUT_MS)
    assert core.is_leader
    later = start + 100 + FETCH_TIMEOUT_MS + 5
    fetch(core, 3, 1, 1, later, clock=later)
    assert core.has_quorum_contact(later)
    follower = make(node_id=2)
    assert not follower.has_quorum_contact(0)
    sole = make(voters=(1,), epochs=[1], state=QuorumState(1))
    assert sole.is_leader
    assert sole.has_quorum_contact(10 * FETCH_TIMEOUT_MS)


def test_fetches_read_after_a_pause_do_not_pass_for_quorum_contact() -> None:
    """Fetches the voters sent while the leader's process was paused wait in its sockets and
    are read the moment it resumes - after the voters may have elected a successor. What a
    voter confirms (the leader clock of the last answer it accepted) counts, not when its
    fetch was read: the resumed leader has no quorum contact (its controller must not renew
    broker leases) and its check-quorum makes it resign at once."""
    core = make()
    elect(core)
    start = core.next_deadline_ms() - ELECTION_MS
    clock = {2: -1, 3: -1}
    now = start
    while now < start + 1000:  # both voters fetch, each echoing the last answer it accepted
        for voter in (2, 3):
            resp = fetch(core, voter, 1, 1, now, clock=clock[voter])
            assert isinstance(resp, FetchResponse)
            assert resp.leader_clock_ms == now
            clock[voter] = resp.leader_clock_ms
        now += FETCH_INTERVAL_MS
    assert core.has_quorum_contact(now)
    paused = now
    resumed = paused + 3 * FETCH_TIMEOUT_MS
    # the fetches sent during the pause (the last confirmations the voters could give) are
    # read first, before any timer of the leader fires
    fetch(core, 2, 1, 1, resumed, clock=clock[2])
    assert not core.has_quorum_contact(resumed)
    fetch(core, 3, 1, 1, resumed, clock=clock[3])
    assert not core.has_quorum_contact(resumed)
    assert core.role is Role.RESIGNED


def test_a_voter_echoes_the_leader_clock_of_the_last_answer_it_accepted() -> None:
    """The fetcher's side of the confirmation: nothing before its first answer, then the
    leader clock of the last answer it accepted; an error answer confirms nothing, and a new
    leader starts from nothing again. The leader ignores a clock from its future."""
    core = make(node_id=2, state=QuorumState(1, None, 1), epochs=[1])
    ((dst, req),) = sent(core.poll(), FetchRequest)
    assert isinstance(req, FetchRequest)
    assert req.leader_clock_ms == -1
    core.handle_response(dst, req, FetchResponse(ErrorCode.NONE, 1, 1, 1, leader_clock_ms=500), 10)
    core.tick(10 + FETCH_INTERVAL_MS)
    ((dst, req),) = sent(core.poll(), FetchRequest)
    assert isinstance(req, FetchRequest)
    assert req.leader_clock_ms == 500
    refused = FetchResponse(ErrorCode.UNKNOWN_LEADER_EPOCH, 1, 1, 1, leader_clock_ms=900)
    core.handle_response(dst, req, refused, 70)
    core.tick(70 + FETCH_INTERVAL_MS)
    ((dst, req),) = sent(core.poll(), FetchRequest)
    assert isinstance(req, FetchRequest)
    assert req.leader_clock_ms == 500
    core.handle_request(3, BeginQuorumEpochRequest(3, 2), 130)
    assert core.leader_id == 3
    core.tick(130 + FETCH_INTERVAL_MS)
    fetches = [r for d, r in sent(core.poll(), FetchRequest) if d == 3]
    assert fetches
    assert all(isinstance(r, FetchRequest) and r.leader_clock_ms == -1 for r in fetches)

    leader = make()
    elect(leader)
    start = leader.next_deadline_ms() - ELECTION_MS
    fetch(leader, 2, 1, 1, start + 10, clock=start + 10 + FETCH_TIMEOUT_MS)  # from the future
    assert not leader.has_quorum_contact(start + FETCH_TIMEOUT_MS)


def test_leader_reannounces_itself_to_silent_voters() -> None:
    """KIP-595: BeginQuorumEpoch is re-sent to voters that have not fetched lately."""
    core = make()
    ready = elect(core)
    assert len(sent(ready, BeginQuorumEpochRequest)) == 2
    t = core.next_deadline_ms()
    fetch(core, 2, 1, 1, t - 1)
    core.tick(t)
    assert [d for d, _ in sent(core.poll(), BeginQuorumEpochRequest)] == [3]


# ---------------------------------------------------------------- observers


def test_observer_discovers_leader_and_never_stands() -> None:
    """KIP-595: an observer asks the voters in turn until one names the leader; it never
    becomes a candidate, however long it hears nothing."""
    core = make(node_id=9)
    assert core.role is Role.OBSERVER
    assert not core.is_voter
    ((dst, req),) = sent(core.poll(), FetchRequest)
    assert dst == 1
    core.request_failed(dst, req, 10)
    core.tick(10 + FETCH_INTERVAL_MS)
    ((dst, req),) = sent(core.poll(), FetchRequest)
    assert dst == 2
    core.handle_response(dst, req, FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, 3, 6, 0), 70)
    assert core.leader_id == 3
    assert core.epoch == 6
    ((dst, _),) = sent(core.poll(), FetchRequest)
    assert dst == 3
    core.tick(100_000)
    assert core.role is Role.OBSERVER
    assert core.leader_id is None


def test_observer_asks_voters_when_its_leader_fails() -> None:
    """KIP-595: no EndQuorumEpoch reaches observers, so an observer whose fetch to the leader
    fails asks the voters again (one of them names the new leader)."""
    core = make(node_id=9, state=QuorumState(4, None, 2))
    ((dst, req),) = sent(core.poll(), FetchRequest)
    assert dst == 2
    core.request_failed(dst, req, 10)
    assert core.leader_id is None
    assert core.poll().state == QuorumState(4, None, None)
    core.tick(10 + FETCH_INTERVAL_MS)
    ((dst, req),) = sent(core.poll(), FetchRequest)
    assert dst != 2
    core.handle_response(dst, req, FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, 3, 5, 0), 70)
    assert core.leader_id == 3
    assert core.epoch == 5
