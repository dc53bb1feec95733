"""Client quotas (Kafka's ClientQuotaControlManager and ClientQuotasImage): AlterClientQuotas as
records, DescribeClientQuotas as a filter over the image.

Why here: a quota is cluster metadata like a config - the active controller validates a change
and writes `ClientQuotaRecord`s, every node replays them into `MetadataImage.client_quotas`, and
each broker enforces what its published image says (`kafkapy.quota`).

Rules of AlterClientQuotas (Kafka's, per entity; one entity's error leaves the others alone):
- an entity is (type, name) pairs of the types `user` and `client-id` (one or both); a None name
  is the type's default (`<default>`). No pairs, a type twice, an unknown type or an empty name
  -> INVALID_REQUEST. `ip` entities (connection-rate quotas) are refused: kafkapy does not
  enforce them, and a quota that is stored but never applied would mislead.
- keys: `producer_byte_rate` and `consumer_byte_rate` (integral, bytes/s), `request_percentage`
  and `controller_mutation_rate` (doubles). An unknown key, a value <= 0 (or not finite), a
  fraction for an integral key or a key twice for one entity -> INVALID_REQUEST, and none of
  that entity's changes is written.
- the same entity twice in one request -> INVALID_REQUEST for both.
- one request changes at most `MAX_RECORDS_PER_USER_OP` keys (Kafka's bound on the records of
  one operation): beyond it every entity is INVALID_REQUEST and nothing is written.
- a set writes a record only when the value changes; a removal only when the key is set.

Describe filter (Kafka's): components of (entity type, match type, match): 0 = exact name, 1 =
the default entity, 2 = any entity of that type. Non-strict: an entity matches when it has
every component; strict: also no other types. No components: every entity (non-strict) or none
(strict). A type twice, an empty type or a bad match -> INVALID_REQUEST; an unknown type ->
UNSUPPORTED_VERSION.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Mapping, Sequence

from kafkapy.controller.image import quota_entity
from kafkapy.controller.records import ClientQuotaRecord, MetadataRecord, QuotaEntity
from kafkapy.controller.state import ControllerResult, ControllerState
from kafkapy.protocol.errors import ErrorCode

__all__ = [
    "CLIENT_ID",
    "IP",
    "QUOTA_KEYS",
    "USER",
    "FilterComponent",
    "QuotaAlteration",
    "QuotaAlterationResult",
    "QuotaOp",
    "alter_client_quotas",
    "describe_client_quotas",
]

USER, CLIENT_ID, IP = "user", "client-id", "ip"
#: Kafka's user / client-id quota configs: key -> integral (LONG) or not (DOUBLE)
QUOTA_KEYS: dict[str, bool] = {
    "producer_byte_rate": True,
    "consumer_byte_rate": True,
    "request_percentage": False,
    "controller_mutation_rate": False,
}
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
#: the most quota keys one AlterClientQuotas may change (Kafka's records-per-operation bound)
MAX_RECORDS_PER_USER_OP = 10_000
_LONG_MAX = float(2**63 - 1)


@dataclasses.dataclass(frozen=True, slots=True)
class QuotaOp:
    """Set `key` to `value`, or remove it (`value` None)."""

    key: str
    value: float | None


@dataclasses.dataclass(frozen=True, slots=True)
class QuotaAlteration:
    entity: Sequence[tuple[str, str | None]]
    ops: Sequence[QuotaOp]


@dataclasses.dataclass(frozen=True, slots=True)
class QuotaAlterationResult:
    entity: Sequence[tuple[str, str | None]]
    error: ErrorCode
    message: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class FilterComponent:
    entity_type: str
    match_type: int
    match: str | None


class _Reject(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _check_entity(pairs: Sequence[tuple[str, str | None]]) -> QuotaEntity:
    if not pairs:
        raise _Reject(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    seen: set[str] = set()
    for entity_type, name in pairs:
        if entity_type in seen:
            raise _Reject(
                ErrorCode.INVALID_REQUEST,
                f"Invalid client quota entity, duplicate entity entry {entity_type}",
            )
        seen.add(entity_type)
        if entity_type == IP:
            raise _Reject(
                ErrorCode.INVALID_REQUEST, "ip quotas (connection creation rate) are not supported"
            )
        if entity_type not in (USER, CLIENT_ID):
            raise _Reject(
                ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {entity_type}"
            )
        if name == "":
            raise _Reject(ErrorCode.INVALID_REQUEST, f"Empty {entity_type} not supported")
    return quota_entity(list(pairs))


def _check_value(key: str, value: float) -> None:
    integral = QUOTA_KEYS.get(key)
    if integral is None:
        raise _Reject(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if not math.isfinite(value) or value <= 0.0:
        raise _Reject(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if integral:
        if value > _LONG_MAX:
            raise _Reject(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for a LONG.")
        if abs(value % 1.0) > 1e-6:
            raise _Reject(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")


def _entity_records(
    current: Mapping[str, float], entity: QuotaEntity, ops: Sequence[QuotaOp]
) -> list[ClientQuotaRecord]:
    repeated = [k for k, n in Counter(op.key for op in ops).items() if n > 1]
    if repeated:
        raise _Reject(ErrorCode.INVALID_REQUEST, f"Duplicate quota key {repeated[0]}")
    out: list[ClientQuotaRecord] = []
    for op in ops:
        if op.value is None:
            if op.key in current:
                out.append(ClientQuotaRecord(entity, op.key, 0.0, remove=True))
            continue
        _check_value(op.key, op.value)
        if current.get(op.key) != op.value:
            out.append(ClientQuotaRecord(entity, op.key, float(op.value)))
    return out


def alter_client_quotas(
    st: ControllerState, alterations: Sequence[QuotaAlteration], *, validate_only: bool = False
) -> ControllerResult[list[QuotaAlterationResult]]:
    """One result per alteration, in request order (see the module rules)."""
    records: list[MetadataRecord] = []
    if sum(len(a.ops) for a in alterations) > MAX_RECORDS_PER_USER_OP:
        message = f"Cannot alter more than {MAX_RECORDS_PER_USER_OP} quotas in a single operation."
        return ControllerResult(
            records, [QuotaAlterationResult(a.entity, ErrorCode.INVALID_REQUEST, message) for a in alterations]
        )
    canonical = [quota_entity(list(a.entity)) for a in alterations]
    counts = Counter(canonical)
    results: list[QuotaAlterationResult] = []
    for alteration, key in zip(alterations, canonical, strict=True):
        try:
            if counts[key] > 1:
                raise _Reject(ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {key}")
            entity = _check_entity(alteration.entity)
            changes = _entity_records(st.image.client_quotas.get(entity, {}), entity, alteration.ops)
        except _Reject as rej:
            results.append(QuotaAlterationResult(alteration.entity, rej.error, rej.message))
            continue
        if not validate_only:
            for record in changes:
                st.emit(records, record)
        results.append(QuotaAlterationResult(alteration.entity, ErrorCode.NONE))
    return ControllerResult(records, results)


def _parse_filter(
    components: Sequence[FilterComponent],
) -> tuple[dict[str, str | None], set[str]]:
    exact: dict[str, str | None] = {}
    any_of: set[str] = set()
    for c in components:
        t = c.entity_type
        if not t:
            raise _Reject(ErrorCode.INVALID_REQUEST, "Invalid empty entity type.")
        if t in exact or t in any_of:
            raise _Reject(
                ErrorCode.INVALID_REQUEST, f"Entity type {t} cannot appear more than once in the filter."
            )
        if t not in (USER, CLIENT_ID, IP):
            raise _Reject(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {t}")
        if c.match_type == MATCH_EXACT:
            if c.match is None:
                raise _Reject(
                    ErrorCode.INVALID_REQUEST,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[t] = c.match
        elif c.match_type in (MATCH_DEFAULT, MATCH_SPECIFIED):
            if c.match is not None:
                raise _Reject(
                    ErrorCode.INVALID_REQUEST, "Request specified a match string for a match type without one."
                )
            if c.match_type == MATCH_DEFAULT:
                exact[t] = None
            else:
                any_of.add(t)
        else:
            raise _Reject(ErrorCode.INVALID_REQUEST, f"Unknown match type {c.match_type}")
    types = set(exact) | any_of
    if IP in types and (USER in types or CLIENT_ID in types):
        raise _Reject(
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be "
            "used with user or clientId filter component.",
        )
    return exact, any_of


def describe_client_quotas(
    quotas: Mapping[QuotaEntity, Mapping[str, float]],
    components: Sequence[FilterComponent],
    strict: bool,
) -> tuple[ErrorCode, str | None, list[tuple[QuotaEntity, dict[str, float]]]]:
    """(error, message, matching entities with their quotas) - see the module's filter rules."""
    try:
        exact, any_of = _parse_filter(components)
    except _Reject as rej:
        return rej.error, rej.message, []
    if not components and strict:
        return ErrorCode.NONE, None, []
    out: list[tuple[QuotaEntity, dict[str, float]]] = []
    for entity, values in sorted(quotas.items(), key=lambda item: repr(item[0])):
        names = dict(entity)
        if strict and len(names) != len(exact) + len(any_of):
            continue
        if all(t in names and names[t] == n for t, n in exact.items()) and all(
            t in names for t in any_of
        ):
            out.append((entity, dict(values)))
    return ErrorCode.NONE, None, out
