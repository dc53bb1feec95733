"""ClusterNode: composes one node's cluster-mode parts and runs their tasks.

Why a composition object outside the Broker: the single-node broker must stay exactly as it was,
so cluster mode is an add-on. `broker.cluster` is `None` on a single node and this object in
cluster mode (it assigns itself there at construction); every cluster-mode branch elsewhere is
guarded by `if broker.cluster is not None`.

Parts (docs/cluster.md), each a class with a plain constructor `(broker, node)` and an
`async def run(self) -> None` that runs until cancelled; they are built in this order, so a part's
constructor may use the ones before it:

    raft        RaftDriver            kafkapy.server.cluster.raft_driver           every node
    publisher   MetadataPublisher     kafkapy.server.cluster.metadata_publisher    every node
    controller  ControllerDriver      kafkapy.server.cluster.controller_driver     controller role
    channel     ControllerChannel     kafkapy.server.cluster.lifecycle             broker role
    lifecycle   BrokerLifecycle       kafkapy.server.cluster.lifecycle             broker role
    fetchers    ReplicaFetcherManager kafkapy.server.cluster.replica_fetcher       broker role

They are written in parallel by different people, so a part whose module or class does not
exist yet is left `None` (and logged): the node still starts and the parts that exist run.

Readiness (what `kafkapy serve` waits for before its ready line in cluster mode): a node with
the broker role is ready once its registration in the published `image` is unfenced - it can
then lead and follow partitions - and a controller-only node once Raft knows a leader.

Error handling: a part whose `run()` raises is logged with its traceback and restarted after a
pause (doubling to 5 s), so one failing part does not take the node's other duties down;
cancellation (shutdown) stops them all.

Construct it inside `trio.run` (the Server does, in its constructor): the parts read trio's clock
when they are built.

Resource handling: `run(nursery)` starts the tasks in the server's nursery, which cancels them at
shutdown; `aclose()` closes the peer connections.
"""

from __future__ import annotations

import base64
import importlib
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import trio

from kafkapy.server.cluster.peer import PeerPool
from kafkapy.server.config import ClusterConfig
from kafkapy.server.security.inter_node import controller_peer_security, inter_broker_peer_security

if TYPE_CHECKING:
    from kafkapy.server.broker import Broker

__all__ = ["ClusterNode", "cluster_id_for"]

log = logging.getLogger(__name__)

_RESTART_MIN_S = 0.5
_RESTART_MAX_S = 5.0
_READY_POLL_S = 0.05


def cluster_id_for(config: ClusterConfig) -> str:
    """The cluster id every member derives from the voter set (Kafka's 22-character form).

    Why derived: members are started independently (no `kafka-storage format` step), yet clients
    expect one cluster id from every broker; the voter set is what they all share."""
    voters = ",".join(f"{i}@{h}:{p}" for i, (h, p) in sorted(config.voters.items()))
    raw = uuid.uuid5(uuid.NAMESPACE_URL, f"kafkapy-cluster:{voters}").bytes
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _build(module: str, name: str, *args: object) -> Any:
    """`module.name(*args)`, or None when that part has not landed yet (see the module doc)."""
    full = f"kafkapy.server.cluster.{module}"
    try:
        mod = importlib.import_module(full)
    except ModuleNotFoundError as e:
        if e.name != full:
            raise
        log.warning("cluster part %s is missing: %s not available", name, full)
        return None
    cls = getattr(mod, name, None)
    if cls is None:
        log.warning("cluster part %s is missing from %s", name, full)
        return None
    return cls(*args)


def _new_image() -> Any:
    try:
        from kafkapy.controller import image as image_module
    except ImportError:
        return None
    cls = getattr(image_module, "MetadataImage", None)
    return cls() if cls is not None else None


class ClusterNode:
    """One node's cluster-mode state and tasks (see the module doc for the parts)."""

    def __init__(self, broker: Broker) -> None:
        config = broker.config.cluster
        if config is None:
            raise ValueError("ClusterNode needs cluster mode (more than one voter, or a broker-only node)")
        self.broker = broker
        self.config: ClusterConfig = config
        self.node_id = config.node_id
        broker.cluster = self
        broker.cluster_id = cluster_id_for(config)
        client_id = f"kafkapy-node-{config.node_id}"
        #: the voters' controller listeners (Raft, broker -> controller RPCs)
        #: TLS / SASL of connections to the controller and to the inter-broker listener
        self.controller_security = controller_peer_security(broker.config)
        self.broker_security = inter_broker_peer_security(broker.config) if config.is_broker else None
        self.controller_peers = PeerPool(
            lambda node_id: self.config.voters.get(node_id),
            client_id=client_id,
            security=self.controller_security,
        )
        #: other brokers' inter-broker listeners, from their registrations in the image
        self.broker_peers = PeerPool(self.broker_address, client_id=client_id, security=self.broker_security)
        #: latest published MetadataImage (the publisher replaces it)
        self.image: Any = _new_image()
        self.raft: Any = _build("raft_driver", "RaftDriver", broker, self)
        self.publisher: Any = _build("metadata_publisher", "MetadataPublisher", broker, self)
        self.controller: Any = (
            _build("controller_driver", "ControllerDriver", broker, self) if config.is_controller else None
        )
        self.channel: Any = _build("lifecycle", "ControllerChannel", broker, self) if config.is_broker else None
        self.lifecycle: Any = _build("lifecycle", "BrokerLifecycle", broker, self) if config.is_broker else None
        self.fetchers: Any = (
            _build("replica_fetcher", "ReplicaFetcherManager", broker, self) if config.is_broker else None
        )
        self._joined = False
        self.broker_peers.on_gone = self.peer_gone
        self.controller_peers.on_gone = self.peer_gone

    def peer_gone(self, node_id: int) -> None:
        """A request to `node_id` failed with a refused/reset/closed connection: the active
        controller (here, or through this broker's next heartbeat) checks whether its process
        is gone and fences it early (liveness.py)."""
        suspect = getattr(self.controller, "suspect", None)
        if suspect is not None and self.controller.active() is not None:
            suspect(node_id, f"node {self.node_id}'s connection to it failed")
        elif self.lifecycle is not None:
            self.lifecycle.report_gone(node_id)

    # -- addresses --------------------------------------------------------------------------------
    def broker_address(self, node_id: int) -> tuple[str, int] | None:
        """`node_id`'s inter-broker listener as registered in the image (None if unknown)."""
        brokers = getattr(self.image, "brokers", None)
        registration = brokers.get(node_id) if brokers is not None else None
        if registration is None:
            return None
        name = self.config.inter_broker_listener_name
        endpoints = list(getattr(registration, "endpoints", ()))
        for endpoint in endpoints:
            if endpoint.name == name:
                return str(endpoint.host), int(endpoint.port)
        return (str(endpoints[0].host), int(endpoints[0].port)) if endpoints else None

    # -- running ----------------------------------------------------------------------------------
    def parts(self) -> dict[str, Any]:
        """The parts that exist on this node, by attribute name, in start order."""
        named = {
            "raft": self.raft,
            "publisher": self.publisher,
            "controller": self.controller,
            "lifecycle": self.lifecycle,
            "fetchers": self.fetchers,
        }
        return {name: part for name, part in named.items() if part is not None}

    def run(self, nursery: trio.Nursery) -> None:
        """Start every existing part's `run()` in `nursery` (supervised, see the module doc)."""
        for name, part in self.parts().items():
            run = getattr(part, "run", None)
            if run is not None:
                nursery.start_soon(self._supervise, name, run, name=f"cluster-{name}")

    async def _supervise(self, name: str, run: Callable[[], Awaitable[None]]) -> None:
        pause = _RESTART_MIN_S
        while True:
            try:
                await run()
            except Exception:
                log.exception("cluster part %s failed; restarting in %.1f s", name, pause)
            else:
                log.info("cluster part %s finished", name)
                return
            await trio.sleep(pause)
            pause = min(_RESTART_MAX_S, pause * 2)

    def is_ready(self) -> bool:
        """True once this node can do its job (see the module doc)."""
        if self.config.is_broker:
            brokers = getattr(self.image, "brokers", None)
            registration = brokers.get(self.node_id) if brokers is not None else None
            return registration is not None and not getattr(registration, "fenced", True)
        return self.raft is not None and getattr(self.raft, "leader_id", None) is not None

    def has_joined(self) -> bool:
        """True once this process's own registration is unfenced in its image (latched): the
        image then holds everything committed before it. Before that, a restarted node's image
        is what it replayed from disk - empty until a Raft leader tells it what is committed -
        and must not be served to clients as the cluster's state (Kafka opens its client
        listeners only after this catch-up)."""
        if self._joined:
            return True
        brokers = getattr(self.image, "brokers", None)
        registration = brokers.get(self.node_id) if brokers is not None else None
        incarnation = getattr(self.lifecycle, "incarnation_id", None)
        self._joined = (
            registration is not None
            and not getattr(registration, "fenced", True)
            and (incarnation is None or getattr(registration, "incarnation_id", None) == incarnation)
        )
        return self._joined

    async def wait_ready(self) -> None:
        """Return once `is_ready()`; logs what it waits for every few seconds."""
        next_note = trio.current_time() + 5
        while not self.is_ready():
            if trio.current_time() >= next_note:
                leader = getattr(self.raft, "leader_id", None)
                log.info("node %d waiting to join the cluster (raft leader %s)", self.node_id, leader)
                next_note = trio.current_time() + 5
            await trio.sleep(_READY_POLL_S)

    async def shutdown(self, timeout_s: float) -> None:
        """At SIGTERM, before the tasks are cancelled: the lifecycle's `controlled_shutdown()`
        (hand partitions over), then every part's optional `async shutdown()` in reverse start
        order (fetchers, lifecycle, controller, publisher, raft - Raft resigns last), all within
        `timeout_s`. A failing step is logged and the rest still run."""
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = []
        controlled = getattr(self.lifecycle, "controlled_shutdown", None)
        if controlled is not None:
            steps.append(("lifecycle controlled shutdown", controlled))
        for name, part in reversed(self.parts().items()):
            hook = getattr(part, "shutdown", None)
            if hook is not None:
                steps.append((f"{name} shutdown", hook))
        with trio.move_on_after(timeout_s) as scope:
            for what, step in steps:
                try:
                    await step()
                except Exception:
                    log.exception("%s failed", what)
        if scope.cancelled_caught:
            log.warning("cluster shutdown steps did not finish within %.1f s", timeout_s)

    async def aclose(self) -> None:
        await self.controller_peers.aclose()
        await self.broker_peers.aclose()
