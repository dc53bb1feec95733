"""DescribeUserScramCredentials (key 50) v0 and AlterUserScramCredentials (key 51) v0.

Behaviour: what `kafka-configs --describe/--alter --entity-type users`, `kafkapy users` and the
admin clients' describe/alterUserScramCredentials do. Alter is forwarded to the active controller
(kafkapy.controller.scram has Kafka's rules: mechanism 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512, else
UNSUPPORTED_SASL_MECHANISM; iterations within 4096..16384, a non-empty name, salt and salted
password, else UNACCEPTABLE_CREDENTIAL; one user twice in a request -> DUPLICATE_RESOURCE;
deleting a missing credential -> RESOURCE_NOT_FOUND), which writes the credentials to the
metadata log; the answer comes once this node's image has them, so every node's logins - and
this node's at once - check them, and they survive restarts. Describe answers from this node's
published image plus its configured users (`kafkapy.sasl.users`, JAAS `user_<name>`, which log in
with SCRAM too; kafkapy.server.security.credentials): `users` null or empty lists every user
with credentials, an unknown user is RESOURCE_NOT_FOUND, one named twice DUPLICATE_RESOURCE.
With an authorizer, Describe needs DESCRIBE and Alter ALTER on the cluster (else
CLUSTER_AUTHORIZATION_FAILED: Describe's top-level code, Alter's every user), checked here with
the caller's principal before the request is forwarded.

Not done: configured users are node config, not metadata - deleting one over the wire is
RESOURCE_NOT_FOUND (the message says where it comes from); `kafka-storage format --add-scram`
(SCRAM users written at format time) has no counterpart.

Controller listener (`@controller_handler`, the request a broker forwards to the active
controller): AlterUserScramCredentials (51) v0.
"""

from __future__ import annotations

from collections import Counter

from kafkapy.authorizer.acl import AclOperation
from kafkapy.broker.context import RequestContext
from kafkapy.broker.controller_tags import set_metadata_offset
from kafkapy.broker.errors import PeerError
from kafkapy.broker.handlers.registry import controller_handler, handler
from kafkapy.broker.handlers.shared.controller import (
    run_on_controller,
)
from kafkapy.controller.controller import (
    ScramDeletion,
    ScramUpsertion,
)
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
from kafkapy.protocol.sasl import SCRAM_MECHANISM_TYPES

__all__ = ["handle_alter_user_scram_credentials", "handle_describe_user_scram_credentials"]

_IDS = {name: i for i, name in SCRAM_MECHANISM_TYPES.items()}


@handler(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, min_version=0, max_version=0)
async def handle_describe_user_scram_credentials(
    ctx: RequestContext, req: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    known = ctx.ports.credentials.scram_users()
    # null or empty: every user with credentials (librdkafka sends an empty list, Kafka treats
    # both alike)
    names = [u.name for u in req.users] if req.users else sorted(known)
    counts = Counter(names)
    results: list[Described] = []
    for name in counts:
        info = DescribeUserScramCredentialsResponse.CredentialInfo
        if counts[name] > 1:
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
    if not ctx.authorize_cluster(AclOperation.ALTER):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return AlterUserScramCredentialsResponse(results=[Result(user=u, error_code=code) for u in users])
    if not users:
        return AlterUserScramCredentialsResponse()
    ctx.release_turn()
    try:
        response = await ctx.controller.alter_user_scram_credentials(req)
    except PeerError as exc:
        code = ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))
        return AlterUserScramCredentialsResponse(
            results=[Result(user=u, error_code=code, error_message=str(exc)) for u in users]
        )
    store = ctx.ports.credentials
    for result in response.results:
        if result.error_code == ErrorCode.RESOURCE_NOT_FOUND and store.configured(result.user):
            result.error_message = (
                f"{result.user} has no credential in the metadata log: it is a configured user "
                "of this node (kafkapy.sasl.users / sasl.jaas.config), changed in its config"
            )
    return response


@controller_handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, min_version=0, max_version=0)
async def handle_alter_user_scram_credentials_on_controller(
    ctx: RequestContext, req: AlterUserScramCredentialsRequest
) -> AlterUserScramCredentialsResponse:
    deletions = [ScramDeletion(d.name, d.mechanism) for d in req.deletions]
    upsertions = [
        ScramUpsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
        for u in req.upsertions
    ]
    outcome = await run_on_controller(ctx, lambda c: c.alter_user_scram_credentials(deletions, upsertions))
    Out = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    if outcome is None:
        users = dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions])
        return AlterUserScramCredentialsResponse(
            results=[Out(user=u, error_code=ErrorCode.NOT_CONTROLLER) for u in users]
        )
    results, offset = outcome
    response = AlterUserScramCredentialsResponse(
        results=[Out(user=r.user, error_code=r.error, error_message=r.message) for r in results]
    )
    set_metadata_offset(response, offset)
    return response
