"""`LeaderStep`: the leader serves fetches and snapshot chunks, advances the HW and checks
that a majority still hears from it.

The leader's half of log matching lives here: a fetch whose (fetch offset, last fetched epoch)
does not match our log gets the diverging epoch to truncate to; one below our log start (or
older than our snapshot's epoch) gets our snapshot id to pull instead; only a matching fetch
counts as the fetcher's progress. The HW is the offset a majority of voters reached (our own
log counted as far as it is flushed), and only moves over an entry of our epoch (5.4.2).
"""

from __future__ import annotations

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.messages import (
    BeginQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from kafkapy.raft.replica import NEVER, Replica
from kafkapy.raft.state import LeaderState, ReplicaProgress
from kafkapy.raft.step import RoleStep

__all__ = ["LeaderStep"]


def _epoch_error(request_epoch: int, epoch: int) -> ErrorCode | None:
    """A fetcher that names a leader epoch other than ours: fenced when older, unknown to us
    when newer (-1 names none)."""
    if request_epoch < 0 or request_epoch == epoch:
        return None
    if request_epoch < epoch:
        return ErrorCode.FENCED_LEADER_EPOCH
    return ErrorCode.UNKNOWN_LEADER_EPOCH


class LeaderStep(RoleStep, state=LeaderState):
    """The leader of its epoch (see `LeaderState` for its rules)."""

    led_epoch = True

    def __init__(self, r: Replica, st: LeaderState) -> None:
        super().__init__(r, st)
        self.st = st

    # ------------------------------------------------------------------ timers

    def deadline_ms(self) -> int:
        st, r = self.st, self.r
        deadline = st.quorum_contact_ms(r.voters, r.node_id, r.now) + r.check_quorum_ms
        for v in r.voters - {r.node_id}:
            last = st.progress.get(v, ReplicaProgress()).last_fetch_ms or st.started_ms
            deadline = min(
                deadline, max(last, st.begin_sent_ms.get(v, -NEVER)) + r.begin_timeout_ms
            )
        return deadline

    def tick(self) -> None:
        """Resign when no majority confirmed hearing from us within the check-quorum timeout;
        re-announce ourselves to voters that have not fetched lately."""
        st, r = self.st, self.r
        if len(r.voters) > 1:
            seen = st.quorum_contact_ms(r.voters, r.node_id, r.now)
            if r.now - seen >= r.check_quorum_ms:
                r.resign(st)
                return
        for voter in r.others():
            last = st.progress.get(voter, ReplicaProgress()).last_fetch_ms or st.started_ms
            sent = st.begin_sent_ms.get(voter, -NEVER)
            if r.now - max(last, sent) >= r.begin_timeout_ms:
                st.begin_sent_ms[voter] = r.now
                r.send(voter, BeginQuorumEpochRequest(r.node_id, r.epoch))

    # ------------------------------------------------------------------ requests

    def grants_pre_vote(self, log_ok: bool) -> bool:
        return False  # we are the live leader

    def fetch(self, src: int, req: FetchRequest) -> FetchResponse:
        st, r = self.st, self.r
        code = _epoch_error(req.current_leader_epoch, r.epoch)
        if code is not None:
            return FetchResponse(code, r.node_id, r.epoch, r.hw)
        if req.fetch_offset < 0 or req.last_fetched_epoch < 0:
            return FetchResponse(ErrorCode.INVALID_REQUEST, r.node_id, r.epoch, r.hw)
        if req.current_leader_epoch == r.epoch:
            st.confirm(req.replica_id, req.leader_clock_ms, r.now)
        clock = r.now
        snapshot = r.log.latest_snapshot()
        if snapshot is not None and (
            req.fetch_offset < r.log.start_offset() or req.last_fetched_epoch < snapshot.epoch
        ):
            # what the fetcher needs next is only in the snapshot (or its log diverges below it)
            st.progress.setdefault(req.replica_id, ReplicaProgress()).last_fetch_ms = r.now
            return FetchResponse(
                ErrorCode.NONE,
                r.node_id,
                r.epoch,
                r.hw,
                snapshot_id=snapshot,
                leader_clock_ms=clock,
            )
        if req.fetch_offset > 0 or req.last_fetched_epoch > 0:
            epoch, end = r.log.end_offset_for_epoch(req.last_fetched_epoch)
            if epoch != req.last_fetched_epoch or req.fetch_offset > end:
                return FetchResponse(
                    ErrorCode.NONE,
                    r.node_id,
                    r.epoch,
                    r.hw,
                    diverging_epoch=(epoch, end),
                    leader_clock_ms=clock,
                )
        st.record_fetch(req.replica_id, req.fetch_offset, r.log.end_offset(), r.now)
        if req.replica_id in r.voters:
            self.advance_hw()
        entries = r.log.read(req.fetch_offset, r.max_fetch_entries)
        return FetchResponse(
            ErrorCode.NONE, r.node_id, r.epoch, r.hw, entries=entries, leader_clock_ms=clock
        )

    def fetch_snapshot(self, src: int, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
        st, r = self.st, self.r
        sid = req.snapshot_id
        code = _epoch_error(req.current_leader_epoch, r.epoch)
        if code is not None:
            return FetchSnapshotResponse(code, r.node_id, r.epoch, sid)
        if req.position < 0:
            return FetchSnapshotResponse(ErrorCode.POSITION_OUT_OF_RANGE, r.node_id, r.epoch, sid)
        chunk = min(r.max_snapshot_chunk_bytes, max(1, req.max_bytes))
        got = r.log.read_snapshot(sid, req.position, chunk)
        if got is None:
            return FetchSnapshotResponse(ErrorCode.SNAPSHOT_NOT_FOUND, r.node_id, r.epoch, sid)
        # a voter pulling a snapshot follows us: it counts for the leader's check-quorum
        st.progress.setdefault(req.replica_id, ReplicaProgress()).last_fetch_ms = r.now
        if req.current_leader_epoch == r.epoch:
            st.confirm(req.replica_id, req.leader_clock_ms, r.now)
        data, size = got
        return FetchSnapshotResponse(
            ErrorCode.NONE, r.node_id, r.epoch, sid, size, req.position, data, r.now
        )

    # ------------------------------------------------------------------ leader only

    def advance_hw(self) -> None:
        st, r = self.st, self.r
        candidate = st.majority_end_offset(r.voters, r.node_id, r.flushed_end)
        if candidate > r.hw and r.log.epoch_at(candidate - 1) == r.epoch:
            r.hw = candidate

    def log_flushed(self) -> None:
        self.advance_hw()

    def resign(self) -> None:
        self.r.resign(self.st)

    def has_quorum_contact(self, now_ms: int) -> bool:
        st, r = self.st, self.r
        if len(r.voters) <= 1:
            return True
        now = max(r.now, now_ms)
        seen = st.quorum_contact_ms(r.voters, r.node_id, now, unconfirmed_ms=-NEVER)
        return now - seen < r.fetch_timeout_ms

    def replica_progress(self) -> dict[int, ReplicaProgress]:
        st, r = self.st, self.r
        out = {
            rid: ReplicaProgress(p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
            for rid, p in st.progress.items()
        }
        out[r.node_id] = ReplicaProgress(r.log.end_offset(), r.now, r.now)
        return out
