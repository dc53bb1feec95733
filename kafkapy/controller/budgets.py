"""Partition budgets (KIP-578's `max.broker.partitions` and `max.partitions`).

Why: every partition replica costs its broker open files, memory for indexes and a fetcher
slot, and every partition costs the controller and each broker's metadata image; past some
count a broker's restart or a controller failover takes too long. KIP-578 treats the count as
a budgeted resource; Apache Kafka never shipped it (operators use a CreateTopicPolicy), so the
names are KIP-578's and the behaviour is kafkapy's:
- `max.broker.partitions`: the most partition replicas one broker may hold; a CreateTopics,
  CreatePartitions or AlterPartitionReassignments that would take a broker over it is refused
  with POLICY_VIOLATION naming the broker and by how much. A reassignment is charged for the
  replicas it adds; the ones it removes count until it completes (both exist meanwhile).
- `max.partitions`: the most partitions in the cluster (each partition once, not per replica).
- Internal topics (`__consumer_offsets`, `__transaction_state`, `__cluster_metadata`) are
  counted but never refused: refusing them would break the coordinators, not save a broker.
- Auto-created topics go through CreateTopics and are charged like any other.
Within one request the topics are charged in order, so the second of two topics that together
go over is the one refused.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from kafkapy.controller.image import MetadataImage

__all__ = [
    "DEFAULT_MAX_BROKER_PARTITIONS",
    "DEFAULT_MAX_PARTITIONS",
    "INTERNAL_TOPICS",
    "PartitionBudget",
    "replicas_per_broker",
]

#: KIP-578's default for `max.broker.partitions`: Java's Integer.MAX_VALUE, i.e. unlimited. Kept
#: until the scale measurements give a figure at which a broker's restart or a controller
#: failover becomes too slow (Kafka's own guidance is about 4,000 replicas per broker).
DEFAULT_MAX_BROKER_PARTITIONS = (1 << 31) - 1
#: KIP-578's default for `max.partitions`: unlimited, as above (Kafka's guidance: 200,000).
DEFAULT_MAX_PARTITIONS = (1 << 31) - 1
#: topics never refused by a budget
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__cluster_metadata"})


def replicas_per_broker(image: MetadataImage) -> Counter[int]:
    """How many partition replicas each broker holds (reassignments: target + removing)."""
    counts: Counter[int] = Counter()
    for topic in image.topics.values():
        for part in topic.partitions.values():
            counts.update(part.replicas)
    return counts


class PartitionBudget:
    """The budgets of one request: counts taken from the image on first use, then charged as
    the request's topics are accepted."""

    def __init__(self, image: MetadataImage, max_broker_partitions: int, max_partitions: int):
        self._image = image
        self.max_broker_partitions = max_broker_partitions
        self.max_partitions = max_partitions
        self._replicas: Counter[int] | None = None
        self._partitions = 0

    @property
    def unlimited(self) -> bool:
        return (
            self.max_broker_partitions >= DEFAULT_MAX_BROKER_PARTITIONS
            and self.max_partitions >= DEFAULT_MAX_PARTITIONS
        )

    def charge(
        self, topic: str, replicas: Iterable[Sequence[int]], new_partitions: int
    ) -> str | None:
        """Charge `topic`'s new `replicas` (one list per partition) and `new_partitions`
        partitions; why that goes over a budget (nothing charged), or None (charged)."""
        if self.unlimited:
            return None
        if self._replicas is None:
            self._replicas = replicas_per_broker(self._image)
            self._partitions = sum(len(t.partitions) for t in self._image.topics.values())
        added: Counter[int] = Counter()
        for replica_list in replicas:
            added.update(replica_list)
        if topic not in INTERNAL_TOPICS:
            reason = self._over(added, new_partitions)
            if reason is not None:
                return reason
        self._replicas.update(added)
        self._partitions += new_partitions
        return None

    def _over(self, added: Counter[int], new_partitions: int) -> str | None:
        assert self._replicas is not None
        for broker in sorted(added):
            total = self._replicas[broker] + added[broker]
            if total > self.max_broker_partitions:
                over = total - self.max_broker_partitions
                return (
                    f"broker {broker} would hold {total} partition replicas, {over} more than "
                    f"max.broker.partitions={self.max_broker_partitions}"
                )
        total = self._partitions + new_partitions
        if new_partitions and total > self.max_partitions:
            over = total - self.max_partitions
            return (
                f"the cluster would hold {total} partitions, {over} more than "
                f"max.partitions={self.max_partitions}"
            )
        return None
