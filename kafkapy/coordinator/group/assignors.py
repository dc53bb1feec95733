"""Server-side assignors of the consumer group protocol (KIP-848): `uniform` and `range`.

Why on the broker: with KIP-848 the coordinator computes each member's *target* assignment
itself, so clients no longer ship assignor code; the member only names one
(`ServerAssignor`), and the group uses the one most of its members chose (the first of
`group.consumer.assignors` when nobody chose).

Both take `{member_id: subscribed topics}`, `{topic: partition count}`, the previous target
(uniform only) and the racks (`Racks`: each member's `RackId`, each partition's replica
racks), and return `{member_id: {topic: partitions}}` covering every subscribed partition
exactly once. They are pure functions, so replaying the same inputs gives the same assignment.

Racks (KIP-881): a member reading a partition from a replica in its own rack fetches from
that follower (KIP-392) instead of across racks. Rack matching never changes how many
partitions each member gets: the assignor first computes the member counts as it would
without racks, then hands the partitions it is free to place (range: all of a topic's;
uniform: those no member keeps) to rack-matching members up to those counts, and the rest
to the remaining slots. Racks are used only when some member has a rack and some partition
lacks a replica in some member's rack (otherwise every choice matches equally); the layout
is then the rack-blind one. Where the subscriptions differ so much that no placement with
the same counts fills every slot from the rack-matching pass, the rack-blind assignment is
kept - balance first, as Kafka's rack-aware assignors do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["ASSIGNORS", "Assignor", "Racks", "range_assign", "uniform_assign"]

TopicAssignment = dict[str, set[int]]
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Racks:
    """What rack-aware assignment reads: `members[member_id]` its rack (None: none sent),
    `partitions[topic][p]` the racks of partition p's replicas (a topic missing: unknown)."""

    members: Mapping[str, str | None] = field(default_factory=dict)
    partitions: Mapping[str, Sequence[frozenset[str]]] = field(default_factory=dict)

    def replica_racks(self, tp: TopicPartition) -> frozenset[str]:
        racks = self.partitions.get(tp[0], ())
        return racks[tp[1]] if tp[1] < len(racks) else frozenset()

    def matches(self, member: str, tp: TopicPartition) -> bool:
        rack = self.members.get(member)
        return rack is not None and rack in self.replica_racks(tp)

    def keeps(self, members: Sequence[str], member: str, tp: TopicPartition) -> bool:
        """May `member` keep `tp` it had: it is in a replica's rack, or no member is."""
        if self.matches(member, tp):
            return True
        return not any(self.matches(m, tp) for m in members)

    def useful(self, members: Sequence[str], tps: Sequence[TopicPartition]) -> bool:
        """Does rack matching change anything: a member with a rack, and a partition whose
        replicas miss the rack of some member?"""
        racks = {r for m in members if (r := self.members.get(m)) is not None}
        return bool(racks) and any((rr := self.replica_racks(tp)) and not racks <= rr for tp in tps)


NO_RACKS = Racks()


class Assignor(Protocol):
    def __call__(
        self,
        subscriptions: Mapping[str, frozenset[str]],
        partition_counts: Mapping[str, int],
        previous: Mapping[str, Mapping[str, frozenset[int]]],
        racks: Racks = NO_RACKS,
    ) -> dict[str, TopicAssignment]: ...


def _rack_matched(
    free: Sequence[TopicPartition],
    slots: Mapping[str, int],
    eligible: Mapping[str, frozenset[str]],
    racks: Racks,
) -> dict[str, list[TopicPartition]] | None:
    """Place `free` (in order) into `slots` (member -> how many it takes): first each
    partition to the rack-matching eligible member with the most slots left, then the rest to
    any eligible member with slots left. None when some partition finds no slot (the
    rack-blind layout then stands)."""
    left = dict(slots)
    out: dict[str, list[TopicPartition]] = {m: [] for m in slots}
    rest = []
    for tp in free:
        matching = [m for m in left if left[m] > 0 and tp[0] in eligible[m] and racks.matches(m, tp)]
        if not matching:
            rest.append(tp)
            continue
        m = max(matching, key=lambda x: left[x])
        out[m].append(tp)
        left[m] -= 1
    for tp in rest:
        open_ = [m for m in sorted(left) if left[m] > 0 and tp[0] in eligible[m]]
        if not open_:
            return None
        m = max(open_, key=lambda x: left[x])
        out[m].append(tp)
        left[m] -= 1
    return out


def _add(out: dict[str, TopicAssignment], m: str, tp: TopicPartition) -> None:
    out[m].setdefault(tp[0], set()).add(tp[1])


def uniform_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Mapping[str, frozenset[int]]],
    racks: Racks = NO_RACKS,
) -> dict[str, TopicAssignment]:
    """Balanced and sticky: members keep what they had up to their fair share (floor, or floor
    + 1 for as many members as the remainder allows), the rest goes to the least loaded
    eligible member, so a membership change moves as few partitions as it can. With racks,
    a member keeps only partitions with a replica in its rack (or in no member's rack), and
the partitions nobody keeps are placed preferring members in a replica's rack."""
    members = sorted(subscriptions)
    out: dict[str, TopicAssignment] = {m: {} for m in members}
    if not members:
        return out
    every = [
        (t, p)
        for t in sorted({t for subs in subscriptions.values() for t in subs})
        if t in partition_counts
        for p in range(partition_counts[t])
    ]
    floor, extra = divmod(len(every), len(members))
    counts = dict.fromkeys(members, 0)
    taken: set[TopicPartition] = set()
    keeps = racks.keeps if racks.useful(members, every) else None
    # biggest previous owners first, so the floor + 1 slots go to those that had more
    by_previous = sorted(
        members, key=lambda m: (-sum(len(ps) for ps in previous.get(m, {}).values()), m)
    )
    for m in by_previous:
        had = sorted(
            (t, p)
            for t, ps in previous.get(m, {}).items()
            if t in subscriptions[m] and t in partition_counts
            for p in ps
            if p < partition_counts[t] and (keeps is None or keeps(members, m, (t, p)))
        )
        cap = floor + (1 if extra > 0 and len(had) > floor else 0)
        if cap > floor:
            extra -= 1
        for tp in had[:cap]:
            _add(out, m, tp)
            taken.add(tp)
        counts[m] = min(len(had), cap)
    kept = dict(counts)
    placed: dict[str, list[TopicPartition]] = {m: [] for m in members}
    for tp in every:
        if tp in taken:
            continue
        eligible = [m for m in members if tp[0] in subscriptions[m]]
        if eligible:
            m = min(eligible, key=lambda x: (counts[x], x))
            placed[m].append(tp)
            counts[m] += 1
    free = [tp for ps in placed.values() for tp in ps]
    if racks.useful(members, free):
        slots = {m: counts[m] - kept[m] for m in members}
        placed = _rack_matched(sorted(free), slots, subscriptions, racks) or placed
    for m, tps in placed.items():
        for tp in tps:
            _add(out, m, tp)
    return out


def range_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Mapping[str, frozenset[int]]],
    racks: Racks = NO_RACKS,
) -> dict[str, TopicAssignment]:
    """Per topic, contiguous ranges to the subscribed members in member id order (the first
    `count % members` get one more), as the classic RangeAssignor does. With racks (its
    KIP-881 form), each member takes the same number of partitions, rack-matching ones first
    (in partition order), the rest filling the remaining slots."""
    del previous
    out: dict[str, TopicAssignment] = {m: {} for m in subscriptions}
    topics = sorted({t for subs in subscriptions.values() for t in subs})
    for t in topics:
        if t not in partition_counts:
            continue
        eligible = sorted(m for m, subs in subscriptions.items() if t in subs)
        share, extra = divmod(partition_counts[t], len(eligible))
        slots = {m: share + (1 if i < extra else 0) for i, m in enumerate(eligible)}
        tps = [(t, p) for p in range(partition_counts[t])]
        placed = None
        if racks.useful(eligible, tps):
            placed = _rack_matched(tps, slots, {m: frozenset((t,)) for m in eligible}, racks)
        if placed is None:
            start = 0
            placed = {}
            for m in eligible:
                placed[m] = tps[start : start + slots[m]]
                start += slots[m]
        for m, mine in placed.items():
            if mine:
                out[m][t] = {p for _, p in mine}
    return out


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
