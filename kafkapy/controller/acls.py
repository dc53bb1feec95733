"""ACLs as metadata records (Kafka's AclControlManager): CreateAcls / DeleteAcls.

Why in the controller: ACLs of StandardAuthorizer live in the metadata log, so every node's
image (and so its authorizer) holds the same bindings, a restart replays them and snapshots
carry them. The controller gives each new binding a random id (`AccessControlEntryRecord`) and
removes bindings by id (`RemoveAccessControlEntryRecord`).

Rules (Kafka's):
- a binding needs a concrete resource type, pattern type LITERAL or PREFIXED, a concrete
  operation and permission, a non-empty name and a `Type:name` principal
  (`authorizer.acl.binding_problem`); a CLUSTER binding names `kafka-cluster` (AclApis); else
  INVALID_REQUEST for that binding only;
- creating a binding that exists (or twice in one request) succeeds and writes nothing;
- a delete filter with an UNKNOWN part is INVALID_REQUEST (`authorizer.acl.filter_problem`);
  every filter is matched against the ACLs as they were before the request, so a binding two
  filters match is reported by both and removed once;
- one request writes at most `MAX_RECORDS_PER_USER_OP` records (Kafka's bound): beyond it the
  whole request fails with INVALID_REQUEST and writes nothing (a create stops checking there).
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Iterable, Sequence
from typing import TypeVar, cast

from kafkapy.authorizer.acl import (
    CLUSTER_NAME,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    binding_problem,
    filter_problem,
)
from kafkapy.controller.image import AclKey, MetadataImage, acl_key
from kafkapy.controller.records import (
    AccessControlEntryRecord,
    MetadataRecord,
    RemoveAccessControlEntryRecord,
)
from kafkapy.controller.state import ControllerResult, ControllerState
from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "CLUSTER_NAME",
    "MAX_RECORDS_PER_USER_OP",
    "AclCreateResult",
    "AclDeleteResult",
    "acl_binding",
    "acl_record",
    "binding_of_codes",
    "code_of",
    "create_acls",
    "create_problem",
    "delete_acls",
    "image_acls",
]

#: the most records one admin operation may write (Kafka's QuorumController bound)
MAX_RECORDS_PER_USER_OP = 10_000

E = TypeVar("E", bound=enum.IntEnum)
_NO_ID = uuid.UUID(int=0)


@dataclasses.dataclass(frozen=True, slots=True)
class AclCreateResult:
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class AclDeleteResult:
    """The bindings one filter matched (and removed), or why the filter was refused."""

    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    deleted: tuple[AclBinding, ...] = ()


def code_of(enum_type: type[E], value: int) -> E:
    """`value` as `enum_type`, UNKNOWN (0) for a code it does not know (Kafka's `fromCode`).
    A table lookup: loading an image's ACLs converts four codes per ACL."""
    member = enum_type._value2member_map_.get(value)
    return cast(E, member) if member is not None else enum_type(0)


def acl_binding(record: AccessControlEntryRecord) -> AclBinding:
    """The binding a record stores (codes it does not know read as UNKNOWN)."""
    return binding_of_codes(
        record.resource_type,
        record.resource_name,
        record.pattern_type,
        record.principal,
        record.host,
        record.operation,
        record.permission_type,
    )


def binding_of_codes(
    resource_type: int,
    resource_name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission_type: int,
) -> AclBinding:
    """A binding from the codes a record or a CreateAcls creation carries (codes it does not
    know read as UNKNOWN, which validation then refuses)."""
    return AclBinding(
        ResourcePattern(
            code_of(ResourceType, resource_type), resource_name, code_of(PatternType, pattern_type)
        ),
        AccessControlEntry(
            principal,
            host,
            code_of(AclOperation, operation),
            code_of(AclPermissionType, permission_type),
        ),
    )


def acl_record(acl_id: uuid.UUID, binding: AclBinding) -> AccessControlEntryRecord:
    pattern, entry = binding.pattern, binding.entry
    return AccessControlEntryRecord(
        acl_id,
        int(pattern.resource_type),
        pattern.name,
        int(pattern.pattern_type),
        entry.principal,
        entry.host,
        int(entry.operation),
        int(entry.permission_type),
    )


def image_acls(image: MetadataImage) -> dict[uuid.UUID, AclBinding]:
    """Every ACL of `image` by id, as bindings (what an authorizer is loaded with)."""
    return {acl_id: acl_binding(record) for acl_id, record in image.acls.items()}


def create_problem(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses `binding` (INVALID_REQUEST), or None (see the module rules)."""
    problem = binding_problem(binding)
    pattern = binding.pattern
    if problem is None and pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        problem = f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    return problem


def _new_id(st: ControllerState) -> uuid.UUID:
    while True:
        acl_id = uuid.UUID(int=st.rng.getrandbits(128), version=4)
        if acl_id not in st.image.acls:
            return acl_id


def create_acls(
    st: ControllerState, bindings: Sequence[AclBinding]
) -> ControllerResult[list[AclCreateResult]]:
    """One result per binding, in order (see the module rules)."""
    results: list[AclCreateResult] = []
    new: dict[AclKey, AclBinding] = {}
    for binding in bindings:
        if len(new) > MAX_RECORDS_PER_USER_OP:
            break  # refused whole below: the rest need no checking
        problem = create_problem(binding)
        if problem is not None:
            results.append(AclCreateResult(ErrorCode.INVALID_REQUEST, problem))
            continue
        key = acl_key(acl_record(_NO_ID, binding))
        if key not in st.image.acl_ids:
            new.setdefault(key, binding)
        results.append(AclCreateResult())
    if len(new) > MAX_RECORDS_PER_USER_OP:
        message = (
            f"Cannot create more than {MAX_RECORDS_PER_USER_OP} acls in a single create operation."
        )
        return ControllerResult([], [AclCreateResult(ErrorCode.INVALID_REQUEST, message)] * len(bindings))
    records: list[MetadataRecord] = []
    for binding in new.values():
        st.emit(records, acl_record(_new_id(st), binding))
    return ControllerResult(records, results)


class _PatternIndex:
    """The image's ACLs by (resource type, name, pattern type), so a delete filter that names a
    resource looks only at the patterns that could match it; `AclBindingFilter.matches` (Kafka's
    rules) still decides. Why: each filter scanning every ACL made a DeleteAcls of 1,000
    filters over 10,000 ACLs hold the controller's event loop for ~30 s."""

    def __init__(self, image: MetadataImage) -> None:
        self._records = image.acls
        self._by_pattern: dict[tuple[int, str, int], list[uuid.UUID]] = {}
        for acl_id, r in image.acls.items():
            self._by_pattern.setdefault((r.resource_type, r.resource_name, r.pattern_type), []).append(acl_id)
        self._types = {resource_type for resource_type, _, _ in self._by_pattern}
        self._bindings: dict[uuid.UUID, AclBinding] = {}

    def _binding(self, acl_id: uuid.UUID) -> AclBinding:
        binding = self._bindings.get(acl_id)
        if binding is None:
            binding = self._bindings[acl_id] = acl_binding(self._records[acl_id])
        return binding

    def _candidates(self, acl_filter: AclBindingFilter) -> Iterable[uuid.UUID]:
        pattern = acl_filter.pattern
        name = pattern.name
        if name is None:
            return self._records
        literal, prefixed = int(PatternType.LITERAL), int(PatternType.PREFIXED)
        if pattern.pattern_type == PatternType.MATCH:
            names = {(name, literal), (WILDCARD_RESOURCE, literal)}
            names.update((name[:k], prefixed) for k in range(1, len(name) + 1))
        elif pattern.pattern_type == PatternType.ANY:
            names = {(name, literal), (name, prefixed)}
        else:
            names = {(name, int(pattern.pattern_type))}
        types = self._types if pattern.resource_type == ResourceType.ANY else {int(pattern.resource_type)}
        found: dict[uuid.UUID, None] = {}
        for resource_type in types:
            for n, pattern_type in names:
                found.update(dict.fromkeys(self._by_pattern.get((resource_type, n, pattern_type), ())))
        return found

    def matching(self, acl_filter: AclBindingFilter) -> list[tuple[uuid.UUID, AclBinding]]:
        """The (id, binding) pairs `acl_filter` matches."""
        return [
            (acl_id, self._binding(acl_id))
            for acl_id in self._candidates(acl_filter)
            if acl_filter.matches(self._binding(acl_id))
        ]


def delete_acls(
    st: ControllerState, filters: Sequence[AclBindingFilter]
) -> ControllerResult[list[AclDeleteResult]]:
    """One result per filter, in order, naming the bindings it removed (module rules)."""
    index = _PatternIndex(st.image)
    results: list[AclDeleteResult] = []
    doomed: dict[uuid.UUID, None] = {}
    for acl_filter in filters:
        problem = filter_problem(acl_filter)
        if problem is not None:
            results.append(AclDeleteResult(ErrorCode.INVALID_REQUEST, problem))
            continue
        matched = index.matching(acl_filter)
        doomed.update((acl_id, None) for acl_id, _ in matched)
        results.append(AclDeleteResult(deleted=tuple(b for _, b in matched)))
    if len(doomed) > MAX_RECORDS_PER_USER_OP:
        message = (
            f"Cannot remove more than {MAX_RECORDS_PER_USER_OP} acls in a single delete operation."
        )
        return ControllerResult([], [AclDeleteResult(ErrorCode.INVALID_REQUEST, message)] * len(filters))
    records: list[MetadataRecord] = []
    for acl_id in doomed:
        st.emit(records, RemoveAccessControlEntryRecord(acl_id))
    return ControllerResult(records, results)
