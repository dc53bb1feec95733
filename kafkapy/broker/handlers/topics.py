"""Topic administration: CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6,
CreatePartitions (key 37) v0-3, DeleteRecords (key 21) v0-2.

CreateTopics, DeleteTopics and CreatePartitions are forwarded as they are to the active
controller (`ControllerChannel`; on a quorum of one, the node's own controller, in-process),
which decides - `kafkapy.controller.topics` has the rules: defaults for -1 counts, placement over
the registered brokers (INVALID_REPLICATION_FACTOR / INVALID_REPLICA_ASSIGNMENT), config
validation (INVALID_CONFIG), names (INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS, a name
repeated in one request INVALID_REQUEST), internal topics and `delete.topic.enable`, growth only
(INVALID_PARTITIONS), and Kafka's per-request limit of 10,000 partitions (POLICY_VIOLATION /
INVALID_PARTITIONS, logged). The answer comes back once this broker's own image holds the
result, so a Metadata request right after sees it; v5+ CreateTopics answers carry every config
of the new topic. No active controller within the request timeout -> NOT_CONTROLLER (retriable).

DeleteRecords moves the log start offset (-1 means the high watermark; beyond it
OFFSET_OUT_OF_RANGE). It is served by the partition's leader only (elsewhere
NOT_LEADER_OR_FOLLOWER, so the client refreshes its metadata) and answers, as Kafka's
DelayedDeleteRecords does, once the low watermark - the lowest log start over the leader and
every replica on an unfenced ports, as their fetches report it - reached the offset;
REQUEST_TIMED_OUT at the request's `timeout_ms` (the leader's log start has moved; the followers
follow it from its Fetch answers).

Authorization (an authorizer configured; Kafka's checks, TOPIC_AUTHORIZATION_FAILED per topic):
CreateTopics CREATE on the cluster or the topic (and a v5+ answer's configs need
DESCRIBE_CONFIGS), DeleteTopics and DeleteRecords DELETE, CreatePartitions ALTER. The broker
checks with the caller's principal and forwards only the topics that passed.

Quotas (`controller_mutation_rate`, `handlers/shared/mutation_quota.py`): each topic costs its
partitions; over the quota strict versions get THROTTLING_QUOTA_EXCEEDED for the topics met while
the client's bucket is below zero, every version gets throttle_time_ms (and a muted connection).

Not yet: topic creation policies.

Controller listener (`@controller_handler`, the request a broker forwards to the active
controller): CreateTopics (19) v2-7, DeleteTopics (20) v1-6 and CreatePartitions (37) v0-3, each
one QuorumController operation answered once its records are committed.

Not yet: CreateTopics v0-1.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker import runtime
from kafkapy.broker.context import RequestContext
from kafkapy.broker.controller_tags import set_metadata_offset
from kafkapy.broker.errors import PeerError, storage_failure
from kafkapy.broker.handlers.registry import controller_handler, handler
from kafkapy.broker.handlers.shared.config_entries import topic_config_entries
from kafkapy.broker.handlers.shared.controller import (
    ZERO_UUID,
    log_limit_refusals,
    run_on_controller,
)
from kafkapy.broker.handlers.shared.mutation_quota import (
    THROTTLED_MESSAGE,
    THROTTLING,
    charge_mutations,
)
from kafkapy.broker.partitions import LeaderPartition, Partitions
from kafkapy.broker.remote_fetch import is_tiered
from kafkapy.controller.controller import (
    NewPartitions,
    NewTopic,
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
    CreateTopicsResponse_CreatableTopicConfigs as TopicConfig,
)
from kafkapy.protocol.messages.create_topics import (
    CreateTopicsResponse_CreatableTopicResult as TopicResult,
)
from kafkapy.protocol.messages.delete_records import (
    DeleteRecordsResponse_DeleteRecordsPartitionResult as DeleteRecordsPartitionResult,
)
from kafkapy.protocol.messages.delete_topics import (
    DeleteTopicsRequest_DeleteTopicState as DeleteTopicState,
)
from kafkapy.protocol.messages.delete_topics import (
    DeleteTopicsResponse_DeletableTopicResult as DeletedTopic,
)
from kafkapy.storage.errors import StorageError
from kafkapy.storage.remote.layout import TopicIdPartition

__all__ = [
    "handle_create_partitions",
    "handle_create_topics",
    "handle_delete_records",
    "handle_delete_topics",
]

log = logging.getLogger(__name__)


@handler(ApiKey.CREATE_TOPICS, min_version=2, max_version=7)
async def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    ports = ctx.ports
    denied: set[str] = set()
    if ports.authorizer is not None and not ctx.authorize_cluster(AclOperation.CREATE):
        denied = ctx.unauthorized(AclOperation.CREATE, ResourceType.TOPIC, (t.name for t in req.topics))
    refused = [
        TopicResult(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for t in req.topics if t.name in denied
    ]
    ctx.release_turn()
    if refused and len(refused) == len(req.topics):
        return CreateTopicsResponse(topics=refused)
    if refused:
        req = dataclasses.replace(req, topics=[t for t in req.topics if t.name not in denied])
    default = ports.config.get_int("num.partitions")
    throttled = charge_mutations(
        ctx,
        ((t.name, t.num_partitions if t.num_partitions > 0 else len(t.assignments) or default) for t in req.topics),
        validate_only=req.validate_only,
    )
    if throttled:
        refused += [
            TopicResult(name=t.name, error_code=THROTTLING, error_message=THROTTLED_MESSAGE)
            for t in req.topics if t.name in throttled
        ]
        req = dataclasses.replace(req, topics=[t for t in req.topics if t.name not in throttled])
        if not req.topics:
            return CreateTopicsResponse(topics=refused, throttle_time_ms=ctx.throttle_ms)
    absent = {t.name for t in req.topics if ports.topics.get(t.name) is None}
    try:
        response: CreateTopicsResponse = await ports.controller.create_topics(req)
    except PeerError as exc:
        response = CreateTopicsResponse(topics=[
            TopicResult(name=t.name, error_code=_controller_error(exc), error_message=str(exc))
            for t in req.topics
        ])
    if not req.validate_only:
        for result in response.topics:
            if result.name in absent:
                _created_meanwhile(ctx, result)
    response.topics += refused
    response.throttle_time_ms = ctx.throttle_ms
    if ctx.api_version >= 5:
        _describe_created_configs(ctx, response, req.validate_only)
    return response


def _describe_created_configs(ctx: RequestContext, response: CreateTopicsResponse,
                              validate_only: bool) -> None:
    """Each created topic's configs in the answer (v5+), computed once per distinct set of
    topic overrides: a CreateTopics of thousands of topics at the defaults spent seconds
    building the same forty entries per topic."""
    ports = ctx.ports
    by_overrides: dict[tuple[tuple[str, str], ...], list[TopicConfig]] = {}
    for result in response.topics:
        info = ports.topics.get(result.name)
        if result.error_code != ErrorCode.NONE or info is None or validate_only:
            continue
        if not ctx.authorize(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, result.name):
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            continue
        overrides = tuple(sorted(info.configs.items()))
        configs = by_overrides.get(overrides)
        if configs is None:
            configs = by_overrides[overrides] = [
                CreateTopicsResponse.CreatableTopicConfigs(
                    name=e.name, value=e.value, read_only=e.read_only,
                    config_source=e.config_source, is_sensitive=False,
                )
                for e in topic_config_entries(ports, info, include_synonyms=False)
            ]
        result.configs = list(configs)


@handler(ApiKey.DELETE_TOPICS, min_version=1, max_version=6)
async def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if ctx.api_version < 6:
        # The channel speaks v6, where topics are named in `topics` (name or id).
        req.topics = [DeleteTopicsRequest.DeleteTopicState(name=n) for n in req.topic_names]
    refused: list[DeletedTopic] = []
    if ctx.authorizer is not None:
        req, refused = _authorize_deletes(ctx, req)
    throttled = charge_mutations(ctx, ((_topic_ref(t), _partitions_of(ctx, t)) for t in req.topics))
    if throttled:
        refused += [
            DeleteTopicsResponse.DeletableTopicResult(
                name=t.name, topic_id=t.topic_id, error_code=THROTTLING, error_message=THROTTLED_MESSAGE
            )
            for t in req.topics if _topic_ref(t) in throttled
        ]
        req = dataclasses.replace(req, topics=[t for t in req.topics if _topic_ref(t) not in throttled])
    ctx.release_turn()
    if not req.topics:
        return DeleteTopicsResponse(responses=refused, throttle_time_ms=ctx.throttle_ms)
    try:
        response: DeleteTopicsResponse = await ctx.controller.delete_topics(req)
    except PeerError as exc:
        return DeleteTopicsResponse(responses=[
            DeleteTopicsResponse.DeletableTopicResult(
                name=t.name, topic_id=t.topic_id, error_code=_controller_error(exc),
                error_message=str(exc),
            )
            for t in req.topics
        ] + refused, throttle_time_ms=ctx.throttle_ms)
    response.responses += refused
    response.throttle_time_ms = ctx.throttle_ms
    return response


def _topic_ref(t: DeleteTopicState) -> str:
    """A topic to delete as one string key: its name, else its id."""
    return t.name if t.name is not None else str(t.topic_id)


def _partitions_of(ctx: RequestContext, t: DeleteTopicState) -> int:
    topics = ctx.topics
    info = topics.get(t.name) if t.name is not None else topics.by_id(t.topic_id)
    return info.partitions if info is not None else 0


def _authorize_deletes(
    ctx: RequestContext, req: DeleteTopicsRequest
) -> tuple[DeleteTopicsRequest, list[DeletedTopic]]:
    """DELETE per topic (named, or by an id this node knows; an unknown id is the controller's
    UNKNOWN_TOPIC_ID to give)."""
    topics = ctx.topics
    kept, refused = [], []
    for t in req.topics:
        name = t.name
        if name is None:
            info = topics.by_id(t.topic_id)
            name = info.name if info is not None else None
        if name is not None and not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
            refused.append(DeleteTopicsResponse.DeletableTopicResult(
                name=t.name, topic_id=t.topic_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            ))
        else:
            kept.append(t)
    return dataclasses.replace(req, topics=kept), refused


@handler(ApiKey.CREATE_PARTITIONS, min_version=0, max_version=3)
async def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    denied = ctx.unauthorized(AclOperation.ALTER, ResourceType.TOPIC, (t.name for t in req.topics))
    refused = [
        CreatePartitionsResponse.CreatePartitionsTopicResult(
            name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED
        )
        for t in req.topics if t.name in denied
    ]
    ctx.release_turn()
    if denied:
        req = dataclasses.replace(req, topics=[t for t in req.topics if t.name not in denied])
    topics = ctx.topics
    throttled = charge_mutations(
        ctx,
        ((t.name, max(0, t.count - (info.partitions if (info := topics.get(t.name)) else t.count))) for t in req.topics),
        validate_only=req.validate_only,
    )
    if throttled:
        refused += [
            CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=t.name, error_code=THROTTLING, error_message=THROTTLED_MESSAGE
            )
            for t in req.topics if t.name in throttled
        ]
        req = dataclasses.replace(req, topics=[t for t in req.topics if t.name not in throttled])
    if not req.topics:
        return CreatePartitionsResponse(results=refused, throttle_time_ms=ctx.throttle_ms)
    try:
        response: CreatePartitionsResponse = await ctx.controller.create_partitions(req)
    except PeerError as exc:
        return CreatePartitionsResponse(results=[
            CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=t.name, error_code=_controller_error(exc), error_message=str(exc)
            )
            for t in req.topics
        ] + refused, throttle_time_ms=ctx.throttle_ms)
    response.results += refused
    response.throttle_time_ms = ctx.throttle_ms
    return response


_OUTCOME_UNKNOWN = frozenset({ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT})


def _created_meanwhile(ctx: RequestContext, result: TopicResult) -> None:
    """An answer that leaves the outcome open (no controller answer, NOT_CONTROLLER,
    REQUEST_TIMED_OUT - a commit slowed by a full disk) for a topic that was absent when the
    request came and is published now: the controller committed it, so the answer is success.
    Never an error answer for a topic that exists: the client's retry would meet
    TOPIC_ALREADY_EXISTS for its own topic."""
    topic = ctx.metadata.image.topics.get(result.name)
    if result.error_code not in _OUTCOME_UNKNOWN or topic is None:
        return
    first = topic.partitions.get(0)
    result.error_code, result.error_message = ErrorCode.NONE, None
    result.topic_id, result.num_partitions = topic.topic_id, len(topic.partitions)
    result.replication_factor = len(first.replicas) if first is not None else -1


def _controller_error(exc: Exception) -> ErrorCode:
    return ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))


@handler(ApiKey.DELETE_RECORDS, min_version=0, max_version=2)
async def handle_delete_records(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    partitions = ctx.partitions
    response = DeleteRecordsResponse()
    moved: list[tuple[str, int, int, DeleteRecordsPartitionResult]] = []
    denied = ctx.unauthorized(AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in req.topics))
    for topic in req.topics:
        out = DeleteRecordsResponse.DeleteRecordsTopicResult(name=topic.name)
        response.topics.append(out)
        for p in topic.partitions:
            result = DeleteRecordsResponse.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1)
            out.partitions.append(result)
            if topic.name in denied:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            lp = partitions.leader(topic.name, p.partition_index)
            if isinstance(lp, ErrorCode):
                result.error_code = lp
                continue
            offset = lp.log.high_watermark if p.offset == -1 else p.offset
            try:
                remote_start = _delete_remote_records(ctx, lp, offset)
                if remote_start is not None:
                    result.low_watermark = remote_start
                    continue
                result.low_watermark = partitions.delete_records(lp, offset)
            except StorageError as e:
                result.error_code = storage_failure(e, f"DeleteRecords of {topic.name}-{p.partition_index}")
                continue
            moved.append((topic.name, p.partition_index, offset, result))
    if moved:
        ctx.release_turn()
        deadline = runtime.get().current_time() + max(req.timeout_ms, 0) / 1000
        async with runtime.get().task_group() as nursery:
            for name, index, offset, result in moved:
                nursery.start_soon(_await_low_watermark, partitions, name, index, offset, result, deadline)
    return response


def _delete_remote_records(ctx: RequestContext, lp: LeaderPartition, offset: int) -> int | None:
    """DeleteRecords below the local log start of a tiered topic (KIP-405): the log start over
    both tiers moves to `offset` (never down) and is the answer; the remote log manager's
    retention pass deletes the remote segments wholly below it, and fetches below it answer
    OFFSET_OUT_OF_RANGE. None: not that case (the local log's DeleteRecords applies)."""
    tier = ctx.ports.remote_tier
    info = ctx.topics.get(lp.topic)
    if tier is None or info is None or not is_tiered(info.configs):
        return None
    local_start = lp.log.log_start_offset
    tp = TopicIdPartition(lp.topic, info.topic_id, lp.partition)
    cache = tier.metadata.cache(tp)
    if not 0 <= offset < local_start or cache is None or cache.log_start_offset() is None:
        return None
    tier.advance_log_start(tp, offset, lp.log.directory)
    return tier.log_start_offset(lp.topic, info.topic_id, lp.partition, local_start)


async def _await_low_watermark(
    partitions: Partitions, topic: str, partition: int, offset: int,
    result: DeleteRecordsPartitionResult, deadline: float,
) -> None:
    result.error_code, low = await partitions.wait_low_watermark(topic, partition, offset, deadline)
    if low >= 0:
        result.low_watermark = low


@controller_handler(ApiKey.CREATE_TOPICS, min_version=2, max_version=7)
async def handle_create_topics_on_controller(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    topics: list[NewTopic] = []
    bad: dict[int, tuple[ErrorCode, str]] = {}
    for i, t in enumerate(req.topics):
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        if len({c.name for c in t.configs}) != len(t.configs):
            bad[i] = (ErrorCode.INVALID_REQUEST, "a config name was given more than once")
        assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments} or None
        if t.assignments and len(assignments or {}) != len(t.assignments):
            bad[i] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "a partition was assigned twice")
        topics.append(NewTopic(t.name, t.num_partitions, t.replication_factor, assignments, configs))
    good = [t for i, t in enumerate(topics) if i not in bad]
    outcome = await run_on_controller(
        ctx, lambda c: c.create_topics(good, validate_only=req.validate_only), timeout_ms=req.timeout_ms
    )
    response = CreateTopicsResponse()
    if outcome is None:
        response.topics = [
            CreateTopicsResponse.CreatableTopicResult(
                name=t.name, error_code=ErrorCode.NOT_CONTROLLER, error_message=None
            )
            for t in req.topics
        ]
        return response
    results, offset = outcome
    log_limit_refusals(ctx, "CreateTopics", [(r.name, r.message) for r in results])
    it = iter(results)
    for i, t in enumerate(req.topics):
        if i in bad:
            code, message = bad[i]
            response.topics.append(
                CreateTopicsResponse.CreatableTopicResult(
                    name=t.name, error_code=code, error_message=message
                )
            )
            continue
        r = next(it)
        out = CreateTopicsResponse.CreatableTopicResult(
            name=r.name, error_code=r.error, error_message=r.message
        )
        if r.error is ErrorCode.NONE:
            out.topic_id = r.topic_id
            out.num_partitions = r.num_partitions
            out.replication_factor = r.replication_factor
            out.configs = [
                CreateTopicsResponse.CreatableTopicConfigs(name=k, value=v, config_source=1)
                for k, v in sorted(r.configs.items())
            ]
        response.topics.append(out)
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.DELETE_TOPICS, min_version=1, max_version=6)
async def handle_delete_topics_on_controller(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if ctx.api_version >= 6:
        wanted: list[tuple[str | None, uuid.UUID | None]] = [
            (t.name, None) if t.name is not None else (None, t.topic_id) for t in req.topics
        ]
    else:
        wanted = [(name, None) for name in req.topic_names]
    names = [n for n, _ in wanted if n is not None]
    ids = [i for n, i in wanted if n is None and i is not None]
    outcome = await run_on_controller(ctx, lambda c: c.delete_topics(names, ids), timeout_ms=req.timeout_ms)
    response = DeleteTopicsResponse()
    if outcome is None:
        response.responses = [
            DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id or ZERO_UUID, error_code=ErrorCode.NOT_CONTROLLER
            )
            for name, topic_id in wanted
        ]
        return response
    results, offset = outcome
    # The controller answers the names first, then the ids: put them back in request order.
    by_name = iter(results[: len(names)])
    by_id = iter(results[len(names) :])
    for name, _ in wanted:
        r = next(by_name) if name is not None else next(by_id)
        response.responses.append(
            DeleteTopicsResponse.DeletableTopicResult(
                name=r.name, topic_id=r.topic_id, error_code=r.error, error_message=r.message
            )
        )
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.CREATE_PARTITIONS, min_version=0, max_version=3)
async def handle_create_partitions_on_controller(
    ctx: RequestContext, req: CreatePartitionsRequest
) -> CreatePartitionsResponse:
    items = [
        NewPartitions(
            t.name,
            t.count,
            [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None,
        )
        for t in req.topics
    ]
    outcome = await run_on_controller(
        ctx,
        lambda c: c.create_partitions(items, validate_only=req.validate_only),
        timeout_ms=req.timeout_ms,
    )
    response = CreatePartitionsResponse()
    if outcome is None:
        response.results = [
            CreatePartitionsResponse.CreatePartitionsTopicResult(
                name=t.name, error_code=ErrorCode.NOT_CONTROLLER
            )
            for t in req.topics
        ]
        return response
    results, offset = outcome
    log_limit_refusals(ctx, "CreatePartitions", [(r.name, r.message) for r in results])
    response.results = [
        CreatePartitionsResponse.CreatePartitionsTopicResult(
            name=r.name, error_code=r.error, error_message=r.message
        )
        for r in results
    ]
    set_metadata_offset(response, offset)
    return response
