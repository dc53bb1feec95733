"""ClusterNode: composes one node's cluster-mode parts and runs their tasks.

Parts (docs/cluster.md), constructed here in this order with their dependencies, so a part's
constructor may use the ones before it:

    raft        RaftDriver            kafkapy.server.cluster.raft_driver           every node
    publisher   MetadataPublisher     kafkapy.server.cluster.metadata_publisher    every node
    controller  ControllerDriver      kafkapy.server.cluster.controller_driver     controller role
    channel     ControllerChannel     kafkapy.server.cluster.lifecycle             every node
    lifecycle   BrokerLifecycle       kafkapy.server.cluster.lifecycle             broker role
    fetchers    ReplicaFetcherManager kafkapy.server.cluster.replica_fetcher       broker role

`image` is the latest MetadataImage the publisher published (Raft's committed records applied);
the publisher is subscribed to Raft here.

Readiness (what `kafkapy serve` waits for before its ready line in cluster mode): a node with
the broker role is ready once its registration in the published `image` is unfenced - it can
then lead and follow partitions - and a controller-only node once Raft knows a leader.

Error handling: a part whose `run()` raises is logged with its traceback and restarted after a
pause (doubling to 5 s), so one failing part does not take the node's other duties down;
cancellation (shutdown) stops them all.

Log dir failure (Kafka's LogDirFailureChannel and its "all log dirs offline: halt"): a write,
roll, fsync or checkpoint of any of this node's logs failing with an I/O error (a full disk:
ENOSPC) halts the process at once, exit code 1, without answering the request that hit it.
A leader that stayed up on a full disk answered the batch that failed KAFKA_STORAGE_ERROR and
the producer's next batch, in flight behind it, OUT_OF_ORDER_SEQUENCE_NUMBER: librdkafka then
bumps its epoch and resends what it had in flight on every partition with new sequence numbers,
so batches other leaders had appended (waiting for an ISR that included the full disk) were
written twice. Once the process is gone, its connections fail (a retry with the same sequence
numbers) and the controller fences it and moves its leaderships (liveness.py); after a restart
the logs are recovered from their recovery point. A quorum of one (a single node: no
replica anywhere to take over) keeps answering KAFKA_STORAGE_ERROR instead. Unlike Kafka, one failed data dir of several halts
the node too (replicas are not moved between a node's dirs).

The Broker builds it (`Broker.open_cluster()`, kept as `broker.cluster`) inside `trio.run` (the
Server has it do so in its constructor): the parts read trio's clock when they are built.

Resource handling: `run(nursery)` starts the tasks in the server's nursery, which cancels them at
shutdown; `aclose()` closes the peer connections.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import trio

from kafkapy.broker.config import ClusterConfig
from kafkapy.controller.image import MetadataImage
from kafkapy.server.cluster.controller_driver import ControllerDriver
from kafkapy.server.cluster.lifecycle import BrokerLifecycle, ControllerChannel, LocalControllerCall
from kafkapy.server.cluster.metadata_publisher import MetadataPublisher
from kafkapy.server.cluster.peer import PeerPool
from kafkapy.server.cluster.raft_driver import SNAPSHOT_BYTES_CONFIG, RaftDriver
from kafkapy.server.cluster.replica_fetcher import ReplicaFetcherManager
from kafkapy.server.security.inter_node import controller_peer_security, inter_broker_peer_security

if TYPE_CHECKING:
    from kafkapy.server.cluster.host import BrokerHost

__all__ = ["ClusterNode", "NodePart"]

log = logging.getLogger(__name__)

_RESTART_MIN_S = 0.5
_RESTART_MAX_S = 5.0
_READY_POLL_S = 0.05


def _halt_process() -> None:
    """Exit now with code 1 (Kafka's Exit.halt): no clean shutdown, whose writes would fail on
    the same disk; the logs are recovered at the next start."""
    for handler in logging.getLogger().handlers:
        with contextlib.suppress(Exception):
            handler.flush()
    os._exit(1)


class NodePart(Protocol):
    """A part with a task of its own: `run()` runs until cancelled (restarted if it raises)."""

    async def run(self) -> None: ...


class ClusterNode:
    """One node's cluster-mode state and tasks (see the module doc for the parts)."""

    def __init__(
        self, broker: BrokerHost, *, halt: Callable[[], None] | None = None,
        local_call: LocalControllerCall | None = None,
    ) -> None:
        """`halt`: what a log dir failure does (None: exit the process; see the module doc);
        `local_call`: this process's controller handlers (`ControllerChannel`)."""
        config = broker.config.cluster
        self.broker = broker
        self.config: ClusterConfig = config
        self.node_id = config.node_id
        self._open_peers(broker)
        #: node id -> trio time this node's last request to it failed with a refused, reset or
        #: closed connection (cleared by its next answer); see `seen_gone`
        self._gone_at: dict[int, float] = {}
        self.raft = RaftDriver(
            config,
            broker.logs,
            self.controller_peers,
            cluster_id=broker.cluster_id,
            snapshot_bytes=broker.config.get_int(SNAPSHOT_BYTES_CONFIG),
            published_image=lambda: self.image,
        )
        self.publisher = MetadataPublisher(
            broker.apply_metadata,
            node_id=config.node_id,
            may_publish=self.has_joined if config.is_broker else lambda: True,
            quiet=config.quorum_of_one,
        )
        self.raft.subscribe(self.publisher.on_committed, self.publisher.on_snapshot)
        self.controller = (
            ControllerDriver(
                broker.config,
                config,
                self.raft,
                self.publisher,
                cluster_id=broker.cluster_id,
                stats=broker.stats,
            )
            if config.is_controller
            else None
        )
        self.channel = ControllerChannel(broker, self, local_call)
        self.lifecycle = BrokerLifecycle(broker, self, self.channel) if config.is_broker else None
        self.fetchers = (
            ReplicaFetcherManager(
                config,
                logs=broker.logs,
                replicas=broker.replicas,
                producer_states=broker.producer_states,
                peers=self.broker_peers,
                image=lambda: self.image,
                remote_tier=lambda: broker.remote_tier,
            )
            if config.is_broker
            else None
        )
        self._joined = False
        #: what a log dir failure does (see the module doc): exit the process, or for a node
        #: sharing its process with others (kafkapy.testing.local) stop its server
        self.halt = halt if halt is not None else _halt_process

    def _open_peers(self, broker: BrokerHost) -> None:
        """The pools of connections to the other nodes: the voters' controller listeners and
        the brokers' inter-broker listeners, with their TLS / SASL (nothing connects yet)."""
        config = self.config
        client_id = f"kafkapy-node-{config.node_id}"
        #: TLS / SASL of connections to the controller and to the inter-broker listener
        self.controller_security = controller_peer_security(broker.config)
        self.broker_security = inter_broker_peer_security(broker.config) if config.is_broker else None
        #: the voters' controller listeners (Raft, broker -> controller RPCs)
        self.controller_peers = PeerPool(
            lambda node_id: self.config.voters.get(node_id),
            client_id=client_id,
            security=self.controller_security,
            on_gone=self.peer_gone,
            on_reached=self.peer_reached,
        )
        #: other brokers' inter-broker listeners, from their registrations in the image
        self.broker_peers = PeerPool(
            self.broker_address,
            client_id=client_id,
            security=self.broker_security,
            on_gone=self.peer_gone,
            on_reached=self.peer_reached,
        )

    def log_dir_failed(self, data_dir: Path, log_dir: Path, reason: str) -> None:
        """A log of `data_dir` failed with an I/O error: halt (see the module doc). Called
        from whichever thread hit it, before the failing request is answered."""
        log.critical(
            "node %d halting: data dir %s failed (%s: %s); restart it once the disk is usable",
            self.node_id, data_dir, log_dir.name, reason,
        )
        self.halt()

    @property
    def image(self) -> MetadataImage:
        """The latest published MetadataImage (never mutated once published)."""
        return self.publisher.image

    def peer_gone(self, node_id: int) -> None:
        """A request to `node_id` failed with a refused/reset/closed connection: the active
        controller (here, or through this broker's next heartbeat) checks whether its process
        is gone and fences it early (liveness.py)."""
        self._gone_at[node_id] = trio.current_time()
        if self.controller is not None and self.controller.active() is not None:
            self.controller.suspect(node_id, f"node {self.node_id}'s connection to it failed")
        elif self.lifecycle is not None:
            self.lifecycle.report_gone(node_id)

    def peer_reached(self, node_id: int) -> None:
        """A request to `node_id` was answered: whatever failed before, it is there now."""
        self._gone_at.pop(node_id, None)

    def seen_gone(self, node_id: int) -> bool:
        """Did this node's last request to `node_id` fail with a refused, reset or closed
        connection, within the last session timeout? Then its process is probably dead, though
        the image still lists it until the controller fences it (within milliseconds when the
        controller's probe is refused, liveness.py; a session timeout at most). FindCoordinator
        sends no client there meanwhile: librdkafka's admin client caches the coordinator it is
        told and waits for that broker to come back before it asks again. After a session
        timeout an unfenced node is evidently alive (it heartbeats), so the doubt lapses."""
        at = self._gone_at.get(node_id)
        if at is None:
            return False
        if trio.current_time() - at > self.config.session_timeout_ms / 1000:
            del self._gone_at[node_id]
            return False
        return True

    # -- addresses --------------------------------------------------------------------------------
    def new_broker_peers(self, client_id: str) -> PeerPool:
        """A pool of its own to the brokers' inter-broker listeners (the transaction markers':
        never queued behind the replica fetchers' requests, see txn_markers.MarkerPeers)."""
        return PeerPool(self.broker_address, client_id=client_id, security=self.broker_security)

    def broker_address(self, node_id: int) -> tuple[str, int] | None:
        """`node_id`'s inter-broker listener as registered in the image (None if unknown)."""
        registration = self.image.brokers.get(node_id)
        if registration is None:
            return None
        name = self.config.inter_broker_listener_name
        endpoints = list(registration.endpoints)
        for endpoint in endpoints:
            if endpoint.name == name:
                return endpoint.host, endpoint.port
        return (endpoints[0].host, endpoints[0].port) if endpoints else None

    # -- running ----------------------------------------------------------------------------------
    def parts(self) -> dict[str, NodePart]:
        """The parts with a task of their own on this node, by attribute name, in start order
        (the publisher has none: it runs inside Raft's commit callback)."""
        named: dict[str, NodePart | None] = {
            "raft": self.raft,
            "controller": self.controller,
            "lifecycle": self.lifecycle,
            "fetchers": self.fetchers,
        }
        return {name: part for name, part in named.items() if part is not None}

    def run(self, nursery: trio.Nursery) -> None:
        """Start every part's `run()` in `nursery` (supervised, see the module doc)."""
        for name, part in self.parts().items():
            nursery.start_soon(self._supervise, name, part.run, name=f"cluster-{name}")

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
            # this process's registration (a restarted node's image holds its previous one,
            # unfenced, until the new one is committed)
            registration = self.image.brokers.get(self.node_id)
            return self.has_joined() and registration is not None and not registration.fenced
        return self.raft.leader_id is not None

    def has_joined(self) -> bool:
        """True once this process's own registration is unfenced in its image (latched): the
        image then holds everything committed before it. Before that, a restarted node's image
        is what it replayed from disk - empty until a Raft leader tells it what is committed -
        and must not be served to clients as the cluster's state (Kafka opens its client
        listeners only after this catch-up)."""
        if self._joined:
            return True
        registration = self.image.brokers.get(self.node_id)
        incarnation = self.lifecycle.incarnation_id if self.lifecycle is not None else None
        self._joined = (
            registration is not None
            and not registration.fenced
            and (incarnation is None or registration.incarnation_id == incarnation)
        )
        return self._joined

    async def wait_ready(self) -> None:
        """Return once `is_ready()`; logs what it waits for every few seconds."""
        next_note = trio.current_time() + 5
        while not self.is_ready():
            if trio.current_time() >= next_note:
                leader = self.raft.leader_id
                log.info("node %d waiting to join the cluster (raft leader %s)", self.node_id, leader)
                next_note = trio.current_time() + 5
            if self.config.is_broker and self.publisher is not None:
                # readiness is a fact of the published image: wake on the next publish
                await self.publisher.wait_applied(self.publisher.applied_offset + 1, _READY_POLL_S)
            else:
                await trio.sleep(_READY_POLL_S)

    async def shutdown(self, timeout_s: float) -> None:
        """At SIGTERM, before the tasks are cancelled: a broker's controlled shutdown (hand its
        partitions over, BrokerLifecycle.controlled_shutdown) within `timeout_s`; a failure is
        logged. Raft resigns when its task is cancelled (RaftDriver)."""
        if self.lifecycle is None:
            return
        with trio.move_on_after(timeout_s) as scope:
            try:
                await self.lifecycle.controlled_shutdown()
            except Exception:
                log.exception("lifecycle controlled shutdown failed")
        if scope.cancelled_caught:
            log.warning("cluster shutdown steps did not finish within %.1f s", timeout_s)

    async def aclose(self) -> None:
        await self.channel.aclose()
        await self.controller_peers.aclose()
        await self.broker_peers.aclose()
