"""Broker lifecycle on the controller listener (Kafka's `ControllerApis`): BrokerRegistration (62)
v0-4 and BrokerHeartbeat (63) v0-1, answered by the active controller (`@controller_handler`,
never on broker listeners). Not yet: a broker's `rack`-aware placement beyond what the controller
keeps.

A BrokerHeartbeat may carry, in a private tagged field, the nodes whose connections failed at
the sender (`liveness.SUSPECTS_TAG`): the controller probes them (fencing a crashed broker early,
see `server/cluster/liveness.py`). A heartbeat answered unfenced without a commit (nothing
changed) is answered only while a majority of voters confirmed hearing from this controller
within the Raft fetch timeout (`RaftCore.has_quorum_contact`: by the leader clock they echo, not
by when their fetches were read - fetches sent during a pause are read after it); otherwise
NOT_CONTROLLER: a controller that resumes after a pause could otherwise renew a broker's leader
lease (lifecycle.py) - its own broker's too - from a state a newer controller has replaced,
before its own check-quorum step-down runs. Answers that changed metadata carry the committed
metadata offset in a private tagged field (`controller_driver.METADATA_OFFSET_TAG`), which the
sending broker's ControllerChannel removes.
"""

from __future__ import annotations

from kafkapy.broker.clock import loop_ms
from kafkapy.broker.context import RequestContext
from kafkapy.broker.controller_tags import SUSPECTS_TAG, decode_suspects, set_metadata_offset
from kafkapy.broker.handlers.registry import controller_handler
from kafkapy.broker.handlers.shared.controller import (
    controller_of,
    has_quorum_contact,
    run_on_controller,
)
from kafkapy.controller.records import Endpoint
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)


@controller_handler(ApiKey.BROKER_REGISTRATION, min_version=0, max_version=4)
async def handle_broker_registration(
    ctx: RequestContext, req: BrokerRegistrationRequest
) -> BrokerRegistrationResponse:
    endpoints = [Endpoint(x.name, x.host, x.port, x.security_protocol) for x in req.listeners]
    now = loop_ms()
    outcome = await run_on_controller(
        ctx,
        lambda c: c.register_broker(
            req.broker_id,
            cluster_id=req.cluster_id,
            incarnation_id=req.incarnation_id,
            endpoints=endpoints,
            rack=req.rack,
            now_ms=now,
            previous_broker_epoch=req.previous_broker_epoch,
        ),
    )
    if outcome is None:
        return BrokerRegistrationResponse(error_code=ErrorCode.NOT_CONTROLLER)
    reply, offset = outcome
    response = BrokerRegistrationResponse(error_code=reply.error, broker_epoch=reply.broker_epoch)
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.BROKER_HEARTBEAT, min_version=0, max_version=1)
async def handle_broker_heartbeat(
    ctx: RequestContext, req: BrokerHeartbeatRequest
) -> BrokerHeartbeatResponse:
    now = loop_ms()
    driver = controller_of(ctx)
    suspects = decode_suspects(req.unknown_tagged_fields.pop(SUSPECTS_TAG, None))
    if driver is not None:
        driver.touch_session(req.broker_id, req.broker_epoch)
        for node_id in suspects:
            driver.suspect(node_id, f"broker {req.broker_id} saw its connections fail")
    outcome = await run_on_controller(
        ctx,
        lambda c: c.broker_heartbeat(
            req.broker_id,
            req.broker_epoch,
            current_metadata_offset=req.current_metadata_offset,
            want_fence=req.want_fence,
            want_shutdown=req.want_shut_down,
            now_ms=now,
        ),
    )
    if outcome is None:
        return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
    reply, _ = outcome
    if not reply.is_fenced and not has_quorum_contact(driver):
        # An answer that wrote nothing was not checked by a commit: a controller that was
        # paused or cut off (another may have fenced this broker and moved its leaderships
        # since) must not renew the broker's leader lease from its stale state.
        return BrokerHeartbeatResponse(error_code=ErrorCode.NOT_CONTROLLER)
    return BrokerHeartbeatResponse(
        error_code=reply.error,
        is_caught_up=reply.is_caught_up,
        is_fenced=reply.is_fenced,
        should_shut_down=reply.should_shut_down,
    )
