"""GroupCoordinator: the classic group membership protocol as a plain state machine.

Rules:

1. Every operation takes domain values and `now_ms` and returns a `Result` (see results.py);
   JoinGroup and SyncGroup may answer `PENDING` and are completed later through
   `Result.completions` of whichever operation or timer finishes them.
2. The server calls `poll(now_ms)` at `next_deadline()`; timers never fire on their own.
3. Durable state changes only through `replay` (core.py): a completed join writes the new
   generation, the leader's SyncGroup writes the assignments, a static member's replacement
   writes its new member id. Who is waiting for what is volatile, as in Kafka.
4. States and their legal predecessors are in state.py (`VALID_PREVIOUS`); every change goes
   through `ClassicGroup.transition_to`.

JoinGroup in short (Kafka's classic protocol): an unknown member of a v4+ client first gets
MEMBER_ID_REQUIRED with a fresh member id and must join again with it; the group then enters
PreparingRebalance, and the join completes when every member has rejoined (or the rebalance
timeout expires, dropping those who did not). The first rebalance of an Empty group waits
`initial_rebalance_delay_ms` (extended per new member, bounded by the rebalance timeout) so a
starting fleet lands in one generation; with 0 a lone consumer is answered at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from kafkapy.coordinator.group import lifecycle_log as events
from kafkapy.coordinator.group.consumer import ConsumerGroupOps
from kafkapy.coordinator.group.core import GroupCoordinatorCore, TimerKey, TimerKind
from kafkapy.coordinator.group.group_configs import group_setting
from kafkapy.coordinator.group.records import (
    ConsumerGroupKey,
    ConsumerMemberKey,
    GroupMetadataKey,
    GroupRecord,
    OffsetCommitKey,
)
from kafkapy.coordinator.group.results import (
    PENDING,
    Completion,
    GroupConfig,
    JoinedMember,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    Pending,
    Result,
    SyncGroupResult,
    TopicPartition,
)
from kafkapy.coordinator.group.state import ClassicGroup, GroupState, Member
from kafkapy.protocol.errors import ErrorCode

__all__ = ["GroupCoordinator"]


def _uuid_member_id(client_id: str) -> str:
    """Kafka's `clientId-UUID`; the client id part is capped so the id always fits the
    int16-length strings of `__consumer_offsets` records, whatever the client sent."""
    return f"{client_id[:1024]}-{uuid.uuid4()}"


class GroupCoordinator(ConsumerGroupOps):
    """All groups of one `__consumer_offsets` partition leader: classic ones (this module)
    and KIP-848 consumer-protocol ones (consumer.py)."""

    def __init__(
        self,
        config: GroupConfig | None = None,
        *,
        member_id_factory: Callable[[str], str] = _uuid_member_id,
    ) -> None:
        super().__init__(config)
        self._new_member_id = member_id_factory
        # initial-delay bookkeeping per group in PreparingRebalance
        self._in_initial_delay: set[str] = set()

    # -- JoinGroup -----------------------------------------------------------------------

    def join_group(
        self,
        *,
        request_id: int,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        now_ms: int,
    ) -> Result[JoinGroupResult]:
        """JoinGroup; `rebalance_timeout_ms < 0` (v0 omits it) defaults to the session timeout.

        A join that fails leaves no trace: a group it created is dropped again, so bad requests
        cannot fill the group table (ListGroups) with empty groups.
        """
        consumer = self.consumer_groups.get(group_id)
        if consumer is not None:
            if consumer.members:
                return self._result(
                    JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
                )
            # an empty consumer group gives its id (and offsets) to the classic group
            self._write(GroupRecord(ConsumerGroupKey(group_id), None))
        existed = group_id in self.groups
        spec = Member(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            rebalance_timeout_ms=(
                rebalance_timeout_ms if rebalance_timeout_ms >= 0 else session_timeout_ms
            ),
            session_timeout_ms=session_timeout_ms,
            protocol_type=protocol_type,
            protocols=list(protocols),
        )
        response = self._join(request_id, group_id, spec, require_known_member_id, now_ms)
        group = self.groups.get(group_id)
        if not existed and group is not None and self._forgettable(group):
            del self.groups[group_id]
        return self._result(response)

    def _forgettable(self, group: ClassicGroup) -> bool:
        """Nothing of the group is left to keep: no members (joined or promised) and no
        committed offsets, so dropping it loses nothing the log or a client relies on."""
        return (
            not group.members and not group.pending_members and group.group_id not in self.offsets
        )

    def _join(
        self,
        request_id: int,
        group_id: str,
        spec: Member,
        require_known_member_id: bool,
        now_ms: int,
    ) -> JoinGroupResult | Pending:
        """The body of `join_group`: `spec` is the joining member as the request describes it."""
        member_id = spec.member_id
        cfg = self.config
        if not group_id:
            return JoinGroupResult(ErrorCode.INVALID_GROUP_ID, member_id=member_id)
        if not cfg.min_session_timeout_ms <= spec.session_timeout_ms <= cfg.max_session_timeout_ms:
            return JoinGroupResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id=member_id)
        group = self.groups.get(group_id)
        if group is None:
            if member_id:
                return JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
            group = self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)
        if group.state is GroupState.DEAD:
            return JoinGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id)
        if not group.supports(spec.protocol_type, spec.protocols):
            return JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not member_id:
            response = self._join_new_member(
                group, spec, request_id, require_known_member_id, now_ms
            )
        else:
            response = self._join_existing_member(group, spec, request_id, now_ms)
        # pull our own answer out of the completions if this very request finished
        if response is PENDING:
            for i, c in enumerate(self._completions):
                if c.request_id == request_id and isinstance(c.response, JoinGroupResult):
                    response = c.response
                    del self._completions[i]
                    break
        return response

    def _join_new_member(
        self,
        group: ClassicGroup,
        spec: Member,
        request_id: int,
        require_known_member_id: bool,
        now_ms: int,
    ) -> JoinGroupResult | Pending:
        spec.member_id = self._new_member_id(spec.client_id)
        if spec.group_instance_id is not None:
            old_id = group.static_members.get(spec.group_instance_id)
            if old_id is not None:  # a replacement does not grow the group
                return self._replace_static_member(group, old_id, spec, request_id, now_ms)
        if len(group.members) + len(group.pending_members) >= self.config.max_size:
            return JoinGroupResult(ErrorCode.GROUP_MAX_SIZE_REACHED)
        if spec.group_instance_id is None and require_known_member_id:
            group.pending_members.add(spec.member_id)
            self._schedule(
                (TimerKind.PENDING_MEMBER, group.group_id, spec.member_id),
                now_ms + spec.session_timeout_ms,
            )
            return JoinGroupResult(ErrorCode.MEMBER_ID_REQUIRED, member_id=spec.member_id)
        return self._add_member_and_rebalance(group, spec, request_id, now_ms)

    def _join_existing_member(
        self, group: ClassicGroup, spec: Member, request_id: int, now_ms: int
    ) -> JoinGroupResult | Pending:
        member_id = spec.member_id
        if member_id in group.pending_members:
            if (
                spec.group_instance_id is not None
                and spec.group_instance_id in group.static_members
            ):
                return JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
            return self._add_member_and_rebalance(group, spec, request_id, now_ms)
        if spec.group_instance_id is not None:
            known = group.static_members.get(spec.group_instance_id)
            if known is not None and known != member_id:
                return JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id=member_id)
        member = group.members.get(member_id)
        if member is None or group.state is GroupState.EMPTY:
            return JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member(group, member, spec, request_id)
            self._maybe_complete_join(group, now_ms)
            return PENDING
        unchanged = member.matches(spec.protocols)
        if group.state is GroupState.COMPLETING_REBALANCE and unchanged:
            # a retry of a join whose answer got lost: answer with the current generation
            return self._current_generation_answer(group, member)
        if group.state is GroupState.STABLE and unchanged and member_id != group.leader:
            self._reschedule_heartbeat(group, member, now_ms)
            return self._current_generation_answer(group, member)
        self._update_member(group, member, spec, request_id)
        self._prepare_rebalance(group, now_ms)
        return PENDING

    def _update_member(
        self, group: ClassicGroup, member: Member, spec: Member, request_id: int
    ) -> None:
        if member.awaiting_join is not None and member.awaiting_join != request_id:
            # the client gave up on its earlier JoinGroup and sent a new one
            self._complete(
                group,
                member.awaiting_join,
                JoinGroupResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id),
            )
        member.protocols = spec.protocols
        member.rebalance_timeout_ms = spec.rebalance_timeout_ms
        member.session_timeout_ms = spec.session_timeout_ms
        member.client_id, member.client_host = spec.client_id, spec.client_host
        member.awaiting_join = request_id

    def _add_member_and_rebalance(
        self, group: ClassicGroup, member: Member, request_id: int, now_ms: int
    ) -> Pending:
        if not group.members:
            group.protocol_type = member.protocol_type
        group.members[member.member_id] = member
        if member.group_instance_id is not None:
            group.static_members[member.group_instance_id] = member.member_id
        if group.leader is None or group.leader not in group.members:
            group.leader = member.member_id
        group.pending_members.discard(member.member_id)
        self._cancel((TimerKind.PENDING_MEMBER, group.group_id, member.member_id))
        member.awaiting_join = request_id
        group.new_member_added = True
        events.member_joined(group, member)
        self._reschedule_heartbeat(group, member, now_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms)
        else:
            self._prepare_rebalance(group, now_ms)
        return PENDING

    def _replace_static_member(
        self, group: ClassicGroup, old_id: str, spec: Member, request_id: int, now_ms: int
    ) -> JoinGroupResult | Pending:
        """A static member restarted: it takes over the old member's place (KIP-345).

        In a Stable group with unchanged protocols this needs no rebalance: the new member id is
        persisted and the member gets the current generation back (its old assignment comes
        with its next SyncGroup). The old incarnation, if still waiting, is fenced.
        """
        old = group.members.pop(old_id)
        events.member_removed(group, old, events.FENCED)
        self._cancel_member_timers(group.group_id, old_id)
        fenced = JoinGroupResult(ErrorCode.FENCED_INSTANCE_ID, member_id=old_id)
        self._complete(group, old.awaiting_join, fenced)
        self._complete(group, old.awaiting_sync, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        spec.assignment = old.assignment
        group.members[spec.member_id] = spec
        assert spec.group_instance_id is not None
        group.static_members[spec.group_instance_id] = spec.member_id
        if group.leader == old_id:
            group.leader = spec.member_id
        self._reschedule_heartbeat(group, spec, now_ms)
        if (group.state is GroupState.STABLE and old.matches(spec.protocols)) or (
            group.state is GroupState.STABLE
            and spec.metadata_for(group.protocol) == old.metadata_for(group.protocol)
            and group.protocol in spec.protocol_names()
        ):
            self._write_current_generation(group, now_ms)
            answer = self._current_generation_answer(group, spec)
            answer.skip_assignment = spec.member_id == group.leader
            return answer
        spec.awaiting_join = request_id
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms)
        else:
            self._prepare_rebalance(group, now_ms)
        return PENDING

    def _current_generation_answer(self, group: ClassicGroup, member: Member) -> JoinGroupResult:
        is_leader = member.member_id == group.leader
        return JoinGroupResult(
            ErrorCode.NONE,
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol,
            leader=group.leader or "",
            member_id=member.member_id,
            members=self._member_list(group) if is_leader else [],
        )

    def _member_list(self, group: ClassicGroup) -> list[JoinedMember]:
        return [
            JoinedMember(m.member_id, m.group_instance_id, m.metadata_for(group.protocol))
            for m in group.members.values()
        ]

    # -- rebalance -----------------------------------------------------------------------

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            # members waiting for the leader's assignment must rejoin instead
            for m in group.members.values():
                if m.awaiting_sync is not None:
                    self._complete(
                        group, m.awaiting_sync, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
                    )
                    m.awaiting_sync = None
        self._cancel((TimerKind.SYNC, group.group_id, ""))
        was_empty = group.state is GroupState.EMPTY
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms)
        rebalance_ms = group.max_rebalance_timeout_ms()
        delay_ms = self.config.initial_rebalance_delay_ms
        if was_empty and delay_ms > 0:
            delay_ms = min(delay_ms, rebalance_ms)
            group.initial_delay_remaining_ms = rebalance_ms - delay_ms
            group.new_member_added = False
            self._in_initial_delay.add(group.group_id)
            self._schedule((TimerKind.REBALANCE, group.group_id, ""), now_ms + delay_ms)
            events.rebalance_started(group, delay_ms, initial_delay=True)
            return
        self._in_initial_delay.discard(group.group_id)
        self._schedule((TimerKind.REBALANCE, group.group_id, ""), now_ms + rebalance_ms)
        events.rebalance_started(group, rebalance_ms, initial_delay=False)
        self._maybe_complete_join(group, now_ms)

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if (
            group.state is GroupState.PREPARING_REBALANCE
            and group.group_id not in self._in_initial_delay
            and group.all_members_joined()
        ):
            self._complete_join(group, now_ms)

    def _on_rebalance_timer(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE:
            return
        if group.group_id in self._in_initial_delay:
            if group.new_member_added and group.initial_delay_remaining_ms > 0:
                delay = min(
                    self.config.initial_rebalance_delay_ms, group.initial_delay_remaining_ms
                )
                group.initial_delay_remaining_ms -= delay
                group.new_member_added = False
                self._schedule((TimerKind.REBALANCE, group.group_id, ""), now_ms + delay)
                return
            self._in_initial_delay.discard(group.group_id)
        self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        """Form the next generation from the members that rejoined; drop the others."""
        self._cancel((TimerKind.REBALANCE, group.group_id, ""))
        self._in_initial_delay.discard(group.group_id)
        for m in [m for m in group.members.values() if m.awaiting_join is None]:
            events.member_removed(group, m, events.NOT_REJOINED)
            self._remove_member(group, m)
        group.new_member_added = False
        generation = group.generation + 1
        if not group.members:
            self._write(
                self._group_metadata_record(
                    group,
                    generation=generation,
                    protocol=None,
                    leader=None,
                    members=(),
                    now_ms=now_ms,
                )
            )
            group.transition_to(GroupState.EMPTY, now_ms)
            return
        protocol = group.select_protocol()
        leader = group.leader if group.leader in group.members else next(iter(group.members))
        self._write(
            self._group_metadata_record(
                group,
                generation=generation,
                protocol=protocol,
                leader=leader,
                members=group.members.values(),
                now_ms=now_ms,
                assignments={},
            )
        )
        group.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        events.generation_formed(group)
        for m in group.members.values():
            self._complete(group, m.awaiting_join, self._current_generation_answer(group, m))
            m.awaiting_join = None
            self._reschedule_heartbeat(group, m, now_ms)
        group.pending_sync = set(group.members)
        self._schedule(
            (TimerKind.SYNC, group.group_id, ""), now_ms + group.max_rebalance_timeout_ms()
        )

    def _remove_member(self, group: ClassicGroup, member: Member) -> None:
        group.members.pop(member.member_id, None)
        instance_id = member.group_instance_id
        if instance_id is not None and group.static_members.get(instance_id) == member.member_id:
            del group.static_members[instance_id]
        group.pending_sync.discard(member.member_id)
        self._cancel_member_timers(group.group_id, member.member_id)
        self._complete(
            group,
            member.awaiting_join,
            JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id=member.member_id),
        )
        self._complete(group, member.awaiting_sync, SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        member.awaiting_join = member.awaiting_sync = None
        if group.leader == member.member_id:
            group.leader = next(iter(group.members), None)

    def _remove_member_and_update(self, group: ClassicGroup, member: Member, now_ms: int) -> None:
        self._remove_member(group, member)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        else:
            self._maybe_complete_join(group, now_ms)

    # -- SyncGroup -----------------------------------------------------------------------

    def sync_group(
        self,
        *,
        request_id: int,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: list[tuple[str, bytes]],
        now_ms: int,
    ) -> Result[SyncGroupResult]:
        """SyncGroup; `protocol_type`/`protocol_name` are None before v5 (nothing to check)."""
        group = self.groups.get(group_id)
        if group is None:
            return self._result(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is GroupState.DEAD:
            return self._result(SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        error = self._validate_member(group, member_id, group_instance_id)
        if error is ErrorCode.NONE and generation_id != group.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is ErrorCode.NONE and (
            (protocol_type is not None and protocol_type != group.protocol_type)
            or (protocol_name is not None and protocol_name != group.protocol)
        ):
            error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is ErrorCode.NONE and group.state is GroupState.EMPTY:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        if error is ErrorCode.NONE and group.state is GroupState.PREPARING_REBALANCE:
            error = ErrorCode.REBALANCE_IN_PROGRESS
        if error is not ErrorCode.NONE:
            return self._result(SyncGroupResult(error))
        member = group.members[member_id]
        group.pending_sync.discard(member_id)
        self._reschedule_heartbeat(group, member, now_ms)
        if group.state is GroupState.STABLE:
            return self._result(self._sync_answer(group, member))
        # CompletingRebalance: wait for the leader's assignment
        if member.awaiting_sync is not None and member.awaiting_sync != request_id:
            self._complete(
                group, member.awaiting_sync, SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS)
            )
        member.awaiting_sync = request_id
        if member_id == group.leader:
            by_member = dict(assignments)
            chosen = {mid: by_member.get(mid, b"") for mid in group.members}
            self._write_current_generation(group, now_ms, chosen)
            group.transition_to(GroupState.STABLE, now_ms)
            events.generation_synced(group, chosen)
            mine: SyncGroupResult | None = None
            for m in group.members.values():
                if m.awaiting_sync is None:
                    continue
                answer = self._sync_answer(group, m)
                if m.awaiting_sync == request_id:
                    mine = answer
                else:
                    self._complete(group, m.awaiting_sync, answer)
                m.awaiting_sync = None
            if not group.pending_sync:
                self._cancel((TimerKind.SYNC, group.group_id, ""))
            assert mine is not None
            return self._result(mine)
        return self._result(PENDING)

    def _write_current_generation(
        self, group: ClassicGroup, now_ms: int, assignments: dict[str, bytes] | None = None
    ) -> None:
        """Persist the group as it stands (generation, protocol, leader, members), with new
        `assignments` when given (the leader's SyncGroup), else the members' current ones."""
        self._write(
            self._group_metadata_record(
                group,
                generation=group.generation,
                protocol=group.protocol,
                leader=group.leader,
                members=group.members.values(),
                now_ms=now_ms,
                assignments=assignments,
            )
        )

    def _sync_answer(self, group: ClassicGroup, member: Member) -> SyncGroupResult:
        return SyncGroupResult(
            ErrorCode.NONE, group.protocol_type, group.protocol, member.assignment
        )

    def _validate_member(
        self, group: ClassicGroup, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if group_instance_id is not None:
            known = group.static_members.get(group_instance_id)
            if known is not None and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE

    # -- Heartbeat / LeaveGroup ----------------------------------------------------------

    def heartbeat(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        now_ms: int,
    ) -> Result[ErrorCode]:
        group = self.groups.get(group_id)
        if group is None:
            return self._result(ErrorCode.UNKNOWN_MEMBER_ID)
        if group.state is GroupState.DEAD:
            return self._result(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        error = self._validate_member(group, member_id, group_instance_id)
        if error is ErrorCode.NONE and generation_id != group.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        if error is not ErrorCode.NONE:
            return self._result(error)
        if group.state is GroupState.EMPTY:
            return self._result(ErrorCode.UNKNOWN_MEMBER_ID)
        self._reschedule_heartbeat(group, group.members[member_id], now_ms)
        if group.state is GroupState.PREPARING_REBALANCE:
            return self._result(ErrorCode.REBALANCE_IN_PROGRESS)
        return self._result(ErrorCode.NONE)

    def leave_group(
        self, *, group_id: str, members: list[tuple[str, str | None]], now_ms: int
    ) -> Result[LeaveGroupResult]:
        """LeaveGroup for (member_id, group_instance_id) pairs (v3+ batches; v0-2 send one).

        A static member may leave by instance id alone (member id "").
        """
        group = self.groups.get(group_id)
        if group is None:
            return self._result(LeaveGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.state is GroupState.DEAD:
            return self._result(LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        out: list[LeaveMemberResult] = []
        for member_id, instance_id in members:
            out.append(
                LeaveMemberResult(
                    member_id, instance_id, self._leave_one(group, member_id, instance_id, now_ms)
                )
            )
        return self._result(LeaveGroupResult(ErrorCode.NONE, out))

    def _leave_one(
        self, group: ClassicGroup, member_id: str, instance_id: str | None, now_ms: int
    ) -> ErrorCode:
        if instance_id is not None:
            known = group.static_members.get(instance_id)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if member_id and member_id != known:
                return ErrorCode.FENCED_INSTANCE_ID
            member_id = known
        if member_id in group.pending_members:
            group.pending_members.discard(member_id)
            self._cancel((TimerKind.PENDING_MEMBER, group.group_id, member_id))
            self._maybe_complete_join(group, now_ms)
            return ErrorCode.NONE
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        events.member_removed(group, member, events.LEFT)
        self._remove_member_and_update(group, member, now_ms)
        return ErrorCode.NONE

    # -- timers --------------------------------------------------------------------------

    def poll(self, now_ms: int) -> Result[None]:
        """Fire every timer due at `now_ms`; returns the records and completions they made."""
        for key in self._pop_due(now_ms):
            self._fire(key, now_ms)
        return self._result(None)

    def _fire(self, key: TimerKey, now_ms: int) -> None:
        kind, group_id, member_id = key
        if kind in (TimerKind.CONSUMER_SESSION, TimerKind.CONSUMER_REVOCATION):
            self._fire_consumer(key, now_ms)
            return
        if kind is TimerKind.OFFSET_EXPIRY:
            self._expire_offsets(now_ms)
            return
        group = self.groups.get(group_id)
        if group is None:
            return
        if kind is TimerKind.HEARTBEAT:
            member = group.members.get(member_id)
            if member is None:
                return
            if member.awaiting_join is not None or member.awaiting_sync is not None:
                # a member blocked in JoinGroup/SyncGroup cannot heartbeat: keep it alive
                self._reschedule_heartbeat(group, member, now_ms)
                return
            events.member_removed(group, member, events.SESSION_TIMEOUT)
            self._remove_member_and_update(group, member, now_ms)
        elif kind is TimerKind.PENDING_MEMBER:
            group.pending_members.discard(member_id)
            self._maybe_complete_join(group, now_ms)
            if (
                group.state is GroupState.EMPTY
                and group.generation == 0
                and self._forgettable(group)
            ):
                del self.groups[group_id]  # never formed, nothing persisted: forget it
        elif kind is TimerKind.REBALANCE:
            self._on_rebalance_timer(group, now_ms)
        elif kind is TimerKind.SYNC:
            laggards = [group.members[m] for m in group.pending_sync if m in group.members]
            group.pending_sync.clear()
            if not laggards:
                return
            for m in laggards:
                events.member_removed(group, m, events.NOT_SYNCED)
                self._remove_member(group, m)
            if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                self._prepare_rebalance(group, now_ms)

    # -- failed writes -------------------------------------------------------------------

    def revert(
        self,
        records: Iterable[GroupRecord],
        log_state: GroupCoordinatorCore,
        *,
        error: ErrorCode,
        now_ms: int,
        completions: Iterable[Completion] = (),
    ) -> Result[None]:
        """Undo `records`, whose append to `__consumer_offsets` failed, so that the state
        follows the log again (an OffsetFetch must never show a commit the client was told
        failed, and that a restart would lose).

        `log_state` is a coordinator loaded from the log of the partitions the records were
        meant for (the start-up load path). Every key the records touched gets the log's value
        back: committed and pending transactional offsets one by one; a group whose metadata
        was written is replaced by the log's version of it. Each Join/SyncGroup that group had
        waiting, and each of `completions` (the failed operation's own answers) that reports
        on it, is answered `error` instead; a group left with members then rebalances, as
        Kafka does after a failed assignment write, so every member rejoins and learns the
        generation that really is in the log. Other completions pass through unchanged: the
        returned Result carries every completion the caller must deliver, and no records.
        """
        records = list(records)
        rebuilt = {r.group_id for r in records if isinstance(r.key, GroupMetadataKey)}
        for r in records:
            if isinstance(r.key, OffsetCommitKey):
                self._restore_offset(r.key, r.producer_id, log_state)
        for group_id in rebuilt:
            self._rebuild_group(group_id, log_state, error, now_ms)
        consumer_keys = (ConsumerGroupKey, ConsumerMemberKey)
        for group_id in {r.group_id for r in records if isinstance(r.key, consumer_keys)}:
            self._rebuild_consumer_group(group_id, log_state, now_ms)
        for group_id in {r.group_id for r in records} - rebuilt:
            group = self.groups.get(group_id)
            if (
                group is not None
                and group_id not in log_state.groups
                and group.state is GroupState.EMPTY
                and self._forgettable(group)
                and not any(group_id in by_group for by_group in self.pending_txn_offsets.values())
            ):
                del self.groups[group_id]  # created by the failed commit alone
        for c in completions:
            if c.group_id in rebuilt:
                self._completions.append(
                    Completion(c.request_id, _as_error(c.response, error), c.group_id)
                )
            else:
                self._completions.append(c)
        result = self._result(None)
        assert not result.records, "reverting must not write"
        return result

    def _rebuild_consumer_group(
        self, group_id: str, log_state: GroupCoordinatorCore, now_ms: int
    ) -> None:
        """The log's version of a consumer group; its members heartbeat again from there
        (a member whose epoch the log never saw is fenced on its next heartbeat)."""
        old = self.consumer_groups.pop(group_id, None)
        for member_id in old.members if old is not None else ():
            self._cancel_consumer_timers(group_id, member_id)
        group = log_state.consumer_groups.get(group_id)
        if group is None:
            return
        self.consumer_groups[group_id] = group
        session_ms = group_setting(self.config, group_id, "consumer.session.timeout.ms")
        for member_id in group.members:
            self._schedule((TimerKind.CONSUMER_SESSION, group_id, member_id), now_ms + session_ms)

    def load_complete(self, now_ms: int) -> None:
        super().load_complete(now_ms)
        self._start_consumer_timers(now_ms)

    def _restore_offset(
        self, key: OffsetCommitKey, producer_id: int, log_state: GroupCoordinatorCore
    ) -> None:
        tp = TopicPartition(key.topic, key.partition)
        if producer_id >= 0:
            source = log_state.pending_txn_offsets.get(producer_id, {})
            target = self.pending_txn_offsets.setdefault(producer_id, {})
        else:
            source, target = log_state.offsets, self.offsets
        value = source.get(key.group_id, {}).get(tp)
        if value is not None:
            target.setdefault(key.group_id, {})[tp] = value
        else:
            by_tp = target.get(key.group_id, {})
            by_tp.pop(tp, None)
            if not by_tp:
                target.pop(key.group_id, None)
        if producer_id >= 0 and not target:
            del self.pending_txn_offsets[producer_id]

    def _rebuild_group(
        self, group_id: str, log_state: GroupCoordinatorCore, error: ErrorCode, now_ms: int
    ) -> None:
        old = self.groups.pop(group_id, None)
        if old is not None:
            for m in old.members.values():
                self._cancel_member_timers(group_id, m.member_id)
                self._complete(old, m.awaiting_join, JoinGroupResult(error, member_id=m.member_id))
                self._complete(old, m.awaiting_sync, SyncGroupResult(error))
            for member_id in old.pending_members:
                self._cancel((TimerKind.PENDING_MEMBER, group_id, member_id))
        self._cancel((TimerKind.REBALANCE, group_id, ""))
        self._cancel((TimerKind.SYNC, group_id, ""))
        self._in_initial_delay.discard(group_id)
        group = log_state.groups.get(group_id)
        if group is None or group.state is GroupState.DEAD:
            return
        self.groups[group_id] = group
        for m in group.members.values():
            self._reschedule_heartbeat(group, m, now_ms)
        if group.members:
            self._prepare_rebalance(group, now_ms)


def _as_error(
    response: JoinGroupResult | SyncGroupResult, error: ErrorCode
) -> JoinGroupResult | SyncGroupResult:
    if isinstance(response, JoinGroupResult):
        return JoinGroupResult(error, member_id=response.member_id)
    return SyncGroupResult(error)
