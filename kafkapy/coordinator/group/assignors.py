"""Server-side assignors of the consumer group protocol (KIP-848): `uniform` and `range`.

Why on the broker: with KIP-848 the coordinator computes each member's *target* assignment
itself, so clients no longer ship assignor code; the member only names one
(`ServerAssignor`), and the group uses the one most of its members chose (the first of
`group.consumer.assignors` when nobody chose).

Both take `{member_id: subscribed topics}`, `{topic: partition count}` and (uniform only) the
previous target, and return `{member_id: {topic: partitions}}` covering every subscribed
partition exactly once. They are pure functions, so replaying the same inputs gives the same
assignment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["ASSIGNORS", "Assignor", "range_assign", "uniform_assign"]

TopicAssignment = dict[str, set[int]]
Assignor = Callable[
    [Mapping[str, frozenset[str]], Mapping[str, int], Mapping[str, Mapping[str, frozenset[int]]]],
    dict[str, TopicAssignment],
]


def uniform_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Mapping[str, frozenset[int]]],
) -> dict[str, TopicAssignment]:
    """Balanced and sticky: members keep what they had up to their fair share (floor, or floor
    + 1 for as many members as the remainder allows), the rest goes to the least loaded
    eligible member, so a membership change moves as few partitions as it can."""
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
    taken: set[tuple[str, int]] = set()
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
            if p < partition_counts[t]
        )
        cap = floor + (1 if extra > 0 and len(had) > floor else 0)
        if cap > floor:
            extra -= 1
        for tp in had[:cap]:
            out[m].setdefault(tp[0], set()).add(tp[1])
            taken.add(tp)
        counts[m] = min(len(had), cap)
    for t, p in every:
        if (t, p) in taken:
            continue
        eligible = [m for m in members if t in subscriptions[m]]
        if not eligible:
            continue
        m = min(eligible, key=lambda x: (counts[x], x))
        out[m].setdefault(t, set()).add(p)
        counts[m] += 1
    return out


def range_assign(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Mapping[str, frozenset[int]]],
) -> dict[str, TopicAssignment]:
    """Per topic, contiguous ranges to the subscribed members in member id order (the first
    `count % members` get one more), as the classic RangeAssignor does."""
    del previous
    out: dict[str, TopicAssignment] = {m: {} for m in subscriptions}
    topics = sorted({t for subs in subscriptions.values() for t in subs})
    for t in topics:
        if t not in partition_counts:
            continue
        eligible = sorted(m for m, subs in subscriptions.items() if t in subs)
        share, extra = divmod(partition_counts[t], len(eligible))
        start = 0
        for i, m in enumerate(eligible):
            n = share + (1 if i < extra else 0)
            if n:
                out[m][t] = set(range(start, start + n))
            start += n
    return out


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
