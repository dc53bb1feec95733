"""DescribeUserScramCredentials (key 50) v0 and AlterUserScramCredentials (key 51) v0.

Behaviour: what `kafka-configs --describe/--alter --entity-type users` and the admin clients'
describe/alterUserScramCredentials do, against the broker's user database
(`kafkapy.server.security.credentials`). Kafka's rules: mechanism 1 = SCRAM-SHA-256, 2 =
SCRAM-SHA-512 (others UNSUPPORTED_SASL_MECHANISM); iterations within 4096..16384, a non-empty
name, salt and salted password (else UNACCEPTABLE_CREDENTIAL); one user altered twice for one
mechanism in a request -> DUPLICATE_RESOURCE; deleting or describing a missing credential ->
RESOURCE_NOT_FOUND. A user with any error gets none of its changes applied. Describe with `users`
null or empty lists every user with credentials.

Not yet: persistence - credentials altered at run time live in memory and a restart goes back
to the configured users (Kafka keeps them in the metadata log). A quorum of more than one node:
each broker has its own user database from its config, so AlterUserScramCredentials is refused
there (INVALID_REQUEST with the reason) instead of changing one broker only; Describe answers
from the receiving broker's configured users.
"""

from __future__ import annotations

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafkapy.protocol.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsResponse_AlterUserScramCredentialsResult as Result,
)
from kafkapy.protocol.messages.describe_user_scram_credentials import (
    DescribeUserScramCredentialsResponse_DescribeUserScramCredentialsResult as Described,
)
from kafkapy.protocol.sasl import SCRAM_MAX_ITERATIONS, SCRAM_MIN_ITERATIONS, ScramCredential
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.registry import handler

__all__ = ["handle_alter_user_scram_credentials", "handle_describe_user_scram_credentials"]

#: Kafka's ScramMechanism type bytes
MECHANISM_IDS: dict[int, str] = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
_IDS = {name: i for i, name in MECHANISM_IDS.items()}


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, min_version=0, max_version=0)
async def handle_describe_user_scram_credentials(
    ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    known = ctx.broker.credentials.scram_users()
    # null or empty: every user with credentials (librdkafka sends an empty list, Kafka treats
    # both alike)
    names = [u.name for u in req.users] if req.users else sorted(known)
    results: list[Described] = []
    for name in dict.fromkeys(names):
        info = DescribeUserScramCredentialsResponse.CredentialInfo
        if names.count(name) > 1:
            results.append(Described(user=name, error_code=ErrorCode.DUPLICATE_RESOURCE,
                                     error_message=f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"))  # fmt: skip
        elif name not in known:
            results.append(Described(user=name, error_code=ErrorCode.RESOURCE_NOT_FOUND,
                                     error_message=f"Attempt to describe a user credential that does not exist: {name}"))  # fmt: skip
        else:
            creds = [info(mechanism=_IDS[m], iterations=i) for m, i in known[name]]
            results.append(Described(user=name, credential_infos=creds))
    return DescribeUserScramCredentialsResponse(results=results)


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, min_version=0, max_version=0)
async def handle_alter_user_scram_credentials(
    ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    users = list(dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))
    if not ctx.broker.config.cluster.quorum_of_one:
        reason = ("kafkapy keeps SCRAM credentials per broker (kafkapy.sasl.users); "
                  "AlterUserScramCredentials works on a single node only")  # fmt: skip
        results = [
            Result(user=u, error_code=ErrorCode.INVALID_REQUEST, error_message=reason)
            for u in users
        ]
        return AlterUserScramCredentialsResponse(results=results)
    store = ctx.broker.credentials
    errors: dict[str, tuple[ErrorCode, str]] = {}
    seen: set[tuple[str, int]] = set()
    for name, mech_id in [(d.name, d.mechanism) for d in req.deletions] + [
        (u.name, u.mechanism) for u in req.upsertions
    ]:
        if (name, mech_id) in seen:
            errors.setdefault(name, (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"))  # fmt: skip
        seen.add((name, mech_id))
    for deletion in req.deletions:
        problem = _check(deletion.name, deletion.mechanism)
        if (
            problem is None
            and store.scram(MECHANISM_IDS[deletion.mechanism], deletion.name) is None
        ):
            problem = (
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        if problem is not None:
            errors.setdefault(deletion.name, problem)
    for upsertion in req.upsertions:
        problem = _check(upsertion.name, upsertion.mechanism)
        if (
            problem is None
            and not SCRAM_MIN_ITERATIONS <= upsertion.iterations <= SCRAM_MAX_ITERATIONS
        ):
            problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                       f"Iterations must be between {SCRAM_MIN_ITERATIONS} and {SCRAM_MAX_ITERATIONS}")  # fmt: skip
        if problem is None and (not upsertion.salt or not upsertion.salted_password):
            problem = (
                ErrorCode.UNACCEPTABLE_CREDENTIAL,
                "Salt and salted password must not be empty",
            )
        if problem is not None:
            errors.setdefault(upsertion.name, problem)
    for deletion in req.deletions:
        if deletion.name not in errors:
            store.delete_scram(MECHANISM_IDS[deletion.mechanism], deletion.name)
    for upsertion in req.upsertions:
        if upsertion.name not in errors:
            mechanism = MECHANISM_IDS[upsertion.mechanism]
            credential = ScramCredential.from_salted_password(
                mechanism,
                bytes(upsertion.salted_password),
                bytes(upsertion.salt),
                upsertion.iterations,
            )
            store.set_scram(mechanism, upsertion.name, credential)
    return AlterUserScramCredentialsResponse(
        results=[
            Result(user=u, error_code=errors[u][0], error_message=errors[u][1])
            if u in errors
            else Result(user=u)
            for u in users
        ]
    )


def _check(name: str, mechanism: int) -> tuple[ErrorCode, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_IDS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {mechanism}"
    return None
