"""ACLs: DescribeAcls (key 29) v1-3, CreateAcls (key 30) v1-3, DeleteAcls (key 31) v1-3.

Behaviour, as a KRaft Kafka broker:
- without `authorizer.class.name` every ACL request is answered SECURITY_DISABLED ("No
  Authorizer is configured."): admin UIs and tools probe these APIs, and an unserved API would
  make us close their connection;
- with StandardAuthorizer, CreateAcls and DeleteAcls go to the active controller (the
  controller channel; on a quorum of one, this node's own controller), which validates them
  and writes the ACL records (kafkapy.controller.acls, Kafka's error codes per binding /
  filter); the answer comes once this node's image holds the change, so a DescribeAcls or a
  request right after it sees it. DescribeAcls is answered from this node's authorizer, fed from
  its metadata image: every node answers the same within the metadata propagation delay;
- DescribeAcls needs DESCRIBE on the cluster, Create/DeleteAcls ALTER on the cluster
  (CLUSTER_AUTHORIZATION_FAILED; checked here, with the caller's principal, before anything is
  forwarded);
- a filter with an UNKNOWN part (a code kafkapy does not know) is INVALID_REQUEST (Kafka closes
  the connection while parsing such a request).

Not yet: version 0 (removed in Kafka 4.0).

Controller listener (`@controller_handler`, the request a broker forwards to the active
controller): CreateAcls (30) v1-3 and DeleteAcls (31) v1-3 (the broker checked the caller may
alter the cluster; without an authorizer configured SECURITY_DISABLED, as the broker answers).
"""

from __future__ import annotations

from kafkapy.authorizer.acl import AclOperation, filter_problem
from kafkapy.broker.context import RequestContext
from kafkapy.broker.controller_tags import set_metadata_offset
from kafkapy.broker.errors import PeerError
from kafkapy.broker.handlers.registry import controller_handler, handler
from kafkapy.broker.handlers.shared.acl_wire import (
    NO_AUTHORIZER,
    create_acls_error,
    creation_binding,
    delete_acls_error,
    delete_filter,
    delete_filter_result,
    describe_filter,
    describe_resources,
)
from kafkapy.broker.handlers.shared.controller import (
    run_on_controller,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)

__all__ = ["handle_create_acls", "handle_delete_acls", "handle_describe_acls"]


@handler(ApiKey.DESCRIBE_ACLS, min_version=1, max_version=3)
async def handle_describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    authorizer = ctx.authorizer
    if authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeAclsResponse(
            error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=_not_authorized(ctx)
        )
    acl_filter = describe_filter(req)
    problem = filter_problem(acl_filter)
    if problem is not None:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
    found = [binding for _, binding in authorizer.acls_matching(acl_filter)]
    return DescribeAclsResponse(resources=describe_resources(found))


@handler(ApiKey.CREATE_ACLS, min_version=1, max_version=3)
async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    if ctx.authorizer is None:
        return create_acls_error(req, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return create_acls_error(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _not_authorized(ctx))
    if not req.creations:
        return CreateAclsResponse()
    ctx.release_turn()
    try:
        return await ctx.controller.create_acls(CreateAclsRequest(creations=req.creations))
    except PeerError as exc:
        code = ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))
        return create_acls_error(req, code, str(exc))


@handler(ApiKey.DELETE_ACLS, min_version=1, max_version=3)
async def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    if ctx.authorizer is None:
        return delete_acls_error(req, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return delete_acls_error(req, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, _not_authorized(ctx))
    if not req.filters:
        return DeleteAclsResponse()
    ctx.release_turn()
    try:
        return await ctx.controller.delete_acls(DeleteAclsRequest(filters=req.filters))
    except PeerError as exc:
        code = ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))
        return delete_acls_error(req, code, str(exc))


@controller_handler(ApiKey.CREATE_ACLS, min_version=1, max_version=3)
async def handle_create_acls_on_controller(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    if ctx.authorizer is None:
        return create_acls_error(req, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    bindings = [creation_binding(c) for c in req.creations]
    outcome = await run_on_controller(ctx, lambda c: c.create_acls(bindings))
    if outcome is None:
        return create_acls_error(req, ErrorCode.NOT_CONTROLLER, None)
    results, offset = outcome
    response = CreateAclsResponse(
        results=[
            CreateAclsResponse.AclCreationResult(error_code=r.error, error_message=r.message)
            for r in results
        ]
    )
    set_metadata_offset(response, offset)
    return response


@controller_handler(ApiKey.DELETE_ACLS, min_version=1, max_version=3)
async def handle_delete_acls_on_controller(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    if ctx.authorizer is None:
        return delete_acls_error(req, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    filters = [delete_filter(f) for f in req.filters]
    outcome = await run_on_controller(ctx, lambda c: c.delete_acls(filters))
    if outcome is None:
        return delete_acls_error(req, ErrorCode.NOT_CONTROLLER, None)
    results, offset = outcome
    response = DeleteAclsResponse(filter_results=[delete_filter_result(r) for r in results])
    set_metadata_offset(response, offset)
    return response


def _not_authorized(ctx: RequestContext) -> str:
    """Kafka's ClusterAuthorizationException text for these APIs ("Request ... is not
    authorized."), naming the request by its API and principal."""
    return f"Request {ApiKey(ctx.header.api_key).name} from {ctx.principal} is not authorized."
