"""AlterPartition (56) v0-3 on the controller listener: a partition leader's ISR change
(`server/cluster/partition_roles.ReplicaManager` sends it), committed by the active controller
(NOT_CONTROLLER elsewhere). The state machine is `kafkapy.replication.partition.LeaderState` on
the leader and `kafkapy.controller` on the controller.

Version mapping, as Kafka does it: AlterPartition v0-1 name topics (v2+ ids; an unknown name is
UNKNOWN_TOPIC_OR_PARTITION, an unknown id UNKNOWN_TOPIC_ID), v0-2 send plain ISR ids (v3 ids with
broker epochs); INELIGIBLE_REPLICA, new in v3, is OPERATION_NOT_ATTEMPTED before it.

Versions: all Kafka defines (v0-3); nothing of it is left out.
"""

from __future__ import annotations

import uuid

from kafkapy.broker.context import RequestContext
from kafkapy.broker.controller_tags import set_metadata_offset
from kafkapy.broker.handlers.registry import controller_handler
from kafkapy.broker.handlers.shared.controller import (
    ZERO_UUID,
    run_on_controller,
)
from kafkapy.controller.controller import (
    AlterPartitionItem,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
)
from kafkapy.protocol.messages.alter_partition import AlterPartitionResponse_TopicData


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
    outcome = await run_on_controller(ctx, lambda c: c.alter_partition(req.broker_id, req.broker_epoch, items))
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
                topic_name=r.topic_name or "", topic_id=r.topic_id or ZERO_UUID
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
