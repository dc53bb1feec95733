"""ACL bindings and filters to and from the wire structs of CreateAcls / DescribeAcls /
DeleteAcls, for the broker's handlers (`handlers/acls.py`) and the controller's
(the `_on_controller` handlers in the same module).

Why shared: the broker turns a client's request into bindings to check it and the controller
turns the forwarded request into the same bindings to store it; both must read a code they do
not know the same way (as UNKNOWN, Kafka's `fromCode`), which the rules then refuse.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkapy.authorizer.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafkapy.controller.acls import AclDeleteResult, binding_of_codes, code_of
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafkapy.protocol.messages.create_acls import CreateAclsRequest_AclCreation
from kafkapy.protocol.messages.delete_acls import (
    DeleteAclsRequest_DeleteAclsFilter,
    DeleteAclsResponse_DeleteAclsFilterResult,
)
from kafkapy.protocol.messages.describe_acls import DescribeAclsResponse_DescribeAclsResource

__all__ = [
    "NO_AUTHORIZER",
    "create_acls_error",
    "creation_binding",
    "delete_acls_error",
    "delete_filter",
    "delete_filter_result",
    "describe_filter",
    "describe_resources",
]

_FilterStruct = DeleteAclsRequest_DeleteAclsFilter | DescribeAclsRequest

#: Kafka's answer without an authorizer (SECURITY_DISABLED)
NO_AUTHORIZER = "No Authorizer is configured."


def create_acls_error(req: CreateAclsRequest, code: ErrorCode, message: str | None) -> CreateAclsResponse:
    """`code` for every creation (Kafka's `CreateAclsRequest.getErrorResponse`)."""
    return CreateAclsResponse(
        results=[
            CreateAclsResponse.AclCreationResult(error_code=code, error_message=message)
            for _ in req.creations
        ]
    )


def delete_acls_error(req: DeleteAclsRequest, code: ErrorCode, message: str | None) -> DeleteAclsResponse:
    """`code` for every filter (Kafka's `DeleteAclsRequest.getErrorResponse`)."""
    return DeleteAclsResponse(
        filter_results=[
            DeleteAclsResponse.DeleteAclsFilterResult(error_code=code, error_message=message)
            for _ in req.filters
        ]
    )


def creation_binding(c: CreateAclsRequest_AclCreation) -> AclBinding:
    return binding_of_codes(
        c.resource_type,
        c.resource_name,
        c.resource_pattern_type,
        c.principal,
        c.host,
        c.operation,
        c.permission_type,
    )


def _filter(f: _FilterStruct) -> AclBindingFilter:
    return AclBindingFilter(
        ResourcePatternFilter(
            code_of(ResourceType, f.resource_type_filter),
            f.resource_name_filter,
            code_of(PatternType, f.pattern_type_filter),
        ),
        AccessControlEntryFilter(
            f.principal_filter,
            f.host_filter,
            code_of(AclOperation, f.operation),
            code_of(AclPermissionType, f.permission_type),
        ),
    )


def describe_filter(req: DescribeAclsRequest) -> AclBindingFilter:
    return _filter(req)


def delete_filter(f: DeleteAclsRequest_DeleteAclsFilter) -> AclBindingFilter:
    return _filter(f)


def describe_resources(
    bindings: Iterable[AclBinding],
) -> list[DescribeAclsResponse_DescribeAclsResource]:
    """Bindings grouped by resource pattern (Kafka's `DescribeAclsResponse.aclsResources`),
    in a stable order: resource type, name, pattern type; entries by principal, host,
    operation, permission."""
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    resources = []
    for pattern in sorted(by_pattern, key=lambda p: (p.resource_type, p.name, p.pattern_type)):
        entries = sorted(
            by_pattern[pattern], key=lambda e: (e.principal, e.host, e.operation, e.permission_type)
        )
        resources.append(
            DescribeAclsResponse.DescribeAclsResource(
                resource_type=int(pattern.resource_type),
                resource_name=pattern.name,
                pattern_type=int(pattern.pattern_type),
                acls=[
                    DescribeAclsResponse.AclDescription(
                        principal=e.principal,
                        host=e.host,
                        operation=int(e.operation),
                        permission_type=int(e.permission_type),
                    )
                    for e in entries
                ],
            )
        )
    return resources


def delete_filter_result(result: AclDeleteResult) -> DeleteAclsResponse_DeleteAclsFilterResult:
    return DeleteAclsResponse.DeleteAclsFilterResult(
        error_code=result.error,
        error_message=result.message,
        matching_acls=[
            DeleteAclsResponse.DeleteAclsMatchingAcl(
                resource_type=int(b.pattern.resource_type),
                resource_name=b.pattern.name,
                pattern_type=int(b.pattern.pattern_type),
                principal=b.entry.principal,
                host=b.entry.host,
                operation=int(b.entry.operation),
                permission_type=int(b.entry.permission_type),
            )
            for b in result.deleted
        ],
    )
