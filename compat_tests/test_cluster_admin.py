"""Cluster admin by real clients against a subprocess cluster: leader elections, DeleteRecords,
partition reassignment.

Four nodes, three of them Raft voters (node 4 is broker-only), so two brokers can be down at
once while the controller quorum stays up - which an unclean election needs.

What users rely on:
- confluent-kafka's `AdminClient.elect_leaders`: PREFERRED moves leadership back to the first
  replica once it is in sync again (ELECTION_NOT_NEEDED when it leads already,
  PREFERRED_LEADER_NOT_AVAILABLE while it is down); UNCLEAN gives a partition whose whole ISR
  is down a live out-of-sync replica as leader (ELIGIBLE_LEADERS_NOT_AVAILABLE while none is
  live), and the partition takes writes again.
- kafka-python's `elect_leaders` gets the same per-partition answers; its `delete_records`: a broker that does not lead the partition refuses
  (NotLeaderForPartitionError); on the leader it answers once the followers moved too, so after
  the leader is killed (SIGKILL) the new leader's low watermark is still the deleted-up-to
  offset and a consumer from the earliest offset starts there. `describe_log_dirs` lists on
  each broker only the replicas it hosts.
- The controller's limit of 10,000 new partitions per request (Kafka's): a CreateTopics over it
  fails with POLICY_VIOLATION, a CreatePartitions with INVALID_PARTITIONS, nothing is created,
  and the active controller logs the refusal.
- kafka-python's `alter_partition_reassignments` / `list_partition_reassignments`: replacing a
  partition's replicas copies every acknowledged record to the new ones before the old ones
  leave; a move that cannot finish is listed until it is cancelled.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    NewPartitions,
    NewTopic,
)
from confluent_kafka.error import KafkaError

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


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(tmp_path_factory.mktemp("admin"), 4, voters=3)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(autouse=True)
def _all_nodes_up(cluster: ClusterProcesses) -> None:
    """A test starts with every node running (a previous one may have killed some)."""
    for node_id, node in cluster.nodes.items():
        if not node.is_running():
            cluster.restart(node_id)


def create_assigned(admin: AdminClient, topic: str, assignment: list[list[int]]) -> None:
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=len(assignment), replica_assignment=assignment)], operation_timeout=ADMIN_TIMEOUT_S
    )
    futures[topic].result(timeout=ADMIN_TIMEOUT_S)


def elect(admin: AdminClient, election_type: Any, *tps: TopicPartition) -> dict[tuple[str, int], int]:
    """{(topic, partition): error code} of one ElectLeaders call (0 = elected)."""
    # No timeout keywords: confluent-kafka 2.16's binding raises SystemError with any
    # ("more argument specifiers than keyword list entries"); the client's defaults apply.
    result = admin.elect_leaders(election_type, list(tps)).result(timeout=90)
    out: dict[tuple[str, int], int] = {}
    for tp, error in result.items():
        code = 0
        if error is not None:
            err = error.args[0] if isinstance(error, KafkaException) else error
            code = err.code()
        out[(tp.topic, tp.partition)] = code
    return out


def test_preferred_and_unclean_elections_with_confluent_kafka(cluster: ClusterProcesses) -> None:
    from confluent_kafka import ElectionType

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    pref, unc = unique_topic("pref"), unique_topic("unc")
    create_assigned(admin, pref, [[1, 2, 3]])
    create_assigned(admin, unc, [[4, 3]])
    wait_until(
        "both topics led by their first replica and in sync",
        lambda: partitions(admin, pref)[0] == (1, [1, 2, 3], [1, 2, 3])
        and partitions(admin, unc)[0][0] == 4
        and sorted(partitions(admin, unc)[0][2]) == [3, 4],
        cluster,
    )
    p0, u0 = TopicPartition(pref, 0), TopicPartition(unc, 0)
    assert elect(admin, ElectionType.PREFERRED, p0, u0, TopicPartition(pref, 7)) == {
        (pref, 0): KafkaError.ELECTION_NOT_NEEDED,
        (unc, 0): KafkaError.ELECTION_NOT_NEEDED,
        (pref, 7): KafkaError.UNKNOWN_TOPIC_OR_PART,
    }

    # PREFERRED: the first replica crashes, leadership moves; it cannot come back while down.
    cluster.kill(1)
    wait_until("pref-0 led by 2 or 3", lambda: partitions(admin, pref)[0][0] in (2, 3), cluster)
    assert elect(admin, ElectionType.PREFERRED, p0) == {
        (pref, 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    }
    cluster.restart(1)
    wait_until("1 back in pref-0's ISR", lambda: 1 in partitions(admin, pref)[0][2], cluster)
    assert partitions(admin, pref)[0][0] != 1  # nothing moved it back on its own
    assert elect(admin, ElectionType.PREFERRED, p0) == {(pref, 0): 0}
    wait_until("pref-0 led by 1 again", lambda: partitions(admin, pref)[0][0] == 1, cluster)
    assert elect(admin, ElectionType.PREFERRED, p0) == {(pref, 0): KafkaError.ELECTION_NOT_NEEDED}

    # UNCLEAN: 3 falls out of the ISR, then the only ISR member (4) dies.
    cluster.kill(3)
    wait_until("unc-0's ISR is just 4", lambda: partitions(admin, unc)[0][2] == [4], cluster)
    cluster.kill(4)
    wait_until("unc-0 has no leader", lambda: partitions(admin, unc)[0][0] == -1, cluster)
    assert elect(admin, ElectionType.UNCLEAN, u0) == {
        (unc, 0): KafkaError.ELIGIBLE_LEADERS_NOT_AVAILABLE
    }
    cluster.restart(3)
    assert partitions(admin, unc)[0][0] == -1  # out of sync: no clean election brings it back
    assert elect(admin, ElectionType.PREFERRED, u0) == {
        (unc, 0): KafkaError.PREFERRED_LEADER_NOT_AVAILABLE
    }
    assert elect(admin, ElectionType.UNCLEAN, u0) == {(unc, 0): 0}
    wait_until(
        "unc-0 led by 3 alone", lambda: partitions(admin, unc)[0][0::2] == (3, [3]), cluster
    )
    assert elect(admin, ElectionType.UNCLEAN, u0) == {(unc, 0): KafkaError.ELECTION_NOT_NEEDED}
    producer = Producer({"bootstrap.servers": cluster.bootstrap_of(1, 2, 3), "acks": "all"})
    delivered: list[KafkaError | None] = []
    producer.produce(unc, b"after the unclean election", partition=0, on_delivery=lambda e, _m: delivered.append(e))
    assert producer.flush(30) == 0
    assert delivered == [None]


def test_delete_records_survives_leader_failover_with_kafka_python(cluster: ClusterProcesses) -> None:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import NotLeaderForPartitionError

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("deleted")
    create_assigned(admin, topic, [[1, 2, 4]])
    solo = unique_topic("solo")
    create_assigned(admin, solo, [[1], [2], [3], [4]])
    wait_until("in sync", lambda: sorted(partitions(admin, topic)[0][2]) == [1, 2, 4], cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(20):
        producer.produce(topic, b"m%d" % i, partition=0)
    assert producer.flush(30) == 0

    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    try:
        tp = KTopicPartition(topic, 0)
        with pytest.raises(NotLeaderForPartitionError):
            kadmin.delete_records({tp: 5}, timeout_ms=10_000, partition_leader_id=2)
        result = kadmin.delete_records({tp: 12}, timeout_ms=20_000)
        assert result[tp]["low_watermark"] == 12

        dirs = kadmin.describe_log_dirs()
        assert dirs, "no DescribeLogDirs answer"

        # kafka-python's elect_leaders (sent to the controller id from Metadata, forwarded)
        answer = kadmin.elect_leaders(0, {topic: [0, 3]}, timeout_ms=20_000, raise_errors=False)
        codes = {
            p.partition_id: p.error_code
            for r in answer.replica_election_results
            for p in r.partition_result
        }
        assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 3: KafkaError.UNKNOWN_TOPIC_OR_PART}
    finally:
        kadmin.close()
    for node_id in (1, 2, 3, 4):
        hosted = describe_hosted(cluster, node_id, solo)
        assert hosted == {node_id - 1}, f"broker {node_id} lists {solo} partitions {hosted}"

    cluster.kill(1)  # the leader, right after the answer
    wait_until("a new leader", lambda: partitions(admin, topic)[0][0] in (2, 4), cluster)
    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_of(2, 3, 4), "group.id": unique_topic("g"),
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    try:
        # The consumer's first Metadata may come from a node that has not yet applied the fence
        # and still names node 1 the leader; when a newer answer drops node 1, librdkafka destroys
        # that broker handle and fails the request on it with _DESTROY_BROKER. Retry, as a client
        # application does; what the test holds to is the answer once the new leader serves it.
        low, high = wait_until(
            "the watermarks from the new leader",
            lambda: consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10),
            cluster,
        )
        assert (low, high) == (12, 20)
        consumer.assign([TopicPartition(topic, 0, 0)])  # below the log start: reset to earliest
        first = None
        for _ in range(100):
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                first = msg
                break
        assert first is not None, cluster.logs()
        assert (first.offset(), first.value()) == (12, b"m12")
    finally:
        consumer.close()


def describe_hosted(cluster: ClusterProcesses, node_id: int, topic: str) -> set[int]:
    """Partitions of `topic` that DescribeLogDirs on `node_id` lists (kafka-python, v1+)."""
    from kafka import KafkaAdminClient

    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_of(node_id), request_timeout_ms=30_000)
    try:
        answers = kadmin.describe_log_dirs(brokers=[node_id])
    finally:
        kadmin.close()
    found: set[int] = set()
    for answer in answers if isinstance(answers, list) else [answers]:
        found |= _partitions_in(answer, topic)
    return found


def _partitions_in(answer: Any, topic: str) -> set[int]:
    """Walk kafka-python's DescribeLogDirs answer (dicts or response objects) for `topic`."""
    data = answer.to_object() if hasattr(answer, "to_object") else answer
    out: set[int] = set()
    stack: list[Any] = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            name = item.get("name", item.get("topic"))
            if name == topic and "partitions" in item:
                for p in item["partitions"]:
                    out.add(p["partition_index"] if isinstance(p, dict) else p[0])
                continue
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return out


def test_partition_reassignment_with_kafka_python(cluster: ClusterProcesses) -> None:
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.errors import NoReassignmentInProgressError

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("moved")
    create_assigned(admin, topic, [[1, 2]])
    wait_until("in sync", lambda: sorted(partitions(admin, topic)[0][2]) == [1, 2], cluster)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(30):
        producer.produce(topic, b"m%d" % i, partition=0)
    assert producer.flush(30) == 0

    kadmin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap, request_timeout_ms=30_000)
    try:
        tp = KTopicPartition(topic, 0)
        # The leader (1) is replaced by 3: 3 copies the data and joins the ISR, then 1 leaves.
        assert kadmin.alter_partition_reassignments({tp: [2, 3]}) == {tp: None}
        wait_until(
            "the move to [2, 3] done",
            lambda: partitions(admin, topic)[0][1:] == ([2, 3], [2, 3])
            and partitions(admin, topic)[0][0] in (2, 3)
            and kadmin.list_partition_reassignments() == {},
            cluster,
        )
        # A target on a crashed broker (4, not a controller voter) stays in progress until
        # cancelled.
        cluster.kill(4)
        assert kadmin.alter_partition_reassignments({tp: [2, 3, 4]}) == {tp: None}
        ongoing = kadmin.list_partition_reassignments()
        assert ongoing == {tp: {"replicas": [2, 3, 4], "adding_replicas": [4], "removing_replicas": []}}
        assert kadmin.alter_partition_reassignments({tp: None}) == {tp: None}
        assert kadmin.list_partition_reassignments() == {}
        assert kadmin.alter_partition_reassignments({tp: None}) == {tp: NoReassignmentInProgressError}
    finally:
        kadmin.close()
    wait_until("back to [2, 3]", lambda: partitions(admin, topic)[0][1] == [2, 3], cluster)

    consumer = Consumer({
        "bootstrap.servers": cluster.bootstrap_of(1, 2, 3), "group.id": unique_topic("g"),
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes]] = []
        for _ in range(200):
            if len(got) == 30:
                break
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append((msg.offset(), msg.value() or b""))
        assert got == [(i, b"m%d" % i) for i in range(30)], cluster.logs()
    finally:
        consumer.close()


def test_partition_limit_per_request_with_confluent_kafka(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    huge, grown = unique_topic("huge"), unique_topic("grown")
    futures = admin.create_topics(
        [NewTopic(huge, num_partitions=10_001, replication_factor=1)],
        operation_timeout=ADMIN_TIMEOUT_S,
    )
    with pytest.raises(KafkaException) as refused:
        futures[huge].result(timeout=ADMIN_TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.POLICY_VIOLATION
    admin.create_topics([NewTopic(grown, num_partitions=1, replication_factor=1)])[grown].result(
        timeout=ADMIN_TIMEOUT_S
    )
    futures = admin.create_partitions(
        [NewPartitions(grown, 1 + 10_001)], operation_timeout=ADMIN_TIMEOUT_S
    )
    with pytest.raises(KafkaException) as refused:
        futures[grown].result(timeout=ADMIN_TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.INVALID_PARTITIONS
    # Metadata answers from any broker: one may apply the new topic a moment after the controller
    # answered CreateTopics (as on Kafka, metadata reaches brokers asynchronously).
    def listed() -> dict[str, Any] | None:
        found: dict[str, Any] = admin.list_topics(timeout=ADMIN_TIMEOUT_S).topics
        return found if grown in found else None

    topics = wait_until(f"{grown} in the metadata", listed, cluster)
    assert huge not in topics
    assert len(topics[grown].partitions) == 1
    logs = "".join(node.log_path.read_text() for node in cluster.nodes.values())
    assert f"refused CreateTopics of {huge}" in logs
    assert f"refused CreatePartitions of {grown}" in logs
