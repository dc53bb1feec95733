"""InitProducerId (key 22): v0-5, idempotent producers only; DescribeProducers (key 61): v0.
(Both fallback handlers.)

Behaviour: a producer without a transactional id gets a fresh producer id (unique across
restarts, see `kafkapy.server.idempotence.ProducerIds`) with epoch 0 - also when it asks to bump
the epoch of an id it holds (KIP-360), which is what Kafka does for non-transactional producers.
Idempotent producers are the default of kafka-python 3 and the Java client, so this is needed
for their first send.

Cluster mode: InitProducerId takes its ids from controller blocks; DescribeProducers answers
NOT_LEADER_OR_FOLLOWER for a partition this broker does not lead (its producer state lives on
the leader), UNKNOWN_TOPIC_OR_PARTITION for one the metadata image does not have.

Registered as a fallback: `handlers/transactions.py` (the transaction coordinator's handler)
replaces it and serves transactional ids; this stand-in, answering UNSUPPORTED_VERSION for them,
only serves if that module is not loaded.
"""

from __future__ import annotations

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    DescribeProducersRequest,
    DescribeProducersResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.registry import handler
from kafkapy.server.internal_topics import ensure_producer_ids

__all__ = ["handle_describe_producers", "handle_init_producer_id"]


@handler(ApiKey.INIT_PRODUCER_ID, min_version=0, max_version=5, fallback=True)
async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    unavailable = await ensure_producer_ids(ctx.broker)  # cluster mode: a controller block
    if unavailable is not ErrorCode.NONE:
        return InitProducerIdResponse(error_code=unavailable, producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(
        error_code=ErrorCode.NONE, producer_id=ctx.broker.producer_ids.allocate(), producer_epoch=0
    )


@handler(ApiKey.DESCRIBE_PRODUCERS, min_version=0, max_version=0, fallback=True)
async def handle_describe_producers(ctx: RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse:
    """DescribeProducers (key 61): v0. The active idempotent producers of each partition, from
    its producer state (loaded on demand); unknown partitions -> UNKNOWN_TOPIC_OR_PARTITION;
    cluster mode: a partition this broker does not lead -> NOT_LEADER_OR_FOLLOWER (as Kafka)."""
    partitions = ctx.broker.partitions
    response = DescribeProducersResponse()
    for topic in req.topics:
        out = DescribeProducersResponse.TopicResponse(name=topic.name)
        response.topics.append(out)
        for index in topic.partition_indexes:
            part = DescribeProducersResponse.PartitionResponse(partition_index=index)
            out.partitions.append(part)
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
