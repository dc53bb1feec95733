"""Broker outages that leave too few replicas, checked with confluent-kafka.

Topology: four brokers, the first three also the controller quorum - so two brokers (one voter,
one broker-only node) can be down while the quorum still decides, which is the only way a
client can see NOT_ENOUGH_REPLICAS rather than a stalled cluster.

What users rely on: with min.insync.replicas=2, a partition left with one in-sync replica
refuses acks=all writes with NOT_ENOUGH_REPLICAS (the data is not written unsafely), while
acks=1 still works wherever a leader is alive; with unclean leader election off, a partition
whose whole ISR is down has no leader - an out-of-sync replica coming back does not take over
(that would lose acknowledged data) - until an ISR member returns.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from compat_tests.conftest import unique_topic
from compat_tests.test_cluster_basics import (  # noqa: F401  (the autouse fixture)
    _cluster_logs_on_failure,
    create_topic,
    partitions,
    start_cluster,
    wait_until,
)
from kafkapy.testing.cluster import ClusterProcesses

pytestmark = pytest.mark.timeout(300)

#: the two nodes the outage takes down: one voter and the broker-only node (quorum 1, 2 stays)
DOWN = (3, 4)


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(tmp_path_factory.mktemp("outage"), 4, voters=3)
    try:
        yield c
    finally:
        c.stop()


def in_sync(admin: AdminClient, topic: str, rf: int) -> dict[int, tuple[int, list[int], list[int]]] | None:
    """The partitions once every one has a leader and `rf` in-sync replicas, else None."""
    parts = partitions(admin, topic)
    return parts if all(leader > 0 and len(isr) == rf for leader, _, isr in parts.values()) else None


def produce_one(bootstrap: str, topic: str, partition: int, acks: str) -> KafkaError | None:
    """Produce one message without retries; the delivery error (None = acknowledged)."""
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "retries": 0,
        "message.timeout.ms": 15_000, "enable.idempotence": False,
    })
    result: list[KafkaError | None] = []

    def report(err: KafkaError | None, _msg: Message) -> None:
        result.append(err)

    producer.produce(topic, value=b"x", partition=partition, on_delivery=report)
    assert producer.flush(30) == 0
    return result[0]


def test_two_brokers_down_refuse_acks_all_but_take_acks_1(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("min-isr")
    create_topic(admin, topic, 8, 3, {"min.insync.replicas": "2"})
    parts = wait_until(
        "8 partitions fully in sync",
        lambda: in_sync(admin, topic, 3),
        cluster,
    )
    alone = [p for p, (_, replicas, _) in parts.items() if set(DOWN) <= set(replicas)]
    pair = [p for p, (_, replicas, _) in parts.items() if len(set(DOWN) & set(replicas)) == 1]
    assert alone, f"no partition has both {DOWN} as replicas: {parts}"
    assert pair, f"no partition keeps two live replicas: {parts}"
    for node in DOWN:
        cluster.kill(node)
    survivors = cluster.bootstrap_of(1, 2)
    admin = AdminClient({"bootstrap.servers": survivors})

    def shrunk() -> bool:
        now = partitions(admin, topic)
        return all(
            now[p][0] not in DOWN and now[p][0] > 0 and not set(DOWN) & set(now[p][2]) for p in now
        )

    wait_until("the dead brokers out of every ISR, live leaders everywhere", shrunk, cluster)
    for p in alone:
        err = produce_one(survivors, topic, p, "all")
        assert err is not None, f"partition {p} (ISR of one) acknowledged an acks=all write"
        assert err.code() == KafkaError.NOT_ENOUGH_REPLICAS, f"partition {p}: {err}"
        assert produce_one(survivors, topic, p, "1") is None, f"partition {p}: acks=1 refused"
    for p in pair:
        assert produce_one(survivors, topic, p, "all") is None, f"partition {p} has 2 in sync but refused acks=all"


def _isr_down_with_stale_replica(cluster: ClusterProcesses) -> tuple[AdminClient, str, int, int, int]:
    """A partition whose last ISR member (`last`) is down while its other replica (`first`) is
    out of date (it missed a write acknowledged by `last` alone); `first` is still down too.
    Returns (admin on the live nodes, topic, partition, first, last)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("unclean")
    create_topic(admin, topic, 4, 2)
    parts = wait_until(
        "4 partitions fully in sync",
        lambda: in_sync(admin, topic, 2),
        cluster,
    )
    # a partition whose two replicas can both go down without losing the quorum
    target = next(
        (p for p, (_, replicas, _) in parts.items() if 4 in replicas and sum(r <= 3 for r in replicas) == 1), None
    )
    assert target is not None, f"no partition on node 4 and one voter: {parts}"
    replicas = parts[target][1]
    first, last = replicas[0], replicas[1]
    assert produce_one(cluster.bootstrap, topic, target, "all") is None
    cluster.kill(first)
    live = [i for i in cluster.nodes if i != first]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(*[i for i in live if i != last])})
    wait_until(
        f"node {first} out of the ISR of partition {target}",
        lambda: partitions(admin, topic)[target][2] == [last] and partitions(admin, topic)[target][0] == last,
        cluster,
    )
    # written while `first` is down: `first` is now out of date
    assert produce_one(cluster.bootstrap_of(last), topic, target, "1") is None
    cluster.kill(last)
    wait_until(
        f"partition {target} leaderless",
        lambda: partitions(admin, topic)[target][0] in (-1, None),
        cluster,
    )
    return admin, topic, target, first, last


def test_no_unclean_leader_when_the_whole_isr_is_down(cluster: ClusterProcesses) -> None:
    admin, topic, target, first, last = _isr_down_with_stale_replica(cluster)
    cluster.restart(first)  # out of sync: must not become leader
    deadline = time.monotonic() + 8  # well over the session timeout and a few heartbeats
    while time.monotonic() < deadline:
        leader, _, isr = partitions(admin, topic)[target]
        assert leader in (-1, None), f"out-of-sync replica {leader} was elected (unclean election)"
        assert isr == [last], f"ISR changed to {isr} with the ISR member down"
        time.sleep(0.5)
    cluster.restart(last)
    wait_until(
        f"node {last} leading partition {target} again",
        lambda: partitions(admin, topic)[target][0] == last,
        cluster,
    )


def test_unclean_leader_election_when_the_topic_enables_it(cluster: ClusterProcesses) -> None:
    """`unclean.leader.election.enable=true` on the topic trades the write only `last` had for
    availability: the out-of-date replica leads alone and takes writes again."""
    admin, topic, target, first, _last = _isr_down_with_stale_replica(cluster)
    resource = ConfigResource(
        ResourceType.TOPIC, topic,
        incremental_configs=[ConfigEntry("unclean.leader.election.enable", "true",
                                         incremental_operation=AlterConfigOpType.SET)],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    cluster.restart(first)
    wait_until(
        f"out-of-date node {first} elected leader of partition {target} (unclean)",
        lambda: partitions(admin, topic)[target][0] == first and partitions(admin, topic)[target][2] == [first],
        cluster,
    )
    assert produce_one(cluster.bootstrap_of(first), topic, target, "all") is None
