"""What a request handler sees: the broker, the request header and its connection.

Why a context object instead of arguments: handlers for every API share one signature
(`async def handle(ctx, req)`), and later layers (groups, transactions, quotas) add what they need
here without touching every handler.

Ordering contract: requests of one connection are *processed* in order - each handler runs while
holding its connection's turn, like Kafka's one-request-at-a-time channel, so two produces on one
connection append in the order they were sent. A handler about to wait (a long-poll fetch, a join
group) calls `ctx.release_turn()` first so later requests on that connection are not stuck behind
it; responses are still *written* strictly in request order by the connection.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import trio

if TYPE_CHECKING:
    from kafkapy.protocol import RequestHeader
    from kafkapy.server.broker import Broker

__all__ = ["CloseConnection", "ConnectionState", "RequestContext", "TurnSequencer"]


class CloseConnection(Exception):
    """Raised by a handler to close the connection instead of answering (Kafka's way for some errors,
    and the hook fault-injection tests use)."""


class TurnSequencer:
    """Hands out turns 0, 1, 2, ... in order; a holder passes the turn on by releasing it.

    Why not a trio.Lock: lock acquisition order follows task scheduling order, which trio
    deliberately randomises; requests must enter their handlers in the order they arrived.
    """

    def __init__(self) -> None:
        self._current = 0
        self._waiting: dict[int, trio.Event] = {}

    async def wait_turn(self, seq: int) -> None:
        if seq == self._current:
            return
        event = self._waiting.setdefault(seq, trio.Event())
        await event.wait()

    def release(self, seq: int) -> None:
        """Pass the turn on; only the current holder's release has an effect."""
        if seq != self._current:
            return
        self._current = seq + 1
        event = self._waiting.pop(self._current, None)
        if event is not None:
            event.set()


@dataclass(slots=True)
class ConnectionState:
    """Per-connection facts handlers may consult (and later layers extend)."""

    listener_name: str
    peer: str
    sequencer: TurnSequencer = field(default_factory=TurnSequencer)
    #: Kafka's principal name: `User:<name>` once SASL authenticated, else User:ANONYMOUS
    principal: str = "User:ANONYMOUS"


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    connection: ConnectionState
    seq: int = 0

    @property
    def api_version(self) -> int:
        return self.header.api_version

    def release_turn(self) -> None:
        """Let later requests of this connection start (call before a long wait). Idempotent."""
        self.connection.sequencer.release(self.seq)
