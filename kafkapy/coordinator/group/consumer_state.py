"""State of consumer-protocol groups (KIP-848) and how records change it.

Why a module of its own: the classic and the consumer protocol share `__consumer_offsets`, the
offsets and the group id space, but nothing of their membership; `core.replay` hands consumer
records to `apply_consumer_record` here, the same code at load and on every write.

A group's durable state is exactly its records: the group value (group epoch, target
assignment epoch, the subscribed topics' partition counts) and one value per member
(`ConsumerMemberValue`: its metadata, member epoch, state, assigned partitions, partitions
pending revocation and target). `owners` (partition -> member holding it, assigned or still
being revoked) is derived from the members on every replay; it is what keeps a partition from
being given to a new member before its previous owner released it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kafkapy.coordinator.group.records import (
    ConsumerGroupKey,
    ConsumerGroupValue,
    ConsumerMemberKey,
    ConsumerMemberValue,
    GroupRecord,
    PartitionSet,
)

__all__ = [
    "ConsumerGroup",
    "ConsumerGroupState",
    "MemberState",
    "apply_consumer_record",
    "as_dict",
    "as_set",
    "partition_set",
]

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class MemberState(enum.IntEnum):
    """Kafka's member reconciliation states."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # must revoke `pending_revocation` before moving on
    UNRELEASED_PARTITIONS = 2  # at the target epoch, waiting for others to release partitions


class ConsumerGroupState(enum.Enum):
    """The states ListGroups/ConsumerGroupDescribe show for a consumer group (Kafka's names)."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


def partition_set(assignment: Mapping[str, Iterable[int]]) -> PartitionSet:
    """The one canonical spelling of an assignment (sorted, no empty topics)."""
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()) if ps)


def as_set(ps: PartitionSet) -> set[tuple[str, int]]:
    return {(t, p) for t, parts in ps for p in parts}


def as_dict(ps: PartitionSet) -> dict[str, frozenset[int]]:
    return {t: frozenset(parts) for t, parts in ps}


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    topics: dict[str, int] = field(default_factory=dict)
    members: dict[str, ConsumerMemberValue] = field(default_factory=dict)
    # derived on replay: partition -> member holding it (assigned or pending revocation)
    owners: dict[tuple[str, int], str] = field(default_factory=dict)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch == STATIC_LEAVE_EPOCH:
                continue  # a static member gone for a restart holds its assignment
            if m.member_epoch != self.assignment_epoch or m.state != MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def static_member(self, instance_id: str) -> ConsumerMemberValue | None:
        for m in self.members.values():
            if m.instance_id == instance_id:
                return m
        return None

    def member_id_of(self, instance_id: str) -> str | None:
        for member_id, m in self.members.items():
            if m.instance_id == instance_id:
                return member_id
        return None

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topics}

    def _set_member(self, member_id: str, value: ConsumerMemberValue | None) -> None:
        old = self.members.pop(member_id, None)
        if old is not None:
            for tp in as_set(old.assigned) | as_set(old.pending_revocation):
                if self.owners.get(tp) == member_id:
                    del self.owners[tp]
        if value is not None:
            self.members[member_id] = value
            for tp in as_set(value.assigned) | as_set(value.pending_revocation):
                self.owners[tp] = member_id


def apply_consumer_record(groups: dict[str, ConsumerGroup], record: GroupRecord) -> None:
    """Replay one consumer-group record into `groups` (the only place their state changes)."""
    key, value = record.key, record.value
    if isinstance(key, ConsumerGroupKey):
        if value is None:
            groups.pop(key.group_id, None)
            return
        assert isinstance(value, ConsumerGroupValue)
        group = groups.get(key.group_id)
        if group is None:
            group = groups[key.group_id] = ConsumerGroup(key.group_id)
        group.group_epoch = value.group_epoch
        group.assignment_epoch = value.assignment_epoch
        group.topics = dict(value.topics)
        return
    assert isinstance(key, ConsumerMemberKey)
    group = groups.get(key.group_id)
    if group is None:
        if value is None:
            return
        group = groups[key.group_id] = ConsumerGroup(key.group_id)
    assert value is None or isinstance(value, ConsumerMemberValue)
    group._set_member(key.member_id, value)
