"""OffsetForLeaderEpoch (key 23): v0-4.

Behaviour: consumers (librdkafka, the Java client) validate their position after a leader change
by asking for the end offset of the epoch they last fetched. This node has led every partition
in epoch 0 since it was created, so: requested epoch <= 0 -> (0, log end offset); a larger epoch
is unknown -> (-1, -1) as Kafka answers for epochs past the leader's. The client's
current_leader_epoch (v2+) is checked like everywhere else (FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH); unknown partitions -> UNKNOWN_TOPIC_OR_PARTITION.

Cluster mode (docs/cluster.md; single-node behaviour is unchanged): only the leader answers
(else NOT_LEADER_OR_FOLLOWER), and the answer comes from the log's leader-epoch cache: the
largest epoch <= the requested one and where it ended (the start of the next epoch, or the log
end for the latest); (-1, -1) for an epoch older than everything known.
"""

from __future__ import annotations

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kafkapy.server.broker import LEADER_EPOCH
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.list_offsets import cluster_epoch_error, epoch_error
from kafkapy.server.handlers.registry import handler

__all__ = ["handle_offset_for_leader_epoch"]

Result = OffsetForLeaderEpochResponse.EpochEndOffset


@handler(ApiKey.OFFSET_FOR_LEADER_EPOCH, min_version=0, max_version=4)
async def handle_offset_for_leader_epoch(
    ctx: RequestContext, req: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    broker = ctx.broker
    response = OffsetForLeaderEpochResponse()
    for topic in req.topics:
        out = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=topic.topic)
        response.topics.append(out)
        for p in topic.partitions:
            result = Result(partition=p.partition, leader_epoch=-1, end_offset=-1)
            out.partitions.append(result)
            plog = broker.partition_log(topic.topic, p.partition)
            if plog is None:
                result.error_code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if broker.replicas is not None:
                fenced, _ = cluster_epoch_error(
                    broker, topic.topic, p.partition, p.current_leader_epoch if ctx.api_version >= 2 else -1
                )
                if fenced is not None:
                    result.error_code = fenced
                    continue
                result.leader_epoch, result.end_offset = plog.leader_epochs.end_offset_for(
                    p.leader_epoch, plog.log_end_offset
                )
                continue
            fenced = epoch_error(p.current_leader_epoch) if ctx.api_version >= 2 else None
            if fenced is not None:
                result.error_code = fenced
                continue
            if p.leader_epoch <= LEADER_EPOCH:
                result.leader_epoch = LEADER_EPOCH
                result.end_offset = plog.log_end_offset
    return response
