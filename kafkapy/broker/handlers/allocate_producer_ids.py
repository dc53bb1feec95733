"""AllocateProducerIds (67) v0 on the controller listener: a block of producer ids for a broker's
idempotent and transactional producers (`kafkapy.broker.idempotence.ProducerIds` asks for them), from
the active controller (NOT_CONTROLLER elsewhere; the broker's ControllerChannel retries).

Versions: all Kafka defines (v0); nothing of it is left out.
"""

from __future__ import annotations

from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import controller_handler
from kafkapy.broker.handlers.shared.controller import (
    run_on_controller,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)


@controller_handler(ApiKey.ALLOCATE_PRODUCER_IDS, min_version=0, max_version=0)
async def handle_allocate_producer_ids(
    ctx: RequestContext, req: AllocateProducerIdsRequest
) -> AllocateProducerIdsResponse:
    outcome = await run_on_controller(ctx, lambda c: c.allocate_producer_ids(req.broker_id, req.broker_epoch))
    if outcome is None:
        return AllocateProducerIdsResponse(error_code=ErrorCode.NOT_CONTROLLER)
    reply, _ = outcome
    return AllocateProducerIdsResponse(
        error_code=reply.error, producer_id_start=reply.start, producer_id_len=reply.length
    )
