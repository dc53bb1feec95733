"""`kafkapy cluster start` as a supervisor and `kafkapy cluster node ACTION N` against it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

import pytest

from tests.cli.conftest import communicate, kafkapy

NODE_LINE = re.compile(r"node (\d): pid (\d+), broker (\S+), controller (\S+), status page (\S+)\n")


def _wait_for(predicate: Any, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def _process_state(pid: int) -> str:
    """The state letter of /proc/PID/stat (T: stopped by a signal)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def _processes_using(data: Path) -> list[int]:
    """Pids of live processes whose command line names `data` (a node left running)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if str(data).encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def _start(data: Path, stderr: IO[str]) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "cluster", "start", "--nodes", "3", "--http", "--data-dir", str(data)],
        stdout=subprocess.PIPE, stderr=stderr, text=True, env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    assert proc.stdout is not None
    lines = [proc.stdout.readline() for _ in range(6)]
    if not lines[-1].startswith("state file: "):
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"unexpected start output: {lines!r}")
    return proc, lines


def _replicas(bootstrap: str, topic: str) -> list[int]:
    (described,) = kafkapy("topics", "describe", topic, "--json", bootstrap=bootstrap).json()
    return list(described["partitions"][0]["replicas"])


def _plan(path: Path, topic: str, replicas: list[int]) -> str:
    path.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": replicas}]}))
    return str(path)


def _reassign_onto_a_dead_node_and_cancel(bootstrap: str, plan: Path) -> None:
    """A move onto a dead broker stays in progress (the new replica cannot catch up); --cancel
    puts the replicas back."""
    r = kafkapy("topics", "create", "stuck", "--replica-assignment", "1", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    r = kafkapy("reassign-partitions", "--execute", "--reassignment-json-file", _plan(plan, "stuck", [1, 2]),
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert '"replicas": [1]' in r.stdout  # the rollback plan: the current assignment
    assert r.stdout.endswith("Successfully started partition reassignment(s) for stuck-0\n")
    r = kafkapy("reassign-partitions", "--verify", "--reassignment-json-file", str(plan), bootstrap=bootstrap)
    assert r.stdout == "Status of partition reassignment:\nReassignment of partition stuck-0 is still in progress.\n"
    r = kafkapy("reassign-partitions", "--cancel", "--reassignment-json-file", str(plan), bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    _wait_for(lambda: _replicas(bootstrap, "stuck") == [1], "the cancelled move left replicas behind")


def _reassign_and_verify(bootstrap: str, plan: Path) -> None:
    r = kafkapy("topics", "create", "moved", "--replica-assignment", "1", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert kafkapy("produce", "moved", stdin="m\n", bootstrap=bootstrap).code == 0
    r = kafkapy("reassign-partitions", "--execute", "--reassignment-json-file", _plan(plan, "moved", [2, 3]),
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr

    def verified() -> bool:
        v = kafkapy("reassign-partitions", "--verify", "--reassignment-json-file", str(plan), bootstrap=bootstrap)
        return "Reassignment of partition moved-0 is completed." in v.stdout

    _wait_for(verified, "the reassignment did not complete")
    assert _replicas(bootstrap, "moved") == [2, 3]
    r = kafkapy("consume", "moved", "--from-beginning", "--exit-at-end", bootstrap=bootstrap)
    assert r.stdout == "m\n"


@pytest.mark.timeout(300)
def test_one_node_dies_the_others_keep_serving_and_node_commands_act_on_it(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    err_path = tmp_path / "supervisor.err"
    with err_path.open("w") as err:
        proc, lines = _start(data, err)
    try:
        nodes = {int(m[1]): m for m in map(NODE_LINE.fullmatch, lines[2:5]) if m is not None}
        assert sorted(nodes) == [1, 2, 3], lines
        state = json.loads((data / "cluster.json").read_text())
        assert state["supervisor_pid"] == proc.pid
        for i, m in nodes.items():
            entry = state["processes"][str(i)]
            assert (entry["pid"], entry["broker"], entry["http"]) == (int(m[2]), m[3], m[5])
            with urllib.request.urlopen(f"{m[5]}healthz", timeout=10) as page:  # each node's own page
                assert page.status == 200
        bootstrap = state["bootstrap_servers"]
        assert kafkapy("topics", "create", "t", "--replication-factor", "3", bootstrap=bootstrap).code == 0

        killed = kafkapy("cluster", "node", "kill", "2", "--data-dir", str(data))
        assert killed.code == 0, killed.stderr
        pid2 = int(nodes[2][2])
        _wait_for(lambda: f"node 2 (pid {pid2}) was killed by SIGKILL (exit code -9); nodes 1, 3 keep serving"
                  in err_path.read_text(), "no report of node 2's death")
        assert proc.poll() is None  # the supervisor and the other nodes keep running
        assert json.loads((data / "cluster.json").read_text())["processes"]["2"]["exit_code"] == -9
        survivors = f"{nodes[1][3]},{nodes[3][3]}"
        r = kafkapy("produce", "t", "--acks", "1", stdin="a\n", bootstrap=survivors)
        assert r.code == 0, r.stderr

        _reassign_onto_a_dead_node_and_cancel(survivors, tmp_path / "plan.json")

        assert kafkapy("cluster", "node", "pause", "3", "--data-dir", str(data)).code == 0
        _wait_for(lambda: _process_state(int(nodes[3][2])) == "T", "node 3 was not stopped")
        assert kafkapy("cluster", "node", "resume", "3", "--data-dir", str(data)).code == 0
        _wait_for(lambda: _process_state(int(nodes[3][2])) != "T", "node 3 was not resumed")

        restarted = kafkapy("cluster", "node", "restart", "2", "--data-dir", str(data), timeout=120)
        assert restarted.code == 0, restarted.stderr
        new_pid = json.loads((data / "cluster.json").read_text())["processes"]["2"]["pid"]
        assert restarted.stdout == f"node 2 restarted: pid {new_pid}, broker {nodes[2][3]}\n"
        assert new_pid != pid2
        info = kafkapy("cluster", "info", "--json", bootstrap=nodes[2][3])
        assert info.code == 0, info.stderr
        assert [b["id"] for b in info.json()["brokers"]] == [1, 2, 3]
        _reassign_and_verify(bootstrap, tmp_path / "plan.json")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            assert proc.wait(60) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    assert "Traceback" not in err_path.read_text()
    assert _processes_using(data) == []
    assert json.loads((data / "cluster.json").read_text())["supervisor_pid"] is None
    stopped = kafkapy("cluster", "node", "kill", "1", "--data-dir", str(data))
    assert stopped.code == 1
    assert stopped.stderr == f"kafkapy: the cluster of {data / 'cluster.json'} is not running (kafkapy cluster start)\n"
    missing = kafkapy("cluster", "node", "kill", "1", "--data-dir", str(tmp_path / "none"))
    assert missing.code == 1
    assert missing.stderr.startswith("kafkapy: no local cluster state at ")


@pytest.mark.timeout(120)
def test_sigterm_while_the_nodes_start_stops_them_at_once(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "cluster", "start", "--nodes", "3", "--data-dir", str(data)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    assert proc.stderr is not None
    assert proc.stderr.readline().startswith("starting 3 nodes under ")
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = communicate(proc, timeout=30)  # not after the nodes' readiness wait (60 s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 143, err
    assert "Traceback" not in err
    assert _processes_using(data) == []  # no node outlives its supervisor
    state = json.loads((data / "cluster.json").read_text())
    assert state["supervisor_pid"] is None
    assert all(p["pid"] is None for p in state["processes"].values())
