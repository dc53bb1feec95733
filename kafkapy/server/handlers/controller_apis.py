"""Controller-listener handlers (Kafka's `ControllerApis`): the broker-to-controller RPCs,
answered by the active controller (`@controller_handler`, never on broker listeners).

BrokerRegistration (62) v0-4, BrokerHeartbeat (63) v0-1, AlterPartition (56) v0-3,
AllocateProducerIds (67) v0, and the admin requests brokers forward: CreateTopics (19) v2-7,
DeleteTopics (20) v1-6, CreatePartitions (37) v0-3, IncrementalAlterConfigs (44) v0-1,
AlterUserScramCredentials (51) v0, AlterClientQuotas (49) v0-1, AlterPartitionReassignments (45) v0, ElectLeaders (43) v0-2 (v0: PREFERRED; a null partition list answers only the partitions that
needed an election, under an entry for every topic, as Kafka does), CreateAcls (30) v1-3 and
DeleteAcls (31) v1-3 (the broker checked the caller may alter the cluster; without an
authorizer configured SECURITY_DISABLED, as the broker answers).

Behaviour: each request becomes one QuorumController operation (kafkapy.controller), run by the
ControllerDriver, which answers once its records are committed. A node that is not the active
controller (or loses leadership on the way) answers NOT_CONTROLLER everywhere a code fits, and
the sending broker's ControllerChannel retries against the new leader. Answers that changed
metadata carry the committed metadata offset in a private tagged field (see
`controller_driver.METADATA_OFFSET_TAG`), which the channel removes.

A BrokerHeartbeat may carry, in a private tagged field, the nodes whose connections failed at
the sender (`liveness.SUSPECTS_TAG`): the controller probes them (fencing a crashed broker early,
see `server/cluster/liveness.py`). A heartbeat answered unfenced without a commit (nothing
changed) is answered only while a majority of voters confirmed hearing from this controller
within the Raft fetch timeout (`RaftCore.has_quorum_contact`: by the leader clock they echo, not
by when their fetches were read - fetches sent during a pause are read after it); otherwise
NOT_CONTROLLER: a controller that resumes after a pause could otherwise renew a broker's leader
lease (lifecycle.py) - its own broker's too - from a state a newer controller has replaced,
before its own check-quorum step-down runs.

Version mapping, as Kafka does it: AlterPartition v0-1 name topics (v2+ ids; an unknown name is
UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID), v0-2 send plain ISR ids (v3 ids with
broker epochs); INELIGIBLE_REPLICA, new in v3, is OPERATION_NOT_ATTEMPTED before it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TypeVar

from kafkapy.controller.controller import (
    AlterPartitionItem,
    ConfigChange,
    ConfigOp,
    ControllerResult,
    NewPartitions,
    NewTopic,
    QuorumController,
    QuotaAlteration,
    QuotaOp,
    Reassignment,
    ScramDeletion,
    ScramUpsertion,
)
from kafkapy.controller.records import Endpoint
from kafkapy.controller.topics import is_partition_limit_refusal
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafkapy.protocol.messages.alter_partition import AlterPartitionResponse_TopicData
from kafkapy.server.cluster.controller_driver import (
    ControllerDriver,
    NotControllerError,
    monotonic_ms,
    set_metadata_offset,
)
from kafkapy.server.cluster.liveness import SUSPECTS_TAG, decode_suspects
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.registry import controller_handler
from kafkapy.server.handlers.shared.acl_wire import (
    NO_AUTHORIZER,
    create_acls_error,
    creation_binding,
    delete_acls_error,
    delete_filter,
    delete_filter_result,
)
from kafkapy.server.handlers.shared.partition_results import (
    alter_reassignments_response,
    election_response,
    requested_partitions,
)

__all__ = [
    "handle_allocate_producer_ids",
    "handle_alter_client_quotas",
    "handle_alter_partition",
    "handle_alter_partition_reassignments",
    "handle_alter_user_scram_credentials",
    "handle_broker_heartbeat",
    "handle_broker_registration",
    "handle_create_acls",
    "handle_create_partitions",
    "handle_create_topics",
    "handle_delete_acls",
    "handle_delete_topics",
    "handle_elect_leaders",
    "handle_incremental_alter_configs",
]

T = TypeVar("T")
_ZERO_UUID = uuid.UUID(int=0)

log = logging.getLogger(__name__)


def _driver(ctx: RequestContext) -> ControllerDriver | None:
    return ctx.broker.cluster.controller


def _has_quorum_contact(driver: ControllerDriver | None) -> bool:
    """Does this node's Raft leadership still hold (`RaftDriver.has_quorum_contact`)?"""
    return driver is None or driver.raft.has_quorum_contact()


#: the longest commit wait an admin request's `timeout_ms` may ask for
MAX_ADMIN_COMMIT_WAIT_S = 60.0


async def _run(
    ctx: RequestContext,
    op: Callable[[QuorumController], ControllerResult[T]],
    *,
    timeout_ms: int | None = None,
) -> tuple[T, int] | None:
    """(response, committed offset), or None when this node is not the active controller.
    `timeout_ms`: an admin request's own timeout, which bounds the wait for the commit (see
    `ControllerDriver.submit_with_offset`)."""
    driver = _driver(ctx)
    if driver is None:
        return None
    ctx.release_turn()
    wait_s = None if timeout_ms is None else min(max(timeout_ms, 0) / 1000, MAX_ADMIN_COMMIT_WAIT_S)
    try:
        return await driver.submit_with_offset(op, commit_timeout_s=wait_s)
    except NotControllerError:
        return None


# -- broker lifecycle ---------------------------------------------------------------------------


@controller_handler(ApiKey.BROKER_REGISTRATION, min_version=0, max_version=4)
async def handle_broker_registration(
    ctx: RequestContext, req: BrokerRegistrationRequest
) -> BrokerRegistrationResponse:
    endpoints = [Endpoint(x.name, x.host, x.port, x.security_protocol) for x in req.listeners]
    now = monotonic_ms()
    outcome = await _run(
        ctx,
        lambda c: c.register_broker(
            req.broker_id,
            cluster_id=req.cluster_id,
            incarnation_id=req.incarnation_id,
            endpoints=endpoints,
            rack=req.rack,
            now_ms=now,
            previous_broker_epoch=req.previous_broker_epoch,
        ),
    )
    if outcome is None:
        return BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)
    reply, offset = outcome
    response = BrokerRegistrationResponse(error_code=reply.error, broker_epoch=reply.broker_epoch)
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.BROKER_HEARTBEAT, min_version=0, max_version=1)
async def handle_broker_heartbeat(
    ctx: RequestContext, req: BrokerHeartbeatRequest
) -> BrokerHeartbeatResponse:
    now = monotonic_ms()
    driver = _driver(ctx)
    suspects = decode_suspects(req.unknown_tagged_fields.pop(SUSPECTS_TAG, None))
    if driver is not None:
        driver.touch_session(req.broker_id, req.broker_epoch)
        for node_id in suspects:
            driver.suspect(node_id, f"broker {req.broker_id} saw its connections fail")
    outcome = await _run(
        ctx,
        lambda c: c.broker_heartbeat(
            req.broker_id,
            req.broker_epoch,
            current_metadata_offset=req.current_metadata_offset,
            want_fence=req.want_fence,
            want_shutdown=req.want_shut_down,
            now_ms=now,
        ),
    )
    if outcome is None:
        return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
    reply, _ = outcome
    if not reply.is_fenced and not _has_quorum_contact(driver):
        # An answer that wrote nothing was not checked by a commit: a controller that was
        # paused or cut off (another may have fenced this broker and moved its leaderships
        # since) must not renew the broker's leader lease from its stale state.
        return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
    return BrokerHeartbeatResponse(
        error_code=reply.error,
        is_caught_up=reply.is_caught_up,
        is_fenced=reply.is_fenced,
        should_shut_down=reply.should_shut_down,
    )


@controller_handler(ApiKey.ALLOCATE_PRODUCER_IDS, min_version=0, max_version=0)
async def handle_allocate_producer_ids(
    ctx: RequestContext, req: AllocateProducerIdsRequest
) -> AllocateProducerIdsResponse:
    outcome = await _run(ctx, lambda c: c.allocate_producer_ids(req.broker_id, req.broker_epoch))
    if outcome is None:
        return AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    reply, _ = outcome
    return AllocateProducerIdsResponse(
        error_code=reply.error, producer_id_start=reply.start, producer_id_len=reply.length
    )


@controller_handler(ApiKey.ALTER_PARTITION, min_version=0, max_version=3)
async def handle_alter_partition(
    ctx: RequestContext, req: AlterPartitionRequest
) -> AlterPartitionResponse:
    version = ctx.api_version
    items: list[AlterPartitionItem] = []
    for topic in req.topics:
        for p in topic.partitions:
            if version >= 3:
                isr = [(b.broker_id, b.broker_epoch) for b in p.new_isr_with_epochs]
            else:
                isr = [(b, -1) for b in p.new_isr]
            items.append(
                AlterPartitionItem(
                    topic.topic_name if version < 2 else None,
                    topic.topic_id if version >= 2 else None,
                    p.partition_index,
                    p.leader_epoch,
                    isr,
                    p.partition_epoch,
                )
            )
    outcome = await _run(ctx, lambda c: c.alter_partition(req.broker_id, req.broker_epoch, items))
    if outcome is None:
        return AlterPartitionResponse(error_code=ErrorCode.NOT_CONTROLLER)
    reply, offset = outcome
    response = AlterPartitionResponse(error_code=reply.error)
    by_topic: dict[tuple[str | None, uuid.UUID | None], AlterPartitionResponse_TopicData] = {}
    for r in reply.partitions:
        key = (r.topic_name, r.topic_id)
        out = by_topic.get(key)
        if out is None:
            out = AlterPartitionResponse_TopicData(
                topic_name=r.topic_name or "", topic_id=r.topic_id or _ZERO_UUID
            )
            by_topic[key] = out
            response.topics.append(out)
        error = r.error
        if error is ErrorCode.INELIGIBLE_REPLICA and version < 3:
            error = ErrorCode.OPERATION_NOT_ATTEMPTED
        out.partitions.append(
            AlterPartitionResponse.PartitionData(
                partition_index=r.partition,
                error_code=error,
                leader_id=r.leader,
                leader_epoch=r.leader_epoch,
                isr=list(r.isr),
                partition_epoch=r.partition_epoch,
            )
        )
    set_metadata_offset(response, offset)
    return response


# -- admin requests forwarded by brokers ---------------------------------------------------------


def _log_limit_refusals(ctx: RequestContext, api: str, answers: list[tuple[str, str | None]]) -> None:
    """WARNING for the topics refused by the per-request partition limit (one line a request)."""
    refused = [name for name, message in answers if is_partition_limit_refusal(message)]
    if refused:
        message = next(m for _, m in answers if is_partition_limit_refusal(m))
        log.warning(
            "refused %s of %s forwarded by %s: %s", api, ", ".join(refused), ctx.connection.peer, message
        )


@controller_handler(ApiKey.CREATE_TOPICS, min_version=2, max_version=7)
async def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
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
    outcome = await _run(
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
    _log_limit_refusals(ctx, "CreateTopics", [(r.name, r.message) for r in results])
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
async def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    if ctx.api_version >= 6:
        wanted: list[tuple[str | None, uuid.UUID | None]] = [
            (t.name, None) if t.name is not None else (None, t.topic_id) for t in req.topics
        ]
    else:
        wanted = [(name, None) for name in req.topic_names]
    names = [n for n, _ in wanted if n is not None]
    ids = [i for n, i in wanted if n is None and i is not None]
    outcome = await _run(ctx, lambda c: c.delete_topics(names, ids), timeout_ms=req.timeout_ms)
    response = DeleteTopicsResponse()
    if outcome is None:
        response.responses = [
            DeleteTopicsResponse.DeletableTopicResult(
                name=name, topic_id=topic_id or _ZERO_UUID, error_code=ErrorCode.NOT_CONTROLLER
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
async def handle_create_partitions(
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
    outcome = await _run(
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
    _log_limit_refusals(ctx, "CreatePartitions", [(r.name, r.message) for r in results])
    response.results = [
        CreatePartitionsResponse.CreatePartitionsTopicResult(
            name=r.name, error_code=r.error, error_message=r.message
        )
        for r in results
    ]
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.ELECT_LEADERS, min_version=0, max_version=2)
async def handle_elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    election_type = req.election_type if ctx.api_version >= 1 else 0
    wanted = requested_partitions(req)
    outcome = await _run(
        ctx, lambda c: c.elect_leaders(election_type, wanted), timeout_ms=req.timeout_ms
    )
    if outcome is None:
        response = election_response(
            (t, p, ErrorCode.NOT_CONTROLLER, None) for t, p in wanted or []
        )
        response.error_code = ErrorCode.NOT_CONTROLLER
        return response
    results, offset = outcome
    names: list[str] = []
    driver = _driver(ctx)
    if wanted is None and driver is not None and (c := driver.active()) is not None:
        names = sorted(c.image.topics)
    response = election_response(((r.topic, r.partition, r.error, r.message) for r in results), names)
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, min_version=0, max_version=0)
async def handle_alter_partition_reassignments(
    ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    items = [
        Reassignment(t.name, p.partition_index, p.replicas)  # None: cancel
        for t in req.topics
        for p in t.partitions
    ]
    outcome = await _run(
        ctx, lambda c: c.alter_partition_reassignments(items), timeout_ms=req.timeout_ms
    )
    if outcome is None:
        response = alter_reassignments_response(
            [(i.topic, i.partition, ErrorCode.NOT_CONTROLLER, None) for i in items]
        )
        response.error_code = ErrorCode.NOT_CONTROLLER
        return response
    results, offset = outcome
    response = alter_reassignments_response(
        [(r.topic, r.partition, r.error, r.message) for r in results]
    )
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, min_version=0, max_version=1)
async def handle_incremental_alter_configs(
    ctx: RequestContext, req: IncrementalAlterConfigsRequest
) -> IncrementalAlterConfigsResponse:
    changes = [
        ConfigChange(
            r.resource_type,
            r.resource_name,
            [ConfigOp(c.name, c.config_operation, c.value) for c in r.configs],
        )
        for r in req.resources
    ]
    outcome = await _run(
        ctx, lambda c: c.incremental_alter_configs(changes, validate_only=req.validate_only)
    )
    response = IncrementalAlterConfigsResponse()
    Out = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    if outcome is None:
        response.responses = [
            Out(
                error_code=ErrorCode.NOT_CONTROLLER,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
            )
            for r in req.resources
        ]
        return response
    results, offset = outcome
    response.responses = [
        Out(
            error_code=r.error,
            error_message=r.message,
            resource_type=r.resource_type,
            resource_name=r.resource_name,
        )
        for r in results
    ]
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, min_version=0, max_version=0)
async def handle_alter_user_scram_credentials(
    ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    deletions = [ScramDeletion(d.name, d.mechanism) for d in req.deletions]
    upsertions = [
        ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in req.upsertions
    ]
    outcome = await _run(ctx, lambda c: c.alter_user_scram_credentials(deletions, upsertions))
    Out = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    if outcome is None:
        users = dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions])
        return AlterUserScramCredentialsResponse(
            results=[Out(user=u, error_code=ErrorCode.NOT_CONTROLLER) for u in users]
        )
    results, offset = outcome
    response = AlterUserScramCredentialsResponse(
        results=[Out(user=r.user, error_code=r.error, error_message=r.message) for r in results]
    )
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.ALTER_CLIENT_QUOTAS, min_version=0, max_version=1)
async def handle_alter_client_quotas(
    ctx: RequestContext, req: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    alterations = [
        QuotaAlteration(
            [(e.entity_type, e.entity_name) for e in entry.entity],
            [QuotaOp(op.key, None if op.remove else op.value) for op in entry.ops],
        )
        for entry in req.entries
    ]
    outcome = await _run(
        ctx, lambda c: c.alter_client_quotas(alterations, validate_only=req.validate_only)
    )
    Out = AlterClientQuotasResponse.EntryData
    Entity = AlterClientQuotasResponse.EntityData
    response = AlterClientQuotasResponse()
    if outcome is None:
        response.entries = [
            Out(
                error_code=ErrorCode.NOT_CONTROLLER,
                entity=[Entity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity],
            )
            for entry in req.entries
        ]
        return response
    results, offset = outcome
    response.entries = [
        Out(
            error_code=r.error,
            error_message=r.message,
            entity=[Entity(entity_type=t, entity_name=n) for t, n in r.entity],
        )
        for r in results
    ]
    set_metadata_offset(response, offset)
    return response


# -- ACLs (Kafka's AclControlManager, kafkapy.controller.acls) -----------------------------------


@controller_handler(ApiKey.CREATE_ACLS, min_version=1, max_version=3)
async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    if ctx.broker.authorizer is None:
        return create_acls_error(req, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    bindings = [creation_binding(c) for c in req.creations]
    outcome = await _run(ctx, lambda c: c.create_acls(bindings))
    if outcome is None:
        return create_acls_error(req, ErrorCode.NOT_CONTROLLER, None)
    results, offset = outcome
    response = CreateAclsResponse(
        results=[
            CreateAclsResponse.AclCreationResult(error_code=r.error, error_message=r.message)
            for r in results
        ]
    )
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.DELETE_ACLS, min_version=1, max_version=3)
async def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    if ctx.broker.authorizer is None:
        return delete_acls_error(req, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    filters = [delete_filter(f) for f in req.filters]
    outcome = await _run(ctx, lambda c: c.delete_acls(filters))
    if outcome is None:
        return delete_acls_error(req, ErrorCode.NOT_CONTROLLER, None)
    results, offset = outcome
    response = DeleteAclsResponse(filter_results=[delete_filter_result(r) for r in results])
    set_metadata_offset(response, offset)
    return response
