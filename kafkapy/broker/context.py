"""What a request handler sees: the broker's ports, the request header and its connection.

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

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kafkapy.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafkapy.broker import runtime

if TYPE_CHECKING:
    from kafkapy.authorizer import StandardAuthorizer
    from kafkapy.broker.config import BrokerConfig
    from kafkapy.broker.group_driver import GroupDriver
    from kafkapy.broker.metadata_store import TopicStore
    from kafkapy.broker.partitions import Partitions
    from kafkapy.broker.request_ports import (
        ActiveController,
        ClusterMetadata,
        ControllerChannel,
        LocalBroker,
        QuorumPeer,
        RequestPorts,
    )
    from kafkapy.broker.txn_driver import TxnDriver
    from kafkapy.protocol import RequestHeader
    from kafkapy.quota.client_quotas import ClientQuotaManager

__all__ = ["CloseConnection", "ConnectionState", "RequestContext", "TurnSequencer"]


class CloseConnection(Exception):
    """Raised by a handler to close the connection instead of answering (Kafka's way for some errors,
    and the hook fault-injection tests use)."""


class TurnSequencer:
    """Hands out turns 0, 1, 2, ... in order; a holder passes the turn on by releasing it.

    Why not a lock: lock acquisition order follows task scheduling order, which trio
    deliberately randomises; requests must enter their handlers in the order they arrived.
    """

    def __init__(self) -> None:
        self._current = 0
        self._waiting: dict[int, runtime.Event] = {}

    async def wait_turn(self, seq: int) -> None:
        if seq == self._current:
            return
        event = self._waiting.setdefault(seq, runtime.new_event())
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
    #: the client's address without the port (what ACL hosts are compared with); from `peer`
    host: str = ""

    def __post_init__(self) -> None:
        if not self.host:
            self.host = self.peer.rsplit(":", 1)[0] if ":" in self.peer else self.peer


@dataclass(slots=True)
class RequestContext:
    #: the broker's ports, one bundle per broker shared by every request (see request_ports)
    ports: RequestPorts
    header: RequestHeader
    connection: ConnectionState
    seq: int = 0
    #: the principal an admin request was forwarded for (the controller authorizes it, not the
    #: forwarding broker); None = the connection's own
    forwarded_principal: str | None = None
    #: set by a handler whose client went over a quota: the connection holds its next
    #: requests this long (KIP-219); the handler puts it in the response's throttle_time_ms
    throttle_ms: int = 0
    #: `time.perf_counter()` when the handler first released its turn (0.0: not yet) - where
    #: its own work ended and its waiting began, for the request quota
    released_at: float = 0.0
    #: called once when the handler first releases its turn (the connection then runs the
    #: requests behind it elsewhere, see `Connection._run_jobs`)
    on_release: Callable[[], None] | None = None

    @property
    def api_version(self) -> int:
        return self.header.api_version

    # -- the ports a handler uses (kafkapy.broker.request_ports) ----------------------------------
    @property
    def local(self) -> LocalBroker:
        return self.ports.local

    @property
    def config(self) -> BrokerConfig:
        return self.ports.config

    @property
    def topics(self) -> TopicStore:
        return self.ports.topics

    @property
    def partitions(self) -> Partitions:
        return self.ports.partitions

    @property
    def groups(self) -> GroupDriver:
        return self.ports.groups

    @property
    def transactions(self) -> TxnDriver:
        return self.ports.transactions

    @property
    def authorizer(self) -> StandardAuthorizer | None:
        return self.ports.authorizer

    @property
    def quotas(self) -> ClientQuotaManager:
        return self.ports.quotas

    @property
    def metadata(self) -> ClusterMetadata:
        return self.ports.metadata

    @property
    def controller(self) -> ControllerChannel:
        """The channel to the active controller (what a broker forwards admin requests on)."""
        return self.ports.controller

    @property
    def active_controller(self) -> ActiveController | None:
        """This node's own controller (None on a broker-only node)."""
        return self.ports.active_controller

    @property
    def quorum(self) -> QuorumPeer:
        return self.ports.quorum

    @property
    def principal(self) -> str:
        forwarded = self.forwarded_principal
        return forwarded if forwarded is not None else self.connection.principal

    @property
    def user(self) -> str:
        """The connection's principal name, what user quotas are keyed by (`ANONYMOUS` when not
        authenticated)."""
        return self.connection.principal.partition(":")[2]

    def authorize(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        """May this request's principal do `operation` on the resource? Always, when no
        authorizer is configured (as a Kafka without `authorizer.class.name`)."""
        authorizer = self.ports.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(self.principal, self.connection.host, operation, resource_type, name)

    def authorize_cluster(self, operation: AclOperation) -> bool:
        return self.authorize(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def may_create_topic(self, name: str) -> bool:
        """Kafka's rule for creating (or auto-creating) a topic: CREATE on the cluster or on it."""
        return self.authorize_cluster(AclOperation.CREATE) or self.authorize(
            AclOperation.CREATE, ResourceType.TOPIC, name
        )

    def unauthorized(self, operation: AclOperation, resource_type: ResourceType, names: Iterable[str]) -> set[str]:
        """The names among `names` this principal may not `operation` (one decision per name;
        empty without an authorizer)."""
        authorizer = self.ports.authorizer
        if authorizer is None:
            return set()
        principal, host = self.principal, self.connection.host
        return {n for n in set(names) if not authorizer.authorize(principal, host, operation, resource_type, n)}

    def authorized_operations(self, resource_type: ResourceType, name: str, everything: int) -> int:
        """KIP-430's bit field for the resource: `everything` (what the type supports) without
        an authorizer, else the supported operations this principal may do."""
        authorizer = self.ports.authorizer
        if authorizer is None:
            return everything
        return authorizer.authorized_operations_bits(self.principal, self.connection.host, resource_type, name)

    def release_turn(self) -> None:
        """Let later requests of this connection start (call before a long wait). Idempotent."""
        if not self.released_at:
            self.released_at = time.perf_counter()
            hook, self.on_release = self.on_release, None
            if hook is not None:
                hook()
        self.connection.sequencer.release(self.seq)
