"""The steps of the voters without a leader: `UnattachedStep` and `ResignedStep` wait for an
election timeout, `ProspectiveStep` asks for pre-votes (KIP-996) and `CandidateStep` for votes.

Vote granting is the unattached voter's: it is the only role that may grant a vote of its own
epoch (a follower has a leader in it, a candidate or resigned leader voted for itself); a
prospective one asked for a real vote of its epoch answers as unattached, ending its round.
"""

from __future__ import annotations

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.messages import RaftRequest, VoteRequest, VoteResponse
from kafkapy.raft.replica import Replica
from kafkapy.raft.state import (
    CandidateState,
    ProspectiveState,
    QuorumState,
    ResignedState,
    UnattachedState,
)
from kafkapy.raft.step import RoleStep

__all__ = ["CandidateStep", "ProspectiveStep", "ResignedStep", "UnattachedStep"]


class UnattachedStep(RoleStep, state=UnattachedState):
    """A voter that knows the epoch but no leader of it: grants one vote and stands when its
    election timeout passes."""

    def __init__(self, r: Replica, st: UnattachedState) -> None:
        super().__init__(r, st)
        self.st = st

    def deadline_ms(self) -> int:
        return self.st.election_deadline_ms

    def tick(self) -> None:
        if self.r.now >= self.st.election_deadline_ms:
            self.r.stand()

    def vote_in_epoch(self, req: VoteRequest) -> VoteResponse:
        """5.2: at most one vote per epoch, persisted before it is granted (the transition);
        granting pushes our election timeout back so the candidate gets its chance to win."""
        st, r = self.st, self.r
        granted = False
        if st.voted_for is not None:
            granted = st.voted_for == req.candidate_id
        elif r.log_up_to_date(req):
            granted = True
            st.voted_for = req.candidate_id
            st.election_deadline_ms = r.election_deadline()
            r.transition(st, QuorumState(r.epoch, req.candidate_id, None))
        return VoteResponse(ErrorCode.NONE, r.leader_id, r.epoch, granted)


class ResignedStep(RoleStep, state=ResignedState):
    """A leader that gave up its epoch: serves nothing, refuses votes in it and stands in the
    next one when its election timeout passes."""

    led_epoch = True

    def __init__(self, r: Replica, st: ResignedState) -> None:
        super().__init__(r, st)
        self.st = st

    def deadline_ms(self) -> int:
        return self.st.election_deadline_ms

    def tick(self) -> None:
        if self.r.now >= self.st.election_deadline_ms:
            self.r.stand()


class _BallotStep(RoleStep):
    """A round of (pre-)vote requests: one to every other voter, a failed one retried after a
    backoff, a new round when the election timeout passes."""

    st: CandidateState | ProspectiveState

    def deadline_ms(self) -> int:
        return min([self.st.election_deadline_ms, *self.st.retry_at_ms.values()])

    def tick(self) -> None:
        st, r = self.st, self.r
        if r.now >= st.election_deadline_ms:
            r.stand()
            return
        for voter, at in sorted(st.retry_at_ms.items()):
            if r.now >= at:
                del st.retry_at_ms[voter]
                r.send_vote(st, voter)

    def request_failed(self, dst: int, req: RaftRequest, refused: bool) -> None:
        st = self.st
        if st.inflight.get(dst) is req:
            del st.inflight[dst]
            st.retry_at_ms[dst] = self.r.now + self.r.fetch_interval_ms

    def counted(self, dst: int, req: RaftRequest, granted: bool) -> bool:
        """Count `dst`'s answer to `req`, the request in flight to it; True when it made a
        majority (a stale or repeated answer counts nothing)."""
        st = self.st
        if st.inflight.get(dst) is not req:
            return False
        del st.inflight[dst]
        if not granted:
            st.rejected.add(dst)
            return False
        st.granted.add(dst)
        return st.won(len(self.r.voters))


class CandidateStep(_BallotStep, state=CandidateState):
    """A voter standing in its epoch: a majority of votes makes it the leader; an answer
    naming a leader of its epoch or a newer one ends the candidacy."""

    st: CandidateState

    def __init__(self, r: Replica, st: CandidateState) -> None:
        super().__init__(r, st)
        self.st = st

    def vote_response(self, dst: int, req: RaftRequest, resp: VoteResponse) -> None:
        if self.r.observe(resp.leader_epoch, resp.leader_id):
            return
        granted = (
            resp.error == ErrorCode.NONE
            and resp.vote_granted
            and resp.leader_epoch == self.st.epoch
        )
        if self.counted(dst, req, granted):
            self.r.become_leader()


class ProspectiveStep(_BallotStep, state=ProspectiveState):
    """A voter asking for pre-votes in the next epoch: a majority makes it a candidate."""

    st: ProspectiveState

    def __init__(self, r: Replica, st: ProspectiveState) -> None:
        super().__init__(r, st)
        self.st = st

    def vote_in_epoch(self, req: VoteRequest) -> VoteResponse:
        """A real vote in our epoch: answered as an unattached voter (our pre-vote round ends;
        the election timer stands us again if nobody wins)."""
        st, r = self.st, self.r
        unattached = UnattachedState(r.epoch, st.voted_for, st.election_deadline_ms)
        r.transition(unattached, r.quorum)
        return UnattachedStep(r, unattached).vote_in_epoch(req)

    def vote_response(self, dst: int, req: RaftRequest, resp: VoteResponse) -> None:
        """A voter naming the leader we timed out on may just not have noticed it is gone yet:
        following it again would keep us all waiting on it (its own BeginQuorumEpoch or a fetch
        answer still brings us back)."""
        st, r = self.st, self.r
        hearsay = resp.leader_epoch == r.epoch and resp.leader_id == st.previous_leader
        if not hearsay and r.observe(resp.leader_epoch, resp.leader_id):
            return
        if self.counted(dst, req, resp.error == ErrorCode.NONE and resp.vote_granted):
            r.become_candidate()
