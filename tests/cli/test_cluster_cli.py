"""`kafkapy cluster info|quorum|start` as a user runs them."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import kafkapy


def test_info_on_a_single_node(bootstrap: str) -> None:
    r = kafkapy("cluster", "info", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    doc = r.json()
    host, port = bootstrap.split(":")
    assert doc["brokers"] == [{"id": 1, "host": host, "port": int(port), "rack": None}]
    assert doc["controller_id"] == 1
    assert len(doc["cluster_id"]) == 22
    human = kafkapy("cluster", "info", bootstrap=bootstrap)
    assert f"cluster id {doc['cluster_id']}" in human.stdout
    # the finalized levels of a new cluster (Kafka 4.0's numbers), and what the broker supports
    features = {f["feature"]: f for f in doc["features"]}
    assert features["metadata.version"] == {
        "feature": "metadata.version", "finalized_level": 25, "supported_min": 25, "supported_max": 25}
    assert features["group.version"] == {
        "feature": "group.version", "finalized_level": 1, "supported_min": 0, "supported_max": 1}
    assert doc["features_epoch"] >= 0
    assert re.search(r"metadata\.version\s+25\s+25\s+25", human.stdout), human.stdout


def test_quorum_on_a_single_node_is_a_quorum_of_one(bootstrap: str) -> None:
    r = kafkapy("cluster", "quorum", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    q = r.json()
    assert q["leader_id"] == 1
    assert [(v["node_id"], v["status"]) for v in q["voters"]] == [(1, "Leader")]
    assert q["observers"] == []
    human = kafkapy("cluster", "quorum", bootstrap=bootstrap)
    assert human.stdout.startswith("LeaderId 1  LeaderEpoch ")


def test_quorum_through_a_port_that_is_not_kafka_fails_clearly() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = kafkapy("cluster", "quorum", "--bootstrap-controller", f"127.0.0.1:{port}")
    assert r.code == 1
    assert f"cannot connect to 127.0.0.1:{port}" in r.stderr


def _closed(address: str) -> bool:
    host, port = address.split(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1):
            return False
    except OSError:
        return True


def _start(data_dir: Path) -> tuple[subprocess.Popen[str], str, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "cluster", "start", "--nodes", "3", "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    assert proc.stdout is not None
    bootstrap_line = proc.stdout.readline()
    voters_line = proc.stdout.readline()
    m = re.fullmatch(r"bootstrap servers: (\S+)\n", bootstrap_line)
    v = re.fullmatch(r"controller quorum voters: (\S+)\n", voters_line)
    if m is None or v is None:
        proc.kill()
        proc.wait(10)
        raise AssertionError(f"no bootstrap line: {bootstrap_line!r} {voters_line!r}")
    controllers = ",".join(item.split("@")[1] for item in v.group(1).split(","))
    return proc, m.group(1), controllers


def _stop(proc: subprocess.Popen[str], bootstrap: str) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert all(_closed(a) for a in bootstrap.split(","))


def _replica_assignment_on_three_nodes(bootstrap: str) -> None:
    """`topics create/add-partitions --replica-assignment` places replicas where asked."""
    def replicas() -> list[list[int]]:
        (topic,) = kafkapy("topics", "describe", "placed", "--json", bootstrap=bootstrap).json()
        return [p["replicas"] for p in sorted(topic["partitions"], key=lambda p: p["partition"])]

    r = kafkapy("topics", "create", "placed", "--replica-assignment", "2:3,3:1", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert replicas() == [[2, 3], [3, 1]]
    r = kafkapy("topics", "add-partitions", "placed", "--partitions", "3", "--replica-assignment", "2:3,3:1,1:2",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert replicas() == [[2, 3], [3, 1], [1, 2]]
    r = kafkapy("topics", "create", "misplaced", "--replica-assignment", "1:9", bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_REPLICA_ASSIGNMENT (error code 39)" in r.stderr


def _group_configs_on_three_nodes(bootstrap: str) -> None:
    """`configs alter --group` through one broker; every broker then describes the group's config
    (a ConfigRecord in the metadata log, applied by each broker as it catches up)."""
    r = kafkapy("configs", "alter", "--group", "orders", "--add-config", "consumer.session.timeout.ms=50000",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    for address in bootstrap.split(","):
        deadline = time.monotonic() + 30
        while True:
            d = kafkapy("configs", "describe", "--group", "orders", "--json", bootstrap=address)
            assert d.code == 0, d.stderr
            if d.json():
                break
            assert time.monotonic() < deadline, f"{address} never showed the group config"
        assert [(c["name"], c["value"], c["source"]) for c in d.json()] == [
            ("consumer.session.timeout.ms", "50000", "DYNAMIC_GROUP_CONFIG")]
    r = kafkapy("configs", "alter", "--group", "orders", "--add-config", "consumer.session.timeout.ms=1",
                bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_CONFIG (error code 40)" in r.stderr


@pytest.mark.timeout(300)
def test_start_three_nodes_quorum_and_keep_data_between_runs(tmp_path: Path) -> None:
    data = tmp_path / "cluster"
    proc, bootstrap, controllers = _start(data)
    try:
        info = kafkapy("cluster", "info", "--json", bootstrap=bootstrap).json()
        assert [b["id"] for b in info["brokers"]] == [1, 2, 3]
        assert sorted(f"{b['host']}:{b['port']}" for b in info["brokers"]) == sorted(bootstrap.split(","))
        quorum = kafkapy("cluster", "quorum", "--bootstrap-controller", controllers, "--json")
        assert quorum.code == 0, quorum.stderr
        q = quorum.json()
        via_broker = kafkapy("cluster", "quorum", "--json", bootstrap=bootstrap)  # forwarded
        assert via_broker.code == 0, via_broker.stderr
        assert via_broker.json()["leader_id"] == q["leader_id"]
        assert sorted(v["node_id"] for v in via_broker.json()["voters"]) == [1, 2, 3]
        assert sorted(v["node_id"] for v in q["voters"]) == [1, 2, 3]
        assert [v["status"] for v in q["voters"] if v["node_id"] == q["leader_id"]] == ["Leader"]
        assert q["leader_epoch"] >= 1
        assert q["high_watermark"] > 0
        assert kafkapy("topics", "create", "kept", "--partitions", "2", "--replication-factor", "3",
                       bootstrap=bootstrap).code == 0
        assert kafkapy("produce", "kept", "--acks", "all", stdin="x\ny\n", bootstrap=bootstrap).code == 0
        (topic,) = kafkapy("topics", "describe", "kept", "--json", bootstrap=bootstrap).json()
        assert all(len(p["replicas"]) == 3 for p in topic["partitions"])
        assert sum(p["log_end_offset"] for p in topic["partitions"]) == 2
        _replica_assignment_on_three_nodes(bootstrap)
        _group_configs_on_three_nodes(bootstrap)
    finally:
        _stop(proc, bootstrap)
    proc, again, _ = _start(data)
    try:
        assert again == bootstrap  # same ports: the voters' addresses in the kept data stay valid
        r = kafkapy("consume", "kept", "--from-beginning", "--exit-at-end", bootstrap=again)
        assert sorted(r.stdout.split()) == ["x", "y"]
    finally:
        _stop(proc, again)
    # keep the data, but a run without --data-dir leaves nothing behind
    assert (data / "node1" / "meta.properties").exists()



@pytest.mark.timeout(300)
def test_describe_filters_find_the_partitions_a_dead_node_leaves_short(tmp_path: Path) -> None:
    """topics describe --under-replicated-partitions / --unavailable-partitions after a SIGKILL."""
    from kafkapy.testing.cluster import ClusterProcesses

    with ClusterProcesses(tmp_path, 3, log_level="WARNING") as procs:
        bootstrap = procs.bootstrap
        for topic, assignment in [("spread", "1:2:3,2:3:1"), ("solo3", "3"), ("solo1", "1")]:
            r = kafkapy("topics", "create", topic, "--replica-assignment", assignment, bootstrap=bootstrap)
            assert r.code == 0, r.stderr

        def filtered(flag: str) -> dict[str, list[int]]:
            r = kafkapy("topics", "describe", "--exclude-internal", flag, "--json", bootstrap=survivors)
            assert r.code == 0, r.stderr
            return {t["topic"]: [p["partition"] for p in t["partitions"]] for t in r.json() if t["partitions"]}

        survivors = procs.bootstrap_of(1, 2)
        assert filtered("--under-replicated-partitions") == {}
        assert filtered("--unavailable-partitions") == {}
        procs.kill(3)
        deadline = time.monotonic() + 60  # fenced within seconds of its ports refusing connections
        while filtered("--unavailable-partitions") != {"solo3": [0]}:
            assert time.monotonic() < deadline, filtered("--unavailable-partitions")
            time.sleep(0.5)
        while filtered("--under-replicated-partitions") != {"spread": [0, 1]}:
            assert time.monotonic() < deadline, filtered("--under-replicated-partitions")
            time.sleep(0.5)
