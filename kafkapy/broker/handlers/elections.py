"""Leader elections: ElectLeaders (key 43) v0-2.

Behaviour:
- The request is forwarded as it is (v2) to the active controller
  (`ControllerChannel.elect_leaders`; in-process on a quorum of one), as CreateTopics is, because only the controller may
  change a partition's leader. The controller answers per partition as Kafka's does (see
  `kafkapy.controller.topics._elect_one`): NONE (a new leader was elected), ELECTION_NOT_NEEDED
  (PREFERRED: the first replica leads already; UNCLEAN: an active leader exists),
  PREFERRED_LEADER_NOT_AVAILABLE (the first replica is not in the ISR or not active),
  ELIGIBLE_LEADERS_NOT_AVAILABLE (UNCLEAN: no live replica at all),
  UNKNOWN_TOPIC_OR_PARTITION. The answer comes back once this broker's image holds the new
  leaders, so a Metadata request right after sees them. No active controller within the request
  timeout -> NOT_CONTROLLER / REQUEST_TIMED_OUT on every partition (and at the top, v1+).
- `topic_partitions` null means every partition of every topic; then, as in Kafka, partitions
  that need no election are left out of the answer (a topic may come back with no results).
- v0 has no election type: PREFERRED.

Not yet: authorization (CLUSTER_AUTHORIZATION_FAILED), Kafka's LeaderRecoveryState after an
unclean election (the controller does not model it).

Authorization: ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED, top level and per partition).

Controller listener (`@controller_handler`, the request a broker forwards to the active
controller): ElectLeaders (43) v0-2 (v0: PREFERRED; a null partition list answers only the
partitions that needed an election, under an entry for every topic, as Kafka does).
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation
from kafkapy.broker.context import RequestContext
from kafkapy.broker.controller_tags import set_metadata_offset
from kafkapy.broker.errors import PeerError
from kafkapy.broker.handlers.registry import controller_handler, handler
from kafkapy.broker.handlers.shared.controller import (
    controller_of,
    run_on_controller,
)
from kafkapy.broker.handlers.shared.partition_results import (
    election_response,
    requested_partitions,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    ElectLeadersRequest,
    ElectLeadersResponse,
)

__all__ = ["handle_elect_leaders"]

PREFERRED, UNCLEAN = 0, 1


@handler(ApiKey.ELECT_LEADERS, min_version=0, max_version=2)
async def handle_elect_leaders(
    ctx: RequestContext, req: ElectLeadersRequest
) -> ElectLeadersResponse:
    if ctx.api_version == 0:
        req.election_type = PREFERRED
    if not ctx.authorize_cluster(AclOperation.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        refused = election_response((t, p, code, None) for t, p in requested_partitions(req) or [])
        refused.error_code = code
        return refused
    ctx.release_turn()
    try:
        response: ElectLeadersResponse = await ctx.controller.elect_leaders(req)
    except PeerError as exc:
        code = ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))
        wanted = requested_partitions(req) or []
        failed = election_response((t, p, code, str(exc)) for t, p in wanted)
        failed.error_code = code
        return failed
    return response


@controller_handler(ApiKey.ELECT_LEADERS, min_version=0, max_version=2)
async def handle_elect_leaders_on_controller(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    election_type = req.election_type if ctx.api_version >= 1 else 0
    wanted = requested_partitions(req)
    outcome = await run_on_controller(
        ctx, lambda c: c.elect_leaders(election_type, wanted), timeout_ms=req.timeout_ms
    )
    if outcome is None:
        response = election_response(
            (t, p, ErrorCode.NOT_CONTROLLER, None) for t, p in wanted or []
        )
        response.error_code = ErrorCode.NOT_CONTROLLER
        return response
    results, offset = outcome
    names: list[str] = []
    driver = controller_of(ctx)
    if wanted is None and driver is not None and (c := driver.active()) is not None:
        names = sorted(c.image.topics)
    response = election_response(((r.topic, r.partition, r.error, r.message) for r in results), names)
    set_metadata_offset(response, offset)
    return response
