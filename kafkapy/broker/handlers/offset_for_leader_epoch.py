"""OffsetForLeaderEpoch (key 23): v0-4.

Behaviour: consumers (librdkafka, the Java client) validate their position after a leader change
by asking for the end offset of the epoch they last fetched; followers ask it too. The answer
comes from the leader (`kafkapy.broker.partitions`, as for every partition API:
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER off the leader, the client's
current_leader_epoch (v2+) checked - FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH): the largest
epoch <= the requested one and where it ended (the start of the next epoch, or the log end for
the latest); (-1, -1) for an epoch unknown here. One node has led every partition in epoch 0
since it was created: epoch <= 0 -> (0, log end offset), a larger one -> (-1, -1).

Authorization (Kafka's, since KIP-320 made it a consumer API too): CLUSTER_ACTION on the cluster
allows every topic, else DESCRIBE per topic (TOPIC_AUTHORIZATION_FAILED for its partitions).

Versions: all Kafka defines (v0-4).
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

__all__ = ["handle_offset_for_leader_epoch"]

Result = OffsetForLeaderEpochResponse.EpochEndOffset


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, min_version=0, max_version=4)
async def handle_offset_for_leader_epoch(
    ctx: RequestContext, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    partitions = ctx.partitions
    response = OffsetForLeaderEpochResponse()
    denied: set[str] = set()
    if not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        denied = ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.TOPIC, (t.topic for t in req.topics))
    for topic in req.topics:
        out = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=topic.topic)
        response.topics.append(out)
        for p in topic.partitions:
            result = Result(partition=p.partition, leader_epoch=-1, end_offset=-1)
            out.partitions.append(result)
            if topic.topic in denied:
                result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            lp = partitions.leader(topic.topic, p.partition, p.current_leader_epoch if ctx.api_version >= 2 else -1)
            if isinstance(lp, ErrorCode):
                result.error_code = lp
                continue
            result.leader_epoch, result.end_offset = partitions.end_offset_for_epoch(lp, p.leader_epoch)
    return response
