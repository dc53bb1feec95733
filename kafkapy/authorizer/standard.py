"""Kafka's StandardAuthorizer decision rules over an in-memory ACL index.

Why a plain class: the bindings are metadata-log records; the server feeds them in
(`add_acl` / `remove_acl` as the image changes) and asks `authorize` per request. No I/O, no
clock: tested by comparing it with a direct transcription of the rules.

The rules (Kafka's `StandardAuthorizerData.authorize`):
- a super user (`super.users`, `User:name` strings) is allowed everything;
- the ACLs of a resource are the LITERAL bindings of its exact name, the LITERAL wildcard `*`,
  and the PREFIXED bindings whose name the resource name starts with;
- an entry applies when its principal is the caller's or `User:*` and its host is the caller's
  address or `*`;
- a DENY entry for the operation (or ALL) denies, whatever else allows;
- an ALLOW entry for the operation (or ALL) allows; ALLOW of READ, WRITE, DELETE or ALTER also
  allows DESCRIBE, and ALLOW of ALTER_CONFIGS allows DESCRIBE_CONFIGS (never so for DENY);
- nothing applies: denied when the resource has any ACL at all (for anyone), else
  `allow.everyone.if.no.acl.found`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import TypeAlias

from kafkapy.authorizer.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = [
    "SUPPORTED_OPERATIONS",
    "StandardAuthorizer",
    "parse_super_users",
]

_O = AclOperation
#: What each resource type supports (Kafka's `AclEntry.supportedOperations`): the operations
#: KIP-430 "authorized operations" fields report on (`protocol.acl_operations` has the same sets
#: as bit fields, what a Kafka without an authorizer reports).
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        _O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER, _O.DESCRIBE_CONFIGS,
        _O.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS),
    ResourceType.CLUSTER: (
        _O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS, _O.IDEMPOTENT_WRITE,
        _O.ALTER, _O.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (_O.DESCRIBE, _O.WRITE),
    ResourceType.DELEGATION_TOKEN: (_O.DESCRIBE,),
    ResourceType.USER: (_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS),
}

_IMPLIES_DESCRIBE = frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER})
_IMPLIES_DESCRIBE_CONFIGS = frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS})
_ALLOW = AclPermissionType.ALLOW
_DENY = AclPermissionType.DENY
#: Decisions kept between ACL changes; beyond this many the cache starts over.
_CACHE_LIMIT = 65536

_Entries: TypeAlias = dict[uuid.UUID, AccessControlEntry]


def parse_super_users(value: str | None) -> frozenset[str]:
    """`super.users` as Kafka reads it: `User:a;User:b`, blanks around names ignored."""
    if not value:
        return frozenset()
    return frozenset(part.strip() for part in value.split(";") if part.strip())


def _entry_result(entry: AccessControlEntry, principal: str, host: str, operation: AclOperation) -> bool | None:
    """True (allows), False (denies) or None (does not apply) - Kafka's `findResult`."""
    if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
        return None
    if entry.host != WILDCARD_HOST and entry.host != host:
        return None
    op = entry.operation
    if entry.permission_type == _ALLOW:
        if op == _O.ALL or op == operation:
            return True
        if operation == _O.DESCRIBE and op in _IMPLIES_DESCRIBE:
            return True
        if operation == _O.DESCRIBE_CONFIGS and op in _IMPLIES_DESCRIBE_CONFIGS:
            return True
        return None
    return False if op == _O.ALL or op == operation else None


class StandardAuthorizer:
    """The broker's ACLs, indexed by resource, and Kafka's allow/deny decision over them."""

    def __init__(
        self, *, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._by_id: dict[uuid.UUID, AclBinding] = {}
        self._literal: dict[tuple[ResourceType, str], _Entries] = {}
        self._prefixed: dict[ResourceType, dict[str, _Entries]] = {}
        #: the distinct prefix lengths per resource type: a name is looked up once per length
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        #: how many distinct prefixes have each length, per resource type
        self._prefix_counts: dict[ResourceType, dict[int, int]] = {}
        self._cache: dict[tuple[str, str, AclOperation, ResourceType, str], bool] = {}

    # -- the ACL set --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._by_id)

    def add_acl(self, acl_id: uuid.UUID, binding: AclBinding) -> None:
        """Store a binding under its id (replacing what the id held: replaying a record twice
        leaves one binding)."""
        if acl_id in self._by_id:
            self.remove_acl(acl_id)
        self._by_id[acl_id] = binding
        pattern = binding.pattern
        if pattern.pattern_type == PatternType.PREFIXED:
            by_prefix = self._prefixed.setdefault(pattern.resource_type, {})
            entries = by_prefix.get(pattern.name)
            if entries is None:
                entries = by_prefix[pattern.name] = {}
                self._count_prefix_length(pattern.resource_type, len(pattern.name), 1)
            entries[acl_id] = binding.entry
        else:
            self._literal.setdefault((pattern.resource_type, pattern.name), {})[acl_id] = binding.entry
        self._cache.clear()

    def remove_acl(self, acl_id: uuid.UUID) -> AclBinding | None:
        """Forget a binding; the removed binding, or None when the id was unknown."""
        binding = self._by_id.pop(acl_id, None)
        if binding is None:
            return None
        pattern = binding.pattern
        if pattern.pattern_type == PatternType.PREFIXED:
            by_prefix = self._prefixed[pattern.resource_type]
            entries = by_prefix[pattern.name]
            del entries[acl_id]
            if not entries:
                del by_prefix[pattern.name]
                self._count_prefix_length(pattern.resource_type, len(pattern.name), -1)
        else:
            key = (pattern.resource_type, pattern.name)
            entries = self._literal[key]
            del entries[acl_id]
            if not entries:
                del self._literal[key]
        self._cache.clear()
        return binding

    def clear(self) -> None:
        """Drop every binding (a snapshot load replaces the whole set)."""
        self._by_id.clear()
        self._literal.clear()
        self._prefixed.clear()
        self._prefix_lengths.clear()
        self._prefix_counts.clear()
        self._cache.clear()

    def acls(self) -> dict[uuid.UUID, AclBinding]:
        """Every stored binding by id (a copy)."""
        return dict(self._by_id)

    def acls_matching(self, acl_filter: AclBindingFilter) -> list[tuple[uuid.UUID, AclBinding]]:
        """The (id, binding) pairs a Describe/DeleteAcls filter selects."""
        return [(i, b) for i, b in self._by_id.items() if acl_filter.matches(b)]

    def _count_prefix_length(self, resource_type: ResourceType, length: int, change: int) -> None:
        """A prefix of `length` came (+1) or went (-1): the sorted lengths follow the counts
        (at most one per possible name length), so loading n prefixes costs O(n), not O(n^2)."""
        counts = self._prefix_counts.setdefault(resource_type, {})
        left = counts.get(length, 0) + change
        if left:
            counts[length] = left
        else:
            del counts[length]
        if left in (0, 1):
            self._prefix_lengths[resource_type] = tuple(sorted(counts))

    def _resource_entries(self, resource_type: ResourceType, name: str) -> Iterator[AccessControlEntry]:
        """Every entry of a binding that applies to the resource, whoever it is for."""
        literal = self._literal
        exact = literal.get((resource_type, name))
        if exact:
            yield from exact.values()
        if name != WILDCARD_RESOURCE:
            wildcard = literal.get((resource_type, WILDCARD_RESOURCE))
            if wildcard:
                yield from wildcard.values()
        by_prefix = self._prefixed.get(resource_type)
        if by_prefix:
            for length in self._prefix_lengths[resource_type]:
                if length > len(name):
                    break
                entries = by_prefix.get(name[:length])
                if entries:
                    yield from entries.values()

    # -- decisions ----------------------------------------------------------------------------

    def authorize(
        self,
        principal: str,
        host: str,
        operation: AclOperation,
        resource_type: ResourceType,
        resource_name: str,
    ) -> bool:
        """May `principal` (`User:name`) from `host` (an IP address) do `operation` on the resource?"""
        if principal in self.super_users:
            return True
        key = (principal, host, operation, resource_type, resource_name)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        result = self._decide(principal, host, operation, resource_type, resource_name)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = result
        return result

    def _decide(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        has_resource_acls = allowed = False
        for entry in self._resource_entries(resource_type, name):
            has_resource_acls = True
            result = _entry_result(entry, principal, host, operation)
            if result is False:
                return False
            if result:
                allowed = True
        if allowed:
            return True
        return not has_resource_acls and self.allow_everyone_if_no_acl_found

    def authorized_operations(
        self, principal: str, host: str, resource_type: ResourceType, resource_name: str
    ) -> frozenset[AclOperation]:
        """The supported operations of the resource this principal may do (KIP-430)."""
        return frozenset(
            op
            for op in SUPPORTED_OPERATIONS.get(resource_type, ())
            if self.authorize(principal, host, op, resource_type, resource_name)
        )

    def authorized_operations_bits(
        self, principal: str, host: str, resource_type: ResourceType, resource_name: str
    ) -> int:
        """`authorized_operations` as the wire's bit field (bit n = operation code n)."""
        bits = 0
        for op in self.authorized_operations(principal, host, resource_type, resource_name):
            bits |= 1 << op
        return bits

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """May the principal do `operation` on SOME resource of the type? (KIP-679's check for
        idempotent producers without IDEMPOTENT_WRITE on the cluster: WRITE on any topic.)

        Kafka's `Authorizer.authorizeByResourceType`: a super user (or the no-ACL default) by
        asking about a made-up name first; then an applicable DENY of the literal wildcard
        denies, an ALLOW of the wildcard allows, and otherwise some LITERAL or PREFIXED ALLOW
        must not be covered by a DENY of the same literal name or of a prefix of its name.
        Only the operation itself or ALL count here (no implied DESCRIBE).
        """
        if self.authorize(principal, host, operation, resource_type, "hardcode"):
            return True
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allows: list[ResourcePattern] = []
        wildcard_allow = False
        for binding in self._by_id.values():
            pattern, entry = binding.pattern, binding.entry
            if pattern.resource_type != resource_type:
                continue
            if entry.host != host and entry.host != WILDCARD_HOST:
                continue
            if entry.principal != principal and entry.principal != WILDCARD_PRINCIPAL:
                continue
            if entry.operation != operation and entry.operation != _O.ALL:
                continue
            is_literal = pattern.pattern_type == PatternType.LITERAL
            if entry.permission_type == _DENY:
                if is_literal and pattern.name == WILDCARD_RESOURCE:
                    return False
                (deny_literal if is_literal else deny_prefixed).add(pattern.name)
            elif entry.permission_type == _ALLOW:
                if is_literal and pattern.name == WILDCARD_RESOURCE:
                    wildcard_allow = True
                else:
                    allows.append(pattern)
        if wildcard_allow:
            return True
        for pattern in allows:
            if pattern.pattern_type == PatternType.LITERAL and pattern.name in deny_literal:
                continue
            name = pattern.name
            if not any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                return True
        return False
