"""InitProducerId (key 22): v0-5, idempotent producers only (a fallback handler).

Behaviour: a producer without a transactional id gets a fresh producer id (unique across
restarts, see `kafkapy.server.idempotence.ProducerIds`) with epoch 0 - also when it asks to bump
the epoch of an id it holds (KIP-360), which is what Kafka does for non-transactional producers.
Idempotent producers are the default of kafka-python 3 and the Java client, so this is needed
for their first send.

Not yet: transactional ids - there is no transaction coordinator to serve them, so such a
request gets UNSUPPORTED_VERSION (a fatal error the client reports). Registered as a fallback: a
full transaction-coordinator handler for this key replaces it.
"""

from __future__ import annotations

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import InitProducerIdRequest, InitProducerIdResponse
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.registry import handler

__all__ = ["handle_init_producer_id"]


@handler(ApiKey.INIT_PRODUCER_ID, min_version=0, max_version=5, fallback=True)
async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        return InitProducerIdResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
    return InitProducerIdResponse(
        error_code=ErrorCode.NONE, producer_id=ctx.broker.producer_ids.allocate(), producer_epoch=0
    )
