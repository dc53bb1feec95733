"""`kafkapy cluster hot` against a three-node cluster while confluent-kafka produces with one hot
key: the key's partition tops the hot list, its leader is the hot broker, and executing the
balancer's plan (leadership moves only) brings the measured max/mean broker load to <= 1.25.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.conftest import unique_topic
from compat_tests.test_cluster_basics import (  # noqa: F401  (the autouse fixture)
    ADMIN_TIMEOUT_S,
    _cluster_logs_on_failure,
    partitions,
    start_cluster,
    wait_until,
)
from kafkapy.testing.cluster import ClusterProcesses

pytestmark = pytest.mark.timeout(300)

PARTITIONS = 9
#: partition p led by broker p % 3 + 1, three leaderships each
ASSIGNMENT = [[p % 3 + 1, (p + 1) % 3 + 1, (p + 2) % 3 + 1] for p in range(PARTITIONS)]
VALUE = b"v" * 1000


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(tmp_path_factory.mktemp("hot"), 3)
    try:
        yield c
    finally:
        c.stop()


class HotKeyProducer(threading.Thread):
    """Keeps producing: 4 records with key `hot` for every record of each other partition."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        self.topic = topic
        self.stop = threading.Event()
        self.hot_partition = -1

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is None and msg.key() == b"hot":
            self.hot_partition = msg.partition()

    def run(self) -> None:
        while not self.stop.is_set():
            for _ in range(4):
                self.producer.produce(self.topic, key=b"hot", value=VALUE, on_delivery=self._delivered)
            for p in range(PARTITIONS):
                if p != self.hot_partition:
                    self.producer.produce(self.topic, value=VALUE, partition=p)
            self.producer.poll(0)
            if len(self.producer) > 2000:
                self.producer.flush(10)
            self.stop.wait(0.02)
        self.producer.flush(30)


def hot(cluster: ClusterProcesses, *args: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "kafkapy", "cluster", "hot", "--json", "--interval", "5",
           "--bootstrap-server", cluster.bootstrap, *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    doc: dict[str, Any] = json.loads(r.stdout)
    return doc


def test_a_hot_key_tops_the_list_and_executing_the_plan_evens_broker_load(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("hot")
    admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replica_assignment=ASSIGNMENT)])[topic].result(
        timeout=ADMIN_TIMEOUT_S)
    wait_until("all led", lambda: len(partitions(admin, topic)) == PARTITIONS
               and all(v[0] > 0 for v in partitions(admin, topic).values()), cluster)
    producer = HotKeyProducer(cluster.bootstrap, topic)
    producer.start()
    try:
        wait_until("hot key delivered", lambda: producer.hot_partition >= 0, cluster)
        plan = hot(cluster, "--execute")
        hot_list = plan["hot_partitions"]
        assert hot_list, plan
        assert (hot_list[0]["topic"], hot_list[0]["partition"]) == (topic, producer.hot_partition)
        hot_leader = ASSIGNMENT[producer.hot_partition][0]
        assert [b["broker"] for b in plan["brokers"] if b["hot"]] == [hot_leader]
        print(f"before {plan['before']:.2f}, planned after {plan['after']:.2f}")
        assert plan["before"] > 1.25, plan
        assert plan["after"] <= 1.25, plan
        assert plan["executed"], plan
        moved = plan["moves"]
        assert all(m["partition"] != producer.hot_partition for m in moved)
        assert all(m["from"] == hot_leader for m in moved), moved
        wait_until("moves applied", lambda: all(
            partitions(admin, topic)[m["partition"]][0] == m["to"] for m in moved), cluster)
        measured = hot(cluster)
        print(f"measured after executing: {measured['before']:.2f}")
        assert measured["before"] <= 1.25, measured
    finally:
        producer.stop.set()
        producer.join(60)
