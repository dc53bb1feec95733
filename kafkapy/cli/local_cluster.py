"""`kafkapy cluster start` (a supervisor of local nodes) and `kafkapy cluster node ACTION N`.

`start --nodes N` runs N `kafkapy serve` processes on 127.0.0.1 (kafkapy.testing.cluster's
process harness) and then supervises them: a node that exits is reported on stderr (node, pid,
exit code, its log) and the others keep serving, because a local cluster exists to watch what
clients and the survivors do when one node dies. Ctrl-C or SIGTERM stops every node cleanly.

The state file, `cluster.json` in the cluster's data dir, is the contract with the `node`
commands run from another terminal: the supervisor's pid, and per node its pid (null once it
exited), exit code, ports (broker, controller, HTTP with `--http`), log file and start count.
It is rewritten (atomically) whenever a node starts, becomes ready or exits; its ports are also
what a later `start --data-dir` over the same data reuses, since the voters' addresses are
stored in the metadata log. The last started cluster's data dir is remembered in
`$TMPDIR/kafkapy-cluster-<uid>`, so `--data-dir` can be left out of the `node` commands.

`node kill|pause|resume N` signal the node's process directly (SIGKILL: a crash; SIGSTOP: a
hung node that keeps its connections open; SIGCONT); `node restart N` asks the supervisor,
through a request file in `<data-dir>/control/`, to stop the node (SIGTERM) if it runs and
start it again with the same command line, and waits until it is ready.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kafkapy.cli.common import CliError, parse_key_values

if TYPE_CHECKING:
    from kafkapy.testing.cluster import ClusterProcesses

__all__ = ["node", "start", "state_file"]

STATE_FILE = "cluster.json"
CONTROL_DIR = "control"
POLL_S = 0.25
RESTART_TIMEOUT_S = 90.0
SIGNALS = {"kill": signal.SIGKILL, "pause": signal.SIGSTOP, "resume": signal.SIGCONT}


def _pointer() -> Path:
    """Where the last started cluster's data dir is remembered (per user)."""
    return Path(tempfile.gettempdir()) / f"kafkapy-cluster-{os.getuid()}"


def state_file(data_dir: Path | None) -> Path:
    """The state file of the cluster under `data_dir`, or of the last one started."""
    if data_dir is not None:
        return data_dir / STATE_FILE
    try:
        return Path(_pointer().read_text().strip()) / STATE_FILE
    except OSError:
        raise CliError("no local cluster was started (kafkapy cluster start); or pass --data-dir") from None


def _write_json(path: Path, doc: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n")
    os.replace(tmp, path)


def _keep_ports(procs: ClusterProcesses, state: Path, nodes: int) -> None:
    """Reuse the ports of the last run over the same data dir (the voters' addresses stay put)."""
    if not state.is_file():
        return
    saved = json.loads(state.read_text())
    if saved.get("nodes") != nodes:
        return
    for node_id, node in procs.nodes.items():
        node.broker_port, node.controller_port = saved["ports"][str(node_id)]
        http = saved.get("http_ports", {}).get(str(node_id))
        if node.http_port is not None and http is not None:
            node.http_port = http


def _exit_text(code: int) -> str:
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-code).name} (exit code {code})"
    return f"exited with code {code}"


class Supervisor:
    """Keeps the state file true, reports exits and readiness, and serves restart requests."""

    def __init__(self, procs: ClusterProcesses, base: Path, nodes: int) -> None:
        self.procs = procs
        self.base = base
        self.nodes = nodes
        self.control = base / CONTROL_DIR
        self.exits: dict[int, int] = {}  # node id -> the start count whose exit was reported
        self.ready: dict[int, int] = {}  # node id -> the start count whose readiness was reported

    def state(self, running: bool = True) -> dict[str, Any]:
        nodes = self.procs.nodes
        processes = {}
        for i, n in nodes.items():
            alive = running and n.is_running()
            processes[str(i)] = {
                "pid": n.proc.pid if alive and n.proc is not None else None,
                "exit_code": None if alive or n.proc is None else n.proc.returncode,
                "ready": alive and n.ready.is_set(), "starts": n.starts,
                "broker": n.bootstrap, "controller": f"{n.host}:{n.controller_port}" if n.voter else None,
                "http": None if n.http_port is None else f"http://{n.host}:{n.http_port}/",
                "log": str(n.log_path),
            }
        return {
            "nodes": self.nodes,
            "ports": {str(i): [n.broker_port, n.controller_port] for i, n in nodes.items()},
            "http_ports": {str(i): n.http_port for i, n in nodes.items() if n.http_port is not None},
            "supervisor_pid": os.getpid() if running else None,
            "bootstrap_servers": self.procs.bootstrap,
            "controller_quorum_voters": self.procs.voters,
            "processes": processes,
        }

    def save(self, running: bool = True) -> None:
        _write_json(self.base / STATE_FILE, self.state(running))

    def announce(self) -> None:
        """The per-node lines `start` prints once every node is ready."""
        for i, n in self.procs.nodes.items():
            pid = n.proc.pid if n.proc is not None else None
            line = f"node {i}: pid {pid}, broker {n.bootstrap}"
            if n.voter:
                line += f", controller {n.host}:{n.controller_port}"
            if n.http_port is not None:
                line += f", status page http://{n.host}:{n.http_port}/"
            click.echo(line)
            self.ready[i] = n.starts
        click.echo(f"state file: {self.base / STATE_FILE}")

    def check(self) -> None:
        """One round: report exits and readiness, serve restart requests, save if anything moved."""
        changed = False
        for i, n in self.procs.nodes.items():
            if n.proc is not None and n.proc.poll() is not None and self.exits.get(i) != n.starts:
                self.exits[i] = n.starts
                self._report_exit(i)
                changed = True
            elif n.is_running() and n.ready.is_set() and self.ready.get(i) != n.starts:
                self.ready[i] = n.starts
                assert n.proc is not None
                click.echo(f"node {i} is ready again: pid {n.proc.pid}, broker {n.bootstrap}", err=True)
                changed = True
        for request in sorted(self.control.glob("restart-*")):
            request.unlink(missing_ok=True)
            changed |= self._restart(request.name.removeprefix("restart-"))
        if changed:
            self.save()

    def _report_exit(self, node_id: int) -> None:
        n = self.procs.nodes[node_id]
        assert n.proc is not None
        live = self.procs.live()
        others = (f"nodes {', '.join(map(str, live))} keep serving" if live else "no node is running")
        click.echo(f"node {node_id} (pid {n.proc.pid}) {_exit_text(n.proc.returncode)}; {others}; "
                   f"log: {n.log_path}; start it again: kafkapy cluster node restart {node_id} "
                   f"--data-dir {self.base}", err=True)
        if n.proc.returncode > 0:
            for line in n.log_tail(5).splitlines():
                click.echo(f"  node {node_id}| {line}", err=True)

    def _restart(self, name: str) -> bool:
        if not name.isdigit() or int(name) not in self.procs.nodes:
            return False
        node_id = int(name)
        n = self.procs.nodes[node_id]
        if n.is_running():
            assert n.proc is not None
            n.proc.send_signal(signal.SIGCONT)  # a paused node cannot act on SIGTERM
            self.procs.terminate(node_id)
            self.exits[node_id] = n.starts  # asked for: not reported as a failure
        self.procs.spawn(node_id)
        assert n.proc is not None
        click.echo(f"node {node_id} restarting: pid {n.proc.pid}", err=True)
        return True


def _start_nodes(procs: ClusterProcesses, stop: threading.Event) -> bool:
    """Spawn every node and wait until all are ready, or until a signal sets `stop` (False).

    Why not `ClusterProcesses.start()`: a signal handler that raised to leave its waits could
    land inside `Popen` after the fork and orphan that node; here the handler only sets `stop`
    and every wait checks it.
    """
    from kafkapy.testing.cluster import ClusterStartError

    procs.base_dir.mkdir(parents=True, exist_ok=True)
    for node_id in procs.nodes:
        if stop.is_set():
            return False
        procs.spawn(node_id)
    deadline = time.monotonic() + procs.ready_timeout_s
    while not all(n.ready.is_set() for n in procs.nodes.values()):
        for node_id, n in procs.nodes.items():
            if n.proc is not None and n.proc.poll() is not None:
                raise ClusterStartError(f"node {node_id} exited (code {n.proc.returncode}) before it was ready\n"
                                        f"{procs.logs()}")
        if time.monotonic() > deadline:
            raise ClusterStartError(f"not every node printed its ready line in time\n{procs.logs()}")
        if stop.wait(0.1):
            return False
    procs.wait_settled()
    return not stop.is_set()


def _serve(supervisor: Supervisor, stop: threading.Event) -> bool:
    """Start the nodes, print where they are, supervise until `stop`; False: stopped while starting."""
    procs = supervisor.procs
    click.echo(f"starting {supervisor.nodes} nodes under {supervisor.base} ...", err=True)
    supervisor.control.mkdir(exist_ok=True)
    for stale in supervisor.control.glob("restart-*"):
        stale.unlink(missing_ok=True)
    if not _start_nodes(procs, stop):
        return False
    supervisor.save()
    _pointer().write_text(str(supervisor.base.resolve()))
    click.echo(f"bootstrap servers: {procs.bootstrap}")
    click.echo(f"controller quorum voters: {procs.voters}")
    supervisor.announce()
    click.echo(f"logs: {supervisor.base}/node<N>.log - a node that exits is reported, the others keep "
               "serving; kafkapy cluster node kill|pause|resume|restart N acts on one; "
               "Ctrl-C stops every node", err=True)
    while not stop.wait(POLL_S):
        supervisor.check()
    return True


@click.command()
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True, help="how many nodes")
@click.option("--voters", type=click.IntRange(min=1), help="how many of them are controllers [default: all]")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="keep data (and ports) here between runs [default: a temporary folder]")
@click.option("--http", is_flag=True, help="give each node an HTTP listener (status page, /metrics)")
@click.option("--override", multiple=True, metavar="KEY=VALUE", help="a broker config for every node")
@click.option("--racks", metavar="RACK[,RACK]",
              help="broker.rack of each node, in turn: node i gets the ((i - 1) mod count)-th")
def start(nodes: int, voters: int | None, data_dir: Path | None, http: bool, override: tuple[str, ...],
          racks: str | None) -> int:
    """Run and supervise a local N-node cluster on 127.0.0.1 until Ctrl-C."""
    from kafkapy.testing.cluster import ClusterProcesses, ClusterStartError

    overrides = parse_key_values(override, "--override")
    rack_names = [r.strip() for r in (racks or "").split(",") if r.strip()]
    if voters is not None and voters > nodes:
        raise click.BadParameter("at most --nodes voters", param_hint="--voters")
    temp = None if data_dir is not None else tempfile.TemporaryDirectory(prefix="kafkapy-cluster-")
    base = data_dir if data_dir is not None else Path(temp.name)  # type: ignore[union-attr]
    base.mkdir(parents=True, exist_ok=True)
    procs = ClusterProcesses(base, nodes, voters=voters, overrides=overrides, log_level="WARNING", http=http,
                             racks=rack_names)
    _keep_ports(procs, base / STATE_FILE, nodes)
    supervisor = Supervisor(procs, base, nodes)
    stop = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, frame: object) -> None:
        received.append(signum)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        served = _serve(supervisor, stop)
    except ClusterStartError as e:
        raise CliError(f"the cluster did not start: {e}") from None
    finally:
        procs.stop()
        supervisor.save(running=False)
        with contextlib.suppress(OSError):
            if _pointer().read_text().strip() == str(base.resolve()):
                _pointer().unlink()
        if temp is not None:
            temp.cleanup()
        click.echo("stopped", err=True)
    # stopped before every node was ready: the exit status of the signal, as `kafkapy` gives it
    return 0 if served or not received else 128 + received[0]


def _running_state(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        doc = None
    if not isinstance(doc, dict) or not isinstance(doc.get("processes"), dict):
        raise CliError(f"no local cluster state at {path} (kafkapy cluster start writes it)")
    pid = doc.get("supervisor_pid")
    alive = isinstance(pid, int)
    if isinstance(pid, int):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            alive = False
        except PermissionError:
            pass
    if not alive:
        raise CliError(f"the cluster of {path} is not running (kafkapy cluster start)")
    return doc


def _wait_restarted(path: Path, node_id: int, starts: int) -> dict[str, Any]:
    deadline = time.monotonic() + RESTART_TIMEOUT_S
    while time.monotonic() < deadline:
        entry: dict[str, Any] = _running_state(path)["processes"][str(node_id)]
        if entry["starts"] > starts and entry["ready"]:
            return entry
        if entry["starts"] > starts and entry["exit_code"] is not None:
            raise CliError(f"node {node_id} exited (code {entry['exit_code']}) before it was ready; "
                           f"log: {entry['log']}")
        time.sleep(POLL_S)
    raise CliError(f"node {node_id} was not ready within {RESTART_TIMEOUT_S:.0f} s")


@click.command()
@click.argument("action", type=click.Choice(["kill", "pause", "resume", "restart"]))
@click.argument("node_id", metavar="N", type=click.IntRange(min=1))
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path),
              help="the cluster's data dir [default: the last cluster started]")
def node(action: str, node_id: int, data_dir: Path | None) -> int:
    """Kill (SIGKILL), pause (SIGSTOP), resume (SIGCONT) or restart one node of a local cluster."""
    path = state_file(data_dir)
    doc = _running_state(path)
    entry = doc["processes"].get(str(node_id))
    if entry is None:
        raise CliError(f"the cluster has nodes 1..{doc['nodes']}, not {node_id}")
    if action == "restart":
        control = path.parent / CONTROL_DIR
        control.mkdir(exist_ok=True)
        (control / f"restart-{node_id}").touch()
        entry = _wait_restarted(path, node_id, entry["starts"])
        click.echo(f"node {node_id} restarted: pid {entry['pid']}, broker {entry['broker']}")
        return 0
    if entry["pid"] is None:
        raise CliError(f"node {node_id} is not running (exit code {entry['exit_code']}); "
                       f"kafkapy cluster node restart {node_id} starts it")
    os.kill(entry["pid"], SIGNALS[action])
    click.echo(f"node {node_id} (pid {entry['pid']}): {SIGNALS[action].name} sent")
    return 0
