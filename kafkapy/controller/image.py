"""MetadataImage: the cluster state built by replaying committed metadata records.

Why one replay function for everyone: the active controller applies its own records at once
(to an uncommitted copy), and every node applies the committed ones from the Raft log; both go
through `MetadataImage.apply`, so "replay of the records == the controller's state" holds by
construction and is what the tests check.

Rules of `apply`:
- a record that contradicts the image (unknown topic or broker, stale broker epoch, a second
  topic with the same name or id) raises `MetadataApplyError` and changes nothing, so a node
  can log it and carry on with the next record;
- a `PartitionChangeRecord` with a leader bumps the leader epoch; every change record bumps the
  partition epoch;
- an ACL is kept under its id; a second ACL with that id, or with the same binding as one kept
  (the controller never writes either), and the removal of an unknown id are refused;
- a `FeatureLevelRecord` finalizes a feature at its level, and level 0 takes the finalization
  away (Kafka's rule); a negative level is refused;
- `offset` always becomes the offset of the last applied record.
An optional `MetadataDelta` collects what changed so the broker reacts only to that.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from kafkapy.controller.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    QuotaEntity,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from kafkapy.protocol.sasl import SCRAM_MECHANISM_TYPES, ScramCredential

__all__ = [
    "AclKey",
    "BrokerRegistration",
    "MetadataApplyError",
    "MetadataDelta",
    "MetadataImage",
    "PartitionImage",
    "TopicImage",
    "acl_key",
    "changed",
    "quota_entity",
]

_V = TypeVar("_V")


def changed(new: _V | None, current: _V) -> _V:
    """A PartitionChangeRecord field's effect (Kafka's): None leaves the current value."""
    return current if new is None else new

#: an ACL binding without its id: (resource type, resource name, pattern type, principal, host,
#: operation, permission type), what makes two ACLs the same
AclKey = tuple[int, str, int, str, str, int, int]


def acl_key(acl: AccessControlEntryRecord) -> AclKey:
    return (
        acl.resource_type,
        acl.resource_name,
        acl.pattern_type,
        acl.principal,
        acl.host,
        acl.operation,
        acl.permission_type,
    )


def quota_entity(pairs: QuotaEntity | list[tuple[str, str | None]]) -> QuotaEntity:
    """The canonical form of a client quota entity: its (type, name) pairs sorted by type."""
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


class MetadataApplyError(ValueError):
    """A record that does not fit the image it is applied to (the image is left unchanged)."""


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerRegistration:
    id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool = True
    in_controlled_shutdown: bool = False

    def endpoint(self, listener_name: str) -> Endpoint | None:
        """The endpoint of `listener_name`, or None if the broker does not advertise it."""
        for ep in self.endpoints:
            if ep.name == listener_name:
                return ep
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionImage:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    # an ongoing reassignment: `replicas` is the target followed by `removing_replicas`
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclasses.dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionImage] = dataclasses.field(default_factory=dict)
    configs: dict[str, str] = dataclasses.field(default_factory=dict)

    def copy(self) -> TopicImage:
        # PartitionImage is frozen, so sharing the values is safe; only the dicts are copied.
        return TopicImage(self.name, self.topic_id, dict(self.partitions), dict(self.configs))


@dataclasses.dataclass(slots=True)
class MetadataDelta:
    """What a run of records changed: names of topics created or changed (with the changed
    partitions), topics removed (their last image, so their logs can be found), brokers and
    configs touched."""

    changed_topics: set[str] = dataclasses.field(default_factory=set)
    changed_partitions: dict[str, set[int]] = dataclasses.field(default_factory=dict)
    deleted_topics: dict[uuid.UUID, TopicImage] = dataclasses.field(default_factory=dict)
    changed_brokers: set[int] = dataclasses.field(default_factory=set)
    changed_broker_configs: set[str] = dataclasses.field(default_factory=set)
    changed_group_configs: set[str] = dataclasses.field(default_factory=set)
    producer_ids_changed: bool = False
    changed_scram_users: set[str] = dataclasses.field(default_factory=set)
    changed_acls: set[uuid.UUID] = dataclasses.field(default_factory=set)
    client_quotas_changed: bool = False

    def is_empty(self) -> bool:
        return not (
            self.changed_topics
            or self.deleted_topics
            or self.changed_brokers
            or self.changed_broker_configs
            or self.changed_group_configs
            or self.producer_ids_changed
            or self.changed_scram_users
            or self.changed_acls
            or self.client_quotas_changed
        )

    def _partition(self, topic: str, partition: int) -> None:
        self.changed_topics.add(topic)
        self.changed_partitions.setdefault(topic, set()).add(partition)


@dataclasses.dataclass(slots=True)
class MetadataImage:
    brokers: dict[int, BrokerRegistration] = dataclasses.field(default_factory=dict)
    topics: dict[str, TopicImage] = dataclasses.field(default_factory=dict)
    topics_by_id: dict[uuid.UUID, str] = dataclasses.field(default_factory=dict)
    # Broker configs by resource name: "" is the cluster-wide default, else the broker id.
    broker_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # Group configs (KIP-848) by group id; a group need not exist to have them.
    group_configs: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    # SCRAM credentials by (user, mechanism name): salted keys only, what SASL logins check
    scram_credentials: dict[tuple[str, str], ScramCredential] = dataclasses.field(
        default_factory=dict
    )
    # Client quotas (key -> value) by entity, the entity in its canonical order (`quota_entity`).
    client_quotas: dict[QuotaEntity, dict[str, float]] = dataclasses.field(default_factory=dict)
    next_producer_id: int = 0
    # ACLs (StandardAuthorizer's, stored in the log) by id, and the id of each binding
    acls: dict[uuid.UUID, AccessControlEntryRecord] = dataclasses.field(default_factory=dict)
    acl_ids: dict[AclKey, uuid.UUID] = dataclasses.field(default_factory=dict)
    # Finalized feature levels (KIP-584) by feature name; only levels >= 1 are kept
    features: dict[str, int] = dataclasses.field(default_factory=dict)
    offset: int = -1

    def copy(self) -> MetadataImage:
        """An independent copy (topics and config dicts copied; frozen values shared)."""
        return MetadataImage(
            brokers=dict(self.brokers),
            topics={name: t.copy() for name, t in self.topics.items()},
            topics_by_id=dict(self.topics_by_id),
            broker_configs={k: dict(v) for k, v in self.broker_configs.items()},
            group_configs={k: dict(v) for k, v in self.group_configs.items()},
            scram_credentials=dict(self.scram_credentials),
            client_quotas={k: dict(v) for k, v in self.client_quotas.items()},
            next_producer_id=self.next_producer_id,
            acls=dict(self.acls),
            acl_ids=dict(self.acl_ids),
            features=dict(self.features),
            offset=self.offset,
        )

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        name = self.topics_by_id.get(topic_id)
        return None if name is None else self.topics[name]

    def partition(self, topic: str, partition: int) -> PartitionImage | None:
        t = self.topics.get(topic)
        return None if t is None else t.partitions.get(partition)

    def is_active(self, broker_id: int) -> bool:
        """Registered, unfenced and not shutting down: may lead and join an ISR."""
        b = self.brokers.get(broker_id)
        return b is not None and not b.fenced and not b.in_controlled_shutdown

    def apply(
        self, record: MetadataRecord, offset: int, delta: MetadataDelta | None = None
    ) -> None:
        """Replay one record at `offset` (see the module rules).

        Each record type has its own step in `_APPLY_STEPS`, one small method per record, as
        Kafka's MetadataDelta.replay dispatches by type: a step reads as the rule of its record,
        and a new record type is one method and one table entry (a test keeps the table complete).
        """
        step = _APPLY_STEPS.get(type(record))
        if step is not None:
            step(self, record, delta if delta is not None else MetadataDelta())
        self.offset = offset

    def _register_broker(self, record: RegisterBrokerRecord, d: MetadataDelta) -> None:
        self.brokers[record.broker_id] = BrokerRegistration(
            record.broker_id,
            record.broker_epoch,
            record.incarnation_id,
            record.endpoints,
            record.rack,
            record.fenced,
            False,
        )
        d.changed_brokers.add(record.broker_id)

    def _unregister_broker(self, record: UnregisterBrokerRecord, d: MetadataDelta) -> None:
        self._broker(record.broker_id, record.broker_epoch)
        del self.brokers[record.broker_id]
        d.changed_brokers.add(record.broker_id)

    def _fence_broker(self, record: FenceBrokerRecord, d: MetadataDelta) -> None:
        b = self._broker(record.id, record.epoch)
        self.brokers[b.id] = dataclasses.replace(b, fenced=True)
        d.changed_brokers.add(b.id)

    def _unfence_broker(self, record: UnfenceBrokerRecord, d: MetadataDelta) -> None:
        b = self._broker(record.id, record.epoch)
        self.brokers[b.id] = dataclasses.replace(b, fenced=False)
        d.changed_brokers.add(b.id)

    def _change_broker_registration(
        self, record: BrokerRegistrationChangeRecord, d: MetadataDelta
    ) -> None:
        """Only the fields the record carries change (None: as before)."""
        b = self._broker(record.broker_id, record.broker_epoch)
        fenced = b.fenced if record.fenced is None else record.fenced
        shutdown = b.in_controlled_shutdown
        if record.in_controlled_shutdown is not None:
            shutdown = record.in_controlled_shutdown
        self.brokers[b.id] = dataclasses.replace(b, fenced=fenced, in_controlled_shutdown=shutdown)
        d.changed_brokers.add(b.id)

    def _create_topic(self, record: TopicRecord, d: MetadataDelta) -> None:
        if record.name in self.topics:
            raise MetadataApplyError(f"topic {record.name!r} already exists")
        if record.topic_id in self.topics_by_id:
            raise MetadataApplyError(f"topic id {record.topic_id} is already in use")
        self.topics[record.name] = TopicImage(record.name, record.topic_id)
        self.topics_by_id[record.topic_id] = record.name
        d.changed_topics.add(record.name)

    def _create_partition(self, record: PartitionRecord, d: MetadataDelta) -> None:
        t = self._topic(record.topic_id)
        t.partitions[record.partition_id] = PartitionImage(
            record.replicas,
            record.isr,
            record.leader,
            record.leader_epoch,
            record.partition_epoch,
            record.adding_replicas,
            record.removing_replicas,
        )
        d._partition(t.name, record.partition_id)

    def _change_partition(self, record: PartitionChangeRecord, d: MetadataDelta) -> None:
        """A new leader bumps the leader epoch; every change bumps the partition epoch."""
        t = self._topic(record.topic_id)
        p = t.partitions.get(record.partition_id)
        if p is None:
            raise MetadataApplyError(f"no partition {record.partition_id} in topic {t.name!r}")
        t.partitions[record.partition_id] = PartitionImage(
            changed(record.replicas, p.replicas),
            changed(record.isr, p.isr),
            changed(record.leader, p.leader),
            p.leader_epoch + (1 if record.leader is not None else 0),
            p.partition_epoch + 1,
            changed(record.adding_replicas, p.adding_replicas),
            changed(record.removing_replicas, p.removing_replicas),
        )
        d._partition(t.name, record.partition_id)

    def _remove_topic(self, record: RemoveTopicRecord, d: MetadataDelta) -> None:
        """The delta keeps the topic's last image, so the broker can find its logs."""
        t = self._topic(record.topic_id)
        del self.topics[t.name]
        del self.topics_by_id[t.topic_id]
        d.changed_topics.discard(t.name)
        d.changed_partitions.pop(t.name, None)
        d.deleted_topics[t.topic_id] = t

    def _producer_ids(self, record: ProducerIdsRecord, d: MetadataDelta) -> None:
        """Producer id blocks only move forward: a reused id would merge two producers."""
        if record.next_producer_id <= self.next_producer_id:
            raise MetadataApplyError(
                f"producer id block ends at {record.next_producer_id}, "
                f"not after {self.next_producer_id}"
            )
        self.next_producer_id = record.next_producer_id
        d.producer_ids_changed = True

    def _scram_credential(self, record: UserScramCredentialRecord, d: MetadataDelta) -> None:
        key = (record.name, self._scram_mechanism(record.mechanism))
        self.scram_credentials[key] = ScramCredential(
            record.salt, record.stored_key, record.server_key, record.iterations
        )
        d.changed_scram_users.add(record.name)

    def _remove_scram_credential(
        self, record: RemoveUserScramCredentialRecord, d: MetadataDelta
    ) -> None:
        key = (record.name, self._scram_mechanism(record.mechanism))
        if self.scram_credentials.pop(key, None) is None:
            raise MetadataApplyError(f"no {key[1]} credential of user {record.name!r}")
        d.changed_scram_users.add(record.name)

    def _feature_level(self, record: FeatureLevelRecord, d: MetadataDelta) -> None:
        """Level 0 takes the finalization away (Kafka's rule); brokers read features from the
        image when they need them, so the delta records nothing."""
        if record.feature_level < 0:
            raise MetadataApplyError(
                f"feature {record.name!r} at negative level {record.feature_level}"
            )
        if record.feature_level == 0:
            self.features.pop(record.name, None)
        else:
            self.features[record.name] = record.feature_level

    def _broker(self, broker_id: int, epoch: int) -> BrokerRegistration:
        b = self.brokers.get(broker_id)
        if b is None:
            raise MetadataApplyError(f"broker {broker_id} is not registered")
        if b.epoch != epoch:
            raise MetadataApplyError(f"broker {broker_id} has epoch {b.epoch}, not {epoch}")
        return b

    @staticmethod
    def _scram_mechanism(mechanism: int) -> str:
        name = SCRAM_MECHANISM_TYPES.get(mechanism)
        if name is None:
            raise MetadataApplyError(f"unknown SCRAM mechanism type {mechanism}")
        return name

    def _topic(self, topic_id: uuid.UUID) -> TopicImage:
        t = self.topic_by_id(topic_id)
        if t is None:
            raise MetadataApplyError(f"unknown topic id {topic_id}")
        return t

    def _create_acl(self, record: AccessControlEntryRecord, d: MetadataDelta) -> None:
        key = acl_key(record)
        if record.id in self.acls:
            raise MetadataApplyError(f"ACL id {record.id} is already in use")
        if key in self.acl_ids:
            raise MetadataApplyError(f"the ACL {key} exists already as {self.acl_ids[key]}")
        self.acls[record.id] = record
        self.acl_ids[key] = record.id
        d.changed_acls.add(record.id)

    def _remove_acl(self, record: RemoveAccessControlEntryRecord, d: MetadataDelta) -> None:
        acl = self.acls.pop(record.id, None)
        if acl is None:
            raise MetadataApplyError(f"no ACL with id {record.id}")
        del self.acl_ids[acl_key(acl)]
        d.changed_acls.add(record.id)

    def _config(self, record: ConfigRecord, d: MetadataDelta) -> None:
        if record.resource_type == ConfigResourceType.TOPIC:
            t = self.topics.get(record.resource_name)
            if t is None:
                raise MetadataApplyError(f"config for unknown topic {record.resource_name!r}")
            configs = t.configs
            d.changed_topics.add(t.name)
        elif record.resource_type == ConfigResourceType.BROKER:
            configs = self.broker_configs.setdefault(record.resource_name, {})
            d.changed_broker_configs.add(record.resource_name)
        elif record.resource_type == ConfigResourceType.GROUP:
            configs = self.group_configs.setdefault(record.resource_name, {})
            d.changed_group_configs.add(record.resource_name)
        else:
            raise MetadataApplyError(f"unknown config resource type {record.resource_type}")
        if record.value is None:
            configs.pop(record.name, None)
        else:
            configs[record.name] = record.value
        if not configs and record.resource_type == ConfigResourceType.BROKER:
            del self.broker_configs[record.resource_name]
        if not configs and record.resource_type == ConfigResourceType.GROUP:
            del self.group_configs[record.resource_name]

    def _client_quota(self, record: ClientQuotaRecord, d: MetadataDelta) -> None:
        entity = quota_entity(record.entity)
        if not entity or len({t for t, _ in entity}) != len(entity):
            raise MetadataApplyError(f"bad client quota entity {record.entity!r}")
        if record.remove:
            quotas = self.client_quotas.get(entity, {})
            quotas.pop(record.key, None)
            if not quotas:
                self.client_quotas.pop(entity, None)
        else:
            self.client_quotas.setdefault(entity, {})[record.key] = record.value
        d.client_quotas_changed = True

    def broker_config(self, broker_id: int, name: str) -> str | None:
        """A dynamic broker config: the broker's own value, else the cluster default."""
        own = self.broker_configs.get(str(broker_id), {})
        if name in own:
            return own[name]
        return self.broker_configs.get("", {}).get(name)


def _no_op(image: MetadataImage, record: NoOpRecord, d: MetadataDelta) -> None:
    """A NoOpRecord only advances the committed offset (Kafka writes them so a quiet cluster's
    metadata log still shows progress); `apply` moves `offset` for every record."""


_ApplyStep = Callable[[MetadataImage, Any, MetadataDelta], None]

#: `MetadataImage.apply`'s step for each record type of `MetadataRecord`, every one of them.
_APPLY_STEPS: dict[type, _ApplyStep] = {
    RegisterBrokerRecord: MetadataImage._register_broker,
    UnregisterBrokerRecord: MetadataImage._unregister_broker,
    FenceBrokerRecord: MetadataImage._fence_broker,
    UnfenceBrokerRecord: MetadataImage._unfence_broker,
    BrokerRegistrationChangeRecord: MetadataImage._change_broker_registration,
    TopicRecord: MetadataImage._create_topic,
    PartitionRecord: MetadataImage._create_partition,
    PartitionChangeRecord: MetadataImage._change_partition,
    RemoveTopicRecord: MetadataImage._remove_topic,
    ConfigRecord: MetadataImage._config,
    ProducerIdsRecord: MetadataImage._producer_ids,
    UserScramCredentialRecord: MetadataImage._scram_credential,
    RemoveUserScramCredentialRecord: MetadataImage._remove_scram_credential,
    AccessControlEntryRecord: MetadataImage._create_acl,
    RemoveAccessControlEntryRecord: MetadataImage._remove_acl,
    ClientQuotaRecord: MetadataImage._client_quota,
    FeatureLevelRecord: MetadataImage._feature_level,
    NoOpRecord: _no_op,
}
