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
EndQuorumEpoch. The per-role rules live in `kafkapy.raft.state`.

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

from kafkapy.protocol.errors import ErrorCode
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
    Role,
    RoleState,
    SnapshotFetch,
    UnattachedState,
)

__all__ = ["NotLeaderError", "RaftCore", "Ready"]

_NEVER = 1 << 62


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
        self.node_id = node_id
        self.voters = frozenset(voters)
        self.log = log
        self._rng = rng
        self._election_timeout_ms = election_timeout_ms
        self._fetch_timeout_ms = fetch_timeout_ms
        self._fetch_interval_ms = fetch_interval_ms
        # a leader re-announces itself to a voter silent this long (Kafka: fetch timeout / 2)
        self._begin_timeout_ms = max(1, fetch_timeout_ms // 2)
        # a leader that no majority confirmed hearing from for this long resigns (check quorum)
        self._check_quorum_ms = fetch_timeout_ms * 3 // 2
        self._max_fetch_entries = max_fetch_entries
        self._max_snapshot_chunk_bytes = max(1, max_snapshot_chunk_bytes)
        # KIP-996: stand only after a majority said it would vote (see ProspectiveState)
        self._pre_vote = pre_vote
        self._quorum = state
        self._state_dirty = False
        # what the log starts at is in a snapshot: committed, and loaded by the driver first
        self._hw = log.start_offset()
        self._applied = log.start_offset()
        self._installed: SnapshotId | None = None
        self._unflushed = False
        self._flushed_end = log.end_offset()
        self._outbox: list[tuple[int, RaftRequest]] = []
        self._leader_changed = False
        self._now = now_ms
        self._role_state: RoleState = self._initial_role(state, now_ms)
        if self.voters == {node_id}:
            # The only voter: no one else can vote or lead, so an election timeout would only
            # delay start-up. Stand at once and win (KRaft does the same for a quorum of one).
            self._become_candidate()
        self.tick(now_ms)

    # ------------------------------------------------------------------ read-only view

    @property
    def role(self) -> Role:
        return self._role_state.role

    @property
    def epoch(self) -> int:
        return self._quorum.epoch

    @property
    def voted_for(self) -> int | None:
        return self._quorum.voted_for

    @property
    def quorum_state(self) -> QuorumState:
        return self._quorum

    @property
    def leader_id(self) -> int | None:
        st = self._role_state
        if isinstance(st, LeaderState):
            return self.node_id
        if isinstance(st, FetchingState):
            return st.leader_id
        return None

    @property
    def is_leader(self) -> bool:
        return isinstance(self._role_state, LeaderState)

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def high_watermark(self) -> int:
        return self._hw

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
        st = self._role_state
        if not isinstance(st, LeaderState):
            return False
        if len(self.voters) <= 1:
            return True
        now = max(self._now, now_ms)
        seen = st.quorum_contact_ms(self.voters, self.node_id, now, unconfirmed_ms=-_NEVER)
        return now - seen < self._fetch_timeout_ms

    def replica_progress(self) -> dict[int, ReplicaProgress]:
        """The leader's view of every replica that fetched (DescribeQuorum); empty elsewhere."""
        st = self._role_state
        if not isinstance(st, LeaderState):
            return {}
        out = {
            rid: ReplicaProgress(p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
            for rid, p in st.progress.items()
        }
        out[self.node_id] = ReplicaProgress(self.log.end_offset(), self._now, self._now)
        return out

    def next_deadline_ms(self) -> int:
        """When `tick` must be called next (it may be called earlier)."""
        st = self._role_state
        if isinstance(st, UnattachedState | ResignedState):
            return st.election_deadline_ms
        if isinstance(st, CandidateState | ProspectiveState):
            return min([st.election_deadline_ms, *st.retry_at_ms.values()])
        if isinstance(st, FetchingState):
            fetch = (
                st.inflight_sent_ms + self._fetch_timeout_ms
                if st.inflight is not None
                else st.next_fetch_ms
            )
            if isinstance(st, ObserverState) and st.leader_id is None:
                return fetch
            if isinstance(st, FollowerState):
                return min(fetch, st.stand_at_ms())
            return min(fetch, st.fetch_deadline_ms)
        deadline = (
            st.quorum_contact_ms(self.voters, self.node_id, self._now) + self._check_quorum_ms
        )
        for v in self.voters - {self.node_id}:
            last = st.progress.get(v, ReplicaProgress()).last_fetch_ms or st.started_ms
            deadline = min(
                deadline, max(last, st.begin_sent_ms.get(v, -_NEVER)) + self._begin_timeout_ms
            )
        return deadline

    # ------------------------------------------------------------------ inputs

    def handle_request(self, src: int, request: RaftRequest, now_ms: int) -> RaftResponse:
        """Answer a peer's request at once (safe to call again for a held-back empty Fetch)."""
        self._now = max(self._now, now_ms)
        response: RaftResponse
        match request:
            case VoteRequest():
                response = self._handle_vote(request)
            case BeginQuorumEpochRequest():
                response = self._handle_begin_epoch(request)
            case EndQuorumEpochRequest():
                response = self._handle_end_epoch(request)
            case FetchRequest():
                response = self._handle_fetch(src, request)
            case FetchSnapshotRequest():
                response = self._handle_fetch_snapshot(src, request)
        self.tick(self._now)
        return response

    def handle_response(
        self, dst: int, request: RaftRequest, response: RaftResponse, now_ms: int
    ) -> None:
        """Step the answer `dst` gave to `request` (the very object the core asked to send)."""
        self._now = max(self._now, now_ms)
        match response:
            case VoteResponse():
                self._handle_vote_response(dst, request, response)
            case FetchResponse():
                self._handle_fetch_response(dst, request, response)
            case FetchSnapshotResponse():
                self._handle_fetch_snapshot_response(dst, request, response)
            case BeginQuorumEpochResponse() | EndQuorumEpochResponse():
                self._observe(response.leader_epoch, response.leader_id)
        self.tick(self._now)

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
        self._now = max(self._now, now_ms)
        st = self._role_state
        if isinstance(st, FetchingState) and st.inflight is request:
            st.fetch_done(self._now + self._fetch_interval_ms)
            if refused and isinstance(st, FollowerState) and st.leader_id == dst:
                st.fetch_deadline_ms = min(st.fetch_deadline_ms, self._now)
            if isinstance(st, ObserverState):
                self._observer_ask_around(st)
        elif isinstance(st, CandidateState | ProspectiveState) and st.inflight.get(dst) is request:
            del st.inflight[dst]
            st.retry_at_ms[dst] = self._now + self._fetch_interval_ms
        self.tick(self._now)

    def tick(self, now_ms: int) -> None:
        """Fire every timer due at `now_ms` (elections, fetches, re-announcements)."""
        self._now = now_ms = max(self._now, now_ms)
        st = self._role_state
        if isinstance(st, UnattachedState | ResignedState):
            if now_ms >= st.election_deadline_ms:
                self._stand()
        elif isinstance(st, CandidateState | ProspectiveState):
            if now_ms >= st.election_deadline_ms:
                self._stand()
                return
            for voter, at in sorted(st.retry_at_ms.items()):
                if now_ms >= at:
                    del st.retry_at_ms[voter]
                    self._send_vote(st, voter)
        elif isinstance(st, FollowerState):
            if now_ms >= st.stand_at_ms():
                self._stand()
                return
            self._maybe_fetch(st)
        elif isinstance(st, ObserverState):
            if st.leader_id is not None and now_ms >= st.fetch_deadline_ms:
                st = self._observer_ask_around(st)
            self._maybe_fetch(st)
        else:
            self._leader_tick(st)

    def propose(self, data: Sequence[bytes], now_ms: int) -> int:
        """Append `data` as entries of the leader's epoch; the offset of the last one."""
        self._now = max(self._now, now_ms)
        if not isinstance(self._role_state, LeaderState):
            raise NotLeaderError(self.leader_id, self.epoch)
        if not data:
            raise ValueError("nothing to propose")
        self._append_local([bytes(d) for d in data])
        self.tick(self._now)
        return self.log.end_offset() - 1

    def resign(self, now_ms: int) -> None:
        """Give up leadership (clean shutdown): EndQuorumEpoch names the successors, most caught
        up first, so the next leader is elected without waiting for a fetch timeout."""
        self._now = max(self._now, now_ms)
        st = self._role_state
        if isinstance(st, LeaderState):
            self._resign(st)

    def poll(self) -> Ready:
        """Collect what the driver must do now (see `Ready`); assumes the driver does it."""
        state: QuorumState | None = None
        if self._state_dirty:
            state, self._state_dirty = self._quorum, False
        flush = self._unflushed
        if flush:
            self._unflushed = False
            self._flushed_end = self.log.end_offset()
            if isinstance(self._role_state, LeaderState):
                self._advance_leader_hw(self._role_state)
        committed: list[Entry] = []
        if self._hw > self._applied:
            committed = self.log.read(self._applied, self._hw - self._applied)
            self._applied += len(committed)
        requests, self._outbox = self._outbox, []
        changed, self._leader_changed = self._leader_changed, False
        installed, self._installed = self._installed, None
        return Ready(state, requests, committed, flush, changed, installed)

    def snapshot_written(self, snapshot_id: SnapshotId) -> None:
        """The driver stored (`log.store_snapshot`) a snapshot of its applied state at
        `snapshot_id`: the log now starts there. An older one than the log's is ignored (a
        snapshot was installed meanwhile); one beyond what was applied is a driver bug."""
        if snapshot_id.end_offset > self._applied:
            raise ValueError(f"snapshot {snapshot_id} is beyond the applied offset {self._applied}")
        latest = self.log.latest_snapshot()
        if latest is not None and snapshot_id.end_offset <= latest.end_offset:
            return
        if self.log.epoch_at(snapshot_id.end_offset - 1) != snapshot_id.epoch:
            raise ValueError(f"snapshot {snapshot_id} does not match the log")
        self.log.adopt_snapshot(snapshot_id)

    # ------------------------------------------------------------------ transitions

    def _initial_role(self, state: QuorumState, now_ms: int) -> RoleState:
        """Restart where the persisted state says: a leader comes back resigned (its volatile
        leader state is gone), a follower follows the same leader, anyone else is unattached."""
        if not self.is_voter:
            leader = state.leader_id if state.leader_id != self.node_id else None
            return ObserverState(state.epoch, leader, now_ms + self._fetch_timeout_ms, now_ms)
        if state.leader_id == self.node_id:
            # A newer leader re-announces itself to silent voters every fetch timeout / 2:
            # waiting a fetch timeout first lets that reach us instead of our candidacy
            # deposing it (a restarted ex-leader's log is usually behind anyway).
            return ResignedState(state.epoch, self._election_deadline() + self._fetch_timeout_ms)
        if state.leader_id is not None:
            return FollowerState(
                state.epoch,
                state.leader_id,
                now_ms + self._fetch_timeout_ms,
                now_ms,
                voted_for=state.voted_for,
            )
        return UnattachedState(state.epoch, state.voted_for, self._election_deadline())

    def _election_deadline(self) -> int:
        timeout = self._election_timeout_ms
        return self._now + timeout + self._rng.randrange(max(1, timeout))

    def _transition(self, new: RoleState, quorum: QuorumState) -> None:
        before = (self.leader_id, self.epoch)
        self._role_state = new
        if quorum != self._quorum:
            self._quorum = quorum
            self._state_dirty = True
        if (self.leader_id, self.epoch) != before:
            self._leader_changed = True

    def _become_unattached(self, epoch: int) -> None:
        if self.is_voter:
            self._transition(
                UnattachedState(epoch, None, self._election_deadline()), QuorumState(epoch)
            )
        else:
            self._transition(
                ObserverState(epoch, None, self._now + self._fetch_timeout_ms, self._now),
                QuorumState(epoch),
            )

    def _become_follower(self, epoch: int, leader_id: int) -> None:
        voted = self._quorum.voted_for if epoch == self.epoch else None
        deadline = self._now + self._fetch_timeout_ms
        if self.is_voter:
            self._transition(
                FollowerState(
                    epoch,
                    leader_id,
                    deadline,
                    self._now,
                    voted_for=voted,
                    stand_jitter_ms=self._rng.randrange(max(1, self._election_timeout_ms // 2)),
                ),
                QuorumState(epoch, voted, leader_id),
            )
        else:
            self._transition(
                ObserverState(epoch, leader_id, deadline, self._now),
                QuorumState(epoch, voted, leader_id),
            )

    def _stand(self) -> None:
        """An election timeout fired: stand for the next epoch - through a pre-vote round
        first when pre-vote is on and there is anyone to ask."""
        if self._pre_vote and len(self.voters) > 1:
            self._become_prospective()
        else:
            self._become_candidate()

    def _become_prospective(self) -> None:
        # the epoch, the vote and the persisted state stay: nothing here may disrupt anyone
        previous = self._role_state
        st = ProspectiveState(
            self.epoch,
            self._quorum.voted_for,
            self._election_deadline(),
            previous.previous_leader
            if isinstance(previous, ProspectiveState)
            else previous.leader_id
            if isinstance(previous, FollowerState)
            else None,
            granted={self.node_id},
        )
        self._transition(st, self._quorum)
        for voter in sorted(self.voters - {self.node_id}):
            self._send_vote(st, voter)

    def _become_candidate(self) -> None:
        epoch = self.epoch + 1
        st = CandidateState(epoch, self._election_deadline(), granted={self.node_id})
        self._transition(st, QuorumState(epoch, self.node_id, None))
        if st.won(len(self.voters)):
            self._become_leader()
            return
        for voter in sorted(self.voters - {self.node_id}):
            self._send_vote(st, voter)

    def _become_leader(self) -> None:
        st = LeaderState(self.epoch, self._now)
        self._transition(st, QuorumState(self.epoch, self.node_id, self.node_id))
        # the epoch-start no-op: the HW may only pass entries of the leader's own epoch, and
        # this one lets it commit everything before it without waiting for a proposal
        self._append_local([b""])
        for voter in sorted(self.voters - {self.node_id}):
            st.begin_sent_ms[voter] = self._now
            self._outbox.append((voter, BeginQuorumEpochRequest(self.node_id, self.epoch)))

    def _resign(self, st: LeaderState) -> None:
        others = self.voters - {self.node_id}
        successors = tuple(
            sorted(others, key=lambda v: (-st.progress.get(v, ReplicaProgress()).end_offset, v))
        )
        self._transition(
            ResignedState(self.epoch, self._election_deadline(), successors), self._quorum
        )
        for voter in sorted(others):
            self._outbox.append(
                (voter, EndQuorumEpochRequest(self.node_id, self.epoch, successors))
            )

    def _observe(self, epoch: int, leader_id: int | None) -> bool:
        """Catch up with an epoch/leader a peer told us about; True when the role changed."""
        if leader_id == self.node_id:
            leader_id = None  # nobody can tell us we lead; only our own election does
        if epoch > self.epoch:
            if leader_id is not None:
                self._become_follower(epoch, leader_id)
            else:
                self._become_unattached(epoch)
            return True
        if epoch == self.epoch and leader_id is not None:
            st = self._role_state
            if isinstance(st, UnattachedState | CandidateState | ProspectiveState) or (
                isinstance(st, ObserverState) and st.leader_id is None
            ):
                self._become_follower(epoch, leader_id)
                return True
        return False

    # ------------------------------------------------------------------ requests

    def _handle_vote(self, req: VoteRequest) -> VoteResponse:
        if not self.is_voter or req.candidate_id not in self.voters:
            return VoteResponse(ErrorCode.INCONSISTENT_VOTER_SET, self.leader_id, self.epoch, False)
        if req.pre_vote:
            return self._handle_pre_vote(req)
        if req.candidate_epoch < self.epoch:
            return VoteResponse(ErrorCode.NONE, self.leader_id, self.epoch, False)
        st = self._role_state
        if self._pre_vote and isinstance(st, FollowerState) and self._leader_alive(st):
            # As for pre-votes: a voter that heard from its leader within the fetch timeout
            # keeps it, and keeps its epoch. A candidate that won the pre-votes may meet a voter
            # whose leader answered it since; a vote now would elect a successor while the
            # leader counts that voter as in touch (`has_quorum_contact`, leases).
            return VoteResponse(ErrorCode.NONE, self.leader_id, self.epoch, False)
        if req.candidate_epoch > self.epoch:
            self._become_unattached(req.candidate_epoch)
        st = self._role_state
        if isinstance(st, ProspectiveState):
            # a real vote in our epoch: answered as an unattached voter (our pre-vote round
            # ends; the election timer stands us again if nobody wins)
            st = UnattachedState(self.epoch, st.voted_for, st.election_deadline_ms)
            self._transition(st, self._quorum)
        granted = False
        if isinstance(st, UnattachedState):
            if st.voted_for is not None:
                granted = st.voted_for == req.candidate_id
            elif (req.last_offset_epoch, req.last_offset) >= (
                self.log.last_epoch(),
                self.log.end_offset(),
            ):
                granted = True
                st.voted_for = req.candidate_id
                st.election_deadline_ms = self._election_deadline()
                self._transition(st, QuorumState(self.epoch, req.candidate_id, None))
        return VoteResponse(ErrorCode.NONE, self.leader_id, self.epoch, granted)

    def _handle_pre_vote(self, req: VoteRequest) -> VoteResponse:
        """KIP-996: would we vote for `req`'s candidate in its epoch? Changes nothing here - no
        epoch bump, no vote recorded - whatever the answer."""
        if req.candidate_epoch <= self.epoch:
            return VoteResponse(ErrorCode.NONE, self.leader_id, self.epoch, False)
        st = self._role_state
        log_ok = (req.last_offset_epoch, req.last_offset) >= (
            self.log.last_epoch(),
            self.log.end_offset(),
        )
        if isinstance(st, LeaderState):
            granted = False  # we are the live leader
        elif isinstance(st, FollowerState):
            granted = log_ok and not self._leader_alive(st)
        else:
            granted = log_ok
        return VoteResponse(ErrorCode.NONE, self.leader_id, self.epoch, granted)

    def _leader_alive(self, st: FollowerState) -> bool:
        """The leader answered within the fetch timeout and did not resign: keep it."""
        return not st.leader_resigned and self._now < st.fetch_deadline_ms

    def _handle_begin_epoch(self, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        if req.leader_epoch < self.epoch:
            return BeginQuorumEpochResponse(
                ErrorCode.FENCED_LEADER_EPOCH, self.leader_id, self.epoch
            )
        st = self._role_state
        if req.leader_epoch == self.epoch and isinstance(st, LeaderState | ResignedState):
            # two leaders in one epoch cannot happen; refuse rather than follow
            return BeginQuorumEpochResponse(ErrorCode.INVALID_REQUEST, self.leader_id, self.epoch)
        if not self._observe(req.leader_epoch, req.leader_id):
            st = self._role_state
            if isinstance(st, FetchingState) and st.leader_id == req.leader_id:
                st.fetch_deadline_ms = self._now + self._fetch_timeout_ms
        return BeginQuorumEpochResponse(ErrorCode.NONE, self.leader_id, self.epoch)

    def _handle_end_epoch(self, req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        if req.leader_epoch < self.epoch:
            return EndQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, self.leader_id, self.epoch)
        self._observe(req.leader_epoch, req.leader_id)
        st = self._role_state
        if isinstance(st, FollowerState) and st.leader_id == req.leader_id:
            st.leader_resigned = True  # pre-votes for its successors may be granted now
            # the most caught-up successor stands at once, the others a little later, the
            # unnamed ones after a normal election timeout
            if self.node_id in req.preferred_successors:
                pos = req.preferred_successors.index(self.node_id)
                # the next ones only stand if the first failed: a full election timeout apart,
                # so a slow network does not split the votes between them
                delay = (
                    0
                    if pos == 0
                    else pos * self._election_timeout_ms
                    + self._rng.randrange(max(1, self._election_timeout_ms))
                )
                st.fetch_deadline_ms = min(st.fetch_deadline_ms, self._now + delay)
            else:
                st.fetch_deadline_ms = min(st.fetch_deadline_ms, self._election_deadline())
        return EndQuorumEpochResponse(ErrorCode.NONE, self.leader_id, self.epoch)

    def _handle_fetch(self, src: int, req: FetchRequest) -> FetchResponse:
        st = self._role_state
        if not isinstance(st, LeaderState):
            return FetchResponse(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch, self._hw
            )
        if req.current_leader_epoch >= 0 and req.current_leader_epoch != self.epoch:
            code = (
                ErrorCode.FENCED_LEADER_EPOCH
                if req.current_leader_epoch < self.epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
            return FetchResponse(code, self.node_id, self.epoch, self._hw)
        if req.fetch_offset < 0 or req.last_fetched_epoch < 0:
            return FetchResponse(ErrorCode.INVALID_REQUEST, self.node_id, self.epoch, self._hw)
        if req.current_leader_epoch == self.epoch:
            st.confirm(req.replica_id, req.leader_clock_ms, self._now)
        clock = self._now
        snapshot = self.log.latest_snapshot()
        if snapshot is not None and (
            req.fetch_offset < self.log.start_offset() or req.last_fetched_epoch < snapshot.epoch
        ):
            # what the fetcher needs next is only in the snapshot (or its log diverges below it)
            st.progress.setdefault(req.replica_id, ReplicaProgress()).last_fetch_ms = self._now
            return FetchResponse(
                ErrorCode.NONE,
                self.node_id,
                self.epoch,
                self._hw,
                snapshot_id=snapshot,
                leader_clock_ms=clock,
            )
        if req.fetch_offset > 0 or req.last_fetched_epoch > 0:
            epoch, end = self.log.end_offset_for_epoch(req.last_fetched_epoch)
            if epoch != req.last_fetched_epoch or req.fetch_offset > end:
                return FetchResponse(
                    ErrorCode.NONE,
                    self.node_id,
                    self.epoch,
                    self._hw,
                    diverging_epoch=(epoch, end),
                    leader_clock_ms=clock,
                )
        st.record_fetch(req.replica_id, req.fetch_offset, self.log.end_offset(), self._now)
        if req.replica_id in self.voters:
            self._advance_leader_hw(st)
        entries = self.log.read(req.fetch_offset, self._max_fetch_entries)
        return FetchResponse(
            ErrorCode.NONE, self.node_id, self.epoch, self._hw, entries=entries, leader_clock_ms=clock
        )

    def _handle_fetch_snapshot(self, src: int, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
        st = self._role_state
        sid = req.snapshot_id
        if not isinstance(st, LeaderState):
            return FetchSnapshotResponse(
                ErrorCode.NOT_LEADER_OR_FOLLOWER, self.leader_id, self.epoch, sid
            )
        if req.current_leader_epoch >= 0 and req.current_leader_epoch != self.epoch:
            code = (
                ErrorCode.FENCED_LEADER_EPOCH
                if req.current_leader_epoch < self.epoch
                else ErrorCode.UNKNOWN_LEADER_EPOCH
            )
            return FetchSnapshotResponse(code, self.node_id, self.epoch, sid)
        if req.position < 0:
            return FetchSnapshotResponse(
                ErrorCode.POSITION_OUT_OF_RANGE, self.node_id, self.epoch, sid
            )
        chunk = min(self._max_snapshot_chunk_bytes, max(1, req.max_bytes))
        got = self.log.read_snapshot(sid, req.position, chunk)
        if got is None:
            return FetchSnapshotResponse(
                ErrorCode.SNAPSHOT_NOT_FOUND, self.node_id, self.epoch, sid
            )
        # a voter pulling a snapshot follows us: it counts for the leader's check-quorum
        st.progress.setdefault(req.replica_id, ReplicaProgress()).last_fetch_ms = self._now
        if req.current_leader_epoch == self.epoch:
            st.confirm(req.replica_id, req.leader_clock_ms, self._now)
        data, size = got
        return FetchSnapshotResponse(
            ErrorCode.NONE, self.node_id, self.epoch, sid, size, req.position, data, self._now
        )

    # ------------------------------------------------------------------ responses

    def _handle_vote_response(self, dst: int, req: RaftRequest, resp: VoteResponse) -> None:
        st = self._role_state
        hearsay = (
            isinstance(st, ProspectiveState)
            and resp.leader_epoch == self.epoch
            and resp.leader_id == st.previous_leader
        )
        # a voter naming the leader we timed out on may just not have noticed it is gone yet:
        # following it again would keep us all waiting on it (its own BeginQuorumEpoch or a
        # fetch answer still brings us back)
        if not hearsay and self._observe(resp.leader_epoch, resp.leader_id):
            return
        st = self._role_state
        if isinstance(st, ProspectiveState) and st.inflight.get(dst) is req:
            del st.inflight[dst]
            if resp.error == ErrorCode.NONE and resp.vote_granted:
                st.granted.add(dst)
                if st.won(len(self.voters)):
                    self._become_candidate()
            else:
                st.rejected.add(dst)
            return
        if not isinstance(st, CandidateState) or st.inflight.get(dst) is not req:
            return
        del st.inflight[dst]
        if resp.error == ErrorCode.NONE and resp.vote_granted and resp.leader_epoch == st.epoch:
            st.granted.add(dst)
            if st.won(len(self.voters)):
                self._become_leader()
        else:
            st.rejected.add(dst)

    def _handle_fetch_response(self, dst: int, req: RaftRequest, resp: FetchResponse) -> None:
        st = self._role_state
        if not isinstance(st, FetchingState) or st.inflight is not req:
            self._observe(resp.leader_epoch, resp.leader_id)
            return
        assert isinstance(req, FetchRequest)
        st.fetch_done(self._now)
        if self._observe(resp.leader_epoch, resp.leader_id):
            return
        if resp.error != ErrorCode.NONE or dst != st.leader_id or resp.leader_epoch != st.epoch:
            st.next_fetch_ms = self._now + self._fetch_interval_ms
            if isinstance(st, ObserverState):
                self._observer_ask_around(st)
            return
        st.fetch_deadline_ms = self._now + self._fetch_timeout_ms
        st.leader_clock_ms = max(st.leader_clock_ms, resp.leader_clock_ms)
        if req.fetch_offset != self.log.end_offset():
            return  # our log moved since this fetch left; fetch again from where it is
        if resp.snapshot_id is not None:
            # below the leader's log start: pull its snapshot (the next fetches, at once)
            st.snapshot = SnapshotFetch(resp.snapshot_id, dst)
            return
        if resp.diverging_epoch is not None:
            epoch, end = resp.diverging_epoch
            _, local_end = self.log.end_offset_for_epoch(epoch)
            cut = min(end, local_end, self.log.end_offset())
            if cut < self._hw:
                raise RuntimeError(
                    f"leader {dst} asked to truncate to {cut}, below the high watermark {self._hw}"
                )
            self.log.truncate_to(cut)
            self._flushed_end = min(self._flushed_end, cut)
            self._unflushed = True
            return
        if resp.entries:
            if resp.entries[0].offset != self.log.end_offset():
                return
            self.log.append(resp.entries)
            self._unflushed = True
        hw = min(resp.high_watermark, self.log.end_offset())
        if hw > self._hw:
            self._hw = hw
        elif not resp.entries:
            # nothing new at all: pause before asking again (a long-polling leader already
            # waited; one answering at once must not be asked in a busy loop)
            st.next_fetch_ms = self._now + self._fetch_interval_ms

    def _handle_fetch_snapshot_response(
        self, dst: int, req: RaftRequest, resp: FetchSnapshotResponse
    ) -> None:
        st = self._role_state
        if not isinstance(st, FetchingState) or st.inflight is not req:
            self._observe(resp.leader_epoch, resp.leader_id)
            return
        assert isinstance(req, FetchSnapshotRequest)
        st.fetch_done(self._now)
        if self._observe(resp.leader_epoch, resp.leader_id):
            return
        snap = st.snapshot
        if (
            resp.error != ErrorCode.NONE
            or dst != st.leader_id
            or resp.leader_epoch != st.epoch
            or snap is None
            or resp.snapshot_id != snap.snapshot_id
            or resp.position != len(snap.data)
            or resp.position + len(resp.data) > resp.size
            or (not resp.data and resp.position < resp.size)
        ):
            # start over with a Fetch: the leader names the snapshot to get (maybe a newer one)
            st.snapshot = None
            st.next_fetch_ms = self._now + self._fetch_interval_ms
            if isinstance(st, ObserverState) and resp.error != ErrorCode.NONE:
                self._observer_ask_around(st)
            return
        st.fetch_deadline_ms = self._now + self._fetch_timeout_ms
        st.leader_clock_ms = max(st.leader_clock_ms, resp.leader_clock_ms)
        snap.data += resp.data
        if len(snap.data) < resp.size:
            return  # the next chunk goes out at once
        st.snapshot = None
        self._install_snapshot(snap.snapshot_id, bytes(snap.data))

    def _install_snapshot(self, sid: SnapshotId, data: bytes) -> None:
        """A complete snapshot from the leader: store it, restart the log at its end and have
        the driver load it (everything in it is committed)."""
        if sid.end_offset <= self._applied:
            return  # nothing new in it (our log moved on meanwhile)
        self.log.store_snapshot(sid, data)
        self.log.adopt_snapshot(sid)
        self._flushed_end = min(self._flushed_end, self.log.end_offset())
        self._unflushed = True
        self._hw = max(self._hw, sid.end_offset)
        self._applied = sid.end_offset
        self._installed = sid

    # ------------------------------------------------------------------ helpers

    def _send_vote(self, st: CandidateState | ProspectiveState, voter: int) -> None:
        if isinstance(st, ProspectiveState):
            req = VoteRequest(
                st.epoch + 1,
                self.node_id,
                self.log.last_epoch(),
                self.log.end_offset(),
                pre_vote=True,
            )
        else:
            req = VoteRequest(st.epoch, self.node_id, self.log.last_epoch(), self.log.end_offset())
        st.inflight[voter] = req
        self._outbox.append((voter, req))

    def _maybe_fetch(self, st: FetchingState) -> None:
        if st.inflight is not None:
            if self._now - st.inflight_sent_ms < self._fetch_timeout_ms:
                return
            st.fetch_done(self._now)  # lost without a failure report: give up on it
        if self._now < st.next_fetch_ms:
            return
        if st.leader_id is not None:
            dst = st.leader_id
        else:
            assert isinstance(st, ObserverState)
            ordered = sorted(self.voters)
            dst = ordered[st.next_voter % len(ordered)]
        req: FetchRequest | FetchSnapshotRequest
        clock = st.leader_clock_ms if dst == st.leader_id else -1
        if st.snapshot is not None and st.snapshot.leader_id == dst:
            req = FetchSnapshotRequest(
                self.node_id,
                st.snapshot.snapshot_id,
                len(st.snapshot.data),
                st.epoch,
                leader_clock_ms=clock,
            )
        else:
            st.snapshot = None
            req = FetchRequest(
                self.node_id, self.log.end_offset(), self.log.last_epoch(), st.epoch, clock
            )
        st.fetch_sent(dst, req, self._now)
        self._outbox.append((dst, req))

    def _observer_ask_around(self, st: ObserverState) -> ObserverState:
        """An observer whose fetch failed or went unanswered forgets the leader and asks the
        voters in turn: no EndQuorumEpoch tells an observer about a new leader, and any voter
        names it."""
        if st.leader_id is None:
            st.next_voter += 1
            return st
        ordered = sorted(self.voters)
        after = (
            ordered.index(st.leader_id) + 1 if st.leader_id in self.voters else st.next_voter + 1
        )
        new = ObserverState(
            st.epoch, None, self._now + self._fetch_timeout_ms, st.next_fetch_ms, next_voter=after
        )  # starting after the leader that failed
        self._transition(new, QuorumState(st.epoch, self._quorum.voted_for, None))
        return new

    def _leader_tick(self, st: LeaderState) -> None:
        now = self._now
        if len(self.voters) > 1:
            seen = st.quorum_contact_ms(self.voters, self.node_id, now)
            if now - seen >= self._check_quorum_ms:
                self._resign(st)
                return
        for voter in sorted(self.voters - {self.node_id}):
            last = st.progress.get(voter, ReplicaProgress()).last_fetch_ms or st.started_ms
            sent = st.begin_sent_ms.get(voter, -_NEVER)
            if now - max(last, sent) >= self._begin_timeout_ms:
                st.begin_sent_ms[voter] = now
                self._outbox.append((voter, BeginQuorumEpochRequest(self.node_id, self.epoch)))

    def _append_local(self, data: list[bytes]) -> None:
        start = self.log.end_offset()
        self.log.append([Entry(start + i, self.epoch, d) for i, d in enumerate(data)])
        self._unflushed = True

    def _advance_leader_hw(self, st: LeaderState) -> None:
        candidate = st.majority_end_offset(self.voters, self.node_id, self._flushed_end)
        if candidate > self._hw and self.log.epoch_at(candidate - 1) == self.epoch:
            self._hw = candidate
