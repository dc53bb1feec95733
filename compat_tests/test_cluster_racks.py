"""Racks, leader balance and partition budgets by real clients against subprocess clusters.

What users rely on:
- Four brokers in racks a/a/b/b (`broker.rack`): every partition of a replication-factor-2
  topic has one replica in each rack, and its leaders are spread over all four brokers
  (confluent-kafka's Metadata, and DescribeCluster for the racks).
- `max.broker.partitions`: a CreateTopics that would put more replicas on a broker is refused
  with POLICY_VIOLATION and a message naming the broker and by how much; nothing is created.
- KIP-881 with KIP-848: consumers (`group.protocol=consumer`) with `client.rack` are assigned
  the partitions whose replicas are in their rack.
- `reassign-partitions --generate` proposes a plan with a replica in each rack.
- `leader.imbalance.check.interval.seconds`: after a broker restarts, the partitions it was
  preferred leader of are led by it again within a few check intervals.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from confluent_kafka.error import KafkaError

from compat_tests.conftest import unique_topic
from compat_tests.test_cluster_basics import (  # noqa: F401  (the autouse fixture)
    ADMIN_TIMEOUT_S,
    _cluster_logs_on_failure,
    create_topic,
    partitions,
    start_cluster,
    wait_until,
)
from kafkapy.testing.cluster import ClusterProcesses

pytestmark = pytest.mark.timeout(300)

#: replicas one broker may hold in the four-node cluster: the internal topics (3 partitions
#: each, at most 3 replicas) and small topics fit, 200 partitions of replication factor 2
#: (100 replicas a broker) do not
BROKER_BUDGET = 60


@pytest.fixture(scope="module")
def four_racked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(
        tmp_path_factory.mktemp("racks"), 4, voters=3, racks=["a", "a", "b", "b"],
        overrides={
            "max.broker.partitions": str(BROKER_BUDGET),
            # KIP-848 members learn a new assignment at their next heartbeat
            "group.consumer.min.heartbeat.interval.ms": "500",
            "group.consumer.heartbeat.interval.ms": "500",
        },
    )
    try:
        yield c
    finally:
        c.stop()


def test_replicas_span_both_racks_and_leaders_spread_over_the_brokers(four_racked: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": four_racked.bootstrap})
    described = admin.describe_cluster(request_timeout=ADMIN_TIMEOUT_S).result(timeout=ADMIN_TIMEOUT_S)
    racks = {node.id: node.rack for node in described.nodes}
    assert racks == {1: "a", 2: "a", 3: "b", 4: "b"}
    topic = unique_topic("racked")
    create_topic(admin, topic, 8, 2)

    def led() -> dict[int, tuple[int, list[int], list[int]]] | None:
        layout = partitions(admin, topic)
        return layout if len(layout) == 8 and all(v[0] >= 0 for v in layout.values()) else None

    layout = wait_until("every partition led", led, four_racked)
    for _, replicas, _ in layout.values():
        assert sorted(racks[r] for r in replicas) == ["a", "b"], layout
    leaders = Counter(leader for leader, _, _ in layout.values())
    assert sorted(leaders) == [1, 2, 3, 4], layout
    assert max(leaders.values()) == 2, layout


def test_reassign_partitions_generate_proposes_a_rack_aware_plan(
    four_racked: ClusterProcesses, tmp_path: Path
) -> None:
    """`kafkapy reassign-partitions --generate` (kafka-reassign-partitions' job) reads the
    brokers' racks and proposes the controller's striped placement: over brokers 1,2,3,4 in
    racks a/a/b/b every RF-2 partition gets one replica per rack, leaders two per broker."""
    admin = AdminClient({"bootstrap.servers": four_racked.bootstrap})
    topic = unique_topic("generate")
    create_topic(admin, topic, 8, 2)
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": topic}], "version": 1}))
    run = subprocess.run(
        [sys.executable, "-m", "kafkapy", "reassign-partitions", "--generate", "--topics-to-move-json-file",
         str(topics), "--broker-list", "1,2,3,4", "--bootstrap-server", four_racked.bootstrap],
        capture_output=True, text=True, timeout=120, env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    assert run.returncode == 0, run.stderr
    plan = json.loads(run.stdout.split("Proposed partition reassignment configuration\n")[1])
    rack = {1: "a", 2: "a", 3: "b", 4: "b"}
    replicas = [entry["replicas"] for entry in plan["partitions"]]
    assert len(replicas) == 8
    assert all(sorted(rack[r] for r in rs) == ["a", "b"] for rs in replicas), plan
    assert Counter(rs[0] for rs in replicas) == {1: 2, 2: 2, 3: 2, 4: 2}, plan


def _owned(consumer: Consumer, want: set[int], deadline: float) -> set[int]:
    """Poll until the consumer's assignment is `want` (or the deadline); its assignment."""
    while time.monotonic() < deadline:
        consumer.poll(0.2)
        owned = {tp.partition for tp in consumer.assignment()}
        if owned == want:
            return owned
    return {tp.partition for tp in consumer.assignment()}


def test_consumer_protocol_members_get_the_partitions_of_their_rack(four_racked: ClusterProcesses) -> None:
    """KIP-881 with KIP-848 (`group.protocol=consumer`): the coordinator's assignor sees each
    member's `client.rack` and the partitions' replica racks. Partitions 0, 1 live in rack a,
    2, 3 in rack b. The rack-b member joins first and takes everything; when the rack-a member
    joins, the rack-b member keeps 2 and 3 (rack-blind stickiness would keep 0 and 1)."""
    admin = AdminClient({"bootstrap.servers": four_racked.bootstrap})
    topic = unique_topic("kip881")
    new = NewTopic(topic, num_partitions=4, replica_assignment=[[1], [2], [3], [4]])
    admin.create_topics([new])[topic].result(timeout=ADMIN_TIMEOUT_S)
    wait_until("leaders", lambda: all(v[0] >= 0 for v in partitions(admin, topic).values()) or None, four_racked)
    group = f"g-{topic}"

    def member(rack: str) -> Consumer:
        c = Consumer({"bootstrap.servers": four_racked.bootstrap, "group.id": group, "group.protocol": "consumer",
                      "client.rack": rack, "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        return c

    in_b = member("b")
    in_a = None
    try:
        assert _owned(in_b, {0, 1, 2, 3}, time.monotonic() + 60) == {0, 1, 2, 3}
        in_a = member("a")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            in_b.poll(0.1)
            in_a.poll(0.1)
            owned = ({tp.partition for tp in in_a.assignment()}, {tp.partition for tp in in_b.assignment()})
            if owned == ({0, 1}, {2, 3}):
                break
        assert owned == ({0, 1}, {2, 3})
    finally:
        for c in (in_a, in_b):
            if c is not None:
                c.close()


def test_a_create_topics_over_max_broker_partitions_is_refused_with_its_reason(four_racked: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": four_racked.bootstrap})
    topic = unique_topic("too-big")
    futures = admin.create_topics([NewTopic(topic, num_partitions=200, replication_factor=2)])
    with pytest.raises(KafkaException) as refused:
        futures[topic].result(timeout=ADMIN_TIMEOUT_S)
    error = refused.value.args[0]
    assert error.code() == KafkaError.POLICY_VIOLATION
    assert f"max.broker.partitions={BROKER_BUDGET}" in error.str()
    assert "broker " in error.str()
    assert topic not in admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics


@pytest.fixture
def three_balanced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(
        tmp_path_factory.mktemp("balance"), 3, racks=["a", "b", "c"],
        overrides={"leader.imbalance.check.interval.seconds": "2"},
    )
    try:
        yield c
    finally:
        c.stop()


def test_leadership_returns_to_the_preferred_replicas_after_a_restart(three_balanced: ClusterProcesses) -> None:
    cluster = three_balanced
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("balance")
    create_topic(admin, topic, 6, 3)

    def preferred_leaders() -> dict[int, tuple[int, list[int], list[int]]] | None:
        layout = partitions(admin, topic)
        ok = all(leader == replicas[0] and len(isr) == 3 for leader, replicas, isr in layout.values())
        return layout if ok else None

    wait_until("preferred leaders at start", preferred_leaders, cluster)
    cluster.terminate(2)
    wait_until("node 2 leads nothing", lambda: all(v[0] != 2 for v in partitions(admin, topic).values()), cluster)
    cluster.restart(2)
    back = time.monotonic()
    wait_until("preferred leaders again", preferred_leaders, cluster, timeout_s=45)
    assert time.monotonic() - back < 45
