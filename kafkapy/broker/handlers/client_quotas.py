"""DescribeClientQuotas (key 48) v0-1 and AlterClientQuotas (key 49) v0-1.

Behaviour: what `kafka-configs --describe/--alter --entity-type users|clients` and the admin
clients' describeClientQuotas / alterClientQuotas do. Describe answers from this node's
published metadata image with Kafka's filter (`kafkapy.controller.quotas`); Alter is forwarded
to the active controller, which validates it (Kafka's ClientQuotaControlManager rules and error
codes) and writes `ClientQuotaRecord`s; the answer comes once this node's image has them, so a
Describe on the same node right after sees the change. Every broker enforces the quotas of its
own image (`kafkapy.quota`, `Broker.quotas`).

Authorization (an authorizer configured; Kafka's): Describe needs DESCRIBE_CONFIGS, Alter
ALTER_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

Not yet: `ip` entities (connection creation rate quotas) - refused with INVALID_REQUEST.

Controller listener (`@controller_handler`, the request a broker forwards to the active
controller): AlterClientQuotas (49) v0-1.
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation
from kafkapy.broker.context import RequestContext
from kafkapy.broker.controller_tags import set_metadata_offset
from kafkapy.broker.errors import PeerError
from kafkapy.broker.handlers.registry import controller_handler, handler
from kafkapy.broker.handlers.shared.controller import (
    run_on_controller,
)
from kafkapy.controller.controller import (
    QuotaAlteration,
    QuotaOp,
)
from kafkapy.controller.quotas import FilterComponent, describe_client_quotas
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

__all__ = ["handle_alter_client_quotas", "handle_describe_client_quotas"]


@handler(ApiKey.DESCRIBE_CLIENT_QUOTAS, min_version=0, max_version=1)
async def handle_describe_client_quotas(
    ctx: RequestContext, req: DescribeClientQuotasRequest
) -> DescribeClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE_CONFIGS):
        return DescribeClientQuotasResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, entries=None)
    quotas = ctx.metadata.image.client_quotas
    components = [FilterComponent(c.entity_type, c.match_type, c.match) for c in req.components]
    error, message, found = describe_client_quotas(quotas, components, req.strict)
    response = DescribeClientQuotasResponse(error_code=error, error_message=message)
    if error != ErrorCode.NONE:
        response.entries = None
        return response
    Entry = DescribeClientQuotasResponse.EntryData
    Entity = DescribeClientQuotasResponse.EntityData
    Value = DescribeClientQuotasResponse.ValueData
    response.entries = [
        Entry(
            entity=[Entity(entity_type=t, entity_name=n) for t, n in entity],
            values=[Value(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in found
    ]
    return response


@handler(ApiKey.ALTER_CLIENT_QUOTAS, min_version=0, max_version=1)
async def handle_alter_client_quotas(
    ctx: RequestContext, req: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER_CONFIGS):
        return _answer_all(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    ctx.release_turn()
    try:
        response: AlterClientQuotasResponse = await ctx.controller.alter_client_quotas(req)
    except PeerError as exc:
        return _answer_all(req, ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER)), str(exc))
    return response


def _answer_all(req: AlterClientQuotasRequest, code: ErrorCode, message: str) -> AlterClientQuotasResponse:
    Entity = AlterClientQuotasResponse.EntityData
    return AlterClientQuotasResponse(
        entries=[
            AlterClientQuotasResponse.EntryData(
                error_code=code,
                error_message=message,
                entity=[Entity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity],
            )
            for entry in req.entries
        ]
    )


@controller_handler(ApiKey.ALTER_CLIENT_QUOTAS, min_version=0, max_version=1)
async def handle_alter_client_quotas_on_controller(
    ctx: RequestContext, req: AlterClientQuotasRequest
) -> AlterClientQuotasResponse:
    alterations = [
        QuotaAlteration(
            [(e.entity_type, e.entity_name) for e in entry.entity],
            [QuotaOp(op.key, None if op.remove else op.value) for op in entry.ops],
        )
        for entry in req.entries
    ]
    outcome = await run_on_controller(
        ctx, lambda c: c.alter_client_quotas(alterations, validate_only=req.validate_only)
    )
    Out = AlterClientQuotasResponse.EntryData
    Entity = AlterClientQuotasResponse.EntityData
    response = AlterClientQuotasResponse()
    if outcome is None:
        response.entries = [
            Out(
                error_code=ErrorCode.NOT_CONTROLLER,
                entity=[Entity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity],
            )
            for entry in req.entries
        ]
        return response
    results, offset = outcome
    response.entries = [
        Out(
            error_code=r.error,
            error_message=r.message,
            entity=[Entity(entity_type=t, entity_name=n) for t, n in r.entity],
        )
        for r in results
    ]
    set_metadata_offset(response, offset)
    return response
