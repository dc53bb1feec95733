"""`RoleStep`: how a role steps each event, with the answers every role shares.

As etcd's raft swaps a step function per role, each role has a `RoleStep` subclass, picked by
the type of the role state (`step_of`); `RaftCore` hands every event to the step of the role
the node is in at that moment. The base class holds what a role does with an event that is not
meant for it, and the request rules every role shares:

- a request of an older epoch is fenced; a newer epoch moves us to it (`Replica.observe`);
- Vote (5.2, 5.4.1): one vote per epoch, persisted first, only for a log at least as up to
  date, only by a voter without a leader in that epoch (`vote` / `vote_in_epoch`); a pre-vote
  (KIP-996) changes nothing whatever the answer (`pre_vote`);
- Fetch and FetchSnapshot are served by the leader only: anyone else names the leader it knows;
- a response names an epoch and maybe a leader: observed, then (when the role expects it)
  stepped by the role's override.
"""

from __future__ import annotations

from typing import ClassVar

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequest,
    VoteRequest,
    VoteResponse,
)
from kafkapy.raft.replica import Replica
from kafkapy.raft.state import ReplicaProgress, RoleState

__all__ = ["RoleStep", "step_of"]

_STEPS: dict[type[object], type[RoleStep]] = {}


def step_of(r: Replica) -> RoleStep:
    """The step of the role `r` is in now (a transition mid-event changes it)."""
    st = r.role_state
    return _STEPS[type(st)](r, st)


class RoleStep:
    """The events of one role; a subclass names its role state class (`state=`) and overrides
    what that role does differently. A step lives for one event: the role state it wraps is
    thrown away on the next transition."""

    #: the role led the epoch: a BeginQuorumEpoch of that same epoch cannot be genuine
    led_epoch: ClassVar[bool] = False

    def __init_subclass__(cls, state: type[object] | None = None) -> None:
        super().__init_subclass__()
        if state is not None:
            _STEPS[state] = cls

    def __init__(self, r: Replica, st: RoleState) -> None:
        self.r = r

    # ------------------------------------------------------------------ timers

    def deadline_ms(self) -> int:
        """When this role's next timer fires."""
        raise NotImplementedError

    def tick(self) -> None:
        """Fire this role's timers due at `r.now`."""
        raise NotImplementedError

    # ------------------------------------------------------------------ requests

    def vote(self, req: VoteRequest) -> VoteResponse:
        r = self.r
        if not r.is_voter or req.candidate_id not in r.voters:
            return VoteResponse(ErrorCode.INCONSISTENT_VOTER_SET, r.leader_id, r.epoch, False)
        if req.pre_vote:
            return self.pre_vote(req)
        if req.candidate_epoch < r.epoch or self.keeps_leader():
            return VoteResponse(ErrorCode.NONE, r.leader_id, r.epoch, False)
        if req.candidate_epoch > r.epoch:
            r.become_unattached(req.candidate_epoch)
        return step_of(r).vote_in_epoch(req)

    def keeps_leader(self) -> bool:
        """Refuse a vote of a newer epoch and stay in ours (a follower of a live leader)."""
        return False

    def vote_in_epoch(self, req: VoteRequest) -> VoteResponse:
        """A Vote of our epoch: only a voter with no leader in it may grant one."""
        r = self.r
        return VoteResponse(ErrorCode.NONE, r.leader_id, r.epoch, False)

    def pre_vote(self, req: VoteRequest) -> VoteResponse:
        """KIP-996: would we vote for `req`'s candidate in its epoch? Changes nothing here - no
        epoch bump, no vote recorded - whatever the answer."""
        r = self.r
        if req.candidate_epoch <= r.epoch:
            return VoteResponse(ErrorCode.NONE, r.leader_id, r.epoch, False)
        granted = self.grants_pre_vote(r.log_up_to_date(req))
        return VoteResponse(ErrorCode.NONE, r.leader_id, r.epoch, granted)

    def grants_pre_vote(self, log_ok: bool) -> bool:
        """A voter that knows no live leader would vote for an up-to-date log."""
        return log_ok

    def begin_epoch(self, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        r = self.r
        if req.leader_epoch < r.epoch:
            return BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, r.leader_id, r.epoch)
        if req.leader_epoch == r.epoch and self.led_epoch:
            # two leaders in one epoch cannot happen; refuse rather than follow
            return BeginQuorumEpochResponse(ErrorCode.INVALID_REQUEST, r.leader_id, r.epoch)
        if not r.observe(req.leader_epoch, req.leader_id):
            self.leader_announced(req.leader_id)
        return BeginQuorumEpochResponse(ErrorCode.NONE, r.leader_id, r.epoch)

    def leader_announced(self, leader_id: int) -> None:
        """The leader we already know re-announced itself (it is alive)."""

    def end_epoch(self, req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        r = self.r
        if req.leader_epoch < r.epoch:
            return EndQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, r.leader_id, r.epoch)
        r.observe(req.leader_epoch, req.leader_id)
        step_of(r).leader_resigned(req)
        return EndQuorumEpochResponse(ErrorCode.NONE, r.leader_id, r.epoch)

    def leader_resigned(self, req: EndQuorumEpochRequest) -> None:
        """`req.leader_id` gave up its epoch, ours: only its followers act on it."""

    def fetch(self, src: int, req: FetchRequest) -> FetchResponse:
        r = self.r
        return FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, r.leader_id, r.epoch, r.hw)

    def fetch_snapshot(self, src: int, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
        r = self.r
        return FetchSnapshotResponse(
            ErrorCode.NOT_LEADER_OR_FOLLOWER, r.leader_id, r.epoch, req.snapshot_id
        )

    # ------------------------------------------------------------------ responses

    def vote_response(self, dst: int, req: RaftRequest, resp: VoteResponse) -> None:
        self.r.observe(resp.leader_epoch, resp.leader_id)

    def fetch_response(self, dst: int, req: RaftRequest, resp: FetchResponse) -> None:
        self.r.observe(resp.leader_epoch, resp.leader_id)

    def fetch_snapshot_response(
        self, dst: int, req: RaftRequest, resp: FetchSnapshotResponse
    ) -> None:
        self.r.observe(resp.leader_epoch, resp.leader_id)

    def request_failed(self, dst: int, req: RaftRequest, refused: bool) -> None:
        """A request of an earlier role got no answer: nothing to retry in this one."""

    # ------------------------------------------------------------------ leader only

    def log_flushed(self) -> None:
        """The log is flushed up to its end (only a leader counts its own log by it)."""

    def resign(self) -> None:
        """Give up leadership: only a leader has any."""

    def has_quorum_contact(self, now_ms: int) -> bool:
        return False

    def replica_progress(self) -> dict[int, ReplicaProgress]:
        return {}
