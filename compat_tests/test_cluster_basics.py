"""A three-node kafkapy cluster (subprocesses, kafkapy.testing.cluster) seen by real clients.

What users rely on: bootstrapping from any node, kcat -L and confluent-kafka's admin client see
three brokers and a controller; a topic created with replication factor 3 has every partition on
three distinct brokers, all in sync, with leaders spread over the brokers; data produced with
acks=all reads back from the partition leaders.

The cluster helpers here (`start_cluster`, `partitions`, `wait_until`) are shared by the other
test_cluster_* modules. The modules skip - naming what is missing - only while a part of cluster
mode (raft driver, controller, replication, lifecycle) is not in the tree at all.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from compat_tests.conftest import in_ci, unique_topic
from kafkapy.testing.cluster import ClusterProcesses, ClusterStartError

pytestmark = pytest.mark.timeout(180)

ADMIN_TIMEOUT_S = 20.0
T = TypeVar("T")


def start_cluster(base: Path, nodes: int = 3, **kwargs: object) -> ClusterProcesses:
    """A started cluster, or a skip naming the cluster parts missing from the tree."""
    cluster = ClusterProcesses(base, nodes, **kwargs)  # type: ignore[arg-type]
    try:
        cluster.start()
    except ClusterStartError:
        cluster.stop()
        raise
    return cluster


def wait_until(what: str, check: Callable[[], T | None], cluster: ClusterProcesses, timeout_s: float = 60.0) -> T:
    """Poll `check` until it returns a value that is not None/False; fail with the logs."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except Exception as e:  # a client call failing mid-failover: try again
            last = None
            error = e
        else:
            error = None
        if last:
            return last
        time.sleep(0.25)
    pytest.fail(f"timed out after {timeout_s:.0f} s waiting for {what} (last error: {error!r})\n{cluster.logs()}")


def partitions(admin: AdminClient, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """{partition: (leader, replicas, isr)} from a fresh Metadata request."""
    md = admin.list_topics(topic, timeout=ADMIN_TIMEOUT_S)
    t = md.topics[topic]
    if t.error is not None:
        raise RuntimeError(f"topic {topic}: {t.error}")
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in t.partitions.values()}


def create_topic(admin: AdminClient, topic: str, partitions_: int, rf: int, config: dict[str, str] | None = None) -> None:
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions_, replication_factor=rf, config=config or {})],
        operation_timeout=ADMIN_TIMEOUT_S,
    )
    futures[topic].result(timeout=ADMIN_TIMEOUT_S)


@pytest.fixture(autouse=True)
def _cluster_logs_on_failure(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print every node's log tail after each test that used a cluster: pytest shows a test's
    captured output only when it failed, so a failure always comes with what the nodes said."""
    yield
    cluster = getattr(request.node, "funcargs", {}).get("cluster")
    if isinstance(cluster, ClusterProcesses):
        print(cluster.logs())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(tmp_path_factory.mktemp("cluster"), 3)
    try:
        yield c
    finally:
        c.stop()


def test_every_node_reports_three_brokers_and_a_controller(cluster: ClusterProcesses) -> None:
    controllers = set()
    for node in cluster.nodes.values():
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        md = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
        assert sorted(md.brokers) == [1, 2, 3], cluster.logs()
        assert {(b.host, b.port) for b in md.brokers.values()} == {
            (n.host, n.broker_port) for n in cluster.nodes.values()
        }
        assert md.controller_id in (1, 2, 3)
        controllers.add(md.controller_id)
    assert len(controllers) == 1, f"nodes disagree on the controller: {controllers}"


def test_kcat_lists_the_cluster(cluster: ClusterProcesses) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        if in_ci():
            pytest.fail("kcat is not installed, but CI=true: .ci/run must install it")
        pytest.skip("kcat not installed (apt-get install kcat)")
    out = subprocess.run(
        [kcat, "-b", cluster.bootstrap_of(2), "-L", "-m", "15"],
        capture_output=True, text=True, timeout=30, check=False,
    )
    assert out.returncode == 0, out.stderr
    assert re.search(r"\b3 brokers:", out.stdout), out.stdout
    listed = re.findall(r"broker (\d+) at (\S+):(\d+)", out.stdout)
    assert sorted(int(b) for b, _, _ in listed) == [1, 2, 3]
    assert out.stdout.count("(controller)") == 1, out.stdout


def test_rf3_topic_is_replicated_in_sync_and_spread(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("rf3")
    create_topic(admin, topic, 6, 3)

    def all_in_sync() -> dict[int, tuple[int, list[int], list[int]]] | None:
        parts = partitions(admin, topic)
        ok = len(parts) == 6 and all(sorted(isr) == [1, 2, 3] and leader in (1, 2, 3) for leader, _, isr in parts.values())
        return parts if ok else None

    parts = wait_until("6 partitions with a leader and 3 in-sync replicas", all_in_sync, cluster)
    for leader, replicas, _ in parts.values():
        assert sorted(replicas) == [1, 2, 3]
        assert leader == replicas[0], "the preferred (first) replica leads a fresh topic"
    assert {leader for leader, _, _ in parts.values()} == {1, 2, 3}, f"leaders not spread: {parts}"

    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True})
    for i in range(600):
        producer.produce(topic, key=str(i % 6).encode(), value=f"v{i}".encode(), partition=i % 6)
    assert producer.flush(30) == 0, cluster.logs()

    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap, "group.id": unique_topic("g"),
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(6)])
    got: dict[int, list[bytes]] = {p: [] for p in range(6)}
    deadline = time.monotonic() + 60
    try:
        while sum(map(len, got.values())) < 600 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got[msg.partition()].append(msg.value())
    finally:
        consumer.close()
    for p in range(6):
        assert got[p] == [f"v{i}".encode() for i in range(p, 600, 6)], f"partition {p}"


def test_kafka_python_finds_leaders_on_other_nodes(cluster: ClusterProcesses) -> None:
    """kafka-python bootstrapped from one node must route each partition to its leader."""
    from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
    from kafka import TopicPartition as KpTopicPartition

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("kafka-python")
    create_topic(admin, topic, 3, 3)
    wait_until(
        "3 partitions led and in sync",
        lambda: all(len(isr) == 3 and leader > 0 for leader, _, isr in partitions(admin, topic).values()),
        cluster,
    )
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap_of(3), acks="all", request_timeout_ms=20_000)
    try:
        for i in range(300):
            producer.send(topic, key=b"k", value=f"{i}".encode(), partition=i % 3)
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer(
        bootstrap_servers=cluster.bootstrap_of(3), auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=20_000,
    )
    try:
        consumer.assign([KpTopicPartition(topic, p) for p in range(3)])
        got: dict[int, list[int]] = {p: [] for p in range(3)}
        for msg in consumer:
            got[msg.partition].append(int(msg.value))
            if sum(map(len, got.values())) == 300:
                break
    finally:
        consumer.close()
    assert got == {p: list(range(p, 300, 3)) for p in range(3)}


def test_sigterm_hands_leadership_over_and_the_node_rejoins(cluster: ClusterProcesses) -> None:
    """Runs last in this module: a rolling restart of one node, as an operator does it."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("rolling")
    create_topic(admin, topic, 3, 3)
    parts = wait_until(
        "3 partitions led and in sync",
        lambda: (p := partitions(admin, topic)) and all(len(isr) == 3 and leader > 0 for leader, _, isr in p.values()) and p,
        cluster,
    )
    node = next(leader for leader, _, _ in parts.values())
    started = time.monotonic()
    assert cluster.terminate(node) == 0, cluster.logs()
    assert time.monotonic() - started < 8, "SIGTERM took too long"
    others = [i for i in cluster.nodes if i != node]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(*others)})
    wait_until(
        f"every partition led by a live node after node {node} stopped",
        lambda: all(leader in others for leader, _, _ in partitions(admin, topic).values()),
        cluster,
        timeout_s=30,
    )
    producer = Producer({"bootstrap.servers": cluster.bootstrap_of(*others), "acks": "all"})
    for p in range(3):
        producer.produce(topic, value=b"while one node is down", partition=p)
    assert producer.flush(30) == 0, cluster.logs()
    cluster.restart(node)
    wait_until(
        f"node {node} back in every ISR",
        lambda: all(node in isr for _, _, isr in partitions(admin, topic).values()),
        cluster,
    )
