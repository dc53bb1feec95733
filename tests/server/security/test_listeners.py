"""SASL and TLS listeners over real sockets, with our own codec as the client.

What users rely on: a SASL listener serves nothing before authentication (Kafka closes the
connection), answers a wrong password with SASL_AUTHENTICATION_FAILED before closing, keeps
serving everyone else; both the KIP-152 (SaslAuthenticate) and the KIP-43 legacy (raw tokens)
flows work; a TLS listener serves fetches (file regions go through the TLS stream, not sendfile).
Real clients (confluent-kafka, kafka-python, kcat) are in compat_tests/test_security.py.
"""

from __future__ import annotations

import logging
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    FetchRequest,
    MetadataRequest,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from kafkapy.protocol.records import decode_records, iter_batches
from kafkapy.server.app import Server
from kafkapy.testing.certs import CertFiles, make_certs

from ..helpers import IO_TIMEOUT_S, Client, batch, build_node, create_topic, running_broker

LISTENERS = "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0"
USERS = {"kafkapy.sasl.users": "alice:alice-secret,bob:b:ob"}


def _port(server: Server, name: str) -> int:
    return next(b.port for b in server.bound if b.listener.name == name)


@asynccontextmanager
async def sasl_broker(**overrides: str) -> AsyncIterator[tuple[Server, int, int]]:
    """(server, plaintext port, SASL_PLAINTEXT port)"""
    async with running_broker(None, listeners=LISTENERS, **USERS, **overrides) as (_, server, _):
        yield server, _port(server, "PLAINTEXT"), _port(server, "SASL_PLAINTEXT")


async def _login(client: Client, user: str, password: str) -> None:
    shake = await client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
    assert shake.error_code == ErrorCode.NONE
    auth = await client.request(
        ApiKey.SASL_AUTHENTICATE,
        2,
        SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()),
    )
    assert auth.error_code == ErrorCode.NONE, auth.error_message


def _produce(topic: str, *values: bytes) -> ProduceRequest:
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(*values))])])  # fmt: skip


async def test_plain_login_then_requests_including_ones_pipelined_behind_the_last_token() -> None:
    async with sasl_broker() as (_, plain_port, sasl_port):
        await create_topic(plain_port, "t", 1)
        client = await Client.connect(sasl_port)
        versions = await client.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())
        listed = {k.api_key for k in versions.api_keys}
        assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= listed
        shake = await client.request(
            ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")
        )
        assert shake.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        # the token and two requests in one write: the requests are served after authentication
        await client.send(
            ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\0bob\0b:ob")
        )
        await client.send(ApiKey.PRODUCE, 9, _produce("t", b"one"))
        await client.send(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        _, auth = await client.receive()
        assert auth.error_code == ErrorCode.NONE
        assert auth.session_lifetime_ms == 0
        _, produced = await client.receive()
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        _, metadata = await client.receive()
        assert [b.port for b in metadata.brokers] == [sasl_port]  # this listener's address
        await client.aclose()


async def test_legacy_v0_handshake_then_raw_tokens() -> None:
    async with sasl_broker() as (_, _, sasl_port):
        client = await Client.connect(sasl_port)
        shake = await client.request(
            ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN")
        )
        assert shake.error_code == ErrorCode.NONE
        token = b"\0alice\0alice-secret"
        await client.send_raw(struct.pack(">i", len(token)) + token)
        assert await client.read_frame() == b""  # PLAIN's empty answer, size-prefixed
        metadata = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        assert metadata.brokers
        await client.aclose()
        bad = await Client.connect(sasl_port)
        await bad.request(ApiKey.SASL_HANDSHAKE, 0, SaslHandshakeRequest(mechanism="PLAIN"))
        token = b"\0alice\0wrong"
        await bad.send_raw(struct.pack(">i", len(token)) + token)
        assert await bad.read_frame() is None  # legacy flow: no error frame, just the close
        await bad.aclose()


async def test_unauthenticated_produce_closes_the_connection_and_others_carry_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with sasl_broker() as (_, plain_port, sasl_port):
        await create_topic(plain_port, "t", 1)
        intruder = await Client.connect(sasl_port)
        await intruder.send(ApiKey.PRODUCE, 9, _produce("t", b"sneaky"))
        assert await intruder.read_frame() is None
        await intruder.aclose()
        assert "Unexpected Kafka request of type PRODUCE" in caplog.text
        # after the handshake only SaslAuthenticate may come
        early = await Client.connect(sasl_port)
        await early.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        await early.send(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        assert await early.read_frame() is None
        await early.aclose()
        # the broker still serves an authenticated client and the plaintext listener
        client = await Client.connect(sasl_port)
        await _login(client, "alice", "alice-secret")
        produced = await client.request(ApiKey.PRODUCE, 9, _produce("t", b"fine"))
        assert (
            produced.responses[0].partition_responses[0].base_offset == 0
        )  # the intruder wrote nothing
        plain = await Client.connect(plain_port)
        again = await plain.request(ApiKey.PRODUCE, 9, _produce("t", b"plain"))
        assert again.responses[0].partition_responses[0].base_offset == 1
        await client.aclose()
        await plain.aclose()


async def test_wrong_password_unknown_mechanism_and_sasl_on_a_plaintext_listener() -> None:
    async with sasl_broker() as (_, plain_port, sasl_port):
        client = await Client.connect(sasl_port)
        await client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        auth = await client.request(
            ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong")
        )
        assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert auth.error_message == "Authentication failed: Invalid username or password"
        assert await client.read_frame() is None
        await client.aclose()
        client = await Client.connect(sasl_port)
        shake = await client.request(
            ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="GSSAPI")
        )
        assert shake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert "PLAIN" in shake.mechanisms
        assert await client.read_frame() is None
        await client.aclose()
        plain = await Client.connect(plain_port)
        shake = await plain.request(
            ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")
        )
        assert shake.error_code == ErrorCode.ILLEGAL_SASL_STATE
        assert (await plain.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))).brokers
        await plain.aclose()


async def test_only_enabled_mechanisms_are_offered_per_listener() -> None:
    async with sasl_broker(**{"listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-512"}) as (
        _, _, sasl_port,
    ):  # fmt: skip
        client = await Client.connect(sasl_port)
        shake = await client.request(
            ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN")
        )
        assert shake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert shake.mechanisms == ["SCRAM-SHA-512"]
        await client.aclose()


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


async def _tls_client(port: int, certs: CertFiles) -> Client:
    context = ssl.create_default_context(cafile=str(certs.ca))
    with trio.fail_after(IO_TIMEOUT_S):
        tcp = await trio.open_tcp_stream("127.0.0.1", port)
        stream = trio.SSLStream(tcp, context, server_hostname="localhost")
        await stream.do_handshake()
    return Client(stream)  # type: ignore[arg-type]


async def test_tls_listener_serves_produce_and_a_large_fetch(certs: CertFiles) -> None:
    overrides = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(certs.server_pem)}
    async with running_broker(None, **overrides) as (_, _, port):
        client = await _tls_client(port, certs)
        values = [bytes([i]) * 3000 for i in range(40)]  # ~120 KB: a file region, not a small copy
        produced = await client.request(ApiKey.PRODUCE, 9, _produce("t", *values))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        fetch = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_epoch=-1, topics=[
            FetchRequest.FetchTopic(topic="t", partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])  # fmt: skip
        fetched = await client.request(ApiKey.FETCH, 11, fetch)
        records = bytes(fetched.responses[0].partitions[0].records)
        got = [
            r.value
            for pos, header in iter_batches(records)
            for r in decode_records(records, pos, header)
        ]
        assert got == values
        await client.aclose()
        # a plaintext client on the TLS port gets no Kafka answer
        raw = await Client.connect(port)
        await raw.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        with pytest.raises((trio.TooSlowError, AssertionError, trio.BrokenResourceError)):
            await raw.receive(wait_s=3)
        await raw.aclose()


async def test_sasl_ssl_with_client_certificates_required(certs: CertFiles) -> None:
    overrides = {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "ssl.certificate.location": str(certs.server_cert),
        "ssl.key.location": str(certs.server_key),
        "ssl.client.auth": "required",
        "ssl.truststore.location": str(certs.ca),
        **USERS,
    }
    async with running_broker(None, **overrides) as (_, _, port):
        context = ssl.create_default_context(cafile=str(certs.ca))
        context.load_cert_chain(str(certs.client_cert), str(certs.client_key))
        with trio.fail_after(IO_TIMEOUT_S):
            stream = trio.SSLStream(
                await trio.open_tcp_stream("127.0.0.1", port), context, server_hostname="localhost"
            )
            await stream.do_handshake()
        client = Client(stream)  # type: ignore[arg-type]
        await _login(client, "alice", "alice-secret")
        assert (await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))).brokers
        await client.aclose()
        anonymous = await _tls_client(port, certs)  # no client certificate: refused (TLS 1.3
        with pytest.raises((trio.BrokenResourceError, AssertionError)):  # reports it on first read)
            await anonymous.request(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())


def test_bad_tls_and_sasl_settings_fail_at_start_with_a_clear_message(
    tmp_path: Path, certs: CertFiles
) -> None:
    from kafkapy.broker.config import ConfigError

    cases = [
        ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore.location"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(tmp_path / "nope.pem")}, "cannot load"),
        ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.type": "JKS", "ssl.keystore.location": str(certs.server_pem)}, "PEM"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
        ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "kafkapy.sasl.users": "nocolon"}, "NAME:PASSWORD"),
    ]  # fmt: skip

    def start(settings: dict[str, str]) -> None:
        build_node(None, settings).broker.close()

    for settings, message in cases:
        with pytest.raises((ConfigError, ValueError), match=message):
            start(settings)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
async def test_frames_over_512_kib_are_refused_before_authentication_only(
    certs: CertFiles, caplog: pytest.LogCaptureFixture, protocol: str
) -> None:
    """Kafka's cap since CVE-2022-34917: before SASL completes, a size prefix over
    `sasl.server.max.receive.size` (512 KiB) closes the connection - without waiting for (or
    buffering) the body; once authenticated, `socket.request.max.bytes` applies again."""
    overrides = {
        "listeners": f"PLAINTEXT://127.0.0.1:0,{protocol}://127.0.0.1:0",
        "ssl.keystore.location": str(certs.server_pem),
        **USERS,
    }
    big = _produce("t", b"x" * 700_000)  # a 700 KB frame
    async with running_broker(None, **overrides) as (_, server, _):
        port = _port(server, protocol)
        await create_topic(_port(server, "PLAINTEXT"), "t", 1)

        async def connect() -> Client:
            return await (_tls_client(port, certs) if protocol == "SASL_SSL" else Client.connect(port))

        async def closed_after(client: Client, send: Awaitable[object]) -> bool:
            """True when the broker closes the connection (a broken pipe while we still send
            counts: it closed before reading the rest)."""
            try:
                await send
                return await client.read_frame() is None
            except trio.BrokenResourceError:
                return True
            finally:
                await client.aclose()

        intruder = await connect()  # a size prefix, and the body never comes
        head = struct.pack(">i", 600 * 1024) + b"\0" * 64
        assert await closed_after(intruder, intruder.send_raw(head))
        assert "before authentication: frame size 614400 outside 0..524288" in caplog.text
        before_login = await connect()
        assert await closed_after(before_login, before_login.send(ApiKey.PRODUCE, 9, big))
        client = await connect()
        await _login(client, "alice", "alice-secret")
        produced = await client.request(ApiKey.PRODUCE, 9, big)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        await client.aclose()
        plain = await Client.connect(_port(server, "PLAINTEXT"))  # no authentication, no cap
        produced = await plain.request(ApiKey.PRODUCE, 9, big)
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        await plain.aclose()


async def test_the_pre_authentication_cap_is_configurable() -> None:
    async with sasl_broker(**{"sasl.server.max.receive.size": "100"}) as (_, _, sasl_port):
        small = await Client.connect(sasl_port)
        assert (await small.request(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())).api_keys
        await small.send(
            ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN" + " " * 200)
        )
        assert await small.read_frame() is None
        await small.aclose()


async def test_a_failed_login_closes_only_after_the_configured_delay() -> None:
    """Kafka's connection.failed.authentication.delay.ms: the SASL_AUTHENTICATION_FAILED answer
    comes at once, the close after the delay (it only can come later on a loaded machine, never
    earlier), so guessing passwords costs time per attempt; 0 closes at once."""
    for delay_ms, stays_open in (("1500", True), ("0", False)):
        overrides = {"connection.failed.authentication.delay.ms": delay_ms}
        async with sasl_broker(**overrides) as (_, _, sasl_port):
            client = await Client.connect(sasl_port)
            await client.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
            auth = await client.request(
                ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope")
            )
            assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
            if stays_open:
                with pytest.raises(trio.TooSlowError):
                    await client.read_frame(wait_s=0.5)
            assert await client.read_frame() is None  # then closed
            await client.aclose()


async def test_authentications_are_counted_and_the_principal_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="kafkapy.request")
    async with sasl_broker(**{"kafkapy.log.requests": "Metadata"}) as (server, _, sasl_port):
        client = await Client.connect(sasl_port)
        await _login(client, "alice", "alice-secret")
        await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
        await client.aclose()
        bad = await Client.connect(sasl_port)
        await bad.request(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism="PLAIN"))
        auth = await bad.request(
            ApiKey.SASL_AUTHENTICATE, 1, SaslAuthenticateRequest(auth_bytes=b"\0alice\0wrong")
        )
        assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        await bad.aclose()
        assert server.broker.stats.authentications == {
            ("SASL_PLAINTEXT", "PLAIN", True): 1,
            ("SASL_PLAINTEXT", "PLAIN", False): 1,
        }
    lines = [r.getMessage() for r in caplog.records if r.name == "kafkapy.request"]
    assert len(lines) == 1
    assert "principal=User:alice" in lines[0]
    assert "listener=SASL_PLAINTEXT" in lines[0]


async def test_http_and_plaintext_clients_on_a_tls_listener_are_named(
    certs: CertFiles, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kafkapy.server.authenticator")
    overrides = {"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": str(certs.server_pem)}
    async with running_broker(None, **overrides) as (broker, _, port):
        raw = await Client.connect(port)
        await raw.send(ApiKey.API_VERSIONS, 0, ApiVersionsRequest())
        assert await raw.read_frame() is None  # closed, no Kafka answer
        await raw.aclose()
        web = await trio.open_tcp_stream("127.0.0.1", port)
        await web.send_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        with trio.fail_after(IO_TIMEOUT_S):
            while await web.receive_some(4096):
                pass
        await web.aclose()
        assert broker.stats.non_kafka_connections == {("SSL", "plaintext"): 1, ("SSL", "HTTP"): 1}
    assert "a plaintext client on a TLS listener?" in caplog.text
    assert "a non-Kafka client (HTTP) on a TLS listener" in caplog.text
