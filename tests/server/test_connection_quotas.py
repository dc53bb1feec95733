"""Connection limits (Kafka's max.connections, max.connections.per.ip(.overrides),
max.connection.creation.rate): over real sockets against a running broker, and the accept
pacing under trio's virtual clock (no timing in real time)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from kafkapy.broker.config import BrokerConfig, ConfigError
from kafkapy.protocol import ApiKey
from kafkapy.protocol.messages import ApiVersionsRequest
from kafkapy.server.connection_quotas import ConnectionQuotas, parse_ip_overrides

from .helpers import Client, running_broker


async def _served(client: Client) -> bool:
    """True when the broker answers an ApiVersions on this connection, False when it closed it."""
    try:
        await client.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())
        return await client.read_frame() is not None
    except trio.BrokenResourceError:
        return False


async def test_connections_over_the_per_ip_limit_are_closed_and_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="kafkapy.server.app")
    async with running_broker(None, **{"max.connections.per.ip": "2"}) as (_, _, port):
        first, second = await Client.connect(port), await Client.connect(port)
        assert await _served(first)
        assert await _served(second)
        third = await Client.connect(port)
        assert not await _served(third)
        await third.aclose()
        assert "address already has the configured maximum of 2 connections" in caplog.text
        await first.aclose()
        with trio.fail_after(10):  # the broker sees the close, then the slot is free again
            while True:
                again = await Client.connect(port)
                if await _served(again):
                    break
                await again.aclose()
                await trio.sleep(0.05)
        assert await _served(second)  # the others were never affected
        await again.aclose()
        await second.aclose()


async def test_per_ip_overrides_raise_or_lower_one_address() -> None:
    overrides = {"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:3"}
    async with running_broker(None, **overrides) as (_, _, port):
        clients = [await Client.connect(port) for _ in range(4)]
        assert [await _served(c) for c in clients] == [True, True, True, False]
        for c in clients:
            await c.aclose()


async def test_at_max_connections_accepting_waits_until_one_closes() -> None:
    """Kafka blocks its acceptor at the broker-wide limit: the next client is not refused, it is
    served as soon as another connection closes."""
    async with running_broker(None, **{"max.connections": "2"}) as (_, _, port):
        first, second = await Client.connect(port), await Client.connect(port)
        assert await _served(first)
        assert await _served(second)
        waiting = await Client.connect(port)  # the kernel completes the handshake (backlog)
        await waiting.send(ApiKey.API_VERSIONS, 3, ApiVersionsRequest())
        with pytest.raises(trio.TooSlowError):
            await waiting.read_frame(wait_s=1.0)  # not accepted while two are open
        await first.aclose()
        assert await waiting.read_frame() is not None  # accepted and answered now
        await waiting.aclose()
        await second.aclose()


def _quotas(**settings: str) -> ConnectionQuotas:
    return ConnectionQuotas(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0", **settings}))


async def test_creation_rate_paces_accepting_in_virtual_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Kafka throttles its acceptor above max.connection.creation.rate: a second's worth of
    connections at once, then one every 1/rate seconds (pytest-trio's virtual clock)."""
    quotas = _quotas(**{"max.connection.creation.rate": "2"})
    start = trio.current_time()
    accepted: list[float] = []
    for _ in range(6):
        await quotas.wait_to_accept("PLAINTEXT")
        accepted.append(round(trio.current_time() - start, 6))
    assert accepted == [0.0, 0.0, 0.5, 1.0, 1.5, 2.0]
    await trio.sleep(10)  # idle: the bucket refills to one second's worth, no more
    again = trio.current_time()
    for _ in range(3):
        await quotas.wait_to_accept("PLAINTEXT")
    assert round(trio.current_time() - again, 6) == 0.5


def test_exempt_listener_is_not_paced_and_counts_per_ip() -> None:
    quotas = ConnectionQuotas(
        BrokerConfig(
            {
                "listeners": "PLAINTEXT://127.0.0.1:0",
                "max.connections": "1",
                "max.connections.per.ip": "3",
            }
        ),
        exempt_listeners=frozenset({"INTERNAL"}),
    )
    assert quotas.admit("10.0.0.1", "PLAINTEXT") is None
    assert quotas.admit("10.0.0.1", "PLAINTEXT") is not None  # broker-wide limit
    assert quotas.admit("10.0.0.1", "INTERNAL") is None  # exempt from the broker-wide one
    assert quotas.admit("10.0.0.1", "INTERNAL") is None
    assert quotas.admit("10.0.0.1", "INTERNAL") is not None  # but not from its address's
    for _ in range(3):
        quotas.release("10.0.0.1")
    assert quotas.total == 0
    assert quotas.by_ip == {}


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"max.connections.per.ip.overrides": "127.0.0.1"}, "HOST_OR_IP:COUNT"),
        ({"max.connections.per.ip.overrides": "127.0.0.1:many"}, "HOST_OR_IP:COUNT"),
        ({"max.connections.per.ip": "0"}, "needs max.connections.per.ip.overrides"),
        ({"max.connections": "-1"}, "at least 0"),
    ],
)
def test_bad_limits_refuse_to_start(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _quotas(**settings)


def test_overrides_accept_names_and_ipv6() -> None:
    assert parse_ip_overrides("127.0.0.1:5, [::1]:7")["127.0.0.1"] == 5
    assert parse_ip_overrides("[::1]:7") == {"::1": 7}
    assert parse_ip_overrides("localhost:4")["127.0.0.1"] == 4
