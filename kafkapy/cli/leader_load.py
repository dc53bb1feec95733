"""Hot partitions and leader load (beyond Kafka, which leaves this to Cruise Control): pure rules
over measured rates, used by `kafkapy cluster hot`.

Why: one hot key makes one partition, and so its leader's broker, carry far more produce and
consume traffic than the others; Kafka's preferred-leader balance counts leaderships, not load.

Rules:
- A partition's load is its measured byte rate (what its leader takes in, and what consumers
  read from it); a broker's load is the sum over the partitions it leads.
- Hot partition: a rate above `partition_factor` times its topic's median partition rate (and
  above zero). Hot broker: a load above `broker_factor` times the cluster's mean broker load.
- Balancer: leadership moves only (an in-sync replica becomes leader: preferred replica order
  plus a preferred election, no data copied). Repeatedly, of the leaderships of the most
  loaded broker, the one move to another in-sync replica that leaves the lower maximum of the
  two brokers' loads is made, while that maximum is below the most loaded broker's load; then
  it stops. So only moves that lower the top load are made, from the top broker; a partition
  hotter than the mean stays where it is (moving it would only make another broker the top)
  and its broker's other leaderships move away.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "LeaderMove",
    "PartitionLoad",
    "balance_leaders",
    "broker_loads",
    "hot_brokers",
    "hot_partitions",
    "max_over_mean",
]

TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class PartitionLoad:
    topic: str
    partition: int
    leader: int
    #: in-sync replicas in preferred order (the leader may move to any of them)
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    bytes_per_s: float
    messages_per_s: float


@dataclass(frozen=True, slots=True)
class LeaderMove:
    topic: str
    partition: int
    from_leader: int
    to_leader: int
    #: the new replica order: the new leader first (then a preferred election)
    replicas: tuple[int, ...]


def broker_loads(parts: Sequence[PartitionLoad], brokers: Sequence[int], leaders: Mapping[TP, int] | None = None) -> dict[int, float]:
    """Each broker's load (bytes/s of the partitions it leads); `leaders` overrides who leads."""
    loads = dict.fromkeys(brokers, 0.0)
    for p in parts:
        leader = leaders.get((p.topic, p.partition), p.leader) if leaders else p.leader
        if leader >= 0:
            loads[leader] = loads.get(leader, 0.0) + p.bytes_per_s
    return loads


def max_over_mean(loads: Mapping[int, float]) -> float:
    """The highest broker load over the mean (1.0: perfectly even; 0 load: 1.0)."""
    if not loads:
        return 1.0
    mean = sum(loads.values()) / len(loads)
    return max(loads.values()) / mean if mean > 0 else 1.0


def hot_partitions(parts: Sequence[PartitionLoad], partition_factor: float = 3.0) -> list[PartitionLoad]:
    """Partitions far above their topic's median rate, hottest first."""
    by_topic: dict[str, list[float]] = {}
    for p in parts:
        by_topic.setdefault(p.topic, []).append(p.bytes_per_s)
    medians = {t: statistics.median(rates) for t, rates in by_topic.items()}
    hot = [p for p in parts if p.bytes_per_s > 0 and p.bytes_per_s > partition_factor * medians[p.topic]]
    return sorted(hot, key=lambda p: -p.bytes_per_s)


def hot_brokers(loads: Mapping[int, float], broker_factor: float = 1.25) -> list[int]:
    """Brokers whose load is above `broker_factor` times the mean, most loaded first."""
    if not loads:
        return []
    mean = sum(loads.values()) / len(loads)
    return sorted((b for b, v in loads.items() if mean > 0 and v > broker_factor * mean), key=lambda b: -loads[b])


def balance_leaders(parts: Sequence[PartitionLoad], brokers: Sequence[int]) -> list[LeaderMove]:
    """Leadership moves that lower the highest broker load (see the module rules); [] when
    none does."""
    leaders = {(p.topic, p.partition): p.leader for p in parts}
    loads = broker_loads(parts, brokers)
    for _ in range(len(parts)):
        top = max(loads, key=lambda b: (loads[b], -b))
        best: tuple[float, PartitionLoad, int] | None = None
        for p in parts:
            if leaders[(p.topic, p.partition)] != top:
                continue
            for r in p.isr:
                if r == top or r not in loads:
                    continue
                worst = max(loads[top] - p.bytes_per_s, loads[r] + p.bytes_per_s)
                if worst < loads[top] and (best is None or worst < best[0]):
                    best = (worst, p, r)
        if best is None:
            break
        _, p, r = best
        loads[top] -= p.bytes_per_s
        loads[r] += p.bytes_per_s
        leaders[(p.topic, p.partition)] = r
    if max(loads.values(), default=0.0) >= max(broker_loads(parts, brokers).values(), default=0.0):
        return []  # brokers tied at the top: moving off one leaves another there
    moves = []
    for p in parts:
        new = leaders[(p.topic, p.partition)]
        if new != p.leader:
            order = (new, *(r for r in p.replicas if r != new))
            moves.append(LeaderMove(p.topic, p.partition, p.leader, new, order))
    return moves
