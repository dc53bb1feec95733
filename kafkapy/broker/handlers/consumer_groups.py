"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) v0-1, ConsumerGroupDescribe (69) v0.

Behaviour: the handlers translate between the wire (topic ids) and the group coordinator's
consumer-group operations (topic names, see `kafkapy.coordinator.group.consumer`), through the
broker's `GroupDriver`, which persists the records before the answer goes out. The partition
counts the server-side assignor uses are the broker's current topic table, read on every
heartbeat, so created topics and added partitions bump the group epoch at the next heartbeat.

- Heartbeat v0: a joining member (epoch 0) with an empty member id gets one from the
  coordinator; v1 (KIP-1082): the client names itself, an empty member id is INVALID_REQUEST.
- Owned partitions of deleted topics (unknown topic ids) are ignored; an assignment names
  only topics that still exist.
- The group's `__consumer_offsets` partition leader answers, as for classic
  groups (NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS elsewhere).
- Describe: `authorized_operations` as DescribeGroups reports them; a classic group or an
  unknown id is GROUP_ID_NOT_FOUND, as in Kafka.

Authorization (an authorizer configured; Kafka's checks): Heartbeat READ on the group
(GROUP_AUTHORIZATION_FAILED) and DESCRIBE on every subscribed topic (else
TOPIC_AUTHORIZATION_FAILED); Describe DESCRIBE per group (GROUP_AUTHORIZATION_FAILED), with the
principal's authorized operations, and DESCRIBE on every topic in its members' current and target
assignments (else the group is TOPIC_AUTHORIZATION_FAILED, without members).

Not yet: SubscribedTopicRegex (INVALID_REQUEST), rack-aware assignment, client-side assignors,
ShareGroup/StreamsGroup APIs, upgrading a classic group that has members.
"""

from __future__ import annotations

import uuid

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker.clock import now_ms
from kafkapy.broker.context import RequestContext
from kafkapy.broker.group_driver import GroupWriteError
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.request_ports import RequestPorts
from kafkapy.coordinator.group import DescribedConsumerGroup, HeartbeatResult
from kafkapy.protocol import ApiKey
from kafkapy.protocol.acl_operations import AUTHORIZED_OPERATIONS_OMITTED, GROUP_OPERATIONS
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kafkapy.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeResponse_Assignment,
    ConsumerGroupDescribeResponse_DescribedGroup,
)

__all__ = ["handle_consumer_group_describe", "handle_consumer_group_heartbeat"]

# as DescribeGroups (groups.py): without an authorizer every group operation (READ, DELETE,
# DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS) is allowed; a client that did not ask gets the
# "not requested" sentinel
GROUP_AUTHORIZED_OPERATIONS = GROUP_OPERATIONS


def _client_host(ctx: RequestContext) -> str:
    """Kafka reports the client's address as "/ip"."""
    return "/" + ctx.connection.peer.rsplit(":", 1)[0]


def _partition_count(ports: RequestPorts, topic: str) -> int | None:
    info = ports.topics.get(topic)
    return info.partitions if info is not None else None


def _replica_racks(ports: RequestPorts, topic: str) -> list[frozenset[str]] | None:
    """Each partition's replica racks (brokers without `broker.rack` add none), for KIP-881."""
    image = ports.metadata.image
    info = image.topics.get(topic)
    if info is None:
        return None
    out = []
    for p in range(max(info.partitions, default=-1) + 1):
        part = info.partitions.get(p)
        replicas = part.replicas if part is not None else ()
        out.append(frozenset(
            rack for r in replicas if (b := image.brokers.get(r)) is not None and (rack := b.rack)
        ))
    return out


def _heartbeat_response(ports: RequestPorts, r: HeartbeatResult) -> ConsumerGroupHeartbeatResponse:
    assignment = None
    if r.assignment is not None:
        parts = []
        for topic, partitions in sorted(r.assignment.items()):
            info = ports.topics.get(topic)
            if info is not None:
                parts.append(
                    ConsumerGroupHeartbeatResponse.TopicPartitions(
                        topic_id=info.topic_id, partitions=partitions
                    )
                )
        assignment = ConsumerGroupHeartbeatResponse.Assignment(topic_partitions=parts)
    return ConsumerGroupHeartbeatResponse(
        error_code=r.error,
        error_message=r.message,
        member_id=r.member_id,
        member_epoch=r.member_epoch,
        heartbeat_interval_ms=r.heartbeat_interval_ms,
        assignment=assignment,
    )


@handler(ApiKey.CONSUMER_GROUP_HEARTBEAT, min_version=0, max_version=1)
async def handle_consumer_group_heartbeat(
    ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    ports = ctx.ports

    def fail(code: ErrorCode, message: str | None = None) -> ConsumerGroupHeartbeatResponse:
        return ConsumerGroupHeartbeatResponse(
            error_code=code, error_message=message, member_id=req.member_id or None
        )

    if ctx.api_version >= 1 and not req.member_id:
        return fail(ErrorCode.INVALID_REQUEST, "MemberId can't be empty.")
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, req.group_id):
        return fail(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if req.subscribed_topic_names and ctx.unauthorized(
        AclOperation.DESCRIBE, ResourceType.TOPIC, req.subscribed_topic_names
    ):
        return fail(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    driver = await ports.groups.ready()
    coordinator = driver.coordinator_for(req.group_id)
    if isinstance(coordinator, ErrorCode):
        return fail(coordinator)
    owned: dict[str, list[int]] | None = None
    if req.topic_partitions is not None:
        owned = {}
        for tp in req.topic_partitions:
            info = ports.topics.by_id(tp.topic_id)
            if info is not None:
                owned.setdefault(info.name, []).extend(tp.partitions)
    result = coordinator.consumer_group_heartbeat(
        group_id=req.group_id,
        member_id=req.member_id,
        member_epoch=req.member_epoch,
        instance_id=req.instance_id,
        rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topics=req.subscribed_topic_names,
        subscribed_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=req.server_assignor,
        owned=owned,
        client_id=ctx.header.client_id or "",
        client_host=_client_host(ctx),
        partitions_of=lambda topic: _partition_count(ports, topic),
        now_ms=now_ms(),
        replica_racks=lambda topic: _replica_racks(ports, topic),
    )
    try:
        answer = await driver.finish(result)
    except GroupWriteError as exc:  # reverted to the log: the member retries or rejoins
        return fail(exc.group_error)
    assert isinstance(answer, HeartbeatResult)
    return _heartbeat_response(ports, answer)


def _assignment(
    ports: RequestPorts, assignment: dict[str, list[int]]
) -> ConsumerGroupDescribeResponse_Assignment:
    parts = []
    for topic, partitions in sorted(assignment.items()):
        info = ports.topics.get(topic)
        parts.append(
            ConsumerGroupDescribeResponse.TopicPartitions(
                topic_id=info.topic_id if info is not None else uuid.UUID(int=0),
                topic_name=topic,
                partitions=partitions,
            )
        )
    return ConsumerGroupDescribeResponse.Assignment(topic_partitions=parts)


def _described(
    ports: RequestPorts, g: DescribedConsumerGroup, operations: int
) -> ConsumerGroupDescribeResponse_DescribedGroup:
    return ConsumerGroupDescribeResponse.DescribedGroup(
        error_code=g.error,
        error_message=g.message,
        group_id=g.group_id,
        group_state=g.state,
        group_epoch=g.group_epoch,
        assignment_epoch=g.assignment_epoch,
        assignor_name=g.assignor,
        members=[
            ConsumerGroupDescribeResponse.Member(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=m.member_epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                subscribed_topic_names=list(m.subscribed_topics),
                assignment=_assignment(ports, m.assignment),
                target_assignment=_assignment(ports, m.target_assignment),
            )
            for m in g.members
        ],
        authorized_operations=operations,
    )


@handler(ApiKey.CONSUMER_GROUP_DESCRIBE, min_version=0, max_version=0)
async def handle_consumer_group_describe(
    ctx: RequestContext, req: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    ports = ctx.ports
    driver = await ports.groups.ready()
    groups = []
    for group_id in req.group_ids:
        operations = AUTHORIZED_OPERATIONS_OMITTED
        if req.include_authorized_operations:
            operations = ctx.authorized_operations(ResourceType.GROUP, group_id, GROUP_AUTHORIZED_OPERATIONS)
        coordinator = driver.coordinator_for(group_id)
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described = DescribedConsumerGroup(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id)
            operations = AUTHORIZED_OPERATIONS_OMITTED
        elif isinstance(coordinator, ErrorCode):
            described = DescribedConsumerGroup(coordinator, group_id)
        else:
            described = coordinator.describe_consumer_groups([group_id])[0]
            if ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.TOPIC, _assigned_topics(described)):
                described = DescribedConsumerGroup(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED, group_id, message=_HIDDEN_TOPICS
                )
                operations = AUTHORIZED_OPERATIONS_OMITTED
        groups.append(_described(ports, described, operations))
    return ConsumerGroupDescribeResponse(groups=groups)


_HIDDEN_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


def _assigned_topics(g: DescribedConsumerGroup) -> set[str]:
    """The topics in the members' current and target assignments: a group's description would
    show them, so the principal must be allowed to DESCRIBE each (Kafka answers the group
    TOPIC_AUTHORIZATION_FAILED, without members, otherwise)."""
    return {t for m in g.members for a in (m.assignment, m.target_assignment) for t in a}
