"""/metrics and /readyz on three in-process cluster nodes: one active controller, one Raft view,
partition states from the metadata image, and log gauges only where a replica lives."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
import trio
from prometheus_client.parser import text_string_to_metric_families

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import CreateTopicsRequest
from kafkapy.server.cluster.peer import PeerClient
from kafkapy.testing.local import LocalNode, open_cluster

pytestmark = pytest.mark.timeout(120)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode()


async def scrape(node: LocalNode) -> Samples:
    assert node.server.http is not None
    status, text = await trio.to_thread.run_sync(_get, node.server.http.url + "metrics")
    assert status == 200
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_cluster_metrics_agree_across_nodes(tmp_path: Path) -> None:
    overrides = {"kafkapy.http.listener": "127.0.0.1:0"}
    async with open_cluster(tmp_path, 3, overrides=overrides) as nodes:
        for node in nodes:
            assert node.server.http is not None
            assert await trio.to_thread.run_sync(_get, node.server.http.url + "readyz") == (200, "ready\n")

        client = PeerClient("127.0.0.1", nodes[0].broker_port, client_id="metrics-test")
        create = CreateTopicsRequest(timeout_ms=20_000, topics=[
            CreateTopicsRequest.CreatableTopic(name="rf2", num_partitions=3, replication_factor=2)])
        response = await client.request(ApiKey.CREATE_TOPICS, 5, create, timeout_s=30)
        await client.aclose()
        assert response.topics[0].error_code == ErrorCode.NONE

        with trio.fail_after(30):
            while True:
                scrapes = [await scrape(node) for node in nodes]
                replicas = sum(
                    1 for s in scrapes for (n, ls) in s if n == "kafka_log_log_size" and ("topic", "rf2") in ls
                )
                in_sync = all(
                    value(s, "kafka_server_replicamanager_underreplicatedpartitions") == 0 for s in scrapes
                )
                if replicas == 6 and in_sync:
                    break
                await trio.sleep(0.2)

        active = [s for s in scrapes if value(s, "kafka_controller_kafkacontroller_activecontrollercount") == 1]
        assert len(active) == 1
        assert sum(value(s, "kafka_controller_kafkacontroller_activecontrollercount") or 0 for s in scrapes) == 1
        controller = active[0]
        assert value(controller, "kafka_controller_kafkacontroller_activebrokercount") == 3
        assert value(controller, "kafka_controller_kafkacontroller_fencedbrokercount") == 0
        assert value(controller, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
        assert (value(controller, "kafka_server_raft_metrics_commit_latency_ms_count") or 0) > 0
        # followers do not report the cluster-wide controller figures, as in Kafka
        for s in scrapes:
            if s is not controller:
                assert value(s, "kafka_controller_kafkacontroller_globalpartitioncount") is None
        # one Raft view: the same leader and epoch everywhere, and the leader is the controller
        leaders_seen = {value(s, "kafka_server_raft_metrics_current_leader") for s in scrapes}
        epochs = {value(s, "kafka_server_raft_metrics_current_epoch") for s in scrapes}
        assert len(leaders_seen) == 1
        assert len(epochs) == 1
        leader_id = int(next(iter(leaders_seen)) or 0)
        leader_node = next(n for n in nodes if n.node_id == leader_id)
        assert scrapes[nodes.index(leader_node)] is controller
        assert value(controller, "kafka_server_raft_metrics_current_state", state="leader") == 1
        # the status page's data agrees: quorum, brokers, the page renders the quorum rows
        assert leader_node.server.http is not None
        status, body = await trio.to_thread.run_sync(_get, leader_node.server.http.url + "api/status")
        data = json.loads(body)
        assert data["cluster"]["mode"] == "cluster"
        assert data["cluster"]["active_controller"] is True
        assert data["cluster"]["quorum"]["leader_id"] == leader_id
        assert data["cluster"]["quorum"]["voters"] == [1, 2, 3]
        assert sorted(b["node_id"] for b in data["brokers"]) == [1, 2, 3]
        assert not any(b["fenced"] for b in data["brokers"])
        rf2 = [p for p in data["partitions"] if p["topic"] == "rf2"]
        assert len(rf2) == 3
        assert all(len(p["replicas"]) == 2 and sorted(p["isr"]) == sorted(p["replicas"]) for p in rf2)
        status, page = await trio.to_thread.run_sync(_get, leader_node.server.http.url)
        assert status == 200
        assert "Raft voters" in page
        assert f"{leader_id} (this node)" in page
        # every partition of the cluster is led by exactly one node
        led = sum(value(s, "kafka_server_replicamanager_leadercount") or 0 for s in scrapes)
        assert led == value(controller, "kafka_controller_kafkacontroller_globalpartitioncount")
        assert (value(controller, "kafka_controller_kafkacontroller_globaltopiccount") or 0) >= 1
