"""The state every QuorumController operation works on, and the shape of its answers.

Why a separate module: broker, topic and config operations live in their own modules
(`brokers.py`, `topics.py`, `configs.py`, as Kafka splits ClusterControlManager,
ReplicationControlManager and ConfigurationControlManager) but share one uncommitted image,
one offset counter and the broker sessions. Records are applied to that image the moment they
are emitted, so a later step of the same operation (an election after a fence) sees the change.

Offsets: the controller predicts the metadata-log offset of each record it emits (one record per
log entry, proposed in order). A broker epoch is the offset of its RegisterBrokerRecord, as in
Kafka, so a broker knows it has caught up once it has applied that offset. The server checks
each prediction against the offset Raft returns and rebuilds the controller when they differ.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

from kafkapy.controller.budgets import (
    DEFAULT_MAX_BROKER_PARTITIONS,
    DEFAULT_MAX_PARTITIONS,
    PartitionBudget,
)
from kafkapy.controller.image import MetadataImage, PartitionImage, TopicImage
from kafkapy.controller.records import MetadataRecord, PartitionChangeRecord

__all__ = [
    "ControllerConfig",
    "ControllerResult",
    "ControllerState",
    "partition_budget",
    "partition_change",
]

T = TypeVar("T")

NO_LEADER = -1


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfig:
    """Controller settings (Kafka names: `broker.session.timeout.ms`, `num.partitions`,
    `default.replication.factor`, `min.insync.replicas`, `unclean.leader.election.enable`)."""

    session_timeout_ms: int = 9000
    default_partitions: int = 1
    default_replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    producer_id_block_size: int = 1000
    cluster_id: str | None = None
    delete_topic_enable: bool = True
    # Topics clients may not delete (the coordinators' internal topics).
    protected_topics: frozenset[str] = frozenset({"__consumer_offsets", "__transaction_state"})
    # The brokers' other dynamic configs: (name, value) -> why it cannot be set, None if it can
    # (the broker layer knows the keys; None here: only the controller's own two are taken).
    broker_config_check: Callable[[str, str], str | None] | None = None
    # Which of those are list-typed (APPEND / SUBTRACT), with their built-in default.
    broker_list_configs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # Which of those Kafka takes for one broker only, never as the cluster default "" (its
    # DynamicBrokerConfig.PerBrokerConfigs: listener and SASL settings).
    broker_only_configs: frozenset[str] = frozenset()
    # Group configs (KIP-848): a group's whole new override set -> why it cannot be stored, None
    # if it can (the group coordinator's table and the broker's bounds; None here: refused).
    group_config_check: Callable[[Mapping[str, str]], str | None] | None = None
    # KIP-578 partition budgets (budgets.py): `max.broker.partitions`, `max.partitions`.
    max_broker_partitions: int = DEFAULT_MAX_BROKER_PARTITIONS
    max_partitions: int = DEFAULT_MAX_PARTITIONS
    # Leader balance (balance.py): `auto.leader.rebalance.enable`,
    # `leader.imbalance.check.interval.seconds` (here in ms), and
    # `leader.imbalance.per.broker.percentage` (accepted, not applied - as Kafka 4's KRaft
    # controller).
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_ms: int = 300_000
    leader_imbalance_per_broker_percentage: int = 10
    # `remote.log.storage.system.enable` (KIP-405): without it a topic may not set
    # `remote.storage.enable=true` (INVALID_CONFIG, as Kafka's controller answers).
    remote_log_storage_system_enable: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    """Records to commit (already applied to the controller's image) and the answer to give
    once they are committed. No records means the answer can go at once."""

    records: list[MetadataRecord]
    response: T


def _departing(image: MetadataImage) -> list[int]:
    """Brokers that are not active yet lead a partition or share an ISR with others."""
    found: dict[int, None] = {}
    for topic in image.topics.values():
        for part in topic.partitions.values():
            if part.leader != NO_LEADER and not image.is_active(part.leader):
                found[part.leader] = None
            if len(part.isr) > 1:
                found.update((r, None) for r in part.isr if not image.is_active(r))
    return sorted(found)


def partition_budget(st: ControllerState) -> PartitionBudget:
    """The partition budgets for one request (budgets.py)."""
    return PartitionBudget(st.image, st.config.max_broker_partitions, st.config.max_partitions)


class ControllerState:
    """Uncommitted image + offset prediction + broker sessions (in memory only, as Kafka's
    BrokerHeartbeatManager: a new controller starts every active broker's session afresh)."""

    def __init__(
        self,
        config: ControllerConfig,
        image: MetadataImage,
        *,
        now_ms: int = 0,
        next_offset: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.config = config
        self.image = image.copy()
        self.next_offset = image.offset + 1 if next_offset is None else next_offset
        self.rng = rng if rng is not None else random.Random()
        # Last heartbeat (or registration) per broker with a live session.
        self.last_contact_ms: dict[int, int] = {
            b.id: now_ms for b in image.brokers.values() if not b.fenced
        }
        # Offset a broker in controlled shutdown must reach before it may stop.
        self.shutdown_offsets: dict[int, int] = {}
        self.placement_start = self.rng.randrange(1 << 16)
        # Brokers no longer active whose partitions still have to move off them (brokers.py),
        # in the order they left; found in the image after a controller failover.
        self.departing: dict[int, None] = dict.fromkeys(_departing(self.image))
        # When the next leader-imbalance check is due (balance.py); None: never.
        self.next_rebalance_ms: int | None = (
            now_ms + config.leader_imbalance_check_interval_ms
            if config.auto_leader_rebalance_enable
            else None
        )

    def emit(self, out: list[MetadataRecord], record: MetadataRecord) -> None:
        """Apply `record` at the next offset and queue it for commit."""
        self.image.apply(record, self.next_offset)
        self.next_offset += 1
        out.append(record)

    def new_topic_id(self) -> uuid.UUID:
        while True:
            topic_id = uuid.UUID(int=self.rng.getrandbits(128), version=4)
            if topic_id not in self.image.topics_by_id:
                return topic_id

    def unclean_allowed(self, topic: TopicImage) -> bool:
        """`unclean.leader.election.enable`: topic config, else the dynamic cluster config,
        else the controller's static setting."""
        value = topic.configs.get("unclean.leader.election.enable")
        if value is None:
            value = self.image.broker_configs.get("", {}).get("unclean.leader.election.enable")
        if value is None:
            return self.config.unclean_leader_election_enable
        return value.strip().lower() == "true"

    def partitions_with(self, broker_id: int) -> Iterator[tuple[TopicImage, int, PartitionImage]]:
        """Partitions that list `broker_id` as a replica (a snapshot: safe to emit while
        iterating)."""
        for topic in list(self.image.topics.values()):
            for pid, part in list(topic.partitions.items()):
                if broker_id in part.replicas:
                    yield topic, pid, part

    def elect(
        self,
        out: list[MetadataRecord],
        topic: TopicImage,
        partition_id: int,
        *,
        isr: tuple[int, ...] | None = None,
        preferred: bool = False,
    ) -> bool:
        """Emit the change that sets `isr` (if given) and a valid leader; True if any."""
        part = topic.partitions[partition_id]
        record = partition_change(
            topic.topic_id,
            partition_id,
            part,
            self.image.is_active,
            isr=isr,
            unclean=self.unclean_allowed(topic),
            preferred=preferred,
        )
        if record is None:
            return False
        self.emit(out, record)
        return True


def partition_change(
    topic_id: uuid.UUID,
    partition_id: int,
    part: PartitionImage,
    is_active: Callable[[int], bool],
    *,
    isr: tuple[int, ...] | None = None,
    unclean: bool = False,
    preferred: bool = False,
) -> PartitionChangeRecord | None:
    """The change record for a new ISR and the leader it implies (None if nothing changes).

    Rules (Kafka's PartitionChangeBuilder, without ELR):
    - an empty target ISR keeps the last ISR (the partition goes offline, keeping who has data);
    - the current leader stays while it is active and in the ISR (unless `preferred`);
    - otherwise the first replica, in replica order, that is in the ISR and active leads;
    - with none, `unclean` lets the first active replica outside the ISR lead (ISR = just it);
      without it the leader is -1;
    - a reassignment whose target replicas are all in the new ISR completes (replicas = the
      target, ISR within it, a target replica leads), as Kafka's builder does on every change.
    """
    target_isr = part.isr if isr is None or not isr else isr
    leader = part.leader
    if preferred:
        first = part.replicas[0] if part.replicas else NO_LEADER
        if first in target_isr and is_active(first):
            leader = first
    if leader == NO_LEADER or leader not in target_isr or not is_active(leader):
        leader = next((r for r in part.replicas if r in target_isr and is_active(r)), NO_LEADER)
        if leader == NO_LEADER and unclean:
            leader = next((r for r in part.replicas if is_active(r)), NO_LEADER)
            if leader != NO_LEADER:
                target_isr = (leader,)
    replicas = part.replicas
    if part.adding_replicas or part.removing_replicas:
        # the change that puts every target replica in the ISR completes a reassignment
        target = tuple(r for r in replicas if r not in part.removing_replicas)
        if all(r in target_isr for r in target):
            replicas = target
            target_isr = tuple(r for r in target_isr if r in target)
            if leader not in target:
                leader = next((r for r in target if r in target_isr and is_active(r)), NO_LEADER)
    new_isr = target_isr if target_isr != part.isr else None
    new_leader = leader if leader != part.leader else None
    if new_isr is None and new_leader is None and replicas == part.replicas:
        return None
    if replicas == part.replicas:
        return PartitionChangeRecord(partition_id, topic_id, isr=new_isr, leader=new_leader)
    return PartitionChangeRecord(
        partition_id,
        topic_id,
        isr=new_isr,
        leader=new_leader,
        replicas=replicas,
        adding_replicas=(),
        removing_replicas=(),
    )
