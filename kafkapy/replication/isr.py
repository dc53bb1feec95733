"""High watermark and ISR decisions of a partition leader, as pure functions.

Rules (Kafka's, KIP-101/KIP-320/KIP-841 as they apply to one leader):
1. A follower's log end offset, as the leader knows it, is the fetch offset of its latest fetch:
   a follower asks for offset N only once it holds everything below N.
2. The high watermark is the minimum log end offset over the *maximal* ISR - the committed ISR
   plus any replica whose addition is pending at the controller. Counting pending additions
   (and not yet dropping pending removals) means the HW is safe whichever way the pending
   AlterPartition ends. The HW never moves backwards, and a follower whose progress is unknown
   (-1, after a leader change) holds it where it is.
3. A follower is *caught up* at a fetch when its fetch offset reached the leader's log end
   offset, either the current one or the one the leader had at the follower's previous fetch
   (then it was caught up at that previous fetch time). A follower that has not been caught up
   within `replica.lag.time.max.ms` is out of sync and proposed for removal from the ISR.
4. A replica outside the ISR is proposed for addition once its log end offset is at least the
   HW *and* at least the first offset of the leader's current epoch (so it holds every batch
   the leader wrote as leader, none of its own divergent history), it is in sync by rule 3, and
   the controller does not consider its broker ineligible (fenced / shutting down).
5. One change at a time: while an AlterPartition is in flight no other change is proposed, and
   a change never mixes additions and removals. The leader itself is never removed.

Nothing here reads a clock or does I/O: time comes in as `now_ms` (monotonic milliseconds).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace

__all__ = [
    "UNKNOWN_OFFSET",
    "IsrChange",
    "ReplicaProgress",
    "high_watermark",
    "in_sync",
    "isr_change",
    "record_fetch",
]

UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class ReplicaProgress:
    """What the leader knows of one follower (Kafka's `Replica` state)."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0


@dataclass(frozen=True, slots=True)
class IsrChange:
    """A proposed ISR: `new_isr` keeps the replica order of the assignment."""

    new_isr: tuple[int, ...]
    added: frozenset[int]
    removed: frozenset[int]

    @property
    def is_expansion(self) -> bool:
        return bool(self.added)


def record_fetch(progress: ReplicaProgress, fetch_offset: int, leader_leo: int, now_ms: int) -> ReplicaProgress:
    """The follower's progress after a fetch at `fetch_offset` when the leader's LEO is `leader_leo`."""
    caught_up = progress.last_caught_up_ms
    if fetch_offset >= leader_leo:
        caught_up = max(caught_up, now_ms)
    elif progress.last_fetch_leader_leo >= 0 and fetch_offset >= progress.last_fetch_leader_leo:
        caught_up = max(caught_up, progress.last_fetch_ms)
    return replace(
        progress,
        log_end_offset=fetch_offset,
        last_caught_up_ms=caught_up,
        last_fetch_leader_leo=leader_leo,
        last_fetch_ms=now_ms,
    )


def in_sync(progress: ReplicaProgress, leader_leo: int, now_ms: int, lag_ms: int) -> bool:
    """Rule 3: at the leader's end, or caught up within the last `lag_ms`."""
    if progress.log_end_offset >= leader_leo:
        return True
    return now_ms - progress.last_caught_up_ms <= lag_ms


def high_watermark(
    current_hw: int,
    leader_id: int,
    leader_leo: int,
    maximal_isr: Iterable[int],
    progress: Mapping[int, ReplicaProgress],
) -> int:
    """Rule 2: min LEO over the maximal ISR (the leader counts with its own LEO), never lower
    than `current_hw`."""
    low = leader_leo
    for replica in maximal_isr:
        if replica == leader_id:
            continue
        p = progress.get(replica)
        leo = p.log_end_offset if p is not None else UNKNOWN_OFFSET
        if leo < low:
            low = leo
    return max(current_hw, low)


def isr_change(
    *,
    replicas: Collection[int],
    isr: Collection[int],
    leader_id: int,
    progress: Mapping[int, ReplicaProgress],
    leader_leo: int,
    high_watermark: int,
    epoch_start_offset: int,
    now_ms: int,
    lag_ms: int,
    ineligible: Collection[int] = (),
) -> IsrChange | None:
    """Rules 3-5: the ISR change to propose now, or None. Removals come first (a lagging
    follower holds the HW back, so dropping it is the urgent change)."""
    remove = frozenset(
        r for r in isr
        if r != leader_id and not in_sync(progress.get(r, ReplicaProgress()), leader_leo, now_ms, lag_ms)
    )
    if remove:
        return IsrChange(tuple(r for r in _ordered(replicas, isr) if r not in remove), frozenset(), remove)
    add: set[int] = set()
    for r in replicas:
        if r in isr or r == leader_id or r in ineligible:
            continue
        p = progress.get(r)
        if p is None or p.log_end_offset < 0:
            continue
        if p.log_end_offset >= high_watermark and p.log_end_offset >= epoch_start_offset and in_sync(
            p, leader_leo, now_ms, lag_ms
        ):
            add.add(r)
    if add:
        members = set(isr) | add
        return IsrChange(tuple(r for r in _ordered(replicas, members)), frozenset(add), frozenset())
    return None


def _ordered(replicas: Collection[int], members: Collection[int]) -> list[int]:
    """`members` in assignment order, any member missing from `replicas` last (as given)."""
    inside = [r for r in replicas if r in members]
    return inside + [r for r in members if r not in replicas]
