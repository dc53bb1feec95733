"""Hostile bytes before authentication: the SASL phase answers or closes, never crashes, and never
lets a request other than ApiVersions/SASL through (nothing is ever appended)."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey, RequestHeader, encode_request
from kafkapy.protocol.messages import (
    ApiVersionsRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from kafkapy.server.app import Server
from kafkapy.server.broker import Broker
from kafkapy.server.connection import Connection
from kafkapy.server.security import ListenerSecurity

from .helpers import batch, build_node


def _frame(api_key: int, version: int, msg: object) -> bytes:
    body = encode_request(RequestHeader(api_key, version, 1, "fuzz"), msg)
    return struct.pack(">i", len(body)) + body


def _produce() -> bytes:
    from kafkapy.protocol.messages import ProduceRequest

    req = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"x"))])])  # fmt: skip
    return _frame(ApiKey.PRODUCE, 9, req)


_pieces = st.one_of(
    st.binary(max_size=64),
    st.just(_frame(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())),
    st.sampled_from(["PLAIN", "SCRAM-SHA-256", "NOPE"]).map(
        lambda m: _frame(ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=m))
    ),
    st.binary(max_size=40).map(
        lambda t: _frame(ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=t))
    ),
    st.binary(max_size=40).map(lambda t: struct.pack(">i", len(t)) + t),  # raw (legacy) tokens
    st.just(_produce()),
)


@pytest.fixture(scope="module")
def sasl_listener() -> Iterator[tuple[Broker, ListenerSecurity]]:
    settings = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "kafkapy.sasl.users": "alice:pw"}

    async def build() -> Server:  # in a trio run: a node's parts may read trio's clock
        return build_node(None, settings)

    server = trio.run(build)
    try:
        yield server.broker, server.security["SASL_PLAINTEXT"]
    finally:
        server.broker.close()


@settings(max_examples=60, deadline=None)
@given(pieces=st.lists(_pieces, max_size=6))
def test_random_input_before_authentication(
    sasl_listener: tuple[Broker, ListenerSecurity], pieces: list[bytes]
) -> None:
    broker, security = sasl_listener

    async def main() -> None:
        client, server = trio.testing.memory_stream_pair()
        conn = Connection(broker, server, "SASL_PLAINTEXT", "fuzz", security=security)
        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(conn.run)
                for piece in pieces:
                    try:
                        await client.send_all(piece)
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        break
                await client.send_eof()
                while await client.receive_some(65536):  # drain until the server closes
                    pass

    trio.run(main)
    assert broker.partition_log("t", 0) is None  # the unauthenticated Produce wrote nothing
