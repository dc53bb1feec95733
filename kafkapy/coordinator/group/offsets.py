"""Committed offsets and the group administration APIs (describe, list, delete).

Why beside, not inside, the membership code: offsets have their own validation rules (simple
commits from consumers outside any group, generation checks) and their own expiry timer, while
sharing the group table; splitting keeps each module readable (< 800 lines).

Rules for OffsetCommit, in Kafka's order:

1. Unknown group: a commit with generation < 0 creates an Empty "simple" group; any other
   generation is ILLEGAL_GENERATION (the member belongs to a group this coordinator lost).
2. Dead -> COORDINATOR_NOT_AVAILABLE.
3. generation < 0 on an Empty group -> accepted (simple commit).
4. Otherwise: FENCED_INSTANCE_ID for a wrong static member, REBALANCE_IN_PROGRESS while
   CompletingRebalance, UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION; a valid commit also counts as a
   heartbeat. Commits during PreparingRebalance are allowed so eager members can commit before
   rejoining.
5. A KIP-848 consumer group (consumer.py): the member epoch is the generation - an unknown
   member is UNKNOWN_MEMBER_ID, another epoch STALE_MEMBER_EPOCH; a commit without member and
   generation needs the group to be empty.
"""

from __future__ import annotations

from kafkapy.coordinator.group.core import GroupCoordinatorCore, TimerKind
from kafkapy.coordinator.group.records import (
    ConsumerGroupKey,
    GroupRecord,
    OffsetCommitKey,
    OffsetCommitValue,
)
from kafkapy.coordinator.group.results import (
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    ListedGroup,
    OffsetDeleteResult,
    OffsetFetchResult,
    OffsetToCommit,
    Result,
    TopicPartition,
)
from kafkapy.coordinator.group.state import ClassicGroup, GroupState
from kafkapy.protocol.errors import ErrorCode

__all__ = ["OffsetOps"]


class OffsetOps(GroupCoordinatorCore):
    """OffsetCommit/OffsetFetch/OffsetDelete, DescribeGroups/ListGroups/DeleteGroups, expiry."""

    def _validate_commit(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        now_ms: int,
    ) -> ErrorCode:
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if group_id in self.consumer_groups:
            return self._validate_consumer_commit(group_id, member_id, generation_id)
        group = self.groups.get(group_id)
        if group is None:
            if generation_id < 0:
                self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)
                return ErrorCode.NONE
            return ErrorCode.ILLEGAL_GENERATION
        if group.state is GroupState.DEAD:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return ErrorCode.NONE
        if (
            group_instance_id is not None
            and group.static_members.get(group_instance_id, member_id) != member_id
        ):
            return ErrorCode.FENCED_INSTANCE_ID
        if group.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._reschedule_heartbeat(group, member, now_ms)
        return ErrorCode.NONE

    def _validate_consumer_commit(self, group_id: str, member_id: str, epoch: int) -> ErrorCode:
        group = self.consumer_groups[group_id]
        if epoch < 0 and not member_id:
            return ErrorCode.NONE if not group.members else ErrorCode.UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return ErrorCode.NONE

    def commit_offsets(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: list[OffsetToCommit],
        now_ms: int,
        retention_ms: int = -1,
    ) -> Result[list[tuple[TopicPartition, ErrorCode]]]:
        """Validate once per request, then write one record per partition."""
        error = self._validate_commit(group_id, member_id, group_instance_id, generation_id, now_ms)
        expire_ms = now_ms + retention_ms if retention_ms > 0 else -1
        return self._result(self._write_offsets(group_id, offsets, error, now_ms, expire_ms))

    def _write_offsets(
        self,
        group_id: str,
        offsets: list[OffsetToCommit],
        error: ErrorCode,
        now_ms: int,
        expire_ms: int,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> list[tuple[TopicPartition, ErrorCode]]:
        """One record per offset unless the request failed validation (`error`) or its
        metadata is over `offset.metadata.max.bytes`; the answer for every partition."""
        out: list[tuple[TopicPartition, ErrorCode]] = []
        max_meta = self.config.offset_metadata_max_bytes
        for o in offsets:
            tp = TopicPartition(o.topic, o.partition)
            if error is not ErrorCode.NONE:
                out.append((tp, error))
            elif o.metadata is not None and len(o.metadata.encode("utf-8")) > max_meta:
                out.append((tp, ErrorCode.OFFSET_METADATA_TOO_LARGE))
            else:
                self._write(
                    GroupRecord(
                        OffsetCommitKey(group_id, o.topic, o.partition),
                        OffsetCommitValue(o.offset, o.leader_epoch, o.metadata, now_ms, expire_ms),
                        producer_id,
                        producer_epoch,
                    )
                )
                out.append((tp, ErrorCode.NONE))
        return out

    def commit_transactional_offsets(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        offsets: list[OffsetToCommit],
        now_ms: int,
    ) -> Result[list[tuple[TopicPartition, ErrorCode]]]:
        """TxnOffsetCommit: offsets that count once the producer's transaction commits.

        Kafka's checks for transactional commits are looser than OffsetCommit's: an unknown
        group is created, and a commit without member id and generation (older clients) is
        accepted whatever the group's state.
        """
        error = ErrorCode.NONE
        group = self.groups.get(group_id)
        if not group_id:
            error = ErrorCode.INVALID_GROUP_ID
        elif group_id in self.consumer_groups:
            if member_id or generation_id >= 0:
                error = self._validate_consumer_commit(group_id, member_id, generation_id)
        elif group is None:
            self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)
        elif group.state is GroupState.DEAD:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
        elif (
            group_instance_id is not None
            and group.static_members.get(group_instance_id, member_id) != member_id
        ):
            error = ErrorCode.FENCED_INSTANCE_ID
        elif member_id and member_id not in group.members:
            error = ErrorCode.UNKNOWN_MEMBER_ID
        elif generation_id >= 0 and generation_id != group.generation:
            error = ErrorCode.ILLEGAL_GENERATION
        return self._result(
            self._write_offsets(group_id, offsets, error, now_ms, -1, producer_id, producer_epoch)
        )

    def fetch_offsets(
        self,
        *,
        group_id: str,
        partitions: list[TopicPartition] | None,
        require_stable: bool = False,
    ) -> Result[OffsetFetchResult]:
        """Committed offsets (-1 where none); `partitions=None` means all of the group's.

        With `require_stable`, a partition with a transactional offset commit still pending
        answers UNSTABLE_OFFSET_COMMIT (the client retries) instead of a possibly stale offset.
        """
        group = self.groups.get(group_id)
        if group is not None and group.state is GroupState.DEAD:
            return self._result(OffsetFetchResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
        committed = self.offsets.get(group_id, {})
        wanted = sorted(committed) if partitions is None else partitions
        out: list[FetchedOffset] = []
        for tp in wanted:
            v = committed.get(tp)
            if require_stable and self.has_pending_transactional_offset(group_id, tp):
                out.append(
                    FetchedOffset(tp.topic, tp.partition, error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
                )
            elif v is None:
                out.append(FetchedOffset(tp.topic, tp.partition))
            else:
                out.append(
                    FetchedOffset(tp.topic, tp.partition, v.offset, v.leader_epoch, v.metadata)
                )
        return self._result(OffsetFetchResult(ErrorCode.NONE, out))

    def delete_offsets(
        self, *, group_id: str, partitions: list[TopicPartition], now_ms: int
    ) -> Result[OffsetDeleteResult]:
        """OffsetDelete: allowed for Empty groups, or for topics a consumer group no longer uses."""
        del now_ms
        group = self.groups.get(group_id)
        consumer = self.consumer_groups.get(group_id)
        subscribed: set[str] = set()
        if consumer is not None:
            subscribed = consumer.subscribed_topics()
        elif group is None or group.state is GroupState.DEAD:
            return self._result(OffsetDeleteResult(ErrorCode.GROUP_ID_NOT_FOUND))
        elif group.state is not GroupState.EMPTY:
            topics = group.subscribed_topics()
            if topics is None:
                return self._result(OffsetDeleteResult(ErrorCode.NON_EMPTY_GROUP))
            subscribed = topics
        committed = self.offsets.get(group_id, {})
        out: list[tuple[TopicPartition, ErrorCode]] = []
        for tp in partitions:
            if tp.topic in subscribed:
                out.append((tp, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC))
                continue
            if tp in committed:
                self._write(GroupRecord(OffsetCommitKey(group_id, tp.topic, tp.partition), None))
            out.append((tp, ErrorCode.NONE))
        return self._result(OffsetDeleteResult(ErrorCode.NONE, out))

    def delete_groups(
        self, *, group_ids: list[str], now_ms: int
    ) -> Result[list[tuple[str, ErrorCode]]]:
        del now_ms
        out: list[tuple[str, ErrorCode]] = []
        for gid in group_ids:
            group = self.groups.get(gid)
            consumer = self.consumer_groups.get(gid)
            if not gid:
                out.append((gid, ErrorCode.INVALID_GROUP_ID))
            elif consumer is not None:
                if consumer.members:
                    out.append((gid, ErrorCode.NON_EMPTY_GROUP))
                else:
                    self._delete_consumer_group(gid)
                    out.append((gid, ErrorCode.NONE))
            elif group is None or group.state is GroupState.DEAD:
                out.append((gid, ErrorCode.GROUP_ID_NOT_FOUND))
            elif group.state is not GroupState.EMPTY or group.pending_members:
                out.append((gid, ErrorCode.NON_EMPTY_GROUP))
            else:
                self._delete_group_records(group)
                out.append((gid, ErrorCode.NONE))
        return self._result(out)

    def describe_groups(self, group_ids: list[str]) -> list[DescribedGroup]:
        """Kafka's classic describe: metadata and assignments only while Stable."""
        out: list[DescribedGroup] = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if not gid:
                out.append(DescribedGroup(ErrorCode.INVALID_GROUP_ID, gid, GroupState.DEAD.value))
                continue
            if gid in self.consumer_groups:
                # Kafka 4.x: a KIP-848 group is described by ConsumerGroupDescribe only
                out.append(DescribedGroup(ErrorCode.GROUP_ID_NOT_FOUND, gid, GroupState.DEAD.value))
                continue
            if group is None:
                out.append(DescribedGroup(ErrorCode.NONE, gid, GroupState.DEAD.value))
                continue
            stable = group.state is GroupState.STABLE
            out.append(
                DescribedGroup(
                    ErrorCode.NONE,
                    gid,
                    group.state.value,
                    group.protocol_type,
                    (group.protocol or "") if stable else "",
                    [
                        DescribedMember(
                            m.member_id,
                            m.group_instance_id,
                            m.client_id,
                            m.client_host,
                            m.metadata_for(group.protocol) if stable else b"",
                            m.assignment if stable else b"",
                        )
                        for m in group.members.values()
                    ],
                )
            )
        return out

    def list_groups(
        self, *, states_filter: list[str] | None = None, types_filter: list[str] | None = None
    ) -> list[ListedGroup]:
        """ListGroups; filters match case-insensitively as in Kafka, empty means no filter."""
        states = {s.lower() for s in states_filter or []}
        types = {t.lower() for t in types_filter or []}
        out: list[ListedGroup] = []
        for group in self.groups.values():
            if group.state is GroupState.DEAD:
                continue
            if states and group.state.value.lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            out.append(ListedGroup(group.group_id, group.protocol_type, group.state.value))
        for cg in self.consumer_groups.values():
            state = cg.state.value
            if states and state.lower() not in states:
                continue
            if types and "consumer" not in types:
                continue
            out.append(ListedGroup(cg.group_id, "consumer", state, "consumer"))
        return out

    def _delete_consumer_group(self, group_id: str) -> None:
        """Tombstones for an empty consumer group's offsets and the group itself."""
        for tp in list(self.offsets.get(group_id, {})):
            self._write(GroupRecord(OffsetCommitKey(group_id, tp.topic, tp.partition), None))
        self._write(GroupRecord(ConsumerGroupKey(group_id), None))

    # -- expiry --------------------------------------------------------------------------

    def _expire_offsets(self, now_ms: int) -> None:
        """offsets.retention: Empty groups' offsets expire `retention` after the group emptied.

        Groups without a protocol (simple commits) expire each offset by its commit time; a
        consumer group still running loses only offsets of topics it no longer subscribes to;
        an explicit expire timestamp (OffsetCommit v1-v4 retention) always applies. A group
        left Empty with no offsets is deleted.
        """
        retention = self.config.offsets_retention_ms
        for gid, committed in list(self.offsets.items()):
            group = self.groups.get(gid)
            if group is None:
                continue
            unsubscribed_only = False
            topics: set[str] | None = None
            if group.state is not GroupState.EMPTY:
                topics = group.subscribed_topics()
                if topics is None:
                    continue
                unsubscribed_only = True
            expired: list[TopicPartition] = []
            for tp, v in committed.items():
                if v.expire_timestamp_ms >= 0:
                    if v.expire_timestamp_ms <= now_ms:
                        expired.append(tp)
                    continue
                if topics is not None and tp.topic in topics:
                    continue
                base = (
                    group.state_timestamp_ms
                    if group.protocol_type and not unsubscribed_only
                    else v.commit_timestamp_ms
                )
                if now_ms - base >= retention:
                    expired.append(tp)
            for tp in expired:
                self._write(GroupRecord(OffsetCommitKey(gid, tp.topic, tp.partition), None))
        for group in list(self.groups.values()):
            if (
                group.state is GroupState.EMPTY
                and group.group_id not in self.offsets
                and not group.pending_members
                and now_ms - group.state_timestamp_ms >= retention
            ):
                self._delete_group_records(group)
        self._schedule(
            (TimerKind.OFFSET_EXPIRY, "", ""),
            now_ms + self.config.offsets_retention_check_interval_ms,
        )
