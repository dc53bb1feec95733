"""Committed offsets: OffsetCommit (8) v0-9, OffsetFetch (9) v0-9, OffsetDelete (47) v0,
TxnOffsetCommit (28) v0-4.

Behaviour:
- OffsetCommit: partitions of unknown topics get UNKNOWN_TOPIC_OR_PARTITION; the rest go to the
  coordinator in one call, which checks generation and member once per request (a commit with
  generation -1 from outside any group is a "simple" commit) and writes one record per
  partition - all in one record batch per `__consumer_offsets` partition. v2-4
  `retention_time_ms` sets an explicit expiry; v9's member epoch is the generation of a classic
  group. If the append fails the coordinator is reverted to the log and the partitions answer
  Kafka's code for it (NOT_COORDINATOR for a storage error), so a commit the client was told
  failed never shows in OffsetFetch.
- OffsetFetch: v0-7 one group (null topics = all of the group's offsets, v2+), v8+ several groups;
  a partition without a committed offset answers -1. with `require_stable`, partitions with
  a pending transactional commit answer UNSTABLE_OFFSET_COMMIT.
- TxnOffsetCommit: the offsets are written as a transactional batch of the producer and become
  visible when its commit marker reaches `__consumer_offsets` (`GroupDriver.on_transaction_marker`);
  until then OffsetFetch with `require_stable` answers UNSTABLE_OFFSET_COMMIT for them. The
  transaction coordinator first confirms that AddOffsetsToTxn put the group's offsets partition
  into the producer's ongoing transaction (else INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING,
  or INVALID_PRODUCER_EPOCH when fenced; KIP-890 part 1).
- OffsetDelete: group-level GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP, per-partition
  GROUP_SUBSCRIBED_TO_TOPIC.

A group whose `__consumer_offsets` partition this broker does not lead answers
NOT_COORDINATOR (COORDINATOR_LOAD_IN_PROGRESS while it loads); partitions are known from the
metadata image, not from the logs this broker happens to host.

Authorization (an authorizer configured; Kafka's checks): OffsetCommit READ on the group
(GROUP_AUTHORIZATION_FAILED everywhere) and READ per topic (TOPIC_AUTHORIZATION_FAILED);
OffsetFetch READ on the group and DESCRIBE per topic (a named topic TOPIC_AUTHORIZATION_FAILED,
all-offsets fetches leave such topics out); OffsetDelete DELETE on the group, READ per topic;
TxnOffsetCommit WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on
the group and per topic.

Lag is what clients (and `kafkapy groups describe`) compute from these offsets and ListOffsets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker.clock import now_ms
from kafkapy.broker.context import RequestContext
from kafkapy.broker.group_driver import GroupDriver, GroupWriteError
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.internal_topics import partition_count, partition_exists
from kafkapy.broker.request_ports import RequestPorts
from kafkapy.broker.txn_driver import TRANSACTION_STATE_TOPIC
from kafkapy.coordinator.group import (
    FetchedOffset,
    OffsetDeleteResult,
    OffsetFetchResult,
    OffsetToCommit,
    TopicPartition,
)
from kafkapy.coordinator.txn import OFFSETS_TOPIC
from kafkapy.coordinator.txn import TopicPartition as TxnPartition
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)

__all__ = [
    "handle_offset_commit",
    "handle_offset_delete",
    "handle_offset_fetch",
    "handle_txn_offset_commit",
]


TopicT = TypeVar("TopicT")


class _CommitPartition(Protocol):
    """A partition of OffsetCommit or TxnOffsetCommit (the same fields in both requests)."""

    @property
    def partition_index(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_leader_epoch(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


def _exists(ports: RequestPorts, topic: str, partition: int) -> bool:
    return partition_exists(ports.internal_topics, topic, partition)


def _commit_response(
    req: OffsetCommitRequest, error_of: Callable[[TopicPartition], ErrorCode]
) -> OffsetCommitResponse:
    """The OffsetCommit answer: every partition of the request with its error code."""
    return OffsetCommitResponse(
        topics=[
            OffsetCommitResponse.OffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    OffsetCommitResponse.OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=error_of(TopicPartition(t.name, p.partition_index)),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


def offset_commit_error_response(
    req: OffsetCommitRequest, version: int, code: ErrorCode
) -> OffsetCommitResponse:
    return _commit_response(req, lambda _: code)


def _refused(
    topics: Iterable[Any], denied: set[str], code: ErrorCode
) -> dict[TopicPartition, ErrorCode]:
    """`code` for every partition of the request's topics named in `denied`."""
    return {
        TopicPartition(t.name, p.partition_index): code
        for t in topics if t.name in denied for p in t.partitions
    }


def _known_partitions(
    ports: RequestPorts, topics: Iterable[tuple[str, Iterable[_CommitPartition]]], with_epoch: bool
) -> tuple[list[OffsetToCommit], dict[TopicPartition, ErrorCode]]:
    """Split a commit into the offsets of existing partitions and UNKNOWN_TOPIC_OR_PARTITION
    errors for the rest (the leader epoch only where the request version carries it)."""
    to_commit: list[OffsetToCommit] = []
    errors: dict[TopicPartition, ErrorCode] = {}
    for name, partitions in topics:
        for p in partitions:
            if _exists(ports, name, p.partition_index):
                to_commit.append(
                    OffsetToCommit(
                        name, p.partition_index, p.committed_offset,
                        p.committed_leader_epoch if with_epoch else -1, p.committed_metadata,
                    )
                )
            else:
                errors[TopicPartition(name, p.partition_index)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
    return to_commit, errors


@handler(
    ApiKey.OFFSET_COMMIT, min_version=0, max_version=9,
    error_response=offset_commit_error_response,
)
async def handle_offset_commit(
    ctx: RequestContext, req: OffsetCommitRequest
) -> OffsetCommitResponse:
    ports = ctx.ports
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return offset_commit_error_response(req, ctx.api_version, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    driver = await ports.groups.ready()
    coordinator = driver.coordinator_for(req.group_id)
    if isinstance(coordinator, ErrorCode):
        return offset_commit_error_response(req, ctx.api_version, coordinator)
    denied = ctx.unauthorized(AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    to_commit, errors = _known_partitions(
        ports, [(t.name, t.partitions) for t in req.topics if t.name not in denied], ctx.api_version >= 6
    )
    errors.update(_refused(req.topics, denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    if to_commit or not errors:
        try:
            result = await driver.finish(
                coordinator.commit_offsets(
                    group_id=req.group_id,
                    member_id=req.member_id if ctx.api_version >= 1 else "",
                    group_instance_id=req.group_instance_id if ctx.api_version >= 7 else None,
                    generation_id=(
                        req.generation_id_or_member_epoch if ctx.api_version >= 1 else -1
                    ),
                    offsets=to_commit,
                    now_ms=now_ms(),
                    retention_ms=req.retention_time_ms if 2 <= ctx.api_version <= 4 else -1,
                )
            )
        except GroupWriteError as exc:  # reverted: OffsetFetch keeps showing the logged offsets
            result = [(TopicPartition(o.topic, o.partition), exc.commit_error) for o in to_commit]
        assert isinstance(result, list)
        errors.update(result)
    return _commit_response(req, lambda tp: errors.get(tp, ErrorCode.NONE))


def _fetch(
    driver: GroupDriver, group_id: str, topics: list[tuple[str, list[int]]] | None,
    require_stable: bool,
) -> OffsetFetchResult:
    partitions = (
        None if topics is None else [TopicPartition(n, p) for n, ps in topics for p in ps]
    )
    coordinator = driver.coordinator_for(group_id)
    if isinstance(coordinator, ErrorCode):  # led elsewhere or loading: the client retries
        return OffsetFetchResult(coordinator, [
            FetchedOffset(tp.topic, tp.partition, error=coordinator) for tp in partitions or []
        ])
    result = coordinator.fetch_offsets(
        group_id=group_id, partitions=partitions, require_stable=require_stable
    ).response
    assert isinstance(result, OffsetFetchResult)
    return result


def _authorized_fetch(
    ctx: RequestContext, driver: GroupDriver, group_id: str,
    topics: list[tuple[str, list[int]]] | None, require_stable: bool,
) -> OffsetFetchResult:
    """`_fetch` as the principal may see it: READ on the group, DESCRIBE per topic."""
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        return OffsetFetchResult(code, [FetchedOffset(n, p, error=code) for n, ps in topics or [] for p in ps])
    if topics is None:
        result = _fetch(driver, group_id, None, require_stable)
        hidden = ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.TOPIC, (p.topic for p in result.partitions))
        if hidden:
            result.partitions = [p for p in result.partitions if p.topic not in hidden]
        return result
    denied = ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.TOPIC, (n for n, _ in topics))
    result = _fetch(driver, group_id, [(n, ps) for n, ps in topics if n not in denied], require_stable)
    code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    result.partitions += [FetchedOffset(n, p, error=code) for n, ps in topics if n in denied for p in ps]
    return result


def _fetched_topics(
    partitions: list[FetchedOffset],
    topic: Callable[..., TopicT],
    partition: Callable[..., object],
    error_of: Callable[[FetchedOffset], ErrorCode],
) -> list[TopicT]:
    """OffsetFetch's topics of one group, built with the version's classes (v8+ nests them per
    group under other names): committed offsets by topic, a null metadata sent as ""."""
    by_topic: dict[str, list[FetchedOffset]] = {}
    for p in partitions:
        by_topic.setdefault(p.topic, []).append(p)
    return [
        topic(
            name=name,
            partitions=[
                partition(
                    partition_index=p.partition,
                    committed_offset=p.offset,
                    committed_leader_epoch=p.leader_epoch,
                    metadata=p.metadata if p.metadata is not None else "",
                    error_code=error_of(p),
                )
                for p in parts
            ],
        )
        for name, parts in by_topic.items()
    ]


@handler(ApiKey.OFFSET_FETCH, min_version=0, max_version=9)
async def handle_offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    version = ctx.api_version
    driver = await ctx.groups.ready()
    require_stable = req.require_stable if version >= 7 else False
    if version >= 8:
        response = OffsetFetchResponse()
        for g in req.groups:
            wanted = (
                None if g.topics is None else [(t.name, list(t.partition_indexes)) for t in g.topics]
            )
            result = _authorized_fetch(ctx, driver, g.group_id, wanted, require_stable)
            response.groups.append(
                OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=result.error,
                    topics=_fetched_topics(
                        result.partitions,
                        OffsetFetchResponse.OffsetFetchResponseTopics,
                        OffsetFetchResponse.OffsetFetchResponsePartitions,
                        lambda p: p.error,
                    ),
                )
            )
        return response
    topics = req.topics if (req.topics is not None or version >= 2) else []
    wanted_v0 = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    result = _authorized_fetch(ctx, driver, req.group_id, wanted_v0, require_stable)
    group_error = result.error
    return OffsetFetchResponse(
        error_code=group_error,
        topics=_fetched_topics(
            result.partitions,
            OffsetFetchResponse.OffsetFetchResponseTopic,
            OffsetFetchResponse.OffsetFetchResponsePartition,
            # v0-1 have no top-level error: a group-level error goes into every partition
            lambda p: p.error if version >= 2 or group_error is ErrorCode.NONE else group_error,
        ),
    )


@handler(ApiKey.OFFSET_DELETE, min_version=0, max_version=0)
async def handle_offset_delete(
    ctx: RequestContext, req: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    ports = ctx.ports
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, req.group_id):
        return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    driver = await ports.groups.ready()
    coordinator = driver.coordinator_for(req.group_id)
    if isinstance(coordinator, ErrorCode):
        return OffsetDeleteResponse(error_code=coordinator)
    denied = ctx.unauthorized(AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    unknown = _refused(req.topics, denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    wanted: list[TopicPartition] = []
    for t in req.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if tp in unknown:
                continue
            if _exists(ports, t.name, p.partition_index):
                wanted.append(tp)
            else:
                unknown[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    try:
        result = await driver.finish(
            coordinator.delete_offsets(
                group_id=req.group_id, partitions=wanted, now_ms=now_ms()
            )
        )
    except GroupWriteError as exc:  # reverted: the offsets are still committed
        return OffsetDeleteResponse(error_code=exc.group_error)
    assert isinstance(result, OffsetDeleteResult)
    if result.error is not ErrorCode.NONE:
        return OffsetDeleteResponse(error_code=result.error)
    errors = dict(result.partitions) | unknown
    return OffsetDeleteResponse(
        topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(
                name=t.name,
                partitions=[
                    OffsetDeleteResponse.OffsetDeleteResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors.get(TopicPartition(t.name, p.partition_index), ErrorCode.NONE),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )


@handler(ApiKey.TXN_OFFSET_COMMIT, min_version=0, max_version=4)
async def handle_txn_offset_commit(
    ctx: RequestContext, req: TxnOffsetCommitRequest
) -> TxnOffsetCommitResponse:
    ports = ctx.ports
    refusal = _txn_commit_refusal(ctx, req)
    if refusal is not None:
        return _txn_commit_response(req, lambda _: refusal)
    driver = await ports.groups.ready()
    v3 = ctx.api_version >= 3
    coordinator = driver.coordinator_for(req.group_id)
    if isinstance(coordinator, ErrorCode):
        return _txn_commit_response(req, lambda _: coordinator)
    denied = ctx.unauthorized(AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    errors = _refused(req.topics, denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    to_commit: list[OffsetToCommit] = []
    for t in req.topics:
        for p in t.partitions:
            if t.name in denied:
                continue
            if _exists(ports, t.name, p.partition_index):
                to_commit.append(OffsetToCommit(
                    t.name, p.partition_index, p.committed_offset,
                    p.committed_leader_epoch if ctx.api_version >= 2 else -1, p.committed_metadata,
                ))
            else:
                errors[TopicPartition(t.name, p.partition_index)] = (
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                )
    if to_commit and partition_count(ports.internal_topics, TRANSACTION_STATE_TOPIC) is not None:
        # KIP-890 part 1: AddOffsetsToTxn must have put the group's offsets partition into the
        # producer's ongoing transaction, or a delayed commit could join a later transaction.
        # (Without __transaction_state no coordinator ever served a transactional producer
        # here, so there is nothing to verify against.)
        refused = (await ports.transactions.ready()).verify(
            req.transactional_id, req.producer_id, req.producer_epoch,
            TxnPartition(OFFSETS_TOPIC, driver.partition_for(req.group_id)),
        )
        if refused is not ErrorCode.NONE:
            errors.update((TopicPartition(o.topic, o.partition), refused) for o in to_commit)
            to_commit = []
    if to_commit:
        try:
            result = await driver.finish(
                coordinator.commit_transactional_offsets(
                    group_id=req.group_id,
                    producer_id=req.producer_id,
                    producer_epoch=req.producer_epoch,
                    member_id=req.member_id if v3 else "",
                    group_instance_id=req.group_instance_id if v3 else None,
                    generation_id=req.generation_id if v3 else -1,
                    offsets=to_commit,
                    now_ms=now_ms(),
                )
            )
        except GroupWriteError as exc:  # e.g. a producer id the log refuses: reverted, answered
            result = [(TopicPartition(o.topic, o.partition), exc.commit_error) for o in to_commit]
        assert isinstance(result, list)
        errors.update(result)
    return _txn_commit_response(req, lambda tp: errors.get(tp, ErrorCode.NONE))


def _txn_commit_refusal(ctx: RequestContext, req: TxnOffsetCommitRequest) -> ErrorCode | None:
    if not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
        return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    return None


def _txn_commit_response(
    req: TxnOffsetCommitRequest, error_of: Callable[[TopicPartition], ErrorCode]
) -> TxnOffsetCommitResponse:
    return TxnOffsetCommitResponse(
        topics=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(
                name=t.name,
                partitions=[
                    TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=error_of(TopicPartition(t.name, p.partition_index)),
                    )
                    for p in t.partitions
                ],
            )
            for t in req.topics
        ]
    )
