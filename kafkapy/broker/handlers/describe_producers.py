"""DescribeProducers (key 61): v0 - the active idempotent producers of each partition.

Behaviour: each partition's producers come from its producer state on the leader (loaded on
demand): producer id and epoch, last sequence and timestamp, coordinator epoch, and the start
offset of its open transaction. Kafka answers from the leader only - a follower's producer state
is not kept up to date - so a partition this broker does not lead is NOT_LEADER_OR_FOLLOWER, and
one the metadata does not have UNKNOWN_TOPIC_OR_PARTITION (`kafkapy.broker.partitions`).
InitProducerId, for idempotent and transactional producers alike, is `transactions.py`'s.

Authorization: READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation, ResourceType
from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    DescribeProducersRequest,
    DescribeProducersResponse,
)

__all__ = ["handle_describe_producers"]


@handler(ApiKey.DESCRIBE_PRODUCERS, min_version=0, max_version=0)
async def handle_describe_producers(ctx: RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse:
    partitions = ctx.partitions
    response = DescribeProducersResponse()
    denied = ctx.unauthorized(AclOperation.READ, ResourceType.TOPIC, (t.name for t in req.topics))
    for topic in req.topics:
        out = DescribeProducersResponse.TopicResponse(name=topic.name)
        response.topics.append(out)
        for index in topic.partition_indexes:
            part = DescribeProducersResponse.PartitionResponse(partition_index=index)
            out.partitions.append(part)
            if topic.name in denied:
                part.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            # Kafka answers from the leader only: a follower's producer state is not kept up to
            # date (it is rebuilt from the log when the follower becomes leader).
            lp = partitions.leader(topic.name, index)
            if isinstance(lp, ErrorCode):
                part.error_code = lp
                continue
            mgr = await partitions.producer_state(lp)
            part.active_producers = [
                DescribeProducersResponse.ProducerState(
                    producer_id=d.producer_id, producer_epoch=d.producer_epoch,
                    last_sequence=d.last_sequence, last_timestamp=d.last_timestamp,
                    coordinator_epoch=d.coordinator_epoch, current_txn_start_offset=d.current_txn_start_offset,
                )
                for d in mgr.describe_producers()
            ]
    return response
