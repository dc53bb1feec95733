"""ACL bindings and filters in Kafka's vocabulary (`org.apache.kafka.common.acl` / `.resource`).

Why a module of plain values: the controller stores bindings as metadata records, the broker's
authorizer indexes them, the ACL handlers turn wire structs into them and back, and the CLI
prints them; all four must agree on the codes (the wire values of Kafka's enums) and on what a
filter matches (Describe/DeleteAcls), so those rules live here once.

Filter semantics are Kafka's `ResourcePatternFilter.matches` / `AccessControlEntryFilter.matches`:
a filter's None name, principal or host matches anything; pattern type ANY matches bindings of
every pattern type by exact name, MATCH matches the bindings that would apply to the named
resource (the literal name, the literal wildcard `*`, and every PREFIXED pattern the name starts
with); operation and permission ANY match everything.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from kafkapy.protocol.acl_operations import AclOperation

__all__ = [
    "CLUSTER_NAME",
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
    "binding_problem",
    "filter_problem",
]

#: The one name of the CLUSTER resource (Kafka's Resource.CLUSTER_NAME).
CLUSTER_NAME = "kafka-cluster"
#: The resource name of a LITERAL pattern that matches every resource of its type.
WILDCARD_RESOURCE = "*"
#: The principal of an entry that matches every principal (Kafka's `User:*`).
WILDCARD_PRINCIPAL = "User:*"
#: The host of an entry that matches every client host.
WILDCARD_HOST = "*"


class ResourceType(enum.IntEnum):
    """Kafka's ResourceType codes (the wire values)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    """Kafka's PatternType codes; ANY and MATCH exist only in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(enum.IntEnum):
    """Kafka's AclPermissionType codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """The resources a binding applies to: one name (LITERAL, `*` = all) or a name prefix."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (`Type:name`, `User:*`), from where (an IP or `*`), what, and allow or deny."""

    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    """Which patterns a Describe/DeleteAcls filter selects; None name = any name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        wanted = self.pattern_type
        if wanted not in (PatternType.ANY, PatternType.MATCH) and wanted != pattern.pattern_type:
            return False
        if self.name is None:
            return True
        if wanted == PatternType.ANY or wanted == pattern.pattern_type:
            return self.name == pattern.name
        # MATCH: the patterns that would apply to a resource of this name
        if pattern.pattern_type == PatternType.LITERAL:
            return self.name == pattern.name or pattern.name == WILDCARD_RESOURCE
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def matches_at_most_one(self) -> bool:
        """True when the filter names one exact pattern (Kafka's `matchesAtMostOne`)."""
        return (
            self.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN)
            and self.name is not None
            and self.pattern_type not in (PatternType.ANY, PatternType.MATCH, PatternType.UNKNOWN)
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    """Which entries a filter selects; None principal/host = any."""

    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return (
            self.permission_type == AclPermissionType.ANY
            or self.permission_type == entry.permission_type
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)


def _principal_problem(principal: str) -> str | None:
    # Kafka's SecurityUtils.parseKafkaPrincipal: "Type:name", split at the first colon
    if ":" not in principal:
        return f"expected a string in format principalType:principalName but got {principal}"
    return None


def binding_problem(binding: AclBinding) -> str | None:
    """Why CreateAcls must refuse this binding (INVALID_REQUEST), or None when it may be stored.

    Kafka's `AclControlManager.validateNewAcl`: concrete resource, pattern, operation and
    permission types (no UNKNOWN/ANY/MATCH), a non-empty resource name, a parsable principal.
    """
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return "Invalid resourceType " + pattern.resource_type.name
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "Invalid patternType " + pattern.pattern_type.name
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return "Invalid operation " + entry.operation.name
    if entry.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return "Invalid permissionType " + entry.permission_type.name
    if not pattern.name:
        return "Resource name should not be empty"
    return _principal_problem(entry.principal)


def filter_problem(acl_filter: AclBindingFilter) -> str | None:
    """Why Describe/DeleteAcls must refuse this filter (INVALID_REQUEST), or None.

    UNKNOWN in any field can never match a stored binding; Kafka refuses such filters.
    """
    if acl_filter.pattern.resource_type == ResourceType.UNKNOWN:
        return "Filter contains UNKNOWN resource type"
    if acl_filter.pattern.pattern_type == PatternType.UNKNOWN:
        return "Filter contains UNKNOWN pattern type"
    if acl_filter.entry.operation == AclOperation.UNKNOWN:
        return "Filter contains UNKNOWN operation"
    if acl_filter.entry.permission_type == AclPermissionType.UNKNOWN:
        return "Filter contains UNKNOWN permission type"
    return None
