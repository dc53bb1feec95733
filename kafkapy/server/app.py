"""The server: listeners, connection tasks, background maintenance and graceful shutdown.

Resource handling: `Server.run()` binds every configured broker listener - PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL (`kafkapy.server.security`) - and, on nodes with the controller role,
the controller listeners it names, reports the bound addresses through
`task_status` (broker listeners first), and owns all connection tasks. On `request_shutdown()` it stops
accepting, tells every connection to stop reading (queued requests still get answers), wakes all
long-poll fetches so they answer now, waits up to `kafkapy.shutdown.grace.ms` for connections to
drain, cancels what is left, and closes the broker (flush + clean-shutdown marker). Idle client
connections therefore never delay shutdown.

Every node is a cluster member (docs/cluster.md; alone, a quorum of one): the Server has the
broker build its `ClusterNode` (`broker.cluster`), starts its parts' tasks beside the
maintenance loop, and at shutdown gives the lifecycle a bounded chance to hand partitions over
before the tasks are cancelled. `wait_ready()` is what the CLI awaits before its ready line
(the node's own broker registration unfenced).

Connection limits (`max.connections`, `max.connections.per.ip` and its overrides,
`max.connection.creation.rate`) are Kafka's, on the broker listeners: see
`kafkapy.server.connection_quotas`.

Error handling: a failing accept (e.g. out of file descriptors) is logged and retried after a
short pause; errors inside one connection end that connection only; a failing maintenance run is
logged and retried next interval.
"""

from __future__ import annotations

import errno
import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from kafkapy.broker.config import Listener
from kafkapy.broker.context import ConnectionState, RequestContext
from kafkapy.broker.handlers.registry import lookup
from kafkapy.protocol import ApiKey, RequestHeader
from kafkapy.server.broker import Broker, now_ms
from kafkapy.server.connection import Connection
from kafkapy.server.connection_quotas import ConnectionQuotas
from kafkapy.server.fault_control import serve_fault_control
from kafkapy.server.frames import RequestMemory
from kafkapy.server.security import listener_security

if TYPE_CHECKING:
    from kafkapy.server.cluster.node import ClusterNode
    from kafkapy.server.http.listener import HttpListener

__all__ = ["BoundListener", "ListenError", "Server"]

log = logging.getLogger(__name__)

_ACCEPT_RETRY_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS}
# How often new log bytes are handed to the kernel's writeback (LogManager.start_writeback):
# short enough that a 250 MB/s produce leaves at most ~60 MB per partition to write at once.
WRITEBACK_INTERVAL_S = 0.25
#: A deadline the maintenance loop never reaches (a disabled task).
_NEVER = float("inf")
#: the longest a quorum of one waits to be ready before it reports itself started anyway
READY_WAIT_S = 30.0


def own_controller_call(
    broker: Broker, api_key: ApiKey, version: int, client_id: str
) -> Callable[[Any], Awaitable[Any]] | None:
    """The controller listener's handler of `api_key` v`version`, bound to a request context of
    this process's own, for the controller channel's in-process calls (`cluster/lifecycle.py`:
    a broker whose own process is the Raft leader, a quorum of one above all); None when no
    controller handler serves that version."""
    spec = lookup(api_key, controller=True)
    if spec is None or not spec.supports(version):
        return None
    header = RequestHeader(int(api_key), version, 0, client_id)
    ctx = RequestContext(broker.ports, header, ConnectionState("in-process", "in-process"))
    return functools.partial(spec.func, ctx)


class ListenError(OSError):
    """A listener could not be bound (port in use, bad address): fatal at start-up."""


@dataclass(frozen=True, slots=True)
class BoundListener:
    listener: Listener
    host: str
    port: int


class Server:
    def __init__(self, broker: Broker, *, shares_process: bool = False) -> None:
        """`shares_process`: other nodes run in this process (kafkapy.testing.local), so a
        failed data dir stops this server instead of exiting the process (ClusterNode.halt)."""
        self.broker = broker
        # TLS contexts and SASL settings per listener; ConfigError here (bad certificate path)
        self.security = listener_security(broker.config, broker.credentials)
        self.bound: list[BoundListener] = []
        cluster_config = broker.config.cluster
        self.quotas = ConnectionQuotas(
            broker.config,
            exempt_listeners=frozenset(
                [cluster_config.inter_broker_listener_name] if cluster_config.voters_configured else []
            ),
        )
        self.connections: set[Connection] = set()
        #: `queued.max.request.bytes`: what every connection's requests may hold, together
        self.request_memory = RequestMemory(broker.config.get_int("queued.max.request.bytes"))
        self._shutdown = trio.Event()
        self.stopped = trio.Event()
        self._grace_s = broker.config.get_int("kafkapy.shutdown.grace.ms") / 1000
        #: the HTTP listener (`kafkapy.http.listener`), None when off; bound in `run()`
        self.http: HttpListener | None = None
        self._serving = False
        self.cluster: ClusterNode = broker.open_cluster(
            halt=self.request_shutdown if shares_process else None,
            local_call=functools.partial(own_controller_call, broker),
        )

    def request_shutdown(self) -> None:
        self._shutdown.set()

    @property
    def shutdown_requested(self) -> bool:
        return self._shutdown.is_set()

    async def run(
        self, *, task_status: trio.TaskStatus[list[BoundListener]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        broker = self.broker
        try:
            sockets: list[tuple[Listener, trio.SocketListener]] = []
            for listener in self._listeners():
                try:
                    bound = await trio.open_tcp_listeners(listener.port, host=listener.bind_host)
                except OSError as e:
                    for _, opened in sockets:
                        await opened.aclose()
                    where = f"{listener.bind_host}:{listener.port}"
                    raise ListenError(
                        f"cannot listen on {listener.name} {where}: {e.strerror or e}"
                    ) from e
                sockets.extend((listener, sock_listener) for sock_listener in bound)
            try:
                await self._bind_http()
            except ListenError:
                for _, opened in sockets:
                    await opened.aclose()
                raise
            for listener, sock_listener in sockets:
                host, port = sock_listener.socket.getsockname()[:2]
                self.bound.append(BoundListener(listener, host, port))
                broker.set_bound(listener, host, port)
            async with trio.open_nursery() as conn_nursery:
                async with trio.open_nursery() as accept_nursery:
                    for listener, sock_listener in sockets:
                        accept_nursery.start_soon(
                            self._accept_loop, listener, sock_listener, conn_nursery
                        )
                    self._start_background(accept_nursery)
                    self.cluster.run(accept_nursery)
                    if self.http is not None:
                        accept_nursery.start_soon(self.http.serve, accept_nursery)
                    await self._start_fault_control(accept_nursery)
                    self._serving = True
                    if self.cluster.config.quorum_of_one:
                        # it needs nobody else: report it started once it serves, so whoever
                        # starts a lone node (tests, harnesses) can use it at once
                        with trio.move_on_after(READY_WAIT_S):
                            await self._ready_or_shutdown()
                    task_status.started(list(self.bound))
                    await self._shutdown.wait()
                    await self.cluster.shutdown(self._grace_s)
                    accept_nursery.cancel_scope.cancel()
                for _, sock_listener in sockets:
                    await sock_listener.aclose()
                if self.http is not None:
                    await self.http.aclose()
                await self._drain(conn_nursery)
        finally:
            with trio.CancelScope(shield=True):
                with trio.move_on_after(1):
                    await self.cluster.aclose()
                async with broker.storage_lock:
                    broker.close()
            self.stopped.set()
            log.info("kafkapy stopped")

    async def _start_fault_control(self, nursery: trio.Nursery) -> None:
        """Tests only: serve `kafkapy.test.fault.control.socket` (kafkapy.broker.faults)."""
        path = self.broker.config.get("kafkapy.test.fault.control.socket")
        injector = self.broker.fault_injector
        if path and injector is not None:
            await nursery.start(serve_fault_control, injector, Path(path))
            log.warning("TEST ONLY fault injection is on (control socket %s)", path)

    def _listeners(self) -> list[Listener]:
        """Broker listeners, then (controller role) the controller listeners."""
        config = self.broker.config
        listeners = list(config.listeners)
        if config.cluster.is_controller:
            listeners += config.controller_listeners
        return listeners

    async def _bind_http(self) -> None:
        """Bind the HTTP listener when `kafkapy.http.listener` is set (ListenError otherwise)."""
        value = self.broker.config.get("kafkapy.http.listener") or ""
        if not value.strip():
            return
        # imported here: h11, prometheus_client and the pages cost start-up time that a node
        # without the HTTP listener (the default) need not pay
        from kafkapy.server.http.listener import HttpListener, parse_http_address
        from kafkapy.server.http.routes import install_routes

        try:
            host, port = parse_http_address(value)
            http = HttpListener(host, port, self.readiness)
            install_routes(http, self)
            await http.bind()
        except (OSError, ValueError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else e
            raise ListenError(f"cannot listen on HTTP {value}: {reason}") from e
        self.http = http
        log.info("HTTP listener on %s (/metrics, /healthz, /readyz, status page)", http.url)

    def readiness(self) -> tuple[bool, str]:
        """`/readyz`: (ready, what is missing). Ready = every listener bound and serving, the
        node's broker registration unfenced (a controller-only node: a Raft leader known), no
        partition whose log is loading (`kafkapy.broker.log_state`), and no shutdown under way.
        Partitions whose log is offline are not waited for (they will not come back by
        themselves): ready, with their count as the reason, so what `/readyz` says is true."""
        if self._shutdown.is_set():
            return False, "shutting down"
        if not self._serving:
            return False, "listeners not bound yet"
        cluster = self.cluster
        if not cluster.is_ready():
            if not cluster.config.is_broker:
                return False, "no Raft leader known yet"
            if cluster.node_id not in cluster.image.brokers:
                return False, "broker not registered with the controller yet"
            return False, "broker registration fenced (catching up with the metadata log)"
        states = self.broker.log_states
        loading = states.loading_count() if states else 0
        if loading:
            return False, f"{loading} partitions loading"
        offline = len(states.offline()) if states else 0
        return True, f"{offline} partitions offline" if offline else ""

    async def wait_ready(self) -> bool:
        """True once the node is ready to serve (`ClusterNode.is_ready()`); False if the
        server stopped first."""
        cluster = self.cluster
        async with trio.open_nursery() as nursery:
            result = False

            async def ready() -> None:
                nonlocal result
                await cluster.wait_ready()
                result = True
                nursery.cancel_scope.cancel()

            async def stopped() -> None:
                await self.stopped.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(ready)
            nursery.start_soon(stopped)
        return result

    async def _ready_or_shutdown(self) -> None:
        async with trio.open_nursery() as nursery:

            async def ready() -> None:
                await self.cluster.wait_ready()
                nursery.cancel_scope.cancel()

            async def shutdown() -> None:
                await self._shutdown.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(ready)
            nursery.start_soon(shutdown)

    async def _drain(self, conn_nursery: trio.Nursery) -> None:
        self.broker.begin_shutdown()
        for conn in list(self.connections):
            conn.stop_reading()
        self.broker.waiters.wake_all()
        conn_nursery.cancel_scope.deadline = trio.current_time() + self._grace_s

    async def _accept_loop(
        self, listener: Listener, sock_listener: trio.SocketListener, conn_nursery: trio.Nursery
    ) -> None:
        quotas = None if listener.name in self.broker.config.controller_listener_names else self.quotas
        while True:
            if quotas is not None:
                await quotas.wait_to_accept(listener.name)
            try:
                stream = await sock_listener.accept()
            except OSError as e:
                if e.errno in _ACCEPT_RETRY_ERRNOS:
                    log.error("accept failed on %s: %s; retrying", listener.name, e)
                    await trio.sleep(0.1)
                    continue
                raise
            try:
                peer_addr = stream.socket.getpeername()
                ip, peer = str(peer_addr[0]), f"{peer_addr[0]}:{peer_addr[1]}"
            except OSError:  # already gone
                await trio.aclose_forcefully(stream)
                continue
            if quotas is not None:
                refused = quotas.admit(ip, listener.name)
                if refused is not None:
                    log.info("rejected connection from %s on %s: %s", peer, listener.name, refused)
                    await trio.aclose_forcefully(stream)
                    continue
            conn_nursery.start_soon(self._serve_connection, listener, stream, ip, peer, quotas)

    async def _serve_connection(
        self,
        listener: Listener,
        stream: trio.SocketStream,
        ip: str,
        peer: str,
        quotas: ConnectionQuotas | None,
    ) -> None:
        try:
            await self._serve_admitted(listener, stream, peer)
        finally:
            if quotas is not None:
                quotas.release(ip)

    async def _serve_admitted(self, listener: Listener, stream: trio.SocketStream, peer: str) -> None:
        security = self.security.get(listener.name)
        served: trio.abc.Stream = stream
        if security is not None and security.ssl_context is not None:
            # TLS: the connection sees an SSLStream, so it receives through FrameDecoder and
            # sends file regions as bytes (sendfile cannot encrypt) - see connection.py
            served = trio.SSLStream(stream, security.ssl_context, server_side=True)
        conn = Connection(
            self.broker, served, listener.name, peer, security=security, memory=self.request_memory
        )
        self.connections.add(conn)
        stats = self.broker.stats
        stats.connections_created[listener.name] += 1
        if self.broker.shutting_down:
            conn.stop_reading()
        try:
            await conn.run()
        except Exception:
            log.exception("connection %s failed", peer)
        finally:
            self.connections.discard(conn)
            stats.connections_closed[listener.name] += 1

    def _start_background(self, nursery: trio.Nursery) -> None:
        """The broker's own tasks: log maintenance, the coordinators' timers, the remote tier's."""
        broker = self.broker
        nursery.start_soon(self._maintenance_loop)
        nursery.start_soon(broker.group_coordinator.serve)
        nursery.start_soon(broker.txn_coordinator.serve)
        if broker.remote_log_tasks is not None:
            nursery.start_soon(broker.remote_log_tasks.serve)

    async def _maintenance_loop(self) -> None:
        """Retention every `log.retention.check.interval.ms`; compaction every
        `log.cleaner.backoff.ms` unless `log.cleaner.enable` is false (Kafka's cleaner threads
        poll on their own backoff, so a compacted topic is cleaned within seconds, not at the
        next retention check minutes later); idle-producer expiry every
        `producer.id.expiration.check.interval.ms` (Kafka's sweep, the only place producer
        state expires); flushing every `log.flush.scheduler.interval.ms`; writeback pacing every
        `WRITEBACK_INTERVAL_S` (file work in a worker thread, see Broker.run_maintenance)."""
        config = self.broker.config
        retention_s = max(config.get_int("log.retention.check.interval.ms"), 10) / 1000
        cleaner_s = max(config.get_int("log.cleaner.backoff.ms"), 10) / 1000
        next_clean = (
            trio.current_time() + cleaner_s if config.get_bool("log.cleaner.enable") else _NEVER
        )
        expiry_s = max(config.get_int("producer.id.expiration.check.interval.ms"), 10) / 1000
        flush_s = max(config.get_int("log.flush.scheduler.interval.ms"), 10) / 1000
        next_expiry = trio.current_time() + expiry_s
        next_retention = trio.current_time() + retention_s
        next_flush = trio.current_time() + flush_s
        next_writeback = trio.current_time() + WRITEBACK_INTERVAL_S
        while True:
            await trio.sleep_until(
                min(next_retention, next_clean, next_flush, next_writeback, next_expiry)
            )
            now = trio.current_time()
            if now >= next_expiry:
                next_expiry = now + expiry_s
                self.broker.producer_states.expire(now_ms())
            kinds: list[str] = []
            if now >= next_writeback:
                kinds.append("writeback")
                next_writeback = now + WRITEBACK_INTERVAL_S
            if now >= next_flush:
                kinds.append("flush")
                next_flush = now + flush_s
            if now >= next_retention:
                kinds.append("retention")
                next_retention = now + retention_s
            if now >= next_clean:
                kinds.append("cleaner")
                next_clean = now + cleaner_s
            for kind in kinds:
                try:
                    await self.broker.run_maintenance(kind)
                except Exception:
                    log.exception("background %s failed", kind)
