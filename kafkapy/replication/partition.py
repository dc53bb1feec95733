"""`LeaderState`: one led partition's replication bookkeeping (pure; the server owns the I/O).

Why a class around the `isr` functions: the leader must remember each follower's progress, the
committed ISR and partition epoch the controller last confirmed, and the one AlterPartition it
may have in flight (the "pending" ISR). The server feeds it events - a follower fetched, the
leader appended, the controller answered, a new metadata image arrived - and acts on what comes
back: a new high watermark to set on the log (and to wake acks=all producers and long polls
with), or an `IsrProposal` to send to the controller.

Rules:
1. The committed ISR changes only when the controller confirms it (AlterPartition response or a
   newer partition epoch in the metadata image), never on the leader's own say-so.
2. At most one proposal is in flight; its additions count in the maximal ISR for the HW at once,
   its removals only once committed (Kafka's PendingExpandIsr / PendingShrinkIsr).
3. Answers about a proposal that is no longer the pending one (superseded by metadata) are
   ignored, so a late AlterPartition response cannot roll the ISR back.
4. The HW only moves forward; every method that may move it returns the new value (None when it
   did not move).
5. An expansion whose outcome is unknown (no answer: the connection failed, the controller lost
   its leadership or timed out waiting for the commit; or an answer that does not say it was
   not applied: INVALID_UPDATE_VERSION, FENCED_LEADER_EPOCH) may be committed: the controller
   may then list its additions in the ISR and elect one of them when the leader goes, so they
   keep counting in the HW until the outcome is known (a newer partition epoch in the metadata
   image, or an answer to a resend of the same proposal), as Kafka's leader stays in
   PendingExpandIsr (forgetting it would let the HW pass what an ISR member holds).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from kafkapy.replication.isr import (
    IsrChange,
    ReplicaProgress,
    high_watermark,
    isr_change,
    record_fetch,
)

__all__ = ["IsrProposal", "LeaderState"]


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An AlterPartition to send: `new_isr` under `leader_epoch` / `partition_epoch` (the
    committed partition epoch the controller checks the change against)."""

    new_isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    change: IsrChange


class LeaderState:
    """Resource handling: none (plain data). Error handling: events about replicas outside the
    assignment are ignored (a reassignment may be racing the fetch)."""

    def __init__(
        self,
        replicas: Sequence[int],
        isr: Sequence[int],
        leader_epoch: int,
        partition_epoch: int,
        leader_id: int,
        *,
        high_watermark: int = 0,
        epoch_start_offset: int = 0,
        now_ms: int = 0,
    ) -> None:
        self.replicas: tuple[int, ...] = tuple(replicas)
        self.isr: tuple[int, ...] = tuple(isr)
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.leader_id = leader_id
        self.high_watermark = max(high_watermark, 0)
        # the first offset the leader wrote in its epoch (its LEO when it became leader)
        self.epoch_start_offset = epoch_start_offset
        # the leader's LEO as of its latest event (an append moves it on from here)
        self._leo = epoch_start_offset
        self.pending: IsrProposal | None = None
        # the pending proposal got no definitive answer: send it again (rule 5)
        self.resend_pending = False
        # ISR members start "caught up now", so a leader change does not shrink them at once
        self.progress: dict[int, ReplicaProgress] = {
            r: ReplicaProgress(last_caught_up_ms=now_ms if r in self.isr else 0)
            for r in self.replicas if r != leader_id
        }

    # -- views ------------------------------------------------------------------------------------
    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The committed ISR plus a pending proposal's additions (rule 2)."""
        if self.pending is None or not self.pending.change.added:
            return self.isr
        return self.isr + tuple(r for r in self.pending.new_isr if r not in self.isr)

    def enough_replicas(self, min_isr: int) -> bool:
        """acks=all may append: the committed ISR has at least `min.insync.replicas` members."""
        return len(self.isr) >= min_isr

    def is_follower(self, replica_id: int) -> bool:
        """`replica_id` is a follower in the assignment this leader knows (a broker that learnt
        of a reassignment adding it may fetch before the leader learnt of it)."""
        return replica_id in self.progress

    def follower_leo(self, replica_id: int) -> int:
        p = self.progress.get(replica_id)
        return p.log_end_offset if p is not None else -1

    # -- events -----------------------------------------------------------------------------------
    def on_follower_fetch(self, replica_id: int, fetch_offset: int, leader_leo: int, now_ms: int) -> int | None:
        """A follower fetched at `fetch_offset` (so it holds everything below): new HW or None."""
        p = self.progress.get(replica_id)
        if p is None:
            return None
        self.progress[replica_id] = record_fetch(p, min(fetch_offset, leader_leo), leader_leo, now_ms)
        return self._advance(leader_leo)

    def on_leader_append(self, leader_leo: int, request_ms: Mapping[int, int] | None = None) -> int | None:
        """The leader appended (its LEO is `leader_leo`): a lone-member ISR commits at once.

        `request_ms`: each follower's latest fetch request (any partition). A follower in a
        fetch session sends a partition only when its offset moves, so an idle partition's
        progress is not reported per fetch; a follower that was at the leader's end up to
        this append was caught up as of its latest request (what reporting the partition in
        that request would have recorded), so an idle partition's first append does not make
        it look lagging since its last report."""
        if request_ms:
            for r, p in self.progress.items():
                at = request_ms.get(r, 0)
                if p.log_end_offset >= self._leo and at > p.last_caught_up_ms:
                    self.progress[r] = replace(p, last_caught_up_ms=at)
        return self._advance(leader_leo)

    def propose_isr_change(
        self, leader_leo: int, now_ms: int, lag_ms: int, *, ineligible: Collection[int] = ()
    ) -> IsrProposal | None:
        """The AlterPartition to send now, if any (none while one is pending, except the resend
        of a pending proposal whose outcome is unknown); it becomes pending."""
        if self.pending is not None:
            if not self.resend_pending:
                return None
            self.resend_pending = False
            return self.pending
        change = isr_change(
            replicas=self.replicas,
            isr=self.isr,
            leader_id=self.leader_id,
            progress=self.progress,
            leader_leo=leader_leo,
            high_watermark=self.high_watermark,
            epoch_start_offset=self.epoch_start_offset,
            now_ms=now_ms,
            lag_ms=lag_ms,
            ineligible=ineligible,
        )
        if change is None:
            return None
        self.pending = IsrProposal(change.new_isr, self.leader_epoch, self.partition_epoch, change)
        return self.pending

    def isr_change_committed(
        self, proposal: IsrProposal, isr: Sequence[int], partition_epoch: int, leader_leo: int
    ) -> int | None:
        """The controller accepted `proposal` (answering with the ISR and partition epoch it
        stored, which win over what was asked): new HW or None. Stale answers are ignored."""
        if proposal is not self.pending:
            return None
        self.pending = None
        self.resend_pending = False
        if partition_epoch >= self.partition_epoch:
            self.isr = tuple(isr)
            self.partition_epoch = partition_epoch
        return self._advance(leader_leo)

    def isr_change_failed(
        self, proposal: IsrProposal, leader_leo: int, *, maybe_applied: bool = False
    ) -> int | None:
        """The controller refused the proposal (`maybe_applied` False: it says it did not apply
        it): forget it (its additions leave the maximal ISR, which may let the HW advance); a
        later `propose_isr_change` may try again. `maybe_applied`: its outcome is unknown
        (rule 5): an expansion stays pending and `propose_isr_change` resends it; a shrink is
        forgotten (its removals never counted)."""
        if proposal is not self.pending:
            return None
        if maybe_applied and proposal.change.added:
            self.resend_pending = True
            return None
        self.pending = None
        self.resend_pending = False
        return self._advance(leader_leo)

    def on_metadata(
        self, replicas: Sequence[int], isr: Sequence[int], partition_epoch: int, leader_leo: int, now_ms: int
    ) -> int | None:
        """A newer partition state from the metadata image, same leader epoch (the controller
        changed the ISR or the assignment itself): adopt it; a pending proposal is superseded."""
        if partition_epoch <= self.partition_epoch:
            return None
        self.partition_epoch = partition_epoch
        self.isr = tuple(isr)
        self.pending = None
        self.resend_pending = False
        if tuple(replicas) != self.replicas:
            self.replicas = tuple(replicas)
            self.progress = {
                r: self.progress.get(r, ReplicaProgress(last_caught_up_ms=now_ms if r in self.isr else 0))
                for r in self.replicas if r != self.leader_id
            }
        return self._advance(leader_leo)

    def _advance(self, leader_leo: int) -> int | None:
        self._leo = leader_leo
        hw = high_watermark(self.high_watermark, self.leader_id, leader_leo, self.maximal_isr, self.progress)
        if hw > self.high_watermark:
            self.high_watermark = hw
            return hw
        return None
