"""Topic administration: CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6,
CreatePartitions (key 37) v0-3, DeleteRecords (key 21) v0-2.

Behaviour:
- CreateTopics: num_partitions / replication_factor -1 take `num.partitions` /
  `default.replication.factor`; a replication factor above 1 -> INVALID_REPLICATION_FACTOR (one
  broker); manual assignments must name this node only, cover partitions 0..n-1 once each and
  come with -1 counts (else INVALID_REPLICA_ASSIGNMENT / INVALID_REQUEST); configs are validated
  (INVALID_CONFIG); bad names -> INVALID_TOPIC_EXCEPTION; existing -> TOPIC_ALREADY_EXISTS; a name
  repeated in one request -> INVALID_REQUEST for each copy. `validate_only` checks everything and
  creates nothing. v5+ answers carry the partition count, replication factor and all configs.
- DeleteTopics: by name (all versions) or by id (v6+); unknown -> UNKNOWN_TOPIC_OR_PARTITION /
  UNKNOWN_TOPIC_ID; `delete.topic.enable=false` -> TOPIC_DELETION_DISABLED; internal topics
  (`__consumer_offsets`, `__transaction_state`) -> INVALID_TOPIC_EXCEPTION.
- CreatePartitions: only growth (INVALID_PARTITIONS otherwise); assignments must name this node.
- Size of one request, Kafka's controller limit (`kafkapy.controller.topics`, which enforces it
  in cluster mode): a CreateTopics asking for more than 10,000 partitions in all is
  POLICY_VIOLATION for every topic, a CreatePartitions topic taking the request past 10,000 new
  partitions INVALID_PARTITIONS; both answered before any file is touched and logged (WARNING).
- DeleteRecords: moves the log start offset; -1 means the high watermark; beyond it ->
  OFFSET_OUT_OF_RANGE. Answers the new low watermark.

Cluster mode (`broker.cluster is not None`): CreateTopics, DeleteTopics and CreatePartitions are
forwarded as they are to the active controller (`ControllerChannel`), which decides (placement
over the registered brokers, validation, internal-topic and `delete.topic.enable` rules); the
answer comes back once this broker's own image holds the result, so a Metadata request right
after sees it. No active controller within the request timeout -> NOT_CONTROLLER (retriable).
DeleteRecords is served by the partition's leader only (elsewhere NOT_LEADER_OR_FOLLOWER, so the
client refreshes its metadata) and answers, as Kafka's DelayedDeleteRecords does, once the low
watermark - the lowest log start over the leader and every replica on an unfenced broker, as
their fetches report it - reached the offset; REQUEST_TIMED_OUT at the request's `timeout_ms`
(the leader's log start has moved; the followers follow it from its Fetch answers).

Not yet: topic creation policies, quota throttling (THROTTLING_QUOTA_EXCEEDED).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter

import trio

from kafkapy.controller.topics import (
    MAX_PARTITIONS_PER_REQUEST,
    TOO_MANY_PARTITIONS,
    requested_partitions,
    too_many_new_partitions,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from kafkapy.protocol.messages.create_topics import (
    CreateTopicsRequest_CreatableTopic as CreatableTopic,
)
from kafkapy.protocol.messages.create_topics import (
    CreateTopicsResponse_CreatableTopicResult as TopicResult,
)
from kafkapy.protocol.messages.delete_records import (
    DeleteRecordsResponse_DeleteRecordsPartitionResult as DeleteRecordsPartitionResult,
)
from kafkapy.server.broker import Broker, BrokerError, storage_failure
from kafkapy.server.cluster.peer import PeerError
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.registry import handler
from kafkapy.server.handlers.shared.config_entries import topic_config_entries
from kafkapy.server.partitions import Partitions
from kafkapy.storage.errors import StorageError

__all__ = [
    "handle_create_partitions",
    "handle_create_topics",
    "handle_delete_records",
    "handle_delete_topics",
]

log = logging.getLogger(__name__)


def _too_many_partitions(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse | None:
    """Kafka's per-request partition limit (see the module doc): the refusal, or None."""
    default = ctx.broker.config.get_int("num.partitions")
    total = sum(
        requested_partitions(t.num_partitions, len(t.assignments), default) for t in req.topics
    )
    if total <= MAX_PARTITIONS_PER_REQUEST:
        return None
    log.warning(
        "refused CreateTopics from %s (client %s): %d partitions in one request, more than %d: %s",
        ctx.connection.peer, ctx.header.client_id, total, MAX_PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS,
    )
    return CreateTopicsResponse(topics=[
        TopicResult(
            name=t.name, error_code=ErrorCode.POLICY_VIOLATION, error_message=TOO_MANY_PARTITIONS
        )
        for t in req.topics
    ])

def _check_assignments(broker: Broker, topic: CreatableTopic) -> int:
    """Validate manual assignments; returns the partition count they describe."""
    if topic.num_partitions != -1 or topic.replication_factor != -1:
        raise BrokerError(
            ErrorCode.INVALID_REQUEST,
            "Both numPartitions or replicationFactor and replicasAssignments were set.",
        )
    indexes = sorted(a.partition_index for a in topic.assignments)
    if indexes != list(range(len(indexes))):
        raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be numbered 0..n-1.")
    for a in topic.assignments:
        if a.broker_ids != [broker.node_id]:
            raise BrokerError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Replica assignment {a.broker_ids} for partition {a.partition_index} names "
                f"brokers other than the only broker {broker.node_id}.",
            )
    return len(indexes)


async def _create_one(broker: Broker, topic: CreatableTopic, version: int, validate_only: bool) -> TopicResult:
    result = TopicResult(name=topic.name)
    try:
        partitions: int | None = topic.num_partitions
        if topic.assignments:
            partitions = _check_assignments(broker, topic)
        rf = topic.replication_factor
        if rf == -1:
            rf = broker.config.get_int("default.replication.factor")
        if rf <= 0:
            raise BrokerError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
        if rf > 1:
            raise BrokerError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {rf} larger than available brokers: 1.",
            )
        if partitions is not None and partitions == 0:
            raise BrokerError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
        if partitions is not None and partitions < -1:
            raise BrokerError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
        configs = {c.name: c.value for c in topic.configs}
        if len(configs) != len(topic.configs):
            raise BrokerError(ErrorCode.INVALID_REQUEST, "A config name was given more than once.")
        info = await broker.create_topic_async(topic.name, partitions, configs, validate_only=validate_only)
    except BrokerError as e:
        result.error_code = e.error_code
        result.error_message = e.message
        return result
    result.topic_id = info.topic_id if not validate_only else result.topic_id
    if version >= 5:
        result.num_partitions = info.partitions
        result.replication_factor = 1
        result.configs = [
            CreateTopicsResponse.CreatableTopicConfigs(
                name=e.name, value=e.value, read_only=e.read_only,
                config_source=e.config_source, is_sensitive=False,
            )
            for e in topic_config_entries(broker, info, include_synonyms=False)
        ]
    return result


@handler(ApiKey.CREATE_TOPICS, min_version=2, max_version=7)
async def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    if ctx.broker.cluster is not None:
        return await _cluster_create_topics(ctx, req)
    refused = _too_many_partitions(ctx, req)
    if refused is not None:
        return refused
    counts = Counter(t.name for t in req.topics)
    response = CreateTopicsResponse()
    for topic in req.topics:
        if counts[topic.name] > 1:
            response.topics.append(TopicResult(
                name=topic.name, error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"Create topics request from client contains duplicate topic {topic.name}",
            ))
            continue
        response.topics.append(await _create_one(ctx.broker, topic, ctx.api_version, req.validate_only))
    return response


@handler(ApiKey.DELETE_TOPICS, min_version=1, max_version=6)
async def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if ctx.broker.cluster is not None:
        return await _cluster_delete_topics(ctx, req)
    broker = ctx.broker
    response = DeleteTopicsResponse()
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    for name, topic_id in wanted:
        result = DeleteTopicsResponse.DeletableTopicResult(name=name)
        response.responses.append(result)
        if name is None:
            info = broker.topics.by_id(topic_id) if topic_id is not None else None
            if info is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_ID
                result.topic_id = topic_id or result.topic_id
                continue
            name = info.name
            result.name = name
        try:
            info = await broker.delete_topic_async(name)
            result.topic_id = info.topic_id
        except BrokerError as e:
            result.error_code = e.error_code
            result.error_message = e.message
    return response


@handler(ApiKey.CREATE_PARTITIONS, min_version=0, max_version=3)
async def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    if ctx.broker.cluster is not None:
        return await _cluster_create_partitions(ctx, req)
    broker = ctx.broker
    response = CreatePartitionsResponse()
    counts = Counter(t.name for t in req.topics)
    added = 0
    for topic in req.topics:
        result = CreatePartitionsResponse.CreatePartitionsTopicResult(name=topic.name)
        response.results.append(result)
        try:
            if counts[topic.name] > 1:
                raise BrokerError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
            if topic.assignments is not None and any(
                a.broker_ids != [broker.node_id] for a in topic.assignments
            ):
                raise BrokerError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Assignments may only name this broker.")
            info = broker.topics.get(topic.name)
            new = topic.count - info.partitions if info is not None else 0
            too_many = too_many_new_partitions(added, new)
            if too_many is not None:
                log.warning(
                    "refused CreatePartitions of %s from %s (client %s): %s",
                    topic.name, ctx.connection.peer, ctx.header.client_id, too_many,
                )
                raise BrokerError(ErrorCode.INVALID_PARTITIONS, too_many)
            await broker.create_partitions_async(topic.name, topic.count, validate_only=req.validate_only)
            added += max(new, 0)
        except BrokerError as e:
            result.error_code = e.error_code
            result.error_message = e.message
    return response


@handler(ApiKey.DELETE_RECORDS, min_version=0, max_version=2)
async def handle_delete_records(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    partitions = ctx.broker.partitions
    response = DeleteRecordsResponse()
    moved: list[tuple[str, int, int, DeleteRecordsPartitionResult]] = []
    for topic in req.topics:
        out = DeleteRecordsResponse.DeleteRecordsTopicResult(name=topic.name)
        response.topics.append(out)
        for p in topic.partitions:
            result = DeleteRecordsResponse.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1)
            out.partitions.append(result)
            lp = partitions.leader(topic.name, p.partition_index)
            if isinstance(lp, ErrorCode):
                result.error_code = lp
                continue
            offset = lp.log.high_watermark if p.offset == -1 else p.offset
            try:
                result.low_watermark = partitions.delete_records(lp, offset)
            except StorageError as e:
                result.error_code = storage_failure(e, f"DeleteRecords of {topic.name}-{p.partition_index}")
                continue
            moved.append((topic.name, p.partition_index, offset, result))
    if moved:
        ctx.release_turn()
        deadline = trio.current_time() + max(req.timeout_ms, 0) / 1000
        async with trio.open_nursery() as nursery:
            for name, index, offset, result in moved:
                nursery.start_soon(_await_low_watermark, partitions, name, index, offset, result, deadline)
    return response


async def _await_low_watermark(
    partitions: Partitions, topic: str, partition: int, offset: int,
    result: DeleteRecordsPartitionResult, deadline: float,
) -> None:
    result.error_code, low = await partitions.wait_low_watermark(topic, partition, offset, deadline)
    if low >= 0:
        result.low_watermark = low


# -- cluster mode: forwarded to the active controller ---------------------------------------------


def _controller_error(exc: Exception) -> ErrorCode:
    return ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))


async def _cluster_create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    broker = ctx.broker
    assert broker.cluster is not None
    ctx.release_turn()
    try:
        response: CreateTopicsResponse = await broker.cluster.channel.create_topics(req)
    except PeerError as exc:
        return CreateTopicsResponse(topics=[
            TopicResult(name=t.name, error_code=_controller_error(exc), error_message=str(exc))
            for t in req.topics
        ])
    if ctx.api_version >= 5:
        for result in response.topics:
            info = broker.topics.get(result.name)
            if result.error_code == ErrorCode.NONE and info is not None and not req.validate_only:
                result.configs = [
                    CreateTopicsResponse.CreatableTopicConfigs(
                        name=e.name, value=e.value, read_only=e.read_only,
                        config_source=e.config_source, is_sensitive=False,
                    )
                    for e in topic_config_entries(broker, info, include_synonyms=False)
                ]
    return response


async def _cluster_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    broker = ctx.broker
    assert broker.cluster is not None
    if ctx.api_version < 6:
        # The channel speaks v6, where topics are named in `topics` (name or id).
        req.topics = [DeleteTopicsRequest.DeleteTopicState(name=n) for n in req.topic_names]
    ctx.release_turn()
    try:
        response: DeleteTopicsResponse = await broker.cluster.channel.delete_topics(req)
    except PeerError as exc:
        return DeleteTopicsResponse(responses=[
            DeleteTopicsResponse.DeletableTopicResult(
                name=t.name, topic_id=t.topic_id, error_code=_controller_error(exc),
                error_message=str(exc),
            )
            for t in req.topics
        ])
    return response


async def _cluster_create_partitions(
    ctx: RequestContext, req: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    broker = ctx.broker
    assert broker.cluster is not None
    ctx.release_turn()
    try:
        response: CreatePartitionsResponse = await broker.cluster.channel.create_partitions(req)
    except PeerError as exc:
        return CreatePartitionsResponse(results=[
            CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=t.name, error_code=_controller_error(exc), error_message=str(exc)
            )
            for t in req.topics
        ])
    return response
