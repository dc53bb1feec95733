"""SCRAM credentials (Kafka's ScramControlManager): AlterUserScramCredentials as records.

Why in the controller: a credential must be the same on every node and survive restarts, so it
lives in the metadata log like topics and configs; every node's SASL logins read it from the
image its publisher built. The request carries what the client derived from the password (salt,
salted password, iterations); the controller turns the salted password into RFC 5802's StoredKey
and ServerKey and writes only those, so neither the password nor the salted password is ever
stored.

Rules (Kafka's, per user - a user named twice in one request is refused, whatever the mechanisms):
- empty user name -> UNACCEPTABLE_CREDENTIAL; mechanism type other than 1 (SCRAM-SHA-256) or 2
  (SCRAM-SHA-512) -> UNSUPPORTED_SASL_MECHANISM;
- upsertion: iterations outside 4096..16384, or an empty salt or salted password ->
  UNACCEPTABLE_CREDENTIAL;
- deletion of a credential the image does not hold -> RESOURCE_NOT_FOUND;
- a user in more than one deletion / upsertion of the request -> DUPLICATE_RESOURCE (none of
  them applied), unless an earlier one of them already failed: a user is answered its first
  problem, in request order (deletions, then upsertions).
A user with an error gets none of its changes; the others are applied (one record each).
One request changes at most `MAX_RECORDS_PER_USER_OP` credentials (Kafka's bound on the records
of one operation): beyond it every user is answered INVALID_REQUEST and nothing is written.
Results come in the order users first appear in the request (deletions, then upsertions).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kafkapy.controller.acls import MAX_RECORDS_PER_USER_OP
from kafkapy.controller.records import (
    MetadataRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from kafkapy.controller.state import ControllerResult, ControllerState
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.sasl import (
    SCRAM_MAX_ITERATIONS,
    SCRAM_MECHANISM_TYPES,
    SCRAM_MIN_ITERATIONS,
    ScramCredential,
)

__all__ = [
    "ScramDeletion",
    "ScramResult",
    "ScramUpsertion",
    "alter_user_scram_credentials",
]

_TWICE = "A user credential cannot be altered twice in the same request"


@dataclasses.dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclasses.dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:  # the salted password logs a user in: never printed
        return f"ScramUpsertion(name={self.name!r}, mechanism={self.mechanism})"


@dataclasses.dataclass(frozen=True, slots=True)
class ScramResult:
    user: str
    error: ErrorCode
    message: str | None = None


def _name_and_mechanism(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in SCRAM_MECHANISM_TYPES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mechanism}"
    return None


def _deletion_problem(st: ControllerState, d: ScramDeletion) -> tuple[ErrorCode, str] | None:
    problem = _name_and_mechanism(d.name, d.mechanism)
    if problem is None and (d.name, SCRAM_MECHANISM_TYPES[d.mechanism]) not in (
        st.image.scram_credentials
    ):
        problem = (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        )
    return problem


def _upsertion_problem(u: ScramUpsertion) -> tuple[ErrorCode, str] | None:
    problem = _name_and_mechanism(u.name, u.mechanism)
    if problem is None and u.iterations < SCRAM_MIN_ITERATIONS:
        problem = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if problem is None and u.iterations > SCRAM_MAX_ITERATIONS:
        problem = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if problem is None and (not u.salt or not u.salted_password):
        problem = ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return problem


def alter_user_scram_credentials(
    st: ControllerState, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
) -> ControllerResult[list[ScramResult]]:
    """See the module docstring."""
    order = list(dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions]))
    if len(deletions) + len(upsertions) > MAX_RECORDS_PER_USER_OP:
        message = f"Cannot alter more than {MAX_RECORDS_PER_USER_OP} SCRAM credentials in one request"
        return ControllerResult([], [ScramResult(u, ErrorCode.INVALID_REQUEST, message) for u in order])
    errors: dict[str, tuple[ErrorCode, str]] = {}
    valid: set[str] = set()
    changes: list[ScramDeletion | ScramUpsertion] = [*deletions, *upsertions]
    for change in changes:
        name = change.name
        if name in errors:
            continue  # the first problem of a user is the one it is answered
        if name in valid:
            valid.discard(name)
            errors[name] = ErrorCode.DUPLICATE_RESOURCE, _TWICE
            continue
        if isinstance(change, ScramDeletion):
            problem = _deletion_problem(st, change)
        else:
            problem = _upsertion_problem(change)
        if problem is None:
            valid.add(name)
        else:
            errors[name] = problem
    records: list[MetadataRecord] = []
    for d in deletions:
        if d.name not in errors:
            st.emit(records, RemoveUserScramCredentialRecord(d.name, d.mechanism))
    for u in upsertions:
        if u.name not in errors:
            c = ScramCredential.from_salted_password(
                SCRAM_MECHANISM_TYPES[u.mechanism], u.salted_password, u.salt, u.iterations
            )
            st.emit(
                records,
                UserScramCredentialRecord(
                    u.name, u.mechanism, c.salt, c.stored_key, c.server_key, c.iterations
                ),
            )
    results = [
        ScramResult(name, *errors[name]) if name in errors else ScramResult(name, ErrorCode.NONE)
        for name in order
    ]
    return ControllerResult(records, results)
