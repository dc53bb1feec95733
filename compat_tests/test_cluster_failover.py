"""Leader failover under load in a three-node cluster, checked with confluent-kafka.

What users rely on (issue: cluster mode): with acks=all and idempotence, killing (SIGKILL) the
leader of a partition while producing loses no acknowledged message and duplicates none; each
key's messages stay in the order they were produced; a consumer keeps consuming across the kill;
the killed node, restarted on its data, catches up and rejoins every ISR. The same holds when
every listener - clients', inter-broker and controller - is SASL_SSL (SCRAM-SHA-512, mutual TLS).
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

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

N_MESSAGES = 3000
N_KEYS = 30
N_PARTITIONS = 6


@pytest.fixture(params=["PLAINTEXT", "SASL_SSL"])
def cluster(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[ClusterProcesses]:
    c = start_cluster(tmp_path_factory.mktemp("failover"), 3, security=request.param)
    try:
        yield c
    finally:
        c.stop()


class TailingConsumer:
    """A consumer on every partition (manual assignment), polling in a thread until stopped."""

    def __init__(self, bootstrap: str, topic: str, client: dict[str, str]) -> None:
        self.consumer = Consumer({
            **client, "bootstrap.servers": bootstrap, "group.id": unique_topic("tail"),
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "topic.metadata.refresh.interval.ms": 1000,
        })
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(N_PARTITIONS)])
        self.values: list[tuple[float, bytes]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.2)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.fatal():  # transport errors while a node is down are expected
                        self.errors.append(str(err))
                    continue
                self.values.append((time.monotonic(), msg.value() or b""))
        finally:
            self.consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def read_all(bootstrap: str, topic: str, cluster: ClusterProcesses) -> dict[int, list[bytes]]:
    """Every message of every partition up to its high watermark, per partition in offset order."""
    consumer = Consumer({
        **cluster.client_config, "bootstrap.servers": bootstrap, "group.id": unique_topic("verify"),
        "enable.auto.commit": False, "auto.offset.reset": "earliest",
    })
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(N_PARTITIONS)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(N_PARTITIONS)])
        got: dict[int, list[bytes]] = {p: [] for p in range(N_PARTITIONS)}
        deadline = time.monotonic() + 90
        while any(len(got[p]) < ends[p] for p in ends) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            got[msg.partition()].append(msg.value() or b"")
        missing = {p: ends[p] - len(got[p]) for p in ends if len(got[p]) < ends[p]}
        assert not missing, f"could not read back to the high watermark: {missing}\n{cluster.logs()}"
        return got
    finally:
        consumer.close()


def test_leader_kill_while_producing_loses_no_acknowledged_message(cluster: ClusterProcesses) -> None:
    admin = AdminClient({**cluster.client_config, "bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("failover")
    create_topic(admin, topic, N_PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_until(
        "all partitions led and fully in sync",
        lambda: all(leader > 0 and len(isr) == 3 for leader, _, isr in partitions(admin, topic).values()),
        cluster,
    )
    tail = TailingConsumer(cluster.bootstrap, topic, cluster.client_config)
    producer = Producer({
        **cluster.client_config, "bootstrap.servers": cluster.bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "message.timeout.ms": 90_000, "topic.metadata.refresh.interval.ms": 1000,
    })
    acked: list[bytes] = []
    failed: list[tuple[bytes, str]] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        value = msg.value() or b""
        if err is None:
            acked.append(value)
        else:
            failed.append((value, str(err)))

    per_key = defaultdict(int)
    victim = 0
    killed_at = 0.0
    try:
        for i in range(N_MESSAGES):
            key = f"key-{i % N_KEYS:02d}"
            value = f"{key}:{per_key[key]:05d}".encode()
            per_key[key] += 1
            while True:
                try:
                    producer.produce(topic, key=key.encode(), value=value, on_delivery=report)
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
            if i % 100 == 99:
                time.sleep(0.05)  # spread the load over a few seconds so the kill lands mid-stream
            if i == N_MESSAGES // 3:  # messages are in flight: the kill interrupts them
                victim = partitions(admin, topic)[0][0]
                cluster.kill(victim)
                killed_at = time.monotonic()
        remaining = producer.flush(120)
    finally:
        tail.stop()
    assert remaining == 0, f"{remaining} messages never got a delivery report\n{cluster.logs()}"
    assert not failed, f"{len(failed)} messages failed, first: {failed[:3]}\n{cluster.logs()}"
    assert len(acked) == N_MESSAGES

    # the tailing consumer kept going across the kill
    after_kill = [v for t, v in tail.values if t > killed_at]
    assert after_kill, f"the consumer received nothing after the leader was killed\n{cluster.logs()}"
    assert not tail.errors, tail.errors[:5]

    survivors = [i for i in cluster.nodes if i != victim]
    stored = read_all(cluster.bootstrap_of(*survivors), topic, cluster)
    seen: dict[str, list[int]] = defaultdict(list)
    all_values: list[bytes] = []
    for values in stored.values():
        for value in values:
            all_values.append(value)
            key, seq = value.decode().split(":")
            seen[key].append(int(seq))
    assert sorted(all_values) == sorted(acked), "stored messages differ from the acknowledged ones (loss or duplicates)"
    for key, seqs in seen.items():
        assert seqs == sorted(seqs), f"{key}: messages out of produce order"

    # the killed node comes back on its data, catches up and rejoins every ISR
    cluster.restart(victim)
    wait_until(
        f"node {victim} back in every ISR",
        lambda: all(victim in isr for _, _, isr in partitions(admin, topic).values()),
        cluster,
        timeout_s=90,
    )
    after_restart = read_all(cluster.bootstrap_of(victim), topic, cluster)
    assert sorted(v for vs in after_restart.values() for v in vs) == sorted(acked)
