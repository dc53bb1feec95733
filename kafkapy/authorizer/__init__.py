"""ACLs and Kafka's StandardAuthorizer rules (state-machine layer: imports only `protocol`).

`acl` holds the binding and filter values shared by the controller's ACL records, the ACL
handlers and the CLI; `standard` the authorizer the broker asks before serving a request.
"""

from kafkapy.authorizer.acl import (
    CLUSTER_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
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
    binding_problem,
    filter_problem,
)
from kafkapy.authorizer.standard import SUPPORTED_OPERATIONS, StandardAuthorizer, parse_super_users

__all__ = [
    "CLUSTER_NAME",
    "SUPPORTED_OPERATIONS",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "StandardAuthorizer",
    "binding_problem",
    "filter_problem",
    "parse_super_users",
]
