"""The part of the group coordinator every operation shares: state, timers and `replay`.

Rules:

1. Durable state (generations, members' assignments, committed offsets) changes only in
   `replay`, the same code that loads `__consumer_offsets` at start-up; operations create records
   with `_write`, which replays them and queues them for the server to append.
2. Time is injected (`now_ms`); timers are `(deadline, key)` entries in one heap with lazy
   cancellation, so `next_deadline()` is O(1) amortised however many groups and members exist.
3. No I/O, no trio, no clock: the server's driver owns all of that.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterable
from typing import TypeVar

from kafkapy.coordinator.group.consumer_state import ConsumerGroup, apply_consumer_record
from kafkapy.coordinator.group.records import (
    ConsumerGroupKey,
    ConsumerMemberKey,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecord,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
)
from kafkapy.coordinator.group.results import (
    Completion,
    GroupConfig,
    JoinGroupResult,
    Pending,
    Result,
    SyncGroupResult,
    TopicPartition,
)
from kafkapy.coordinator.group.state import ClassicGroup, GroupState, Member

__all__ = ["GroupCoordinatorCore", "TimerKind"]

T = TypeVar("T")


class TimerKind(enum.Enum):
    HEARTBEAT = "heartbeat"  # a member's session timeout
    PENDING_MEMBER = "pending-member"  # a member id handed out with MEMBER_ID_REQUIRED
    REBALANCE = "rebalance"  # initial delay / rebalance timeout of PreparingRebalance
    SYNC = "sync"  # members that never sent SyncGroup after a join completed
    OFFSET_EXPIRY = "offset-expiry"  # periodic offsets.retention check
    CONSUMER_SESSION = "consumer-session"  # a consumer-protocol member's session timeout
    CONSUMER_REVOCATION = "consumer-revocation"  # its rebalance timeout while revoking


TimerKey = tuple[TimerKind, str, str]


class GroupCoordinatorCore:
    """State, timers and replay; `GroupCoordinator` adds the request operations."""

    def __init__(self, config: GroupConfig | None = None) -> None:
        self.config = config or GroupConfig()
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 consumer-protocol groups; a group id is in at most one of the two tables
        # (an offsets-only classic placeholder is dropped when a consumer group takes the id)
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.offsets: dict[str, dict[TopicPartition, OffsetCommitValue]] = {}
        # producer id -> group -> partition -> offset, until the transaction's marker
        self.pending_txn_offsets: dict[int, dict[str, dict[TopicPartition, OffsetCommitValue]]] = {}
        self._deadlines: dict[TimerKey, int] = {}
        self._heap: list[tuple[int, int, TimerKey]] = []
        self._seq = 0
        self._records: list[GroupRecord] = []
        self._completions: list[Completion] = []

    # -- timers --------------------------------------------------------------------------

    def _schedule(self, key: TimerKey, deadline_ms: int) -> None:
        self._deadlines[key] = deadline_ms
        self._seq += 1
        heapq.heappush(self._heap, (deadline_ms, self._seq, key))

    def _cancel(self, key: TimerKey) -> None:
        self._deadlines.pop(key, None)

    def _deadline(self, key: TimerKey) -> int | None:
        return self._deadlines.get(key)

    def next_deadline(self) -> int | None:
        """The earliest time `poll` has work to do, or None when no timer is running."""
        heap = self._heap
        while heap:
            deadline, _, key = heap[0]
            if self._deadlines.get(key) == deadline:
                return deadline
            heapq.heappop(heap)  # cancelled or rescheduled
        return None

    def _pop_due(self, now_ms: int) -> list[TimerKey]:
        due: list[TimerKey] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms:
            deadline, _, key = heapq.heappop(heap)
            if self._deadlines.get(key) == deadline:
                del self._deadlines[key]
                due.append(key)
        return due

    # -- results -------------------------------------------------------------------------

    def _result(self, response: T | Pending) -> Result[T]:
        """Package `response` with the records and completions this operation produced."""
        records, completions = self._records, self._completions
        self._records, self._completions = [], []
        return Result(response, records, completions)

    def _complete(
        self,
        group: ClassicGroup,
        request_id: int | None,
        response: JoinGroupResult | SyncGroupResult,
    ) -> None:
        if request_id is not None:
            self._completions.append(Completion(request_id, response, group.group_id))

    def _write(self, record: GroupRecord) -> None:
        self.replay(record)
        self._records.append(record)

    # -- replay --------------------------------------------------------------------------

    def replay_bytes(self, key: bytes, value: bytes | None, *, producer_id: int = -1) -> None:
        """Replay one raw `__consumer_offsets` record (raises GroupRecordError if unreadable);
        `producer_id` is the batch's when it is transactional."""
        k = decode_key(key)
        self.replay(GroupRecord(k, decode_value(k, value), producer_id))

    def replay_transaction_marker(self, producer_id: int, commit: bool) -> None:
        """A commit/abort marker of `producer_id` on `__consumer_offsets`: its pending
        transactional offsets become committed offsets, or are dropped."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not commit:
            return
        for group_id, offsets in pending.items():
            for tp, value in offsets.items():
                self.replay(GroupRecord(OffsetCommitKey(group_id, tp.topic, tp.partition), value))

    def has_pending_transactional_offset(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in groups.get(group_id, {}) for groups in self.pending_txn_offsets.values())

    def replay(self, record: GroupRecord) -> None:
        key, value = record.key, record.value
        if isinstance(key, ConsumerGroupKey | ConsumerMemberKey):
            apply_consumer_record(self.consumer_groups, record)
            placeholder = self.groups.get(key.group_id)
            if (
                key.group_id in self.consumer_groups
                and placeholder is not None
                and not placeholder.members
                and not placeholder.pending_members
            ):
                del self.groups[key.group_id]
            return
        if isinstance(key, OffsetCommitKey) and record.producer_id >= 0:
            if isinstance(value, OffsetCommitValue):
                by_group = self.pending_txn_offsets.setdefault(record.producer_id, {})
                by_group.setdefault(key.group_id, {})[TopicPartition(key.topic, key.partition)] = (
                    value
                )
                if key.group_id not in self.groups and key.group_id not in self.consumer_groups:
                    self.groups[key.group_id] = ClassicGroup(
                        key.group_id, state_timestamp_ms=value.commit_timestamp_ms
                    )
            return
        if isinstance(key, OffsetCommitKey):
            tp = TopicPartition(key.topic, key.partition)
            if value is None:
                offsets = self.offsets.get(key.group_id)
                if offsets is not None:
                    offsets.pop(tp, None)
                    if not offsets:
                        del self.offsets[key.group_id]
                return
            assert isinstance(value, OffsetCommitValue)
            self.offsets.setdefault(key.group_id, {})[tp] = value
            if key.group_id not in self.groups and key.group_id not in self.consumer_groups:
                self.groups[key.group_id] = ClassicGroup(
                    key.group_id, state_timestamp_ms=value.commit_timestamp_ms
                )
            return
        assert isinstance(key, GroupMetadataKey)
        if value is None:
            group = self.groups.pop(key.group_id, None)
            if group is not None:
                for member_id in group.members:
                    self._cancel_member_timers(group.group_id, member_id)
                group.transition_to(GroupState.DEAD, group.state_timestamp_ms)
            return
        assert isinstance(value, GroupMetadataValue)
        self._replay_group_metadata(key.group_id, value)

    def _replay_group_metadata(self, group_id: str, value: GroupMetadataValue) -> None:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id)
        group.protocol_type = value.protocol_type
        group.generation = value.generation
        group.protocol = value.protocol
        group.leader = value.leader
        members: dict[str, Member] = {}
        for mv in value.members:
            member = group.members.get(mv.member_id)
            if member is None:
                member = Member(
                    member_id=mv.member_id,
                    group_instance_id=mv.group_instance_id,
                    client_id=mv.client_id,
                    client_host=mv.client_host,
                    rebalance_timeout_ms=mv.rebalance_timeout_ms,
                    session_timeout_ms=mv.session_timeout_ms,
                    protocol_type=value.protocol_type,
                    protocols=[(value.protocol or "", mv.subscription)],
                )
            member.assignment = mv.assignment
            members[mv.member_id] = member
        for member_id in group.members.keys() - members.keys():
            self._cancel_member_timers(group_id, member_id)
        group.members = members
        group.static_members = {
            m.group_instance_id: m.member_id
            for m in members.values()
            if m.group_instance_id is not None
        }
        # At rest the state follows from the membership; during a rebalance the operation
        # that wrote this record sets the state itself right after.
        if group.state in (GroupState.EMPTY, GroupState.STABLE):
            group.state = GroupState.STABLE if members else GroupState.EMPTY
            group.state_timestamp_ms = value.state_timestamp_ms

    def _cancel_member_timers(self, group_id: str, member_id: str) -> None:
        self._cancel((TimerKind.HEARTBEAT, group_id, member_id))

    def _reschedule_heartbeat(self, group: ClassicGroup, member: Member, now_ms: int) -> None:
        self._schedule(
            (TimerKind.HEARTBEAT, group.group_id, member.member_id),
            now_ms + member.session_timeout_ms,
        )

    def load_complete(self, now_ms: int) -> None:
        """Start the timers after loading: loaded members must heartbeat within their session."""
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule(
                    (TimerKind.HEARTBEAT, group.group_id, member.member_id),
                    now_ms + member.session_timeout_ms,
                )
        key: TimerKey = (TimerKind.OFFSET_EXPIRY, "", "")
        if self._deadline(key) is None:
            self._schedule(key, now_ms + self.config.offsets_retention_check_interval_ms)

    # -- helpers shared by operations ----------------------------------------------------

    def _group_metadata_record(
        self,
        group: ClassicGroup,
        *,
        generation: int,
        protocol: str | None,
        leader: str | None,
        members: Iterable[Member],
        now_ms: int,
        assignments: dict[str, bytes] | None = None,
    ) -> GroupRecord:
        return GroupRecord(
            GroupMetadataKey(group.group_id),
            GroupMetadataValue(
                protocol_type=group.protocol_type,
                generation=generation,
                protocol=protocol,
                leader=leader,
                state_timestamp_ms=now_ms,
                members=tuple(
                    MemberMetadataValue(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        rebalance_timeout_ms=m.rebalance_timeout_ms,
                        session_timeout_ms=m.session_timeout_ms,
                        subscription=m.metadata_for(protocol),
                        assignment=(
                            m.assignment
                            if assignments is None
                            else assignments.get(m.member_id, b"")
                        ),
                    )
                    for m in members
                ),
            ),
        )

    def _delete_group_records(self, group: ClassicGroup) -> None:
        """Tombstones for every committed offset and the group itself (-> Dead, removed)."""
        for tp in list(self.offsets.get(group.group_id, {})):
            self._write(GroupRecord(OffsetCommitKey(group.group_id, tp.topic, tp.partition), None))
        self._write(GroupRecord(GroupMetadataKey(group.group_id), None))
