"""The steps of the roles that pull from a leader: `FollowerStep` (a voter) and
`ObserverStep` (a broker-only node), with what they share in `FetchingStep`.

The fetcher's half of log matching lives here: an answer is only taken when it is from the
leader of our epoch and our log has not moved since the fetch left; a diverging epoch truncates
the log (never below the HW); entries append only at our log end; the HW is the leader's,
capped at our log end. So does the fetcher's half of snapshot transfer (KIP-630): a fetch below
the leader's log start switches to FetchSnapshot chunks, any inconsistent chunk starts over
with a Fetch, and a complete snapshot restarts the log at its end.
"""

from __future__ import annotations

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft.log import SnapshotId
from kafkapy.raft.messages import (
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftRequest,
)
from kafkapy.raft.replica import Replica
from kafkapy.raft.state import (
    FetchingState,
    FollowerState,
    ObserverState,
    QuorumState,
    SnapshotFetch,
)
from kafkapy.raft.step import RoleStep

__all__ = ["FetchingStep", "FollowerStep", "ObserverStep"]


class FetchingStep(RoleStep):
    """One fetch in flight at a time, to the leader (or, for an observer without one, to a
    voter that may name it)."""

    st: FetchingState

    def fetch_timer_ms(self) -> int:
        """When the fetch in flight counts as lost, or the next one is due."""
        st = self.st
        if st.inflight is not None:
            return st.inflight_sent_ms + self.r.fetch_timeout_ms
        return st.next_fetch_ms

    def fetch_target(self) -> int:
        """Where the next fetch goes."""
        assert self.st.leader_id is not None
        return self.st.leader_id

    def fetch_failed(self) -> None:
        """A fetch got an error or no answer (an observer asks around for the leader)."""

    def leader_announced(self, leader_id: int) -> None:
        st = self.st
        if st.leader_id == leader_id:
            st.fetch_deadline_ms = self.r.now + self.r.fetch_timeout_ms

    def request_failed(self, dst: int, req: RaftRequest, refused: bool) -> None:
        st, r = self.st, self.r
        if st.inflight is not req:
            return
        st.fetch_done(r.now + r.fetch_interval_ms)
        self.fetch_refused(dst, refused)
        self.fetch_failed()

    def fetch_refused(self, dst: int, refused: bool) -> None:
        """`dst` gave no answer to our fetch; `refused`: nobody listens on its port."""

    def maybe_fetch(self) -> None:
        st, r = self.st, self.r
        if st.inflight is not None:
            if r.now - st.inflight_sent_ms < r.fetch_timeout_ms:
                return
            st.fetch_done(r.now)  # lost without a failure report: give up on it
        if r.now < st.next_fetch_ms:
            return
        dst = self.fetch_target()
        req: FetchRequest | FetchSnapshotRequest
        clock = st.leader_clock_ms if dst == st.leader_id else -1
        if st.snapshot is not None and st.snapshot.leader_id == dst:
            req = FetchSnapshotRequest(
                r.node_id,
                st.snapshot.snapshot_id,
                len(st.snapshot.data),
                st.epoch,
                leader_clock_ms=clock,
            )
        else:
            st.snapshot = None
            req = FetchRequest(r.node_id, r.log.end_offset(), r.log.last_epoch(), st.epoch, clock)
        st.fetch_sent(dst, req, r.now)
        r.send(dst, req)

    # ------------------------------------------------------------------ answers

    def fetch_response(self, dst: int, req: RaftRequest, resp: FetchResponse) -> None:
        st, r = self.st, self.r
        if st.inflight is not req:
            r.observe(resp.leader_epoch, resp.leader_id)
            return
        assert isinstance(req, FetchRequest)
        st.fetch_done(r.now)
        if r.observe(resp.leader_epoch, resp.leader_id):
            return
        if resp.error != ErrorCode.NONE or dst != st.leader_id or resp.leader_epoch != st.epoch:
            st.next_fetch_ms = r.now + r.fetch_interval_ms
            self.fetch_failed()
            return
        st.fetch_deadline_ms = r.now + r.fetch_timeout_ms
        st.leader_clock_ms = max(st.leader_clock_ms, resp.leader_clock_ms)
        if req.fetch_offset != r.log.end_offset():
            return  # our log moved since this fetch left; fetch again from where it is
        if resp.snapshot_id is not None:
            # below the leader's log start: pull its snapshot (the next fetches, at once)
            st.snapshot = SnapshotFetch(resp.snapshot_id, dst)
            return
        if resp.diverging_epoch is not None:
            self.truncate(dst, *resp.diverging_epoch)
            return
        self.take(resp)

    def truncate(self, leader: int, epoch: int, end: int) -> None:
        """The leader's log diverges from ours after `end` of `epoch`: cut ours there."""
        r = self.r
        _, local_end = r.log.end_offset_for_epoch(epoch)
        cut = min(end, local_end, r.log.end_offset())
        if cut < r.hw:
            raise RuntimeError(
                f"leader {leader} asked to truncate to {cut}, below the high watermark {r.hw}"
            )
        r.log.truncate_to(cut)
        r.flushed_end = min(r.flushed_end, cut)
        r.unflushed = True

    def take(self, resp: FetchResponse) -> None:
        """Append what the leader sent at our log end and follow its HW up to our log end."""
        st, r = self.st, self.r
        if resp.entries:
            if resp.entries[0].offset != r.log.end_offset():
                return
            r.log.append(resp.entries)
            r.unflushed = True
        hw = min(resp.high_watermark, r.log.end_offset())
        if hw > r.hw:
            r.hw = hw
        elif not resp.entries:
            # nothing new at all: pause before asking again (a long-polling leader already
            # waited; one answering at once must not be asked in a busy loop)
            st.next_fetch_ms = r.now + r.fetch_interval_ms

    def fetch_snapshot_response(
        self, dst: int, req: RaftRequest, resp: FetchSnapshotResponse
    ) -> None:
        st, r = self.st, self.r
        if st.inflight is not req:
            r.observe(resp.leader_epoch, resp.leader_id)
            return
        assert isinstance(req, FetchSnapshotRequest)
        st.fetch_done(r.now)
        if r.observe(resp.leader_epoch, resp.leader_id):
            return
        snap = st.snapshot
        if snap is None or not self.chunk_fits(dst, snap, resp):
            # start over with a Fetch: the leader names the snapshot to get (maybe a newer one)
            st.snapshot = None
            st.next_fetch_ms = r.now + r.fetch_interval_ms
            if resp.error != ErrorCode.NONE:
                self.fetch_failed()
            return
        st.fetch_deadline_ms = r.now + r.fetch_timeout_ms
        st.leader_clock_ms = max(st.leader_clock_ms, resp.leader_clock_ms)
        snap.data += resp.data
        if len(snap.data) < resp.size:
            return  # the next chunk goes out at once
        st.snapshot = None
        self.install_snapshot(snap.snapshot_id, bytes(snap.data))

    def chunk_fits(self, dst: int, snap: SnapshotFetch, resp: FetchSnapshotResponse) -> bool:
        """`resp` is the next chunk of the snapshot we pull, from our leader, in our epoch."""
        st = self.st
        return not (
            resp.error != ErrorCode.NONE
            or dst != st.leader_id
            or resp.leader_epoch != st.epoch
            or resp.snapshot_id != snap.snapshot_id
            or resp.position != len(snap.data)
            or resp.position + len(resp.data) > resp.size
            or (not resp.data and resp.position < resp.size)
        )

    def install_snapshot(self, sid: SnapshotId, data: bytes) -> None:
        """A complete snapshot from the leader: store it, restart the log at its end and have
        the driver load it (everything in it is committed)."""
        r = self.r
        if sid.end_offset <= r.applied:
            return  # nothing new in it (our log moved on meanwhile)
        r.log.store_snapshot(sid, data)
        r.log.adopt_snapshot(sid)
        r.flushed_end = min(r.flushed_end, r.log.end_offset())
        r.unflushed = True
        r.hw = max(r.hw, sid.end_offset)
        r.applied = sid.end_offset
        r.installed = sid


class FollowerStep(FetchingStep, state=FollowerState):
    """A voter following the leader of its epoch: fetches, and stands when the leader stays
    silent (or resigned naming it)."""

    st: FollowerState

    def __init__(self, r: Replica, st: FollowerState) -> None:
        super().__init__(r, st)
        self.st = st

    def leader_alive(self) -> bool:
        """The leader answered within the fetch timeout and did not resign: keep it."""
        return not self.st.leader_resigned and self.r.now < self.st.fetch_deadline_ms

    def deadline_ms(self) -> int:
        return min(self.fetch_timer_ms(), self.st.stand_at_ms())

    def tick(self) -> None:
        if self.r.now >= self.st.stand_at_ms():
            self.r.stand()
            return
        self.maybe_fetch()

    def keeps_leader(self) -> bool:
        # As for pre-votes: a voter that heard from its leader within the fetch timeout keeps
        # it, and keeps its epoch. A candidate that won the pre-votes may meet a voter whose
        # leader answered it since; a vote now would elect a successor while the leader counts
        # that voter as in touch (`has_quorum_contact`, leases).
        return self.r.pre_vote and self.leader_alive()

    def grants_pre_vote(self, log_ok: bool) -> bool:
        return log_ok and not self.leader_alive()

    def fetch_refused(self, dst: int, refused: bool) -> None:
        if refused and self.st.leader_id == dst:
            self.st.fetch_deadline_ms = min(self.st.fetch_deadline_ms, self.r.now)

    def leader_resigned(self, req: EndQuorumEpochRequest) -> None:
        """The most caught-up successor stands at once, the others a little later, the unnamed
        ones after a normal election timeout."""
        st, r = self.st, self.r
        if st.leader_id != req.leader_id:
            return
        st.leader_resigned = True  # pre-votes for its successors may be granted now
        if r.node_id in req.preferred_successors:
            pos = req.preferred_successors.index(r.node_id)
            # the next ones only stand if the first failed: a full election timeout apart,
            # so a slow network does not split the votes between them
            delay = (
                0
                if pos == 0
                else pos * r.election_timeout_ms + r.rng.randrange(max(1, r.election_timeout_ms))
            )
            st.fetch_deadline_ms = min(st.fetch_deadline_ms, r.now + delay)
        else:
            st.fetch_deadline_ms = min(st.fetch_deadline_ms, r.election_deadline())


class ObserverStep(FetchingStep, state=ObserverState):
    """A non-voter: fetches like a follower, never votes nor stands; without a leader it asks
    the voters in turn until one names it."""

    st: ObserverState

    def __init__(self, r: Replica, st: ObserverState) -> None:
        super().__init__(r, st)
        self.st = st

    def deadline_ms(self) -> int:
        if self.st.leader_id is None:
            return self.fetch_timer_ms()
        return min(self.fetch_timer_ms(), self.st.fetch_deadline_ms)

    def tick(self) -> None:
        if self.st.leader_id is not None and self.r.now >= self.st.fetch_deadline_ms:
            self.ask_around()
        self.maybe_fetch()

    def fetch_target(self) -> int:
        if self.st.leader_id is not None:
            return self.st.leader_id
        ordered = sorted(self.r.voters)
        return ordered[self.st.next_voter % len(ordered)]

    def fetch_failed(self) -> None:
        self.ask_around()

    def ask_around(self) -> None:
        """Forget the leader and ask the voters in turn, starting after the one that failed:
        no EndQuorumEpoch tells an observer about a new leader, and any voter names it."""
        st, r = self.st, self.r
        if st.leader_id is None:
            st.next_voter += 1
            return
        ordered = sorted(r.voters)
        after = ordered.index(st.leader_id) + 1 if st.leader_id in r.voters else st.next_voter + 1
        self.st = ObserverState(
            st.epoch, None, r.now + r.fetch_timeout_ms, st.next_fetch_ms, next_voter=after
        )
        r.transition(self.st, QuorumState(st.epoch, r.quorum.voted_for, None))
