"""`RaftCore`: KRaft-style Raft as a sans-IO state machine (no trio, no sockets, no clock).

Everything comes in as a method call with `now_ms` (a request from a peer, a response to a
request the core asked to send, a failed request, a timer tick, a proposal) and everything goes
out through `poll()` as a `Ready`: the quorum state to persist, whether to flush the log,
requests to send, committed entries to apply, whether the leader changed. The driver must act on
a `Ready` in that order - persist, flush, send, apply - and must call `poll()` after every
`handle_request` and act on it *before* sending that request's response (a granted vote is only
valid once persisted).

Pull-based like KRaft: followers and observers Fetch from the leader with (fetch offset, last
fetched epoch); the leader answers with entries and its high watermark, or with a diverging
epoch so the fetcher truncates. Elections use Vote with randomised timeouts; a new leader
announces itself with BeginQuorumEpoch and a resigning one names its successors with
EndQuorumEpoch. The per-role rules live in `kafkapy.raft.state`; each role steps events in its
own `RoleStep` (`kafkapy.raft.step`: the rules every role shares; `electing`, `fetching`,
`leader`: the steps of the roles), over the `Replica` they share (`kafkapy.raft.replica`).

Snapshots (KIP-630): the driver snapshots its applied state, stores it through the log and
calls `snapshot_written`; the log then starts at the snapshot's end. A leader answers a Fetch
whose offset is below its log start (or whose last fetched epoch is older than its snapshot's)
with the snapshot id; the fetcher then pulls the snapshot with FetchSnapshot, chunk by chunk,
installs it (the log restarts at its end, the HW moves there) and hands it out in `Ready.snapshot`
for the driver to load before it applies anything after it. A restarted node starts with its
HW and applied offset at its log start: everything below is in the snapshot it loads.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from kafkapy.raft.electing import CandidateStep, ProspectiveStep, ResignedStep, UnattachedStep
from kafkapy.raft.fetching import FollowerStep, ObserverStep
from kafkapy.raft.leader import LeaderStep
from kafkapy.raft.log import Entry, RaftLog, SnapshotId
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
    RaftResponse,
    VoteRequest,
    VoteResponse,
)
from kafkapy.raft.replica import Replica
from kafkapy.raft.state import QuorumState, ReplicaProgress, Role, RoleState
from kafkapy.raft.step import RoleStep, step_of

__all__ = ["NotLeaderError", "RaftCore", "Ready"]

#: the step of every role, by its state class (each registers itself with `RoleStep`)
ROLE_STEPS: tuple[type[RoleStep], ...] = (
    UnattachedStep,
    FollowerStep,
    ObserverStep,
    ProspectiveStep,
    CandidateStep,
    LeaderStep,
    ResignedStep,
)


class NotLeaderError(Exception):
    """`propose` on a node that is not the leader; names the leader it knows of, if any."""

    def __init__(self, leader_id: int | None, epoch: int) -> None:
        super().__init__(f"not the leader (leader {leader_id}, epoch {epoch})")
        self.leader_id = leader_id
        self.epoch = epoch


@dataclass(frozen=True, slots=True)
class Ready:
    """What the driver must do now, in this order: persist `state` (when not None), flush the
    log (when `flush_log`), send `requests`, load `snapshot` (when not None: a snapshot fetched
    from the leader, now in the log, replacing the applied state), apply `committed` (in order,
    each exactly once)."""

    state: QuorumState | None
    requests: list[tuple[int, RaftRequest]]
    committed: list[Entry]
    flush_log: bool
    leader_changed: bool
    snapshot: SnapshotId | None = None


class RaftCore:
    """One Raft replica of the metadata log; `node_id not in voters` makes it an observer.

    Timers are deadlines in the caller's milliseconds: call `tick(now_ms)` at
    `next_deadline_ms()` (every other entry point ticks too). `rng` randomises election
    timeouts; a seeded one makes a simulation reproducible.
    """

    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        log: RaftLog,
        state: QuorumState,
        *,
        now_ms: int,
        rng: random.Random,
        election_timeout_ms: int = 1000,
        fetch_timeout_ms: int = 2000,
        fetch_interval_ms: int = 50,
        max_fetch_entries: int = 1000,
        max_snapshot_chunk_bytes: int = 1 << 20,
        pre_vote: bool = False,
    ) -> None:
        if not voters:
            raise ValueError("a quorum needs at least one voter")
        self._r = Replica(
            node_id,
            voters,
            log,
            state,
            now_ms=now_ms,
            rng=rng,
            election_timeout_ms=election_timeout_ms,
            fetch_timeout_ms=fetch_timeout_ms,
            fetch_interval_ms=fetch_interval_ms,
            max_fetch_entries=max_fetch_entries,
            max_snapshot_chunk_bytes=max_snapshot_chunk_bytes,
            pre_vote=pre_vote,
        )
        if self._r.voters == {node_id}:
            # The only voter: no one else can vote or lead, so an election timeout would only
            # delay start-up. Stand at once and win (KRaft does the same for a quorum of one).
            self._r.become_candidate()
        self.tick(now_ms)

    def _step(self) -> RoleStep:
        return step_of(self._r)

    # ------------------------------------------------------------------ read-only view

    @property
    def node_id(self) -> int:
        return self._r.node_id

    @property
    def voters(self) -> frozenset[int]:
        return self._r.voters

    @property
    def log(self) -> RaftLog:
        return self._r.log

    @property
    def role(self) -> Role:
        return self._r.role_state.role

    @property
    def epoch(self) -> int:
        return self._r.epoch

    @property
    def voted_for(self) -> int | None:
        return self._r.quorum.voted_for

    @property
    def quorum_state(self) -> QuorumState:
        return self._r.quorum

    @property
    def leader_id(self) -> int | None:
        return self._r.leader_id

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    @property
    def is_voter(self) -> bool:
        return self._r.is_voter

    @property
    def high_watermark(self) -> int:
        return self._r.hw

    @property
    def _role_state(self) -> RoleState:
        """The state of the current role, for tests that look inside a leader's progress."""
        return self._r.role_state

    def has_quorum_contact(self, now_ms: int) -> bool:
        """A leader that a majority of voters heard from within the fetch timeout. With
        pre-vote a voter stands, or grants a vote or pre-vote, only once its fetch timeout
        passed without an answer from this leader (or it resigned), so a successor is elected
        no earlier than a fetch timeout after this leader's last answer a majority accepted -
        or sooner only when this leader's process refuses connections (`request_failed`), when
        it serves nothing. A new leader has no contact until a majority confirmed hearing from
        it: the votes that elected it do not stop a newer candidate's.

        "Heard from" is proven by the voters themselves: every answer carries the leader's
        clock (`leader_clock_ms`) and the voter echoes the last one it accepted in its next
        fetch. When a fetch is read says nothing: fetches sent while this leader's process was
        paused are read when it resumes, after the voters may have elected a successor. A leader
        resumed after a pause, or cut off, fails this at once, although its check-quorum
        step-down (at 1.5 fetch timeouts, at its next tick) may not have run yet."""
        return self._step().has_quorum_contact(now_ms)

    def replica_progress(self) -> dict[int, ReplicaProgress]:
        """The leader's view of every replica that fetched (DescribeQuorum); empty elsewhere."""
        return self._step().replica_progress()

    def next_deadline_ms(self) -> int:
        """When `tick` must be called next (it may be called earlier)."""
        return self._step().deadline_ms()

    # ------------------------------------------------------------------ inputs

    def handle_request(self, src: int, request: RaftRequest, now_ms: int) -> RaftResponse:
        """Answer a peer's request at once (safe to call again for a held-back empty Fetch)."""
        self._r.now = max(self._r.now, now_ms)
        step = self._step()
        response: RaftResponse
        match request:
            case VoteRequest():
                response = step.vote(request)
            case BeginQuorumEpochRequest():
                response = step.begin_epoch(request)
            case EndQuorumEpochRequest():
                response = step.end_epoch(request)
            case FetchRequest():
                response = step.fetch(src, request)
            case FetchSnapshotRequest():
                response = step.fetch_snapshot(src, request)
        self.tick(self._r.now)
        return response

    def handle_response(
        self, dst: int, request: RaftRequest, response: RaftResponse, now_ms: int
    ) -> None:
        """Step the answer `dst` gave to `request` (the very object the core asked to send)."""
        self._r.now = max(self._r.now, now_ms)
        step = self._step()
        match response:
            case VoteResponse():
                step.vote_response(dst, request, response)
            case FetchResponse():
                step.fetch_response(dst, request, response)
            case FetchSnapshotResponse():
                step.fetch_snapshot_response(dst, request, response)
            case BeginQuorumEpochResponse() | EndQuorumEpochResponse():
                self._r.observe(response.leader_epoch, response.leader_id)
        self.tick(self._r.now)

    def request_failed(
        self, dst: int, request: RaftRequest, now_ms: int, *, refused: bool = False
    ) -> None:
        """`request` to `dst` got no answer (connection error or timeout): retry after a pause.

        `refused`: `dst` refused the connection - no process listens on its port any more. A
        follower whose leader refuses takes its fetch timeout as passed at once: it grants
        pre-votes and stands after its jitter, so a crashed leader is replaced in well under
        a second instead of after the 2 s fetch timeout (beyond Kafka, which waits). A paused
        or cut-off leader refuses nothing and is still given the whole fetch timeout.
        """
        self._r.now = max(self._r.now, now_ms)
        self._step().request_failed(dst, request, refused)
        self.tick(self._r.now)

    def tick(self, now_ms: int) -> None:
        """Fire every timer due at `now_ms` (elections, fetches, re-announcements)."""
        self._r.now = max(self._r.now, now_ms)
        self._step().tick()

    def propose(self, data: Sequence[bytes], now_ms: int) -> int:
        """Append `data` as entries of the leader's epoch; the offset of the last one."""
        self._r.now = max(self._r.now, now_ms)
        if not self.is_leader:
            raise NotLeaderError(self.leader_id, self.epoch)
        if not data:
            raise ValueError("nothing to propose")
        self._r.append_local([bytes(d) for d in data])
        self.tick(self._r.now)
        return self.log.end_offset() - 1

    def resign(self, now_ms: int) -> None:
        """Give up leadership (clean shutdown): EndQuorumEpoch names the successors, most caught
        up first, so the next leader is elected without waiting for a fetch timeout."""
        self._r.now = max(self._r.now, now_ms)
        self._step().resign()

    def poll(self) -> Ready:
        """Collect what the driver must do now (see `Ready`); assumes the driver does it."""
        r = self._r
        state: QuorumState | None = None
        if r.state_dirty:
            state, r.state_dirty = r.quorum, False
        flush = r.unflushed
        if flush:
            r.unflushed = False
            r.flushed_end = r.log.end_offset()
            self._step().log_flushed()
        committed: list[Entry] = []
        if r.hw > r.applied:
            committed = r.log.read(r.applied, r.hw - r.applied)
            r.applied += len(committed)
        requests, r.outbox = r.outbox, []
        changed, r.leader_changed = r.leader_changed, False
        installed, r.installed = r.installed, None
        return Ready(state, requests, committed, flush, changed, installed)

    def snapshot_written(self, snapshot_id: SnapshotId) -> None:
        """The driver stored (`log.store_snapshot`) a snapshot of its applied state at
        `snapshot_id`: the log now starts there. An older one than the log's is ignored (a
        snapshot was installed meanwhile); one beyond what was applied is a driver bug."""
        applied = self._r.applied
        if snapshot_id.end_offset > applied:
            raise ValueError(f"snapshot {snapshot_id} is beyond the applied offset {applied}")
        latest = self.log.latest_snapshot()
        if latest is not None and snapshot_id.end_offset <= latest.end_offset:
            return
        if self.log.epoch_at(snapshot_id.end_offset - 1) != snapshot_id.epoch:
            raise ValueError(f"snapshot {snapshot_id} does not match the log")
        self.log.adopt_snapshot(snapshot_id)
