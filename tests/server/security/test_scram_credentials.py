"""DescribeUserScramCredentials / AlterUserScramCredentials with our codec: Kafka's rules, and
that an altered credential is what the next SCRAM login checks."""

from __future__ import annotations

import hashlib

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from kafkapy.protocol.sasl import ScramServer

from ..helpers import Client, running_broker

Upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Delete = AlterUserScramCredentialsRequest.ScramCredentialDeletion
User = DescribeUserScramCredentialsRequest.UserName


def _upsert(name: str, password: str, mechanism: int = 1, iterations: int = 4096) -> Upsert:
    salt = b"salt-" + name.encode()
    algo = "sha256" if mechanism == 1 else "sha512"
    salted = hashlib.pbkdf2_hmac(algo, password.encode(), salt, max(iterations, 1))
    return Upsert(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted
    )


async def test_describe_alter_and_the_next_login_uses_the_new_credential() -> None:
    async with running_broker(None, **{"kafkapy.sasl.users": "alice:pw"}) as (broker, _, port):
        client = await Client.connect(port)
        described = await client.request(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, DescribeUserScramCredentialsRequest()
        )
        assert [
            (r.user, [(c.mechanism, c.iterations) for c in r.credential_infos])
            for r in described.results
        ] == [("alice", [(1, 4096), (2, 4096)])]
        altered = await client.request(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0,
            AlterUserScramCredentialsRequest(upsertions=[_upsert("carol", "new-pw", iterations=8192)],
                                             deletions=[Delete(name="alice", mechanism=2)]),
        )  # fmt: skip
        assert [(r.user, r.error_code) for r in altered.results] == [("alice", 0), ("carol", 0)]
        store = broker.credentials
        assert store.scram("SCRAM-SHA-512", "alice") is None
        first = ScramServer("SCRAM-SHA-256", lambda u: store.scram("SCRAM-SHA-256", u)).evaluate(
            b"n,,n=carol,r=x"
        )
        assert b",i=8192" in first
        described = await client.request(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0,
            DescribeUserScramCredentialsRequest(users=[User(name="carol"), User(name="nobody")]),
        )  # fmt: skip
        assert [(r.user, r.error_code) for r in described.results] == [
            ("carol", ErrorCode.NONE), ("nobody", ErrorCode.RESOURCE_NOT_FOUND),
        ]  # fmt: skip
        await client.aclose()


async def test_alter_refusals_leave_that_user_unchanged() -> None:
    async with running_broker(None, **{"kafkapy.sasl.users": "alice:pw"}) as (broker, _, port):
        client = await Client.connect(port)
        request = AlterUserScramCredentialsRequest(
            upsertions=[
                _upsert("few", "x", iterations=100),
                _upsert("odd", "x", mechanism=3),
                _upsert("twice", "x"), _upsert("twice", "y"),
                _upsert("", "x"),
                _upsert("alice", "changed"),
            ],
            deletions=[Delete(name="ghost", mechanism=1), Delete(name="alice", mechanism=1)],
        )  # fmt: skip
        altered = await client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, request)
        codes = {r.user: r.error_code for r in altered.results}
        assert codes == {
            "ghost": ErrorCode.RESOURCE_NOT_FOUND,
            "alice": ErrorCode.DUPLICATE_RESOURCE,  # deleted and upserted for SCRAM-SHA-256
            "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "odd": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            "twice": ErrorCode.DUPLICATE_RESOURCE,
            "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
        }
        assert set(broker.credentials.scram_users()) == {"alice"}
        assert broker.credentials.scram("SCRAM-SHA-256", "alice") is not None
        await client.aclose()
