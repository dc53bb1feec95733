"""ClusterProcesses: a real N-node kafkapy cluster as `python -m kafkapy serve` subprocesses.

Why subprocesses: the end-to-end cluster tests and the RF=3 benchmark check what users run -
separate processes, each with its own data dir, talking over 127.0.0.1 - and they must be able
to SIGKILL one node (a crash: no flush, no controlled shutdown) and start it again on the same
ports and data.

Layout: node ids 1..N; nodes 1..V (`voters`, default all) are combined broker + controller
nodes and the voters, the rest broker-only (`process.roles=broker`) - a 4-node cluster with 3
voters loses two brokers without losing its controller quorum, which is how the outage tests
reach NOT_ENOUGH_REPLICAS instead of a stalled quorum. Ports are picked up front (`free_ports`:
bound and released, from a range the kernel never numbers sockets in) so every node can be given
the full `controller.quorum.voters` before any of them starts, and a restarted node comes back
on the same addresses. Node `i` keeps its data in `<base>/node<i>/` and its output (stdout and
stderr together) in `<base>/node<i>.log`.

Readiness: a node is ready when it prints its ready line, which in cluster mode means its broker
registration is unfenced (docs/cluster.md). A node's metadata may still lag the others' joins by
a publish, so `start()` and `restart()` also wait until every live node's Metadata lists every
live broker (`wait_settled`) - a test's first Metadata then sees the whole cluster. Every wait
is bounded; a node that exits or stays
silent raises `ClusterStartError` carrying the tail of every node's log, so a failing test shows
what the cluster said.

HTTP (`http=True`): each node also gets a port of its own for its HTTP listener (status page,
/metrics, /healthz), kept across restarts like the others.

Faults: `pause(i)`/`resume(i)` (SIGSTOP/SIGCONT: a hung node), `kill(i)`/`restart(i)`, and
with `fault_control=True` each node's request fault injector (`faults(i)`, kafkapy.broker.faults).

Security (`security="SASL_SSL"`, or SSL / SASL_PLAINTEXT): every listener - the broker listener
clients use, which is also the inter-broker one, and the controller listener - speaks that
protocol: throw-away certificates (`kafkapy.testing.certs`, `ssl.client.auth=required`, so nodes
and clients present certificates too), SCRAM-SHA-512 between nodes as user `kafkapy-node`, and
`client_config` is what a confluent-kafka client needs to join in (user `alice`).

Resource handling: `stop()` (also the context manager's exit) SIGTERMs every live node, waits,
then SIGKILLs stragglers, so no node outlives the test run. Not for serving traffic: only the
tests, the benchmarks, `kafkapy chaos` (a test harness users run, kafkapy/chaos/) and
`kafkapy cluster start` (a local dev cluster, kafkapy/cli/local_cluster.py) use it.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from kafkapy.protocol import ApiKey, RequestHeader, decode_response, encode_request
from kafkapy.protocol.messages import MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from kafkapy.protocol.sasl import SaslError, ScramClient
from kafkapy.testing.certs import CertFiles, make_certs
from kafkapy.testing.faults import FaultClient
from kafkapy.testing.process import ServeOutput, serve_command, spawn_serve

__all__ = [
    "ClusterNodeProcess",
    "ClusterProcesses",
    "ClusterStartError",
    "broker_ids",
    "free_ports",
]

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
LOG_TAIL_LINES = 40

#: quick failure detection for tests (a killed node is fenced in ~3 s instead of 9 s)
TEST_OVERRIDES: dict[str, str] = {
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    "replica.lag.time.max.ms": "5000",
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
}


class ClusterStartError(RuntimeError):
    """A node exited or printed no ready line in time (the message carries the logs)."""


#: Linux's default ephemeral range starts here (net.ipv4.ip_local_port_range "32768 60999")
DEFAULT_EPHEMERAL_LOW = 32768
#: ports `free_ports` hands out lie in the `PORT_POOL_SIZE` ports just below the ephemeral range
PORT_POOL_SIZE = 12288
_next_port: dict[tuple[int, int], int] = {}


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def port_pool() -> range:
    """The ports this process's `free_ports` draws from (empty: let the kernel pick).

    Why not the kernel's port 0: a port picked that way is released before the node binds it,
    and in that gap the kernel may give it to any other socket it numbers itself - a client's
    outgoing connection or another test's port-0 listener - and the node fails with "address in
    use". Below the ephemeral range the kernel never numbers a socket. Parallel test workers
    (pytest-xdist sets PYTEST_XDIST_WORKER=gwN of PYTEST_XDIST_WORKER_COUNT) each get a slice
    of their own, so two workers never hand out the same port either.
    """
    top = _ephemeral_low()
    bottom = max(1024, top - PORT_POOL_SIZE)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    size = (top - bottom) // max(workers, 1)
    if size < 256 or index >= workers:
        return range(0)
    return range(bottom + index * size, bottom + (index + 1) * size)


def _bind(host: str, port: int) -> socket.socket | None:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind((host, port))
    except OSError:
        s.close()
        return None
    return s


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports free right now (bound together, then released).

    Taken in turn from `port_pool()` (starting at a random place, so independent runs on one
    machine rarely meet), skipping any port something else holds; a port comes round again only
    after the whole slice has been handed out.
    """
    pool = port_pool()
    sockets: list[socket.socket] = []
    try:
        if len(pool) >= count:
            key = (pool.start, pool.stop)
            cursor = _next_port.get(key, pool.start + random.randrange(len(pool)))
            for _ in range(len(pool)):
                if len(sockets) == count:
                    break
                s = _bind(host, cursor)
                cursor = cursor + 1 if cursor + 1 < pool.stop else pool.start
                if s is not None:
                    sockets.append(s)
            _next_port[key] = cursor
        while len(sockets) < count:
            s = _bind(host, 0)
            if s is None:
                raise OSError(f"no free port on {host}")
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _exchange(sock: socket.socket, api_key: ApiKey, version: int, msg: object, correlation_id: int) -> object:
    request = encode_request(RequestHeader(api_key, version, correlation_id, "cluster-harness"), msg)
    sock.sendall(struct.pack(">i", len(request)) + request)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise ValueError(f"connection closed before the {api_key.name} answer")
        data += chunk
    try:
        return decode_response(api_key, version, data[4:])[1]
    except Exception as e:  # ProtocolError: a broken answer counts as "not settled yet"
        raise ValueError(str(e)) from e


def _secure(sock: socket.socket, host: str, client: Mapping[str, str]) -> socket.socket:
    """TLS and SCRAM login as `client` (a ClusterProcesses.client_config) asks."""
    protocol = client.get("security.protocol", "PLAINTEXT")
    if protocol in ("SSL", "SASL_SSL"):
        context = ssl.create_default_context(cafile=client["ssl.ca.location"])
        context.load_cert_chain(client["ssl.certificate.location"], client["ssl.key.location"])
        sock = context.wrap_socket(sock, server_hostname=host)
    if protocol.startswith("SASL_"):
        mechanism = client["sasl.mechanisms"]
        shake = _exchange(sock, ApiKey.SASL_HANDSHAKE, 1, SaslHandshakeRequest(mechanism=mechanism), 1)
        if getattr(shake, "error_code", 1):
            raise ValueError(f"SASL handshake refused: {shake}")
        scram = ScramClient(mechanism, client["sasl.username"], client["sasl.password"])
        token = scram.first()
        for step, correlation_id in enumerate((2, 3)):
            answer = _exchange(
                sock, ApiKey.SASL_AUTHENTICATE, 2, SaslAuthenticateRequest(auth_bytes=token), correlation_id
            )
            if getattr(answer, "error_code", 1):
                raise ValueError(f"SASL refused: {getattr(answer, 'error_message', '')}")
            reply = bytes(answer.auth_bytes)  # type: ignore[attr-defined]
            if step == 0:
                token = scram.final_message(reply)
            else:
                scram.final(reply)
    return sock


def broker_ids(
    host: str, port: int, timeout_s: float = 5.0, client: Mapping[str, str] | None = None
) -> set[int]:
    """The broker ids one node's Metadata (v9, no topics) lists; OSError/ValueError on failure.
    `client`: the security settings to connect with (`ClusterProcesses.client_config`)."""
    with socket.create_connection((host, port), timeout=timeout_s) as raw:
        try:
            sock = _secure(raw, host, client or {})
        except (ssl.SSLError, SaslError) as e:
            raise ValueError(str(e)) from e
        with sock:
            response = _exchange(sock, ApiKey.METADATA, 9, MetadataRequest(topics=[]), 9)
    return {b.node_id for b in response.brokers}  # type: ignore[attr-defined]


@dataclass
class ClusterNodeProcess:
    """One node: its fixed addresses, data dir, log file and (when running) its process."""

    node_id: int
    host: str
    broker_port: int
    controller_port: int
    voter: bool
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    starts: int = 0
    #: the HTTP listener's port (status page, /metrics) when the cluster runs with `http=True`
    http_port: int | None = None
    output: ServeOutput = field(init=False)

    def __post_init__(self) -> None:
        self.output = ServeOutput(self.log_path)

    @property
    def ready(self) -> threading.Event:
        return self.output.ready

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.broker_port}"

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return self.output.tail(lines)


class ClusterProcesses:
    """N combined nodes on 127.0.0.1 (see the module doc). Use as a context manager or call
    `start()` / `stop()`."""

    def __init__(
        self,
        base_dir: Path,
        nodes: int = 3,
        *,
        voters: int | None = None,
        overrides: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
        log_level: str = "INFO",
        ready_timeout_s: float = READY_TIMEOUT_S,
        fault_control: bool = False,
        security: str = "PLAINTEXT",
        http: bool = False,
        racks: Sequence[str] = (),
    ) -> None:
        """`racks`: node i (from 1) gets `broker.rack` racks[(i - 1) % len(racks)] (none: no
        rack), so a test or `kafkapy cluster start --racks` lays out failure domains."""
        voter_count = nodes if voters is None else voters
        self.racks = list(racks)
        self.security = security.upper()
        self.certs: CertFiles | None = None
        if self.security in ("SSL", "SASL_SSL"):
            self.certs = make_certs(base_dir / "certs")
        if not 1 <= voter_count <= nodes:
            raise ValueError("a cluster needs 1..nodes voters")
        self.base_dir = base_dir
        self.host = host
        self.log_level = log_level
        self.ready_timeout_s = ready_timeout_s
        self.overrides = {**TEST_OVERRIDES, **(overrides or {})}
        # fault control sockets live in a short directory (a Unix socket path has ~100 bytes)
        self.fault_dir = Path(tempfile.mkdtemp(prefix="kafkapy-faults-")) if fault_control else None
        ports = free_ports(2 * nodes, host)
        http_ports = free_ports(nodes, host) if http else []
        self.nodes: dict[int, ClusterNodeProcess] = {}
        for i in range(1, nodes + 1):
            self.nodes[i] = ClusterNodeProcess(
                node_id=i,
                host=host,
                broker_port=ports[2 * (i - 1)],
                controller_port=ports[2 * (i - 1) + 1],
                voter=i <= voter_count,
                data_dir=base_dir / f"node{i}",
                log_path=base_dir / f"node{i}.log",
                http_port=http_ports[i - 1] if http else None,
            )

    # -- addresses --------------------------------------------------------------------------------
    @property
    def voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes.values() if n.voter)

    @property
    def bootstrap(self) -> str:
        """Every node's broker listener, for a client's `bootstrap.servers`."""
        return ",".join(n.bootstrap for n in self.nodes.values())

    def bootstrap_of(self, *node_ids: int) -> str:
        return ",".join(self.nodes[i].bootstrap for i in node_ids)

    def live(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.is_running()]

    @property
    def client_config(self) -> dict[str, str]:
        """confluent-kafka settings (besides bootstrap.servers) to reach the broker listeners."""
        conf = {"security.protocol": self.security}
        if self.certs is not None:
            conf.update({
                "ssl.ca.location": str(self.certs.ca),
                "ssl.certificate.location": str(self.certs.client_cert),
                "ssl.key.location": str(self.certs.client_key),
            })
        if self.security.startswith("SASL_"):
            conf.update({"sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": "alice-secret"})
        return conf

    def _security_overrides(self) -> dict[str, str]:
        protocol = self.security
        if protocol == "PLAINTEXT":
            return {}
        settings = {"listener.security.protocol.map": f"CONTROLLER:{protocol},{protocol}:{protocol}"}
        if self.certs is not None:
            settings.update({
                "ssl.keystore.location": str(self.certs.server_pem),
                "ssl.truststore.location": str(self.certs.ca),
                "ssl.client.auth": "required",
            })
        if protocol.startswith("SASL_"):
            settings.update({
                "sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                "sasl.mechanism.controller.protocol": "SCRAM-SHA-512",
                "sasl.jaas.config": (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required "
                    'username="kafkapy-node" password="node-secret" '
                    'user_kafkapy-node="node-secret" user_alice="alice-secret";'
                ),
            })
        return settings

    def command(self, node_id: int) -> list[str]:
        node = self.nodes[node_id]
        protocol = self.security
        listeners = f"{protocol}://{node.host}:{node.broker_port}"
        if node.voter:
            listeners += f",CONTROLLER://{node.host}:{node.controller_port}"
        cmd = serve_command(
            "--node-id", str(node_id),
            "--data-dir", str(node.data_dir),
            "--listeners", listeners,
            "--log-level", self.log_level,
            "--override", f"controller.quorum.voters={self.voters}",
            "--override", f"process.roles={'broker,controller' if node.voter else 'broker'}",
            "--override", "controller.listener.names=CONTROLLER",
            "--override", f"inter.broker.listener.name={protocol}",
        )
        for key, value in {**self._security_overrides(), **self.overrides}.items():
            cmd += ["--override", f"{key}={value}"]
        if self.racks:
            cmd += ["--override", f"broker.rack={self.racks[(node_id - 1) % len(self.racks)]}"]
        if node.http_port is not None:
            cmd += ["--http", f"{node.host}:{node.http_port}"]
        if self.fault_dir is not None:
            cmd += ["--override", f"kafkapy.test.fault.control.socket={self.fault_dir / f'node{node_id}.sock'}"]
        return cmd

    def faults(self, node_id: int) -> FaultClient:
        """Node `node_id`'s request fault injector (needs `fault_control=True`)."""
        if self.fault_dir is None:
            raise RuntimeError("this cluster was started without fault_control=True")
        return FaultClient(self.fault_dir / f"node{node_id}.sock")

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> ClusterProcesses:
        """Start every node at once (a quorum needs a majority up) and wait until all are ready."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        for node_id in self.nodes:
            self.spawn(node_id)
        self.wait_ready(*self.nodes)
        self.wait_settled()
        return self

    def spawn(self, node_id: int) -> None:
        """Start node `node_id` without waiting for it (it may need the others to be ready)."""
        node = self.nodes[node_id]
        if node.is_running():
            raise RuntimeError(f"node {node_id} is already running")
        node.data_dir.mkdir(parents=True, exist_ok=True)
        node.starts += 1
        node.output.note(f"--- start {node.starts}: {' '.join(self.command(node_id))}")
        node.proc = spawn_serve(self.command(node_id))
        node.output.follow(node.proc)

    def wait_ready(self, *node_ids: int, timeout_s: float | None = None) -> None:
        """Block until each node printed its ready line; ClusterStartError (with logs) if one
        exits first or the time runs out."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.ready_timeout_s)
        for node_id in node_ids:
            node = self.nodes[node_id]
            while not node.ready.wait(0.05):
                if node.proc is None or node.proc.poll() is not None:
                    code = None if node.proc is None else node.proc.returncode
                    raise ClusterStartError(f"node {node_id} exited (code {code}) before it was ready\n{self.logs()}")
                if time.monotonic() > deadline:
                    raise ClusterStartError(f"node {node_id} printed no ready line in time\n{self.logs()}")

    def kill(self, node_id: int) -> None:
        """SIGKILL node `node_id`: a crash (no flush, no controlled shutdown)."""
        node = self.nodes[node_id]
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()
            node.proc.wait(timeout=STOP_TIMEOUT_S)
        self._join(node)

    def terminate(self, node_id: int, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM node `node_id` and wait; its exit code (None if SIGKILL had to end it)."""
        node = self.nodes[node_id]
        if node.proc is None or node.proc.poll() is not None:
            return None if node.proc is None else node.proc.returncode
        node.proc.send_signal(signal.SIGTERM)
        try:
            return node.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill(node_id)
            return None
        finally:
            self._join(node)

    def pause(self, node_id: int) -> None:
        """SIGSTOP node `node_id`: alive, connections open, answering nothing (a hung node)."""
        node = self.nodes[node_id]
        if node.proc is not None and node.is_running():
            node.proc.send_signal(signal.SIGSTOP)

    def resume(self, node_id: int) -> None:
        """SIGCONT a paused node."""
        node = self.nodes[node_id]
        if node.proc is not None and node.is_running():
            node.proc.send_signal(signal.SIGCONT)

    def restart(self, node_id: int, *, wait: bool = True) -> None:
        """Start node `node_id` again on the same ports and data dir (after kill/terminate)."""
        if self.nodes[node_id].is_running():
            self.kill(node_id)
        self.spawn(node_id)
        if wait:
            self.wait_ready(node_id)
            self.wait_settled()

    def wait_settled(self, timeout_s: float | None = None) -> None:
        """Block until every live node's Metadata lists exactly the live brokers."""
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else self.ready_timeout_s)
        live = set(self.live())
        pending = set(live)
        while pending:
            for node_id in sorted(pending):
                try:
                    seen = broker_ids(
                        self.nodes[node_id].host,
                        self.nodes[node_id].broker_port,
                        client=self.client_config,
                    )
                except (OSError, ValueError):
                    continue
                if seen == live:
                    pending.discard(node_id)
            if not pending:
                return
            if time.monotonic() > deadline:
                raise ClusterStartError(f"nodes {sorted(pending)} never listed brokers {sorted(live)}\n{self.logs()}")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM every live node, then SIGKILL whatever is left after the timeout."""
        live = [n for n in self.nodes.values() if n.is_running()]
        for node in live:
            assert node.proc is not None
            node.proc.send_signal(signal.SIGCONT)  # a paused node cannot act on SIGTERM
            node.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for node in live:
            assert node.proc is not None
            try:
                node.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                node.proc.kill()
                node.proc.wait(timeout=STOP_TIMEOUT_S)
            self._join(node)
        if self.fault_dir is not None:
            shutil.rmtree(self.fault_dir, ignore_errors=True)

    @staticmethod
    def _join(node: ClusterNodeProcess) -> None:
        node.output.join()

    def logs(self, lines: int = LOG_TAIL_LINES) -> str:
        """The tail of every node's log, labelled (what a failing test should show)."""
        return "\n".join(f"--- node {i} ({n.log_path}):\n{n.log_tail(lines)}" for i, n in self.nodes.items())

    def __enter__(self) -> ClusterProcesses:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
