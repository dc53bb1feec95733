"""What the HTTP listener's pages and metrics read of the node that serves them.

Why a Protocol: `server/app.py` builds the HTTP listener and installs its routes, so the pages
naming `Server` itself would import the app back (an import circle, if only a typing one).
They read four things, written down here; `Server` has them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kafkapy.broker.config import Listener
    from kafkapy.broker.context import ConnectionState
    from kafkapy.server.broker import Broker

__all__ = ["BoundAddress", "ServedConnection", "ServedNode"]


class BoundAddress(Protocol):
    """A listener and the address it is bound to."""

    @property
    def listener(self) -> Listener: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...


class ServedConnection(Protocol):
    """An open client connection (its listener name is in `state`)."""

    @property
    def state(self) -> ConnectionState: ...


class ServedNode(Protocol):
    """The running node as the status page and /metrics see it (`kafkapy.server.app.Server`)."""

    @property
    def broker(self) -> Broker: ...
    @property
    def bound(self) -> Sequence[BoundAddress]: ...
    @property
    def connections(self) -> Collection[ServedConnection]: ...
    def readiness(self) -> tuple[bool, str]: ...
