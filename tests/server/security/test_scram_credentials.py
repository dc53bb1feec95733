"""DescribeUserScramCredentials / AlterUserScramCredentials over the wire with our codec:
Kafka's rules, credentials in the metadata log (a SCRAM login over a SASL listener checks them,
a restart keeps them), configured users beside them."""

from __future__ import annotations

import hashlib
from pathlib import Path

from kafkapy.authorizer import StandardAuthorizer
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from kafkapy.protocol.sasl import ScramClient
from kafkapy.server.app import Server

from ..helpers import Client, running_broker

Upsert = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Delete = AlterUserScramCredentialsRequest.ScramCredentialDeletion
User = DescribeUserScramCredentialsRequest.UserName

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
SASL = {"listeners": LISTENERS, "kafkapy.sasl.users": "alice:pw"}
MECHANISMS = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}


def _upsert(name: str, password: str, mechanism: int = 1, iterations: int = 4096) -> Upsert:
    salt = b"salt-" + name.encode()
    algo = "sha256" if mechanism == 1 else "sha512"
    salted = hashlib.pbkdf2_hmac(algo, password.encode(), salt, max(iterations, 1))
    return Upsert(
        name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted
    )


def _sasl_port(server: Server) -> int:
    return next(b.port for b in server.bound if b.listener.name == "SASL_PLAINTEXT")


async def _scram_login(port: int, mechanism: str, user: str, password: str) -> ErrorCode:
    """A SCRAM exchange over SaslHandshake v1 / SaslAuthenticate; NONE once a request after
    it is served."""
    client = await Client.connect(port)
    try:
        shake = await client.request(
            ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism)
        )
        assert shake.error_code == ErrorCode.NONE
        scram = ScramClient(mechanism, user, password)
        first = await client.request(
            ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=scram.first())
        )
        if first.error_code != ErrorCode.NONE:
            return ErrorCode(first.error_code)
        final = await client.request(
            ApiKey.SASL_AUTHENTICATE,
            2,
            SaslAuthenticateRequest(auth_bytes=scram.final_message(bytes(first.auth_bytes))),
        )
        if final.error_code != ErrorCode.NONE:
            return ErrorCode(final.error_code)
        scram.final(bytes(final.auth_bytes))  # the server proved it knows the ServerKey
        metadata = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        assert metadata.brokers
        return ErrorCode.NONE
    finally:
        await client.aclose()


async def _describe(client: Client, *users: str) -> list[tuple[str, int, list[tuple[int, int]]]]:
    request = DescribeUserScramCredentialsRequest(
        users=[User(name=u) for u in users] if users else None
    )
    described = await client.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, request)
    return [
        (r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
        for r in described.results
    ]


async def _alter(client: Client, ups: list[Upsert], dels: list[Delete]) -> dict[str, int]:
    request = AlterUserScramCredentialsRequest(upsertions=ups, deletions=dels)
    altered = await client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, request)
    return {r.user: r.error_code for r in altered.results}


async def test_created_credentials_log_in_at_once_and_deleted_ones_no_longer() -> None:
    async with running_broker(None, **SASL) as (broker, server, port):
        client = await Client.connect(port)
        assert await _describe(client) == [("alice", 0, [(1, 4096), (2, 4096)])]
        assert await _alter(client, [_upsert("carol", "new-pw", 2, 8192)], []) == {"carol": 0}
        # the answer came once this node's image had it: the next login checks it
        sasl_port = _sasl_port(server)
        assert await _scram_login(sasl_port, "SCRAM-SHA-512", "carol", "new-pw") == 0
        assert (
            await _scram_login(sasl_port, "SCRAM-SHA-512", "carol", "old-pw")
            == ErrorCode.SASL_AUTHENTICATION_FAILED
        )
        assert (
            await _scram_login(sasl_port, "SCRAM-SHA-256", "carol", "new-pw")
            == ErrorCode.SASL_AUTHENTICATION_FAILED
        )
        stored = broker.cluster.image.scram_credentials[("carol", "SCRAM-SHA-512")]
        assert stored.iterations == 8192
        assert stored.salt == b"salt-carol"
        assert await _describe(client, "carol", "nobody") == [
            ("carol", ErrorCode.NONE, [(2, 8192)]),
            ("nobody", ErrorCode.RESOURCE_NOT_FOUND, []),
        ]
        assert await _alter(client, [], [Delete(name="carol", mechanism=2)]) == {"carol": 0}
        assert (
            await _scram_login(sasl_port, "SCRAM-SHA-512", "carol", "new-pw")
            == ErrorCode.SASL_AUTHENTICATION_FAILED
        )
        assert await _describe(client) == [("alice", 0, [(1, 4096), (2, 4096)])]
        await client.aclose()


async def test_a_credential_overrides_a_configured_user_for_its_mechanism_only() -> None:
    async with running_broker(None, **SASL) as (_, server, port):
        client = await Client.connect(port)
        sasl_port = _sasl_port(server)
        assert await _alter(client, [_upsert("alice", "rotated", 1, 16384)], []) == {"alice": 0}
        assert await _scram_login(sasl_port, "SCRAM-SHA-256", "alice", "rotated") == 0
        assert await _scram_login(sasl_port, "SCRAM-SHA-512", "alice", "pw") == 0
        assert await _describe(client, "alice") == [("alice", 0, [(1, 16384), (2, 4096)])]
        # deleting it brings the configured password back; the configured one is not deletable
        assert await _alter(client, [], [Delete(name="alice", mechanism=1)]) == {"alice": 0}
        assert await _scram_login(sasl_port, "SCRAM-SHA-256", "alice", "pw") == 0
        request = AlterUserScramCredentialsRequest(deletions=[Delete(name="alice", mechanism=2)])
        altered = await client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, request)
        (result,) = altered.results
        assert result.error_code == ErrorCode.RESOURCE_NOT_FOUND
        assert "configured user" in (result.error_message or "")
        await client.aclose()


async def test_alter_refusals_leave_that_user_unchanged() -> None:
    async with running_broker(None, **SASL) as (broker, _, port):
        client = await Client.connect(port)
        assert await _alter(client, [_upsert("kept", "x")], []) == {"kept": 0}
        codes = await _alter(
            client,
            [
                _upsert("few", "x", iterations=100),
                _upsert("many", "x", iterations=16385),
                _upsert("odd", "x", mechanism=3),
                _upsert("twice", "x"), _upsert("twice", "y", mechanism=2),
                _upsert("", "x"),
                _upsert("kept", "changed"),
                _upsert("fine", "x"),
            ],
            [Delete(name="ghost", mechanism=1), Delete(name="kept", mechanism=1)],
        )  # fmt: skip
        assert codes == {
            "ghost": ErrorCode.RESOURCE_NOT_FOUND,
            "kept": ErrorCode.DUPLICATE_RESOURCE,  # deleted and upserted in one request
            "few": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "many": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "odd": ErrorCode.UNSUPPORTED_SASL_MECHANISM,
            "twice": ErrorCode.DUPLICATE_RESOURCE,  # one user twice, even for two mechanisms
            "": ErrorCode.UNACCEPTABLE_CREDENTIAL,
            "fine": ErrorCode.NONE,
        }
        assert set(broker.cluster.image.scram_credentials) == {
            ("kept", "SCRAM-SHA-256"),
            ("fine", "SCRAM-SHA-256"),
        }
        assert await _describe(client, "kept", "kept") == [
            ("kept", ErrorCode.DUPLICATE_RESOURCE, [])
        ]
        await client.aclose()


async def test_credentials_survive_a_restart_of_a_quorum_of_one(tmp_path: Path) -> None:
    overrides = {**SASL, "kafkapy.sasl.users": ""}
    async with running_broker(tmp_path, **overrides) as (_, _, port):
        client = await Client.connect(port)
        ups = [_upsert("erin", "erin-pw", 2, 8192), _upsert("frank", "frank-pw", 1)]
        assert await _alter(client, ups, []) == {"erin": 0, "frank": 0}
        assert await _alter(client, [], [Delete(name="frank", mechanism=1)]) == {"frank": 0}
        await client.aclose()
    log_dir = tmp_path / "__cluster_metadata-0"
    written = b"".join(p.read_bytes() for p in log_dir.glob("*.log"))
    assert b"erin" in written
    assert b"erin-pw" not in written
    async with running_broker(tmp_path, **overrides) as (_, server, port):
        client = await Client.connect(port)
        assert await _describe(client) == [("erin", 0, [(2, 8192)])]
        await client.aclose()
        sasl_port = _sasl_port(server)
        assert await _scram_login(sasl_port, "SCRAM-SHA-512", "erin", "erin-pw") == 0
        assert (
            await _scram_login(sasl_port, "SCRAM-SHA-256", "frank", "frank-pw")
            == ErrorCode.SASL_AUTHENTICATION_FAILED
        )



async def test_describing_and_altering_users_need_cluster_acls() -> None:
    async with running_broker(None, **SASL) as (broker, _, port):
        client = await Client.connect(port)  # PLAINTEXT: User:ANONYMOUS
        broker.authorizer = StandardAuthorizer(super_users=("User:admin",))
        described = await client.request(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, DescribeUserScramCredentialsRequest()
        )
        assert (described.error_code, described.results) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [],
        )  # fmt: skip
        assert await _alter(client, [_upsert("mia", "x")], [Delete(name="alice", mechanism=1)]) == {
            "alice": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "mia": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        }
        assert broker.cluster.image.scram_credentials == {}
        broker.authorizer = StandardAuthorizer(super_users=("User:ANONYMOUS",))
        assert await _alter(client, [_upsert("mia", "x")], []) == {"mia": 0}
        assert [u for u, _, _ in await _describe(client)] == ["alice", "mia"]
        await client.aclose()
