"""Connection limits on the broker listeners (Kafka's ConnectionQuotas).

Why: without them one client (or a port scanner, or a reconnect loop) can open connections until
the broker runs out of file descriptors, and every other client with it.

Rules, with Kafka's keys and behaviour:
- `max.connections.per.ip` / `max.connections.per.ip.overrides` (`HOST_OR_IP:N,...`, names
  resolved at start-up): a connection beyond its address's limit is closed at once, logged
  (INFO, as Kafka's "Rejected connection from ..."); the others are unaffected.
- `max.connections` (broker-wide): at the limit the listeners stop accepting - new connections
  wait in the kernel's backlog - until one closes, as Kafka's acceptor blocks.
- `max.connection.creation.rate` (broker-wide, per second): above it accepting waits (a token
  bucket holding one second's worth), as Kafka throttles its acceptor.
The controller listener (cluster mode) is not counted: Kafka serves it from its own socket
server. The broker-wide limits do not hold up the inter-broker listener of a cluster (Kafka exempts
it too, closing an idle client connection instead - kafkapy does not); per-IP limits apply there.
"""

from __future__ import annotations

import logging
import socket
from collections import Counter

import trio

from kafkapy.broker.config import BrokerConfig, ConfigError

__all__ = ["ConnectionQuotas", "parse_ip_overrides"]

log = logging.getLogger(__name__)


def parse_ip_overrides(value: str) -> dict[str, int]:
    """`HOST_OR_IP:N,...` as {ip: N}; host names resolved now (ConfigError when unresolvable)."""
    overrides: dict[str, int] = {}
    for entry in (e.strip() for e in value.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        host = host.strip().strip("[]")
        try:
            limit = int(count)
        except ValueError:
            limit = -1
        if not sep or not host or limit < 0:
            raise ConfigError(
                f"max.connections.per.ip.overrides: {entry!r} is not HOST_OR_IP:COUNT"
            ) from None
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            raise ConfigError(
                f"max.connections.per.ip.overrides: cannot resolve {host!r}: {e}"
            ) from None
        for info in infos:
            overrides[str(info[4][0])] = limit
    return overrides


class ConnectionQuotas:
    """The counts and limits of one broker's listeners (see the module doc)."""

    def __init__(self, config: BrokerConfig, *, exempt_listeners: frozenset[str] = frozenset()) -> None:
        self.max_connections = config.get_int("max.connections")
        self.per_ip = config.get_int("max.connections.per.ip")
        self.overrides = parse_ip_overrides(config.get_str("max.connections.per.ip.overrides"))
        self.rate = config.get_int("max.connection.creation.rate")
        for key, value in (
            ("max.connections", self.max_connections),
            ("max.connections.per.ip", self.per_ip),
            ("max.connection.creation.rate", self.rate),
        ):
            if value < 0:
                raise ConfigError(f"{key} must be at least 0, got {value}")
        if self.per_ip == 0 and not self.overrides:
            raise ConfigError(
                "max.connections.per.ip=0 needs max.connections.per.ip.overrides (else no client "
                "could connect)"
            )
        #: listeners the broker-wide limits do not hold up (the inter-broker one in a cluster)
        self.exempt_listeners = exempt_listeners
        self.total = 0
        self.by_ip: Counter[str] = Counter()
        self._freed = trio.Event()
        self._tokens = float(max(self.rate, 1))
        self._refilled = 0.0

    def limit_of(self, ip: str) -> int:
        return self.overrides.get(ip, self.per_ip)

    async def wait_to_accept(self, listener_name: str) -> None:
        """Return when the broker-wide limits let `listener_name` accept one more connection."""
        if listener_name in self.exempt_listeners:
            return
        while self.total >= self.max_connections:
            await self._freed.wait()
        if self.rate <= 0:
            while True:  # a rate of 0 accepts nothing new, as in Kafka
                await trio.sleep_forever()
        now = trio.current_time()
        self._tokens = min(float(self.rate), self._tokens + (now - self._refilled) * self.rate)
        self._refilled = now
        if self._tokens < 1:
            await trio.sleep((1 - self._tokens) / self.rate)
            self._tokens, self._refilled = 1.0, trio.current_time()
        self._tokens -= 1

    def admit(self, ip: str, listener_name: str) -> str | None:
        """Count a new connection from `ip`; why it must be closed instead, or None. (The
        broker-wide check is for listeners that passed `wait_to_accept` at the same time.)"""
        limit = self.limit_of(ip)
        if self.by_ip[ip] >= limit:
            return f"address already has the configured maximum of {limit} connections"
        if listener_name not in self.exempt_listeners and self.total >= self.max_connections:
            return f"the broker has the configured maximum of {self.max_connections} connections"
        self.by_ip[ip] += 1
        self.total += 1
        return None

    def release(self, ip: str) -> None:
        """A connection `admit` counted has closed."""
        self.by_ip[ip] -= 1
        if self.by_ip[ip] <= 0:
            del self.by_ip[ip]
        self.total -= 1
        self._freed.set()
        self._freed = trio.Event()
