"""ConsumerGroupHeartbeat and ConsumerGroupDescribe (KIP-848) as plain state-machine operations.

Rules (Kafka's GroupMetadataManager, in its order):

1. Epochs. The group epoch counts changes that need a new assignment (a member joined, left,
   changed its subscription or assignor, a subscribed topic's partition count changed); the
   coordinator then computes the target assignment at once with the group's server-side
   assignor, so the assignment epoch catches up with the group epoch in the same operation.
   A member's epoch is the assignment epoch it has reconciled to.
2. Reconciliation (incremental, cooperative): a member first revokes what its target no longer
   holds (state UNREVOKED_PARTITIONS, epoch unchanged) and moves to the new epoch only when a
   heartbeat's owned partitions show none of them; then it gets the target's partitions that
   no other member still holds (those wait: UNRELEASED_PARTITIONS). So no partition is ever
   held by two members.
3. Fencing. Epoch 0 joins (or rejoins); -1 leaves; -2 leaves a static member, which keeps its
   assignment for the session timeout so a restart with the same `group.instance.id` takes it
   over without a rebalance (another live member with that instance id: UNRELEASED_INSTANCE_ID).
   An unknown member id is UNKNOWN_MEMBER_ID; an epoch other than the member's (or its previous
   one with owned partitions it still has) is FENCED_MEMBER_EPOCH.
4. Timers: each heartbeat restarts the member's session timeout; a member revoking longer than
   its rebalance timeout is fenced. Fencing removes the member and bumps the group epoch.
5. A classic group with members keeps its id: a heartbeat for it is GROUP_ID_NOT_FOUND, and a
   JoinGroup for a consumer group with members is INCONSISTENT_GROUP_PROTOCOL (coordinator.py).
   An empty consumer group is simply replaced by a classic one that joins (and vice versa).

Racks (KIP-881): the assignor gets each member's `RackId` and the subscribed partitions'
replica racks (from the metadata image) and prefers members in a replica's rack (assignors.py);
a member changing its rack bumps the group epoch.

Not yet: regular-expression subscriptions (SubscribedTopicRegex -> INVALID_REQUEST),
client-side assignors, online upgrade of a classic group with members.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from kafkapy.coordinator.group import lifecycle_log as events
from kafkapy.coordinator.group.assignors import ASSIGNORS, Racks
from kafkapy.coordinator.group.consumer_state import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    MemberState,
    as_dict,
    as_set,
    partition_set,
)
from kafkapy.coordinator.group.core import TimerKey, TimerKind
from kafkapy.coordinator.group.group_configs import group_setting
from kafkapy.coordinator.group.offsets import OffsetOps
from kafkapy.coordinator.group.records import (
    ConsumerGroupKey,
    ConsumerGroupValue,
    ConsumerMemberKey,
    ConsumerMemberValue,
    GroupRecord,
)
from kafkapy.coordinator.group.results import Result
from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "ConsumerGroupOps",
    "DescribedConsumerGroup",
    "DescribedConsumerMember",
    "HeartbeatResult",
    "new_member_id",
]

PartitionCounts = Callable[[str], int | None]
#: a topic's partitions' replica racks, by partition (None: unknown topic)
ReplicaRacks = Callable[[str], Sequence[frozenset[str]] | None]


def new_member_id() -> str:
    """A Kafka-style Uuid string (22 url-safe base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    # topic -> partitions; None = unchanged since the member's last full view
    assignment: dict[str, list[int]] | None = None


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeat:
    """What one ConsumerGroupHeartbeat asks; None fields mean "unchanged" (Kafka's rule)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topics: list[str] | None
    subscribed_regex: str | None
    server_assignor: str | None
    owned: Mapping[str, Iterable[int]] | None
    client_id: str
    client_host: str
    replica_racks: ReplicaRacks | None = None

    def fail(self, code: ErrorCode, message: str) -> HeartbeatResult:
        return HeartbeatResult(code, message, self.member_id or None, self.member_epoch)

    def applied_to(self, member: ConsumerMemberValue | None) -> ConsumerMemberValue:
        """The member with this heartbeat's fields (a new member from them when None)."""
        base = member or ConsumerMemberValue(
            self.instance_id,
            self.rack_id,
            self.client_id,
            self.client_host,
            self.rebalance_timeout_ms,
            self.server_assignor,
            (),
            0,
            0,
            MemberState.STABLE,
        )
        return replace(
            base,
            instance_id=base.instance_id if self.instance_id is None else self.instance_id,
            rack_id=base.rack_id if self.rack_id is None else self.rack_id,
            client_id=self.client_id,
            client_host=self.client_host,
            rebalance_timeout_ms=(
                self.rebalance_timeout_ms
                if self.rebalance_timeout_ms > 0
                else base.rebalance_timeout_ms
            ),
            server_assignor=base.server_assignor
            if self.server_assignor is None
            else self.server_assignor,
            subscribed_topics=(
                base.subscribed_topics
                if self.subscribed_topics is None
                else tuple(sorted(set(self.subscribed_topics)))
            ),
        )


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topics: tuple[str, ...]
    assignment: dict[str, list[int]]
    target_assignment: dict[str, list[int]]


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    error: ErrorCode
    group_id: str
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()
    message: str | None = None


def _listing(ps: Iterable[tuple[str, Iterable[int]]]) -> dict[str, list[int]]:
    return {t: sorted(parts) for t, parts in ps}


class ConsumerGroupOps(OffsetOps):
    """The KIP-848 operations; `GroupCoordinator` inherits them beside the classic ones."""

    #: the replica-rack lookup the last heartbeat brought (a view of the live metadata), for
    #: the assignments a timer computes (a member fenced by its session timeout)
    _replica_racks: ReplicaRacks | None = None

    # -- ConsumerGroupHeartbeat ----------------------------------------------------------

    def consumer_group_heartbeat(
        self,
        *,
        group_id: str,
        member_id: str,
        member_epoch: int,
        instance_id: str | None,
        rack_id: str | None,
        rebalance_timeout_ms: int,
        subscribed_topics: list[str] | None,
        subscribed_regex: str | None = None,
        server_assignor: str | None,
        owned: Mapping[str, Iterable[int]] | None,
        client_id: str,
        client_host: str,
        partitions_of: PartitionCounts,
        now_ms: int,
        replica_racks: ReplicaRacks | None = None,
    ) -> Result[HeartbeatResult]:
        """One heartbeat: join, leave, or reconcile one step; see the module rules.
        `replica_racks` feeds the assignor's rack matching (KIP-881; None: racks unknown)."""
        if replica_racks is not None:
            self._replica_racks = replica_racks
        hb = ConsumerHeartbeat(
            group_id,
            member_id,
            member_epoch,
            instance_id,
            rack_id,
            rebalance_timeout_ms,
            subscribed_topics,
            subscribed_regex,
            server_assignor,
            owned,
            client_id,
            client_host,
            replica_racks,
        )
        return self._result(self._heartbeat(hb, partitions_of, now_ms))

    def _heartbeat(
        self, hb: ConsumerHeartbeat, partitions_of: PartitionCounts, now_ms: int
    ) -> HeartbeatResult:
        refused = self._refusal(hb)
        if refused is not None:
            return hb.fail(*refused)
        group = self.consumer_groups.get(hb.group_id)
        if hb.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(group, hb, partitions_of)
        if group is None:
            if hb.member_epoch != 0:
                return hb.fail(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} not found.")
            if self.config.consumer_max_size < 1:
                return hb.fail(ErrorCode.GROUP_MAX_SIZE_REACHED, "the group is full")
            self._write_group(ConsumerGroup(hb.group_id), 0, 0, {})
            group = self.consumer_groups[hb.group_id]
        member_id = hb.member_id or new_member_id()
        admitted = self._admit(group, member_id, hb)
        if isinstance(admitted, HeartbeatResult):
            return admitted
        return self._step(group, member_id, admitted, hb, partitions_of, now_ms)

    def _refusal(self, hb: ConsumerHeartbeat) -> tuple[ErrorCode, str] | None:
        """Why the request itself is refused, before any group state is looked at."""
        if not hb.group_id:
            return ErrorCode.INVALID_REQUEST, "GroupId can't be empty."
        if hb.subscribed_regex:  # librdkafka sends "" for "no regex"
            return ErrorCode.INVALID_REQUEST, "regex subscriptions are not supported yet"
        if (
            hb.server_assignor is not None
            and hb.server_assignor not in self.config.consumer_assignors
        ):
            return ErrorCode.UNSUPPORTED_ASSIGNOR, f"assignor {hb.server_assignor} not enabled"
        if hb.member_epoch < STATIC_LEAVE_EPOCH:
            return ErrorCode.INVALID_REQUEST, f"invalid MemberEpoch {hb.member_epoch}"
        if hb.member_epoch != 0 and not hb.member_id:
            return ErrorCode.INVALID_REQUEST, "MemberId can't be empty."
        if hb.member_epoch == 0 and hb.subscribed_topics is None:
            return ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set on join."
        classic = self.groups.get(hb.group_id)
        if classic is not None and (classic.members or classic.pending_members):
            return ErrorCode.GROUP_ID_NOT_FOUND, f"Group {hb.group_id} is not a consumer group."
        return None

    def _leave(
        self, group: ConsumerGroup | None, hb: ConsumerHeartbeat, partitions_of: PartitionCounts
    ) -> HeartbeatResult:
        """Epoch -1 removes the member; -2 keeps a static member's assignment for its successor."""
        member = None if group is None else group.members.get(hb.member_id)
        if group is None or member is None:
            return hb.fail(ErrorCode.UNKNOWN_MEMBER_ID, f"unknown member {hb.member_id}")
        if hb.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            left = replace(
                member, member_epoch=STATIC_LEAVE_EPOCH, previous_member_epoch=member.member_epoch
            )
            self._write_member(group, hb.member_id, left)
            self._cancel((TimerKind.CONSUMER_REVOCATION, hb.group_id, hb.member_id))
        else:
            events.consumer_member_removed(group.group_id, hb.member_id, member.client_id, events.LEFT)
            self._remove_consumer_member(group, hb.member_id, partitions_of, hb.replica_racks)
        return HeartbeatResult(ErrorCode.NONE, None, hb.member_id, hb.member_epoch, 0)

    def _admit(
        self, group: ConsumerGroup, member_id: str, hb: ConsumerHeartbeat
    ) -> ConsumerMemberValue | HeartbeatResult | None:
        """The member as it stands (None: joining), or the refusal: a full group, an instance id
        still held, an unknown member, a fenced epoch. A restarted static member takes over its
        predecessor's assignment here."""
        member = group.members.get(member_id)
        if hb.member_epoch == 0:
            if hb.instance_id is not None:
                holder = group.member_id_of(hb.instance_id)
                if holder is not None and holder != member_id:
                    old = group.members[holder]
                    if old.member_epoch != STATIC_LEAVE_EPOCH:
                        return hb.fail(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"instance {hb.instance_id} is still held by member {holder}",
                        )
                    self._write_member(group, holder, None)
                    self._cancel_consumer_timers(hb.group_id, holder)
                    member = replace(old, member_epoch=old.previous_member_epoch)
                    self._write_member(group, member_id, member)
            if member is None and len(group.members) >= self.config.consumer_max_size:
                return hb.fail(ErrorCode.GROUP_MAX_SIZE_REACHED, "the group is full")
        elif member is None:
            return hb.fail(ErrorCode.UNKNOWN_MEMBER_ID, f"unknown member {member_id}")
        elif hb.member_epoch != member.member_epoch:
            owned_set = {(t, p) for t, ps in (hb.owned or {}).items() for p in ps}
            if not (
                hb.member_epoch == member.previous_member_epoch
                and hb.owned is not None
                and owned_set <= as_set(member.assigned)
            ):
                return hb.fail(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"epoch {hb.member_epoch} is not the member's epoch {member.member_epoch}",
                )
        return member

    def _step(
        self,
        group: ConsumerGroup,
        member_id: str,
        member: ConsumerMemberValue | None,
        hb: ConsumerHeartbeat,
        partitions_of: PartitionCounts,
        now_ms: int,
    ) -> HeartbeatResult:
        """Write the member's new fields, refresh the target assignment (a new group epoch when
        the member joined or changed what it subscribes to), reconcile one step, restart its
        timers, and answer with its assignment when it changed or the member needs a full view."""
        updated = hb.applied_to(member)
        if updated != member:
            self._write_member(group, member_id, updated)
        if member is None:
            events.consumer_member_joined(group.group_id, member_id, updated.client_id,
                                          updated.client_host, len(group.members))
        bump = member is None or (
            updated.subscribed_topics != member.subscribed_topics
            or updated.server_assignor != member.server_assignor
            or updated.rack_id != member.rack_id
        )
        self._refresh_assignment(group, partitions_of, force_bump=bump, replica_racks=hb.replica_racks)
        before = group.members[member_id]
        after = self._reconcile(group, member_id, before, hb.owned)
        if after != before:
            self._write_member(group, member_id, after)
        self._schedule(
            (TimerKind.CONSUMER_SESSION, hb.group_id, member_id),
            now_ms + group_setting(self.config, hb.group_id, "consumer.session.timeout.ms"),
        )
        revoking_key: TimerKey = (TimerKind.CONSUMER_REVOCATION, hb.group_id, member_id)
        if after.state == MemberState.UNREVOKED_PARTITIONS:
            if self._deadline(revoking_key) is None:
                self._schedule(revoking_key, now_ms + after.rebalance_timeout_ms)
        else:
            self._cancel(revoking_key)
        full = hb.member_epoch == 0 or hb.owned is not None
        changed = member is None or after.assigned != member.assigned
        return HeartbeatResult(
            ErrorCode.NONE,
            None,
            member_id,
            after.member_epoch,
            group_setting(self.config, hb.group_id, "consumer.heartbeat.interval.ms"),
            _listing(after.assigned) if (full or changed) else None,
        )

    # -- epochs, target assignment and reconciliation -------------------------------------

    def _write_member(
        self, group: ConsumerGroup, member_id: str, value: ConsumerMemberValue | None
    ) -> None:
        self._write(GroupRecord(ConsumerMemberKey(group.group_id, member_id), value))

    def _write_group(
        self, group: ConsumerGroup, epoch: int, assignment_epoch: int, topics: Mapping[str, int]
    ) -> None:
        self._write(
            GroupRecord(
                ConsumerGroupKey(group.group_id),
                ConsumerGroupValue(epoch, assignment_epoch, tuple(sorted(topics.items()))),
            )
        )

    def group_assignor(self, group: ConsumerGroup) -> str:
        """The assignor most members chose (ties: the configured order), else the default."""
        configured = self.config.consumer_assignors
        votes = [m.server_assignor for m in group.members.values() if m.server_assignor]
        if not votes:
            return configured[0]
        return max(configured, key=lambda a: (votes.count(a), -configured.index(a)))

    def _refresh_assignment(
        self,
        group: ConsumerGroup,
        partitions_of: PartitionCounts,
        *,
        force_bump: bool,
        replica_racks: ReplicaRacks | None = None,
    ) -> None:
        """Bump the group epoch if membership or topic metadata changed, and compute the new
        target assignment for it right away (so the assignment epoch equals the group epoch)."""
        topics: dict[str, int] = {}
        for t in sorted(group.subscribed_topics()):
            n = partitions_of(t)
            if n is not None and n > 0:
                topics[t] = n
        if not force_bump and topics == group.topics:
            return
        epoch = group.group_epoch + 1
        assignor = ASSIGNORS[self.group_assignor(group)]
        targets = assignor(
            {mid: frozenset(m.subscribed_topics) for mid, m in group.members.items()},
            topics,
            {mid: as_dict(m.target) for mid, m in group.members.items()},
            _racks(group, topics, replica_racks),
        )
        self._write_group(group, epoch, epoch, topics)
        events.consumer_epoch(group.group_id, epoch,
                              sum(len(ps) for t in targets.values() for ps in t.values()),
                              len(group.members))
        for mid, m in list(group.members.items()):
            target = partition_set(targets.get(mid, {}))
            if target != m.target:
                self._write(
                    GroupRecord(ConsumerMemberKey(group.group_id, mid), replace(m, target=target))
                )

    def _reconcile(
        self,
        group: ConsumerGroup,
        member_id: str,
        m: ConsumerMemberValue,
        owned: Mapping[str, Iterable[int]] | None,
    ) -> ConsumerMemberValue:
        """One step of Kafka's CurrentAssignmentBuilder (module rule 2)."""
        if m.state == MemberState.UNREVOKED_PARTITIONS:
            pending = as_set(m.pending_revocation)
            owned_set = None if owned is None else {(t, p) for t, ps in owned.items() for p in ps}
            if owned_set is None or owned_set & pending:
                return m  # still revoking
            m = replace(m, pending_revocation=(), state=MemberState.STABLE)
        if m.member_epoch == group.assignment_epoch and m.state == MemberState.STABLE:
            return m
        current, target = as_set(m.assigned), as_set(m.target)
        keep, revoke = current & target, current - target
        if revoke:
            return replace(
                m,
                assigned=partition_set(_grouped(keep)),
                pending_revocation=partition_set(_grouped(revoke)),
                state=MemberState.UNREVOKED_PARTITIONS,
            )
        free = {tp for tp in target - current if group.owners.get(tp, member_id) == member_id}
        waiting = target - current - free
        epoch = group.assignment_epoch
        return replace(
            m,
            assigned=partition_set(_grouped(keep | free)),
            pending_revocation=(),
            state=MemberState.UNRELEASED_PARTITIONS if waiting else MemberState.STABLE,
            member_epoch=epoch,
            previous_member_epoch=m.member_epoch
            if epoch != m.member_epoch
            else m.previous_member_epoch,
        )

    def _remove_consumer_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        partitions_of: PartitionCounts | None,
        replica_racks: ReplicaRacks | None = None,
    ) -> None:
        """Leave or fence: the member's partitions are free at once; the rest rebalance (after
        a timeout, with the replica racks the last heartbeat brought)."""
        self._cancel_consumer_timers(group.group_id, member_id)
        self._write_member(group, member_id, None)
        counts = partitions_of or (lambda t: group.topics.get(t))
        self._refresh_assignment(
            group, counts, force_bump=True, replica_racks=replica_racks or self._replica_racks
        )

    def _cancel_consumer_timers(self, group_id: str, member_id: str) -> None:
        self._cancel((TimerKind.CONSUMER_SESSION, group_id, member_id))
        self._cancel((TimerKind.CONSUMER_REVOCATION, group_id, member_id))

    def _fire_consumer(self, key: TimerKey, now_ms: int) -> None:
        """Session or revocation timeout: fence the member (its partitions go to others)."""
        del now_ms
        kind, group_id, member_id = key
        group = self.consumer_groups.get(group_id)
        if group is not None and member_id in group.members:
            why = events.SESSION_TIMEOUT if kind is TimerKind.CONSUMER_SESSION else events.NOT_REVOKED
            events.consumer_member_removed(group_id, member_id, group.members[member_id].client_id, why)
            self._remove_consumer_member(group, member_id, None)

    def _start_consumer_timers(self, now_ms: int) -> None:
        """After loading: every loaded member must heartbeat within its session timeout."""
        for group in self.consumer_groups.values():
            for member_id in group.members:
                self._schedule(
                    (TimerKind.CONSUMER_SESSION, group.group_id, member_id),
                    now_ms
                    + group_setting(self.config, group.group_id, "consumer.session.timeout.ms"),
                )

    # -- offsets and administration --------------------------------------------------------

    def describe_consumer_groups(self, group_ids: list[str]) -> list[DescribedConsumerGroup]:
        out: list[DescribedConsumerGroup] = []
        for gid in group_ids:
            group = self.consumer_groups.get(gid)
            if not gid:
                out.append(DescribedConsumerGroup(ErrorCode.INVALID_GROUP_ID, gid))
            elif group is None:
                code = ErrorCode.GROUP_ID_NOT_FOUND
                message = (
                    f"Group {gid} is not a consumer group."
                    if gid in self.groups
                    else f"Group {gid} not found."
                )
                out.append(DescribedConsumerGroup(code, gid, message=message))
            else:
                members = tuple(
                    DescribedConsumerMember(
                        mid,
                        m.instance_id,
                        m.rack_id,
                        m.member_epoch,
                        m.client_id,
                        m.client_host,
                        m.subscribed_topics,
                        _listing(m.assigned),
                        _listing(m.target),
                    )
                    for mid, m in group.members.items()
                )
                out.append(
                    DescribedConsumerGroup(
                        ErrorCode.NONE,
                        gid,
                        group.state.value,
                        group.group_epoch,
                        group.assignment_epoch,
                        self.group_assignor(group),
                        members,
                    )
                )
        return out


def _grouped(tps: Iterable[tuple[str, int]]) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return out


def _racks(group: ConsumerGroup, topics: Mapping[str, int], replica_racks: ReplicaRacks | None) -> Racks:
    """The members' racks and the subscribed partitions' replica racks for the assignor."""
    members = {mid: m.rack_id or None for mid, m in group.members.items()}
    partitions: dict[str, Sequence[frozenset[str]]] = {}
    if replica_racks is not None:
        for t in topics:
            racks = replica_racks(t)
            if racks is not None:
                partitions[t] = racks
    return Racks(members, partitions)
