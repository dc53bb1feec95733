"""The HTTP listener over real sockets: /healthz, /readyz, routing, limits, bad input."""

from __future__ import annotations

import http.client
import socket
from pathlib import Path

import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.server.app import ListenError
from kafkapy.server.http import listener as listener_module
from kafkapy.server.http.listener import HttpResponse, parse_http_address
from kafkapy.testing.cluster import free_ports
from tests.server.helpers import Client, build_node, running_broker

HTTP = {"kafkapy.http.listener": "127.0.0.1:0"}


def get(port: int, path: str, method: str = "GET", body: bytes | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path, body=body)
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


async def aget(port: int, path: str, method: str = "GET") -> tuple[int, str]:
    return await trio.to_thread.run_sync(get, port, path, method)


def raw_exchange(port: int, data: bytes) -> bytes:
    """Send `data`, read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def test_parse_http_address() -> None:
    assert parse_http_address("127.0.0.1:9644") == ("127.0.0.1", 9644)
    assert parse_http_address("9644") == ("127.0.0.1", 9644)
    assert parse_http_address("[::1]:0") == ("::1", 0)
    assert parse_http_address(":9644") == ("127.0.0.1", 9644)
    for bad in ("localhost", "host:port", "1.2.3.4:70000", "[::1]9644"):
        with pytest.raises(ValueError, match="bad HTTP listener"):
            parse_http_address(bad)


async def test_off_by_default() -> None:
    async with running_broker(None) as (_, server, _):
        assert server.http is None


async def test_healthz_and_readyz_on_a_single_node() -> None:
    async with running_broker(None, **HTTP) as (_, server, _):
        assert server.http is not None
        port = server.http.port
        assert port != 0
        assert await aget(port, "/healthz") == (200, "ok\n")
        assert await aget(port, "/readyz") == (200, "ready\n")
        status, _ = await aget(port, "/healthz", "HEAD")
        assert status == 200


async def test_unknown_path_and_wrong_method() -> None:
    async with running_broker(None, **HTTP) as (_, server, _):
        assert server.http is not None
        port = server.http.port
        assert (await aget(port, "/nope"))[0] == 404
        assert (await aget(port, "/healthz", "POST"))[0] == 405


async def test_keep_alive_serves_several_requests_on_one_connection() -> None:
    async with running_broker(None, **HTTP) as (_, server, _):
        assert server.http is not None
        port = server.http.port

        def two_requests() -> list[int]:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            statuses = []
            for path in ("/healthz", "/readyz", "/healthz"):
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
                statuses.append(response.status)
            conn.close()
            return statuses

        assert await trio.to_thread.run_sync(two_requests) == [200, 200, 200]
        # pipelined in one write: answered in order
        answer = await trio.to_thread.run_sync(
            raw_exchange,
            port,
            b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
            b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        assert answer.count(b"HTTP/1.1 200") == 2
        assert answer.index(b"ok\n") < answer.index(b"ready\n")


async def test_malformed_request_gets_400_and_kafka_keeps_serving() -> None:
    async with running_broker(None, **HTTP) as (_, server, kafka_port):
        assert server.http is not None
        port = server.http.port
        answer = await trio.to_thread.run_sync(raw_exchange, port, b"\x00\x01garbage\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400")
        huge_head = b"GET / HTTP/1.1\r\nX: " + b"a" * 64 * 1024 + b"\r\n\r\n"
        answer = await trio.to_thread.run_sync(raw_exchange, port, huge_head)
        assert answer.startswith(b"HTTP/1.1 431")
        assert await aget(port, "/healthz") == (200, "ok\n")
        client = await Client.connect(kafka_port)
        await client.aclose()


async def test_handler_exception_is_500_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    async with running_broker(None, **HTTP) as (_, server, _):
        assert server.http is not None

        async def broken(request: object) -> HttpResponse:
            raise RuntimeError("boom")

        server.http.add_route("GET", "/broken", broken)
        assert (await aget(server.http.port, "/broken"))[0] == 500
        assert await aget(server.http.port, "/healthz") == (200, "ok\n")
    assert any("HTTP GET /broken failed" in r.getMessage() for r in caplog.records)


async def test_post_route_receives_the_body() -> None:
    async with running_broker(None, **HTTP) as (_, server, _):
        assert server.http is not None
        seen: list[bytes] = []

        async def echo(request: listener_module.HttpRequest) -> HttpResponse:
            seen.append(request.body)
            return HttpResponse.text(200, f"{len(request.body)} {request.arg('x')}\n")

        server.http.add_route("POST", "/echo", echo)
        status, text = await trio.to_thread.run_sync(
            get, server.http.port, "/echo?x=1", "POST", b"hello"
        )
        assert (status, text) == (200, "5 1\n")
        assert seen == [b"hello"]


async def test_connections_beyond_the_cap_get_503(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond the cap only health probes are answered (see the next test); the rest get 503."""
    monkeypatch.setattr(listener_module, "MAX_CONNECTIONS", 2)
    async with running_broker(None, **HTTP) as (_, server, _):
        assert server.http is not None
        port = server.http.port
        idle = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(2)]
        with trio.fail_after(10):
            while server.http.open_connections < 2:  # noqa: ASYNC110
                await trio.sleep(0.01)
        answer = await trio.to_thread.run_sync(raw_exchange, port, b"GET /metrics HTTP/1.1\r\nhost: x\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 503")
        for stream in idle:
            await stream.aclose()
        with trio.fail_after(10):
            while server.http.open_connections:  # noqa: ASYNC110
                await trio.sleep(0.01)
        assert await aget(port, "/healthz") == (200, "ok\n")


async def test_idle_http_connection_is_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(listener_module, "IDLE_TIMEOUT_S", 0.2)
    async with running_broker(None, **HTTP) as (_, server, _):
        assert server.http is not None
        stream = await trio.open_tcp_stream("127.0.0.1", server.http.port)
        with trio.fail_after(10):
            assert await stream.receive_some(100) == b""
        await stream.aclose()


async def test_bad_address_and_port_in_use_refuse_to_start() -> None:
    for value, reason in (("nonsense", "bad HTTP listener"), ("127.0.0.1:99999", "port")):
        server = build_node(None, {"kafkapy.http.listener": value})
        with pytest.raises(ListenError, match=reason):
            await server.run()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "kafkapy.http.listener": f"127.0.0.1:{port}"}
        server = build_node(None, settings)
        with pytest.raises(ListenError, match=f"cannot listen on HTTP 127.0.0.1:{port}"):
            await server.run()


async def test_health_probes_are_answered_while_every_connection_is_held() -> None:
    async with running_broker(None, **HTTP) as (_, server, _):
        assert server.http is not None
        port = server.http.port
        held = [await trio.open_tcp_stream("127.0.0.1", port) for _ in range(listener_module.MAX_CONNECTIONS)]
        with trio.fail_after(10):
            while server.http.open_connections < listener_module.MAX_CONNECTIONS:  # noqa: ASYNC110
                await trio.sleep(0.01)
        with trio.fail_after(3):
            assert await aget(port, "/healthz") == (200, "ok\n")
            assert await aget(port, "/readyz") == (200, "ready\n")
            assert (await aget(port, "/metrics"))[0] == 503
        for stream in held:
            await stream.aclose()


async def test_readyz_is_503_until_a_cluster_member_has_joined(tmp_path: Path) -> None:
    """A cluster node whose quorum cannot form (one of two voters up) is alive but not ready."""
    controller_ports = free_ports(2)
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(controller_ports))
    settings = {
        "node.id": "1",
        "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller_ports[0]}",
        "controller.quorum.voters": voters,
        **HTTP,
    }
    server = build_node(tmp_path / "node1", settings)
    assert server.readiness() == (False, "listeners not bound yet")
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        assert server.http is not None
        port = server.http.port
        assert await aget(port, "/healthz") == (200, "ok\n")
        status, text = await aget(port, "/readyz")
        assert status == 503
        assert text == "not ready: broker not registered with the controller yet\n"
        server.request_shutdown()
        assert server.readiness() == (False, "shutting down")
        with trio.fail_after(15):
            await server.stopped.wait()


async def test_open_http_connections_do_not_delay_shutdown() -> None:
    server = build_node(None, {"listeners": "PLAINTEXT://127.0.0.1:0", **HTTP})
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        assert server.http is not None
        idle = await trio.open_tcp_stream("127.0.0.1", server.http.port)
        with trio.fail_after(10):
            while server.http.open_connections < 1:  # noqa: ASYNC110
                await trio.sleep(0.01)
        server.request_shutdown()
        # an idle HTTP connection would hold it for IDLE_TIMEOUT_S (30 s) if it counted
        with trio.fail_after(listener_module.IDLE_TIMEOUT_S * 2 / 3):
            await server.stopped.wait()
        await idle.aclose()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=st.binary(max_size=2048), tail=st.sampled_from([b"", b"\r\n\r\n", b"GET / HTTP/1.1\r\n\r\n"]))
def test_any_bytes_get_an_answer_or_a_close_and_never_an_exception(garbage: bytes, tail: bytes) -> None:
    """The connection handler on a memory stream: whatever arrives, it ends (4xx, a response, or
    a close) without raising, and another request on a fresh connection is still served."""

    async def scenario() -> None:
        http = listener_module.HttpListener("127.0.0.1", 0, lambda: (True, ""))
        client, server_side = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(http._serve_connection, server_side)
            await client.send_all(garbage + tail)
            await client.send_eof()
            with trio.fail_after(10):
                while await client.receive_some(65536):
                    pass
        assert http.open_connections == 0
        client, server_side = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(http._serve_connection, server_side)
            await client.send_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            answer = b""
            with trio.fail_after(10):
                while chunk := await client.receive_some(65536):
                    answer += chunk
        assert answer.startswith(b"HTTP/1.1 200")

    trio.run(scenario)
