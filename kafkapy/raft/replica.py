"""`Replica`: what every role's step reads and changes, and the rules no single role owns.

A node is in one role at a time (`kafkapy.raft.state`) and each role has its own step
(`kafkapy.raft.step` and the modules beside it); what outlives a role lives here: the log, the
persisted quorum state, the high watermark and applied offset, the outbox, the clock and the
timeouts. So do the rules shared by every role:

- the epoch rule: a peer naming a newer epoch moves us to it (as a follower when it names the
  leader, unattached otherwise); a role still waiting for its epoch's leader follows the one
  named (`observe`);
- the transitions between roles (`become_*`), which are the only place the persisted state
  changes, so a vote or an epoch is always persisted before a message relying on it leaves;
- how up to date a log must be to get a vote (`log_up_to_date`).
"""

from __future__ import annotations

import random

from kafkapy.raft.log import Entry, RaftLog, SnapshotId
from kafkapy.raft.messages import (
    BeginQuorumEpochRequest,
    EndQuorumEpochRequest,
    RaftRequest,
    VoteRequest,
)
from kafkapy.raft.state import (
    CandidateState,
    FetchingState,
    FollowerState,
    LeaderState,
    ObserverState,
    ProspectiveState,
    QuorumState,
    ReplicaProgress,
    ResignedState,
    RoleState,
    UnattachedState,
)

__all__ = ["NEVER", "Replica"]

#: a time before any deadline (a re-announcement never sent)
NEVER = 1 << 62


class Replica:
    """One node's Raft state across roles; `node_id not in voters` makes it an observer.

    The steps change it directly: it is the one object of a sans-IO state machine, not an
    API (`RaftCore` is)."""

    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        log: RaftLog,
        state: QuorumState,
        *,
        now_ms: int,
        rng: random.Random,
        election_timeout_ms: int,
        fetch_timeout_ms: int,
        fetch_interval_ms: int,
        max_fetch_entries: int,
        max_snapshot_chunk_bytes: int,
        pre_vote: bool,
    ) -> None:
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.log = log
        self.rng = rng
        self.election_timeout_ms = election_timeout_ms
        self.fetch_timeout_ms = fetch_timeout_ms
        self.fetch_interval_ms = fetch_interval_ms
        # a leader re-announces itself to a voter silent this long (Kafka: fetch timeout / 2)
        self.begin_timeout_ms = max(1, fetch_timeout_ms // 2)
        # a leader that no majority confirmed hearing from for this long resigns (check quorum)
        self.check_quorum_ms = fetch_timeout_ms * 3 // 2
        self.max_fetch_entries = max_fetch_entries
        self.max_snapshot_chunk_bytes = max(1, max_snapshot_chunk_bytes)
        # KIP-996: stand only after a majority said it would vote (see ProspectiveState)
        self.pre_vote = pre_vote
        self.quorum = state
        self.state_dirty = False
        # what the log starts at is in a snapshot: committed, and loaded by the driver first
        self.hw = log.start_offset()
        self.applied = log.start_offset()
        self.installed: SnapshotId | None = None
        self.unflushed = False
        self.flushed_end = log.end_offset()
        self.outbox: list[tuple[int, RaftRequest]] = []
        self.leader_changed = False
        self.now = now_ms
        self.role_state: RoleState = self._initial_role(state, now_ms)

    # ------------------------------------------------------------------ shared view

    @property
    def epoch(self) -> int:
        return self.quorum.epoch

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def leader_id(self) -> int | None:
        st = self.role_state
        if isinstance(st, LeaderState):
            return self.node_id
        if isinstance(st, FetchingState):
            return st.leader_id
        return None

    def others(self) -> list[int]:
        """The other voters, in the order requests to them go out."""
        return sorted(self.voters - {self.node_id})

    def election_deadline(self) -> int:
        timeout = self.election_timeout_ms
        return self.now + timeout + self.rng.randrange(max(1, timeout))

    def log_up_to_date(self, req: VoteRequest) -> bool:
        """5.4.1: a candidate whose log ends at least as late (by epoch, then offset) as ours."""
        return (req.last_offset_epoch, req.last_offset) >= (
            self.log.last_epoch(),
            self.log.end_offset(),
        )

    def send(self, dst: int, request: RaftRequest) -> None:
        self.outbox.append((dst, request))

    def send_vote(self, st: CandidateState | ProspectiveState, voter: int) -> None:
        """Ask `voter` for its vote - for a pre-vote in the next epoch when `st` is a
        prospective's (nothing is persisted for one)."""
        pre_vote = isinstance(st, ProspectiveState)
        epoch = st.epoch + 1 if pre_vote else st.epoch
        req = VoteRequest(
            epoch, self.node_id, self.log.last_epoch(), self.log.end_offset(), pre_vote=pre_vote
        )
        st.inflight[voter] = req
        self.send(voter, req)

    def append_local(self, data: list[bytes]) -> None:
        start = self.log.end_offset()
        self.log.append([Entry(start + i, self.epoch, d) for i, d in enumerate(data)])
        self.unflushed = True

    # ------------------------------------------------------------------ epoch rules

    def observe(self, epoch: int, leader_id: int | None) -> bool:
        """Catch up with an epoch/leader a peer told us about; True when the role changed."""
        if leader_id == self.node_id:
            leader_id = None  # nobody can tell us we lead; only our own election does
        if epoch > self.epoch:
            if leader_id is not None:
                self.become_follower(epoch, leader_id)
            else:
                self.become_unattached(epoch)
            return True
        if epoch == self.epoch and leader_id is not None:
            st = self.role_state
            if isinstance(st, UnattachedState | CandidateState | ProspectiveState) or (
                isinstance(st, ObserverState) and st.leader_id is None
            ):
                self.become_follower(epoch, leader_id)
                return True
        return False

    # ------------------------------------------------------------------ transitions

    def _initial_role(self, state: QuorumState, now_ms: int) -> RoleState:
        """Restart where the persisted state says: a leader comes back resigned (its volatile
        leader state is gone), a follower follows the same leader, anyone else is unattached."""
        if not self.is_voter:
            leader = state.leader_id if state.leader_id != self.node_id else None
            return ObserverState(state.epoch, leader, now_ms + self.fetch_timeout_ms, now_ms)
        if state.leader_id == self.node_id:
            # A newer leader re-announces itself to silent voters every fetch timeout / 2:
            # waiting a fetch timeout first lets that reach us instead of our candidacy
            # deposing it (a restarted ex-leader's log is usually behind anyway).
            return ResignedState(state.epoch, self.election_deadline() + self.fetch_timeout_ms)
        if state.leader_id is not None:
            return FollowerState(
                state.epoch,
                state.leader_id,
                now_ms + self.fetch_timeout_ms,
                now_ms,
                voted_for=state.voted_for,
            )
        return UnattachedState(state.epoch, state.voted_for, self.election_deadline())

    def transition(self, new: RoleState, quorum: QuorumState) -> None:
        before = (self.leader_id, self.epoch)
        self.role_state = new
        if quorum != self.quorum:
            self.quorum = quorum
            self.state_dirty = True
        if (self.leader_id, self.epoch) != before:
            self.leader_changed = True

    def become_unattached(self, epoch: int) -> None:
        if self.is_voter:
            self.transition(
                UnattachedState(epoch, None, self.election_deadline()), QuorumState(epoch)
            )
        else:
            self.transition(
                ObserverState(epoch, None, self.now + self.fetch_timeout_ms, self.now),
                QuorumState(epoch),
            )

    def become_follower(self, epoch: int, leader_id: int) -> None:
        voted = self.quorum.voted_for if epoch == self.epoch else None
        deadline = self.now + self.fetch_timeout_ms
        if self.is_voter:
            self.transition(
                FollowerState(
                    epoch,
                    leader_id,
                    deadline,
                    self.now,
                    voted_for=voted,
                    stand_jitter_ms=self.rng.randrange(max(1, self.election_timeout_ms // 2)),
                ),
                QuorumState(epoch, voted, leader_id),
            )
        else:
            self.transition(
                ObserverState(epoch, leader_id, deadline, self.now),
                QuorumState(epoch, voted, leader_id),
            )

    def stand(self) -> None:
        """An election timeout fired: stand for the next epoch - through a pre-vote round
        first when pre-vote is on and there is anyone to ask."""
        if self.pre_vote and len(self.voters) > 1:
            self.become_prospective()
        else:
            self.become_candidate()

    def become_prospective(self) -> None:
        """Ask for pre-votes; the epoch, the vote and the persisted state stay as they are:
        nothing here may disrupt anyone."""
        previous = self.role_state
        st = ProspectiveState(
            self.epoch,
            self.quorum.voted_for,
            self.election_deadline(),
            previous.previous_leader
            if isinstance(previous, ProspectiveState)
            else previous.leader_id
            if isinstance(previous, FollowerState)
            else None,
            granted={self.node_id},
        )
        self.transition(st, self.quorum)
        for voter in self.others():
            self.send_vote(st, voter)

    def become_candidate(self) -> None:
        epoch = self.epoch + 1
        st = CandidateState(epoch, self.election_deadline(), granted={self.node_id})
        self.transition(st, QuorumState(epoch, self.node_id, None))
        if st.won(len(self.voters)):
            self.become_leader()
            return
        for voter in self.others():
            self.send_vote(st, voter)

    def become_leader(self) -> None:
        st = LeaderState(self.epoch, self.now)
        self.transition(st, QuorumState(self.epoch, self.node_id, self.node_id))
        # the epoch-start no-op: the HW may only pass entries of the leader's own epoch, and
        # this one lets it commit everything before it without waiting for a proposal
        self.append_local([b""])
        for voter in self.others():
            st.begin_sent_ms[voter] = self.now
            self.send(voter, BeginQuorumEpochRequest(self.node_id, self.epoch))

    def resign(self, st: LeaderState) -> None:
        """Give up the epoch: EndQuorumEpoch names the successors, most caught up first."""
        others = self.voters - {self.node_id}
        successors = tuple(
            sorted(others, key=lambda v: (-st.progress.get(v, ReplicaProgress()).end_offset, v))
        )
        self.transition(
            ResignedState(self.epoch, self.election_deadline(), successors), self.quorum
        )
        for voter in sorted(others):
            self.send(voter, EndQuorumEpochRequest(self.node_id, self.epoch, successors))
