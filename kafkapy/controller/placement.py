"""Replica placement: the striped, rack-aware rules of Kafka's StripedReplicaPlacer (KIP-660).

Why its own pure module: CreateTopics and CreatePartitions place with it inside the controller,
and the reassignment proposal (`kafka-reassign-partitions --generate`'s job) runs the same rules
from the CLI over a metadata image it fetched, so both must agree without a controller.

Rules (the goals of Kafka's placer, in its order of priority):
- Replicas of a partition go to distinct racks first: replica j of a partition led from rack r
  comes from rack r+j (racks sorted by name, round robin, a broker without `broker.rack` in the
  rack None), skipping racks all of whose brokers already hold the partition. So a partition
  spans min(RF, racks) racks; uneven racks are the operator's choice (as in Kafka, a lone broker
  in its own rack gets a replica of nearly every partition).
- Leaders spread evenly over brokers: the leader of the k-th partition placed is the
  (start + k)-th broker of the *striped order*, the racks interleaved (first broker of every
  rack, then the second of every rack that has one, ...). Every broker leads once per round of
  that order, so in one placement leader counts differ by at most 1 - a stronger promise than
  Kafka's, whose placer shares its per-rack cursors between leaders and followers.
- Followers spread within their rack: a rack's k-th follower is its broker at
  (start + k + round) modulo its size, `round` the number of full rounds of the striped order
  before the partition, so the same pairs of brokers do not repeat round after round (Kafka
  reshuffles its lists once per round for the same reason). A follower placed in the leader's
  own rack (RF above the number of racks) is the next broker after the leader there.
- Only active brokers (unfenced, not shutting down) are placed on; `start` varies per call so
  the leaders of successive topics do not pile onto one broker.
`propose_reassignment` is `kafka-reassign-partitions --generate`'s job: a new placement of whole
topics over a list of target brokers with the same rules; the controller applies whatever
target it is given (racks are not checked there, as in Kafka).
With every broker in one rack these rules are plain round robin: partition k's replicas are the
consecutive brokers from start + k, which is what kafkapy placed before it knew about racks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import groupby

__all__ = ["Rack", "propose_reassignment", "racks_of", "striped_order", "striped_placement"]

#: a rack name; None for brokers without `broker.rack`
Rack = str | None


def _rack_key(rack: Rack) -> tuple[bool, str]:
    return (rack is not None, rack or "")


def racks_of(brokers: Mapping[int, Rack]) -> list[list[int]]:
    """The brokers grouped by rack: racks in name order (no rack first), ids sorted within."""
    ordered = sorted(brokers, key=lambda b: (_rack_key(brokers[b]), b))
    return [list(group) for _, group in groupby(ordered, key=lambda b: brokers[b])]


def striped_order(racks: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """(rack index, broker) in the striped order: the racks interleaved, position by position."""
    deepest = max((len(r) for r in racks), default=0)
    return [
        (i, rack[depth])
        for depth in range(deepest)
        for i, rack in enumerate(racks)
        if depth < len(rack)
    ]


def striped_placement(
    brokers: Mapping[int, Rack], count: int, replication_factor: int, start: int
) -> list[tuple[int, ...]]:
    """Replica lists of `count` new partitions, leader first, over `brokers` (id -> rack);
    `replication_factor` must be between 1 and len(brokers)."""
    if not 0 < replication_factor <= len(brokers):
        raise ValueError(f"replication factor {replication_factor} for {len(brokers)} brokers")
    racks = racks_of(brokers)
    order = striped_order(racks)
    n = len(order)
    used = [0] * len(racks)
    placed: list[tuple[int, ...]] = []
    for k in range(count):
        position = start + k
        leader_rack, leader = order[position % n]
        rnd = position // n
        replicas = [leader]
        rack = leader_rack
        while len(replicas) < replication_factor:
            rack = (rack + 1) % len(racks)
            members = racks[rack]
            if all(b in replicas for b in members):
                continue
            if rack == leader_rack:
                at = members.index(leader)
                step = next(
                    s
                    for s in range(1, len(members))
                    if members[(at + s) % len(members)] not in replicas
                )
                replicas.append(members[(at + step) % len(members)])
                continue
            pick = start + used[rack] + rnd
            used[rack] += 1
            while members[pick % len(members)] in replicas:
                pick += 1
            replicas.append(members[pick % len(members)])
        placed.append(tuple(replicas))
    return placed


def propose_reassignment(
    assignments: Mapping[str, Mapping[int, Sequence[int]]],
    brokers: Mapping[int, Rack],
    *,
    start: int = 0,
    rack_aware: bool = True,
) -> dict[str, dict[int, tuple[int, ...]]]:
    """A proposed assignment of every partition of the topics in `assignments` (topic ->
    partition -> current replicas) over the target `brokers` (id -> rack), keeping each
    topic's replication factor (its partition 0's, as Kafka's tool does). `rack_aware=False`
    is the tool's `--disable-rack-aware`. A factor above len(brokers) is a ValueError saying
    so (Kafka's InvalidReplicationFactorException)."""
    targets: Mapping[int, Rack] = brokers if rack_aware else dict.fromkeys(brokers)
    proposal: dict[str, dict[int, tuple[int, ...]]] = {}
    for index, topic in enumerate(sorted(assignments)):
        partitions = sorted(assignments[topic])
        if not partitions:
            continue
        rf = len(assignments[topic][partitions[0]])
        if rf > len(targets):
            raise ValueError(
                f"topic {topic!r}: replication factor {rf} is larger than the "
                f"{len(targets)} target brokers"
            )
        placed = striped_placement(targets, len(partitions), rf, start + index)
        proposal[topic] = dict(zip(partitions, placed, strict=True))
    return proposal
