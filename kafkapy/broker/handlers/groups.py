"""Group membership APIs: FindCoordinator (10) v0-6, JoinGroup (11) v0-9, SyncGroup (14)
v0-5, Heartbeat (12) v0-4, LeaveGroup (13) v0-5, DescribeGroups (15) v0-5, ListGroups (16)
v0-5, DeleteGroups (42) v0-2.

Behaviour: each handler translates the wire message into a `GroupCoordinator` call (through the
broker's `GroupDriver`, which persists records and completes pending responses) and back.
JoinGroup and SyncGroup may wait for the rebalance; they release the connection's turn first so
the same connection's heartbeats and commits are not stuck behind them.

- FindCoordinator: the coordinator is the leader of the key's partition of
  `__consumer_offsets` / `__transaction_state` (created through the controller by the first
  lookup, as Kafka does; COORDINATOR_NOT_AVAILABLE until it has a leader), with its endpoint for
  the listener the request came in on; the v4+ batched form answers each key. A leader this
  node just saw die is not named: the answer waits (up to 3 s) for its fence and the new
  leader, else COORDINATOR_NOT_AVAILABLE. Key types other
  than 0 (group) and 1 (transaction) -> INVALID_REQUEST; during shutdown
  COORDINATOR_NOT_AVAILABLE, so clients retry instead of waiting on a closing broker.
- A group whose partition this broker does not lead answers NOT_COORDINATOR
  (COORDINATOR_LOAD_IN_PROGRESS while it loads); ListGroups lists the groups led here.
- JoinGroup: v4+ clients must rejoin with the member id handed out in MEMBER_ID_REQUIRED; v0
  has no rebalance timeout (the session timeout is used, as in Kafka).
- LeaveGroup: v0-2 name one member (its error is the top-level error), v3+ a batch.
- DescribeGroups v3+: `authorized_operations` as Kafka without an authorizer reports them (every
  operation a group supports) when the client asks, else the "not requested" sentinel.
- A failed write to `__consumer_offsets` (see group_driver) answers the code Kafka gives for the
  API: NOT_COORDINATOR for a storage error, COORDINATOR_NOT_AVAILABLE for a missing partition.

KIP-848 consumer groups (ConsumerGroupHeartbeat, ConsumerGroupDescribe) are in
consumer_groups.py, which shares the group driver with this module. ListGroups
shows them with type `consumer`, DeleteGroups deletes empty ones; DescribeGroups (the classic
API) answers GROUP_ID_NOT_FOUND (state Dead) for them, as Kafka 4.x does, so admin clients fall
back to ConsumerGroupDescribe.

Authorization (an authorizer configured; Kafka's checks, GROUP_AUTHORIZATION_FAILED unless
said): FindCoordinator DESCRIBE on the group / transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
for the latter), per key; Join/Sync/Heartbeat/LeaveGroup READ on the group; DescribeGroups
DESCRIBE per group (and its authorized operations are the principal's); ListGroups lists every
group with DESCRIBE on the cluster, else the groups it may DESCRIBE; DeleteGroups DELETE per group.

Not yet: upgrading a classic group with members to the consumer protocol (refused with
INCONSISTENT_GROUP_PROTOCOL / GROUP_ID_NOT_FOUND).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker import runtime as runtime_port
from kafkapy.broker.clock import now_ms
from kafkapy.broker.context import RequestContext
from kafkapy.broker.group_driver import GroupDriver, GroupWriteError
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.internal_topics import coordinator_node, partition_leader
from kafkapy.broker.request_ports import RequestPorts
from kafkapy.broker.txn_driver import TRANSACTION_STATE_TOPIC, TxnDriver
from kafkapy.coordinator.group import (
    CONSUMER_OFFSETS_TOPIC,
    PENDING,
    DescribedGroup,
    GroupCoordinator,
    JoinGroupResult,
    LeaveGroupResult,
    Result,
    SyncGroupResult,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.acl_operations import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

__all__ = [
    "handle_delete_groups",
    "handle_describe_groups",
    "handle_find_coordinator",
    "handle_heartbeat",
    "handle_join_group",
    "handle_leave_group",
    "handle_list_groups",
    "handle_sync_group",
]

GROUP_KEY, TRANSACTION_KEY = 0, 1

# KIP-430 DescribeGroups authorized operations: with no authorizer configured Kafka reports
# every operation a group supports (READ, DELETE, DESCRIBE and the group configs' DESCRIBE_CONFIGS
# and ALTER_CONFIGS, as bits); a client that did
# not ask gets the "not requested" sentinel.
GROUP_AUTHORIZED_OPERATIONS = GROUP_OPERATIONS

A = TypeVar("A", JoinGroupResult, SyncGroupResult)


def _may(ctx: RequestContext, operation: AclOperation, group_id: str) -> bool:
    return ctx.authorize(operation, ResourceType.GROUP, group_id)


def _client_host(ctx: RequestContext) -> str:
    """Kafka reports the client's address as "/ip"."""
    host = ctx.connection.peer.rsplit(":", 1)[0]
    return f"/{host}"


# -- FindCoordinator ---------------------------------------------------------------------------


@handler(ApiKey.FIND_COORDINATOR, min_version=0, max_version=6)
async def handle_find_coordinator(
    ctx: RequestContext, req: FindCoordinatorRequest
) -> FindCoordinatorResponse:
    ports = ctx.ports
    keys = req.coordinator_keys if ctx.api_version >= 4 else [req.key]
    if ctx.api_version == 0:
        key_type = GROUP_KEY
    else:
        key_type = req.key_type
    if not ports.local.shutting_down and key_type in (GROUP_KEY, TRANSACTION_KEY):
        resource = ResourceType.GROUP if key_type == GROUP_KEY else ResourceType.TRANSACTIONAL_ID
        denied = ctx.unauthorized(AclOperation.DESCRIBE, resource, keys)
        return await _find_in_cluster(ctx, keys, key_type, denied)
    if ports.local.shutting_down:  # send clients elsewhere (or to retry) rather than to us
        error, message = ErrorCode.COORDINATOR_NOT_AVAILABLE, "the broker is shutting down"
    else:
        error, message = ErrorCode.INVALID_REQUEST, f"unknown coordinator key type {key_type}"
    node, h, p = -1, "", -1
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(
            coordinators=[
                FindCoordinatorResponse.Coordinator(
                    key=k, node_id=node, host=h, port=p, error_code=error, error_message=message
                )
                for k in keys
            ]
        )
    return FindCoordinatorResponse(
        error_code=error, error_message=message, node_id=node, host=h, port=p
    )


#: how long FindCoordinator waits for a coordinator partition this node is loading
LOAD_WAIT_S = 2.0


async def _wait_for_local_load(runtime: GroupDriver | TxnDriver, key: str) -> None:
    """This node leads `key`'s partition but is still loading it (typically the internal topic
    was created by this very FindCoordinator): answer once the load is done, within
    `LOAD_WAIT_S`, so the client's next request does not meet COORDINATOR_LOAD_IN_PROGRESS -
    kafkajs's consumer treats that answer to its first JoinGroup as a crash."""
    if runtime.coordinator_for(key) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
        with runtime_port.get().move_on_after(LOAD_WAIT_S):
            await runtime.owned.wait_loaded(runtime.partition_for(key))


#: how long FindCoordinator waits for the fence of a coordinator whose connection just failed
GONE_WAIT_S = 3.0


async def _wait_for_fence(ports: RequestPorts, topic: str, partition: int) -> None:
    """The partition's leader is a node this one just saw die (`ClusterNode.seen_gone`): wait,
    within `GONE_WAIT_S`, for the controller to fence it and elect another leader (usually
    milliseconds), so the client is told the new coordinator at once. Answering
    COORDINATOR_NOT_AVAILABLE straight away is no better: librdkafka's admin client retries
    FindCoordinator only a few times, then waits for a broker state change, times out, and
    aborts (librdkafka 2.16) when the lookup completes after its request timed out."""
    cluster = ports.metadata
    with runtime_port.get().move_on_after(GONE_WAIT_S):
        while True:
            found = partition_leader(ports.internal_topics, topic, partition)
            if found is None or found[0] < 0 or found[0] == ports.local.node_id:
                return
            if not cluster.seen_gone(found[0]):
                return
            await runtime_port.get().sleep(0.01)


async def _find_in_cluster(
    ctx: RequestContext, keys: list[str], key_type: int, denied: set[str]
) -> FindCoordinatorResponse:
    """Each key's coordinator is the leader of its internal-topic partition (`denied`: keys the
    principal may not DESCRIBE)."""
    ports = ctx.ports
    partition_of: Callable[[str], int]
    runtime: GroupDriver | TxnDriver
    if key_type == GROUP_KEY:
        groups = await ports.groups.ready()
        exists = await groups.ensure_topic()
        topic, partition_of, runtime = CONSUMER_OFFSETS_TOPIC, groups.partition_for, groups
    else:
        txns = await ports.transactions.ready()
        exists = await txns.ensure_topic()
        topic, partition_of, runtime = TRANSACTION_STATE_TOPIC, txns.partition_for, txns
    answers = []
    refusal = (
        ErrorCode.GROUP_AUTHORIZATION_FAILED if key_type == GROUP_KEY
        else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    )
    for k in keys:
        if k in denied:
            error, node, host, port = refusal, -1, "", -1
        elif exists:
            await _wait_for_fence(ports, topic, partition_of(k))
            error, node, host, port = coordinator_node(
                ports.internal_topics, topic, partition_of(k), ctx.connection.listener_name
            )
            if error is ErrorCode.NONE and node == ports.local.node_id:
                await _wait_for_local_load(runtime, k)
        else:
            error, node, host, port = ErrorCode.COORDINATOR_NOT_AVAILABLE, -1, "", -1
        message = None
        if error is ErrorCode.COORDINATOR_NOT_AVAILABLE:
            message = f"no leader for the {topic} partition yet"
        answers.append(
            FindCoordinatorResponse.Coordinator(
                key=k,
                node_id=node,
                host=host,
                port=port,
                error_code=error,
                error_message=message,
            )
        )
    if ctx.api_version >= 4:
        return FindCoordinatorResponse(coordinators=answers)
    a = answers[0]
    return FindCoordinatorResponse(
        error_code=a.error_code,
        error_message=a.error_message,
        node_id=a.node_id,
        host=a.host,
        port=a.port,
    )


# -- JoinGroup / SyncGroup ---------------------------------------------------------------------


def _join_response(version: int, r: JoinGroupResult) -> JoinGroupResponse:
    return JoinGroupResponse(
        error_code=r.error,
        generation_id=r.generation_id,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name if r.protocol_name is not None or version >= 7 else "",
        leader=r.leader,
        skip_assignment=r.skip_assignment,
        member_id=r.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in r.members
        ],
    )


async def _settle(
    ctx: RequestContext,
    driver: GroupDriver,
    request_id: int,
    result: Result[A],
    kind: type[A],
    failed: Callable[[ErrorCode], A],
) -> A:
    """Persist a Join/SyncGroup result and, if the coordinator answered PENDING, wait for the
    rebalance - after releasing the connection's turn, so the same connection's heartbeats and
    commits are not stuck behind it. A failed write of the group's metadata answers
    `failed(code)` with the code Kafka gives for it (NOT_COORDINATOR: find us again, rejoin)."""
    try:
        answer = await driver.finish(result)
    except GroupWriteError as exc:
        driver.forget(request_id)
        return failed(exc.group_error)
    except BaseException:
        driver.forget(request_id)
        raise
    if answer is PENDING:
        ctx.release_turn()
        waited = await driver.wait(request_id)
        assert isinstance(waited, kind)
        return waited
    return answer


@handler(ApiKey.JOIN_GROUP, min_version=0, max_version=9)
async def handle_join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    if not _may(ctx, AclOperation.READ, req.group_id):
        return _join_response(
            ctx.api_version, JoinGroupResult(ErrorCode.GROUP_AUTHORIZATION_FAILED, member_id=req.member_id)
        )
    driver = await ctx.groups.ready()
    coordinator = driver.coordinator_for(req.group_id)
    if isinstance(coordinator, ErrorCode):
        return _join_response(
            ctx.api_version, JoinGroupResult(coordinator, member_id=req.member_id)
        )
    request_id = driver.next_request_id()
    result = coordinator.join_group(
        request_id=request_id,
        group_id=req.group_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if ctx.api_version >= 5 else None,
        client_id=ctx.header.client_id or "",
        client_host=_client_host(ctx),
        session_timeout_ms=req.session_timeout_ms,
        rebalance_timeout_ms=req.rebalance_timeout_ms if ctx.api_version >= 1 else -1,
        protocol_type=req.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
        require_known_member_id=ctx.api_version >= 4,
        now_ms=now_ms(),
    )
    answer = await _settle(
        ctx,
        driver,
        request_id,
        result,
        JoinGroupResult,
        lambda code: JoinGroupResult(code, member_id=req.member_id),
    )
    return _join_response(ctx.api_version, answer)


@handler(ApiKey.SYNC_GROUP, min_version=0, max_version=5)
async def handle_sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    if not _may(ctx, AclOperation.READ, req.group_id):
        return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    driver = await ctx.groups.ready()
    coordinator = driver.coordinator_for(req.group_id)
    if isinstance(coordinator, ErrorCode):
        return SyncGroupResponse(error_code=coordinator)
    request_id = driver.next_request_id()
    v5 = ctx.api_version >= 5
    result = coordinator.sync_group(
        request_id=request_id,
        group_id=req.group_id,
        generation_id=req.generation_id,
        member_id=req.member_id,
        group_instance_id=req.group_instance_id if ctx.api_version >= 3 else None,
        protocol_type=req.protocol_type if v5 else None,
        protocol_name=req.protocol_name if v5 else None,
        assignments=[(a.member_id, bytes(a.assignment)) for a in req.assignments],
        now_ms=now_ms(),
    )
    answer = await _settle(ctx, driver, request_id, result, SyncGroupResult, SyncGroupResult)
    return SyncGroupResponse(
        error_code=answer.error,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name,
        assignment=answer.assignment,
    )


# -- Heartbeat / LeaveGroup --------------------------------------------------------------------


@handler(ApiKey.HEARTBEAT, min_version=0, max_version=4)
async def handle_heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    if not _may(ctx, AclOperation.READ, req.group_id):
        return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    driver = await ctx.groups.ready()
    coordinator = driver.coordinator_for(req.group_id)
    if isinstance(coordinator, ErrorCode):
        return HeartbeatResponse(error_code=coordinator)
    error = await driver.finish(
        coordinator.heartbeat(
            group_id=req.group_id,
            generation_id=req.generation_id,
            member_id=req.member_id,
            group_instance_id=req.group_instance_id if ctx.api_version >= 3 else None,
            now_ms=now_ms(),
        )
    )
    assert isinstance(error, ErrorCode)
    return HeartbeatResponse(error_code=error)


@handler(ApiKey.LEAVE_GROUP, min_version=0, max_version=5)
async def handle_leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    if not _may(ctx, AclOperation.READ, req.group_id):
        return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    driver = await ctx.groups.ready()
    batched = ctx.api_version >= 3
    members: list[tuple[str, str | None]] = (
        [(m.member_id, m.group_instance_id) for m in req.members]
        if batched
        else [(req.member_id, None)]
    )
    coordinator = driver.coordinator_for(req.group_id)
    if isinstance(coordinator, ErrorCode):
        return LeaveGroupResponse(error_code=coordinator)
    try:
        answer = await driver.finish(
            coordinator.leave_group(group_id=req.group_id, members=members, now_ms=now_ms())
        )
    except GroupWriteError as exc:  # reverted: the members stay until their sessions expire
        return LeaveGroupResponse(error_code=exc.group_error)
    assert isinstance(answer, LeaveGroupResult)
    if not batched:
        error = answer.error if answer.error is not ErrorCode.NONE else answer.members[0].error
        return LeaveGroupResponse(error_code=error)
    return LeaveGroupResponse(
        error_code=answer.error,
        members=[
            LeaveGroupResponse.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error
            )
            for m in answer.members
        ],
    )


# -- DescribeGroups / ListGroups / DeleteGroups ------------------------------------------------


@handler(ApiKey.DESCRIBE_GROUPS, min_version=0, max_version=5)
async def handle_describe_groups(
    ctx: RequestContext, req: DescribeGroupsRequest
) -> DescribeGroupsResponse:
    driver = await ctx.groups.ready()
    asked = ctx.api_version >= 3 and req.include_authorized_operations
    denied = ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.GROUP, req.groups)
    response = DescribeGroupsResponse(
        groups=[
            DescribeGroupsResponse.DescribedGroup(
                error_code=g.error,
                group_id=g.group_id,
                group_state=g.state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol,
                authorized_operations=(
                    ctx.authorized_operations(ResourceType.GROUP, g.group_id, GROUP_AUTHORIZED_OPERATIONS)
                    if asked
                    else AUTHORIZED_OPERATIONS_OMITTED
                ),
                members=[
                    DescribeGroupsResponse.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in g.members
                ],
            )
            for g in _describe(driver, [gid for gid in req.groups if gid not in denied])
        ]
    )
    if denied:
        # in request order, as Kafka answers
        described = {g.group_id: g for g in response.groups}
        response.groups = [
            described.get(gid) or DescribeGroupsResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=gid,
                authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
            )
            for gid in req.groups
        ]
    return response


def _describe(driver: GroupDriver, group_ids: list[str]) -> list[DescribedGroup]:
    """Each group from its coordinator, in request order; a group led elsewhere (or loading)
    carries that error."""
    out: list[DescribedGroup] = []
    for gid in group_ids:
        coordinator = driver.coordinator_for(gid)
        if isinstance(coordinator, ErrorCode):
            out.append(DescribedGroup(coordinator, gid, ""))
        else:
            out.extend(coordinator.describe_groups([gid]))
    return out


@handler(ApiKey.LIST_GROUPS, min_version=0, max_version=5)
async def handle_list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    driver = await ctx.groups.ready()
    listed = [
        g
        for coordinator in driver.coordinators()
        for g in coordinator.list_groups(
            states_filter=list(req.states_filter) if ctx.api_version >= 4 else None,
            types_filter=list(req.types_filter) if ctx.api_version >= 5 else None,
        )
    ]
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        denied = ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.GROUP, (g.group_id for g in listed))
        listed = [g for g in listed if g.group_id not in denied]
    loading = bool(driver.owned.loading())
    return ListGroupsResponse(
        error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE,
        groups=[
            ListGroupsResponse.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in listed
        ],
    )


@handler(ApiKey.DELETE_GROUPS, min_version=0, max_version=2)
async def handle_delete_groups(
    ctx: RequestContext, req: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    driver = await ctx.groups.ready()
    by_coordinator: dict[int, tuple[GroupCoordinator, list[str]]] = {}
    refused: dict[str, ErrorCode] = {}
    denied = ctx.unauthorized(AclOperation.DELETE, ResourceType.GROUP, req.groups_names)
    for gid in req.groups_names:
        if gid in denied:
            refused[gid] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            continue
        coordinator = driver.coordinator_for(gid)
        if isinstance(coordinator, ErrorCode):
            refused[gid] = coordinator
        else:
            by_coordinator.setdefault(id(coordinator), (coordinator, []))[1].append(gid)
    answered: dict[str, ErrorCode] = dict(refused)
    for coordinator, group_ids in by_coordinator.values():
        try:
            done = await driver.finish(
                coordinator.delete_groups(group_ids=group_ids, now_ms=now_ms())
            )
        except GroupWriteError as exc:  # groups in other partitions may have been deleted
            failed = exc.response if isinstance(exc.response, list) else []
            done = [(g, exc.group_error if g in exc.groups else e) for g, e in failed]
        assert isinstance(done, list)
        answered.update(done)
    # several coordinators: answer in request order
    return DeleteGroupsResponse(
        results=[
            DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=answered[g])
            for g in req.groups_names if g in answered
        ]
    )
