"""The Java client against a 3-node kafkapy cluster (subprocesses, `kafkapy.testing.cluster`).

Why: a Java producer with acks=all to an RF=3 topic is the most common production setup; it
exercises Metadata with several brokers, leader routing, and the ISR wait behind acks=all, all
through kafka-clients' own metadata and partitioner code. See `test_java_client.py` and
`compat_tests/java/harness.py` for how the Java scenarios run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.conftest import unique_topic
from compat_tests.java.harness import JavaClient, java_build
from kafkapy.testing.cluster import ClusterProcesses, ClusterStartError

pytestmark = pytest.mark.timeout(180)

N_NODES = 3


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    cluster = ClusterProcesses(tmp_path / "cluster", N_NODES)
    try:
        cluster.start()
        yield cluster
    except ClusterStartError:
        raise
    finally:
        cluster.stop()


def test_replicated_produce_consume(
    tmp_path_factory: pytest.TempPathFactory, cluster: ClusterProcesses
) -> None:
    """acks=all to an RF=3 topic created with Admin: all 200 records read back once, every
    partition has 3 replicas all in sync, and describeCluster lists the 3 brokers."""
    java = JavaClient(java_build(tmp_path_factory), cluster.bootstrap)
    prefix = unique_topic("java-cluster")
    events = java.run("replicated", prefix)
    assert sorted(events.one("consumed")["values"]) == sorted(f"rf3-{i}" for i in range(200))
    assert events.one("describeCluster")["nodes"] == [1, 2, 3]
    topic = events.one("describeTopics")["topic"]
    assert topic["name"] == f"{prefix}-rf3"
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2]
    for p in topic["partitions"]:
        assert sorted(p["replicas"]) == [1, 2, 3], p
        assert sorted(p["isr"]) == [1, 2, 3], p
        assert p["leader"] in p["replicas"], p
