"""Leader balance: `auto.leader.rebalance.enable` and `leader.imbalance.check.interval.seconds`
as Kafka 4's KRaft controller applies them.

Why: after a broker restarts, the partitions it led stay with the replicas that took over, so
one broker ends up leading far more than its share; the preferred replica (the first of the
assignment, spread evenly by placement) should lead again once it can.

Rules (Kafka's QuorumController.maybeScheduleNextBalancePartitionLeaders and
ReplicationControlManager.maybeBalancePartitionLeaders):
- A partition is imbalanced when its preferred replica is not its leader but is in its ISR and
  active (unfenced, not shutting down).
- With `auto.leader.rebalance.enable`, a check runs `leader.imbalance.check.interval.seconds`
  after the controller became active and then after every check; it runs a preferred election
  for every imbalanced partition, at most `MAX_ELECTIONS_PER_IMBALANCE` per operation - when
  more remain, the next check is due at once (Kafka reschedules immediately).
- `leader.imbalance.per.broker.percentage` is accepted and ignored, as Kafka 4's KRaft
  controller ignores it (only the ZooKeeper-era controller compared each broker's share of
  non-preferred leaders with it): every imbalanced partition is moved at each check.
The state is the controller's (in memory): a new active controller starts its interval afresh.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from kafkapy.controller.image import TopicImage
from kafkapy.controller.records import MetadataRecord
from kafkapy.controller.state import ControllerResult, ControllerState, partition_change

__all__ = [
    "MAX_ELECTIONS_PER_IMBALANCE",
    "LeaderMove",
    "RebalanceReply",
    "imbalanced_partitions",
    "rebalance_leaders",
]

#: Kafka's ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE: preferred elections per
#: operation (one bounded batch of records)
MAX_ELECTIONS_PER_IMBALANCE = 1000


@dataclasses.dataclass(frozen=True, slots=True)
class LeaderMove:
    topic: str
    partition: int
    from_leader: int
    to_leader: int


@dataclasses.dataclass(frozen=True, slots=True)
class RebalanceReply:
    """The leaderships moved, and whether imbalanced partitions remain for an immediate next
    check (`more`)."""

    moved: list[LeaderMove]
    more: bool = False


def imbalanced_partitions(st: ControllerState) -> Iterator[tuple[TopicImage, int]]:
    """Partitions whose preferred replica is in the ISR and active but does not lead."""
    for topic in list(st.image.topics.values()):
        for pid, part in list(topic.partitions.items()):
            if not part.replicas:
                continue
            first = part.replicas[0]
            if part.leader != first and first in part.isr and st.image.is_active(first):
                yield topic, pid


def rebalance_leaders(st: ControllerState, now_ms: int) -> ControllerResult[RebalanceReply]:
    """One leader-imbalance check if it is due at `now_ms` (see the module rules)."""
    due = st.next_rebalance_ms
    if not st.config.auto_leader_rebalance_enable or due is None or now_ms < due:
        return ControllerResult([], RebalanceReply([]))
    records: list[MetadataRecord] = []
    moved: list[LeaderMove] = []
    more = False
    for topic, pid in imbalanced_partitions(st):
        if len(moved) == MAX_ELECTIONS_PER_IMBALANCE:
            more = True
            break
        part = topic.partitions[pid]
        record = partition_change(topic.topic_id, pid, part, st.image.is_active, preferred=True)
        if record is None or record.leader is None:
            continue
        st.emit(records, record)
        moved.append(LeaderMove(topic.name, pid, part.leader, record.leader))
    interval = st.config.leader_imbalance_check_interval_ms
    st.next_rebalance_ms = now_ms if more else now_ms + interval
    return ControllerResult(records, RebalanceReply(moved, more))
