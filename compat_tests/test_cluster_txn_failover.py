"""Transactions across a data-partition leader's crash, checked with confluent-kafka.

What users rely on (issue 12): a transactional producer committing transactions that span
every partition keeps committing when the leader of one of them is SIGKILLed and later
restarted - it never fails fatally (librdkafka's INVALID_TXN_STATE after a commit that timed
out while the coordinator could not deliver its markers); a read_committed consumer then
reads every committed message exactly once and nothing of an aborted transaction. The new
leader (a former follower) must know the producer's sequences (its producer state kept as it
replicated), and the coordinator must deliver the markers to whoever leads each partition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from compat_tests.conftest import unique_topic
from compat_tests.test_cluster_basics import create_topic, partitions, start_cluster, wait_until
from compat_tests.test_cluster_groups import consumer, drain, txn_coordinator
from kafkapy.testing.cluster import ClusterProcesses

pytestmark = pytest.mark.timeout(420)

N_PARTITIONS = 3
PER_TXN = 6


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(tmp_path_factory.mktemp("txn-failover"), 3)
    try:
        yield c
    finally:
        c.stop()


class TxnLoop:
    """Commits transactions of PER_TXN messages over every partition in a thread; aborts
    when librdkafka says the transaction must be, stops at a fatal error."""

    def __init__(self, bootstrap: str, topic: str, tid: str) -> None:
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "transactional.id": tid,
            "transaction.timeout.ms": 60_000, "topic.metadata.refresh.interval.ms": 1000,
        })
        self.producer.init_transactions(60)
        self.topic = topic
        self.committed: list[bytes] = []
        self.aborted: list[bytes] = []
        self.commit_times: list[float] = []
        self.errors: list[str] = []
        self.fatal: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            values = [f"t{n}-{i}".encode() for i in range(PER_TXN)]
            n += 1
            try:
                self.producer.begin_transaction()
                for i, v in enumerate(values):
                    self.producer.produce(self.topic, v, partition=i % N_PARTITIONS)
                self._commit()
                self.committed += values
                self.commit_times.append(time.monotonic())
            except KafkaException as exc:
                err = exc.args[0]
                self.errors.append(str(err))
                if err.fatal():
                    self.fatal = str(err)
                    return
                if not self._abort():
                    return
                self.aborted += values

    def _commit(self) -> None:
        """commit_transaction, retried while librdkafka reports a retriable error (what its
        documentation asks applications to do)."""
        for _ in range(20):
            try:
                self.producer.commit_transaction(30)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable():
                    raise
                self.errors.append(f"retried commit: {exc.args[0]}")
        raise KafkaException(f"commit not done after 20 retries: {self.errors[-1]}")

    def _abort(self) -> bool:
        for _ in range(20):
            try:
                self.producer.abort_transaction(30)
                return True
            except KafkaException as exc:
                self.errors.append(f"abort: {exc.args[0]}")
                if exc.args[0].fatal():
                    self.fatal = str(exc.args[0])
                    return False
        self.fatal = "abort not done after 20 tries"
        return False

    def commits_after(self, t: float) -> int:
        return sum(1 for c in self.commit_times if c > t)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(180)
        assert not self._thread.is_alive(), "the transaction loop is stuck"


def test_transactions_go_on_across_a_data_leader_crash_and_restart(cluster: ClusterProcesses) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("txn-fo")
    create_topic(admin, topic, N_PARTITIONS, 3, {"min.insync.replicas": "2"})

    def leaders() -> dict[int, int] | None:
        found = {p: leader for p, (leader, _, _) in partitions(admin, topic).items()}
        return found if all(leader > 0 for leader in found.values()) else None

    wait_until("the topic's partitions led", leaders, cluster)
    tid = unique_topic("tx")
    loop = TxnLoop(cluster.bootstrap, topic, tid)
    try:
        wait_until("transactions before the crash", lambda: len(loop.commit_times) >= 10 or loop.fatal,
                   cluster)
        coordinator = txn_coordinator(cluster, tid)
        led = leaders() or {}
        victim = next((leader for leader in led.values() if leader != coordinator), None)
        assert victim is not None, f"every partition led by the coordinator {coordinator}: {led}"
        cluster.kill(victim)
        killed_at = time.monotonic()
        wait_until("transactions after the crash",
                   lambda: loop.commits_after(killed_at) >= 10 or loop.fatal, cluster, timeout_s=120)
        cluster.restart(victim)  # it comes back as a follower and catches up
        restarted_at = time.monotonic()
        wait_until("transactions after the restart",
                   lambda: loop.commits_after(restarted_at) >= 10 or loop.fatal, cluster,
                   timeout_s=120)
    finally:
        loop.stop()
    assert loop.fatal is None, f"fatal producer error: {loop.fatal} (errors: {loop.errors[-5:]})"

    reader = consumer(cluster.bootstrap, unique_topic("rc"), **{"isolation.level": "read_committed"})
    reader.assign([TopicPartition(topic, p, 0) for p in range(N_PARTITIONS)])
    seen = drain(reader, quiet_s=5)
    reader.close()
    assert len(seen) == len(set(seen)), "a committed message was read twice"
    assert sorted(seen) == sorted(loop.committed)
    assert not set(seen) & set(loop.aborted)
