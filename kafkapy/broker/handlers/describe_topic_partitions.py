"""DescribeTopicPartitions (key 75) v0: like Metadata for the named topics (or all, when none are
named), sorted by name, paginated by `response_partition_limit` with a cursor.

Each partition's leader, leader epoch, replicas, ISR and offline replicas come from the metadata
image. Authorized operations (KIP-430): every supported topic operation without an authorizer,
the principal's with one. Authorization (Kafka's): DESCRIBE per topic - listing all leaves the
others out, a named one is TOPIC_AUTHORIZATION_FAILED.

Versions: all Kafka defines (v0).
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.metadata_store import TopicInfo
from kafkapy.controller.image import MetadataImage
from kafkapy.protocol import ApiKey
from kafkapy.protocol.acl_operations import TOPIC_OPERATIONS
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafkapy.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsResponse_DescribeTopicPartitionsResponsePartition as PartitionEntry,
)

__all__ = ["handle_describe_topic_partitions"]


def _image_partition(image: MetadataImage, topic: str, index: int, offline_here: int = -1) -> PartitionEntry:
    """The partition as the metadata image has it; `offline_here`: this node's id when the
    partition's log is offline here (listed among its offline replicas, as in Metadata)."""
    part = image.partition(topic, index)
    if part is None:
        return DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partition_index=index, leader_id=-1,
        )

    def alive(b: int) -> bool:
        reg = image.brokers.get(b)
        return reg is not None and not reg.fenced

    leader = part.leader if part.leader >= 0 and alive(part.leader) else -1
    return DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=index, leader_id=leader, leader_epoch=part.leader_epoch,
        replica_nodes=list(part.replicas), isr_nodes=list(part.isr), eligible_leader_replicas=[],
        last_known_elr=[], offline_replicas=[r for r in part.replicas if not alive(r) or r == offline_here],
    )


@handler(ApiKey.DESCRIBE_TOPIC_PARTITIONS, min_version=0, max_version=0)
async def handle_describe_topic_partitions(
    ctx: RequestContext, req: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    ports = ctx.ports
    image = ports.metadata.image
    local = ports.local
    names = sorted({t.name for t in req.topics}) if req.topics else [t.name for t in ports.topics.all()]
    denied = ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
    if denied and not req.topics:
        names = [n for n in names if n not in denied]
    cursor = req.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(req.response_partition_limit, 1)
    response = DescribeTopicPartitionsResponse()
    for name in names:
        info: TopicInfo | None = ports.topics.get(name)
        if name in denied:
            response.topics.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
            ))
            continue
        if info is None:
            response.topics.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name,
            ))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
            name=name, topic_id=info.topic_id, is_internal=info.internal,
            topic_authorized_operations=ctx.authorized_operations(ResourceType.TOPIC, name, TOPIC_OPERATIONS),
        )
        response.topics.append(topic)
        for p in range(start, info.partitions):
            if budget == 0:
                response.next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=p)
                return response
            here = local.node_id if local.log_states.reason(name, p) else -1
            topic.partitions.append(_image_partition(image, name, p, here))
            budget -= 1
    return response

