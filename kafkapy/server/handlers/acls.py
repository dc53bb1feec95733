"""ACLs: DescribeAcls (key 29) v1-3, CreateAcls (key 30) v1-3, DeleteAcls (key 31) v1-3.

Behaviour: kafkapy has no authorizer, so - exactly like a Kafka broker without
`authorizer.class.name` - every ACL request is answered with SECURITY_DISABLED ("No Authorizer
is configured"). Answering matters: admin UIs and tools probe these APIs, and an unserved API
would make us close their connection.

Not yet: an authorizer.
"""

from __future__ import annotations

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
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.registry import handler

__all__ = ["handle_create_acls", "handle_delete_acls", "handle_describe_acls"]

NO_AUTHORIZER = "No Authorizer is configured."


@handler(ApiKey.DESCRIBE_ACLS, min_version=1, max_version=3)
async def handle_describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)


@handler(ApiKey.CREATE_ACLS, min_version=1, max_version=3)
async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    return CreateAclsResponse(results=[
        CreateAclsResponse.AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
        for _ in req.creations
    ])


@handler(ApiKey.DELETE_ACLS, min_version=1, max_version=3)
async def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[
        DeleteAclsResponse.DeleteAclsFilterResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=NO_AUTHORIZER)
        for _ in req.filters
    ])
