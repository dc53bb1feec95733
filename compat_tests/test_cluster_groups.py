"""Group and transaction coordinators in a three-node cluster, checked with confluent-kafka.

What users rely on (issue: cluster mode): a consumer group's committed offsets live in a
replicated `__consumer_offsets` partition, so when the broker coordinating the group is killed
(SIGKILL) the group moves to the new leader of that partition and a consumer resumes exactly at
the committed offsets - nothing committed is delivered again, nothing after the commit is lost;
a member that stays subscribed through the kill carries on with the new coordinator; commits
keep working there. A transactional producer whose partitions are led
by different brokers commits and aborts, and read_committed consumers see exactly the committed
data (markers reach every partition leader); when its transaction coordinator's broker is
killed it carries on with the new leader of its `__transaction_state` partition.

Skips (naming what is missing) only while a part of cluster mode is not in the tree at all.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from compat_tests.conftest import unique_topic
from compat_tests.test_cluster_basics import create_topic, partitions, start_cluster, wait_until
from kafkapy.cli.groups import KafkaWireClient
from kafkapy.coordinator.group import offsets_partition_for
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import FindCoordinatorRequest
from kafkapy.testing.cluster import TEST_OVERRIDES, ClusterProcesses

pytestmark = pytest.mark.timeout(300)

N_PARTITIONS = 3
N_MESSAGES = 300
COMMITTED = 150  # consumed and committed before the kill
TAIL = 30  # consumed after the commit but never committed
OFFSETS_PARTITIONS = int(TEST_OVERRIDES["offsets.topic.num.partitions"])


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(tmp_path_factory.mktemp("groups"), 3)
    try:
        yield c
    finally:
        c.stop()


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed: list[str] = []
    for i, v in enumerate(values):
        producer.produce(topic, v, key=str(i % 10).encode(),
                         on_delivery=lambda err, _m: failed.append(str(err)) if err else None)
    assert producer.flush(60) == 0
    assert not failed


def consumer(bootstrap: str, group: str, **extra: object) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
        "topic.metadata.refresh.interval.ms": 1000, **extra,
    })


def take(c: Consumer, count: int, timeout_s: float = 60) -> list[bytes]:
    """Exactly `count` messages (fails if they do not come in time)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < count and time.monotonic() < deadline:
        for msg in c.consume(count - len(got), timeout=0.5):
            if msg.error() is None:
                got.append(msg.value() or b"")
    assert len(got) == count, f"got {len(got)} of {count} messages"
    return got


def drain(c: Consumer, quiet_s: float = 3.0, timeout_s: float = 90) -> list[bytes]:
    """Everything until nothing has come for `quiet_s` (after at least one message)."""
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    last = time.monotonic()
    while time.monotonic() < deadline:
        batch = [m for m in c.consume(100, timeout=0.5) if m.error() is None]
        if batch:
            got.extend(m.value() or b"" for m in batch)
            last = time.monotonic()
        elif got and time.monotonic() - last > quiet_s:
            break
    return got


def group_coordinator(admin: AdminClient, group: str) -> int:
    described = admin.describe_consumer_groups([group], request_timeout=20)[group].result()
    return int(described.coordinator.id)


def test_group_resumes_at_its_commits_after_the_coordinator_is_killed(
    cluster: ClusterProcesses,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic, group = unique_topic("grp"), unique_topic("g")
    create_topic(admin, topic, N_PARTITIONS, 3, {"min.insync.replicas": "2"})
    wait_until("the topic led and in sync", lambda: all(
        leader > 0 and len(isr) == 3 for leader, _, isr in partitions(admin, topic).values()
    ), cluster)
    values = [f"m{i:04d}".encode() for i in range(N_MESSAGES)]
    produce(cluster.bootstrap, topic, values)

    first = consumer(cluster.bootstrap, group)
    first.subscribe([topic])
    committed = take(first, COMMITTED)
    first.commit(asynchronous=False)
    stored = first.committed([TopicPartition(topic, p) for p in range(N_PARTITIONS)], timeout=20)
    assert sum(max(tp.offset, 0) for tp in stored) == COMMITTED  # one member, every partition
    tail = take(first, TAIL)  # delivered, never committed
    first.close()
    # a second group on the same coordinator keeps its member through the kill
    live_group = same_partition_group(group)
    live = consumer(cluster.bootstrap, live_group)
    live.subscribe([topic])
    live_committed = take(live, COMMITTED)
    live.commit(asynchronous=False)

    wait_until("__consumer_offsets fully in sync", lambda: all(
        len(isr) == 3 for _, _, isr in partitions(admin, "__consumer_offsets").values()
    ), cluster)
    victim = group_coordinator(admin, group)
    cluster.kill(victim)
    survivors = [i for i in cluster.nodes if i != victim]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(*survivors)})
    moved = wait_until("the group's new coordinator", lambda: (
        c if (c := group_coordinator(admin, group)) != victim else None
    ), cluster)
    assert moved in survivors

    second = consumer(cluster.bootstrap_of(*survivors), group)
    second.subscribe([topic])
    rest = drain(second)
    assert not set(committed) & set(rest), "committed messages were delivered again"
    assert set(tail) <= set(rest), "the uncommitted tail was lost"
    assert sorted(rest) == sorted(set(values) - set(committed))
    assert len(rest) == len(set(rest))  # no duplicates either
    second.commit(asynchronous=False)  # commits work at the new coordinator
    done = second.committed([TopicPartition(topic, p) for p in range(N_PARTITIONS)], timeout=20)
    assert sum(tp.offset for tp in done) == N_MESSAGES
    second.close()

    # the live member carries on at the new coordinator: the rest, nothing committed again
    after = drain(live)
    assert not set(live_committed) & set(after), "committed messages were delivered again"
    assert set(live_committed) | set(after) == set(values)
    wait_until("a commit at the new coordinator", lambda: commit_ok(live), cluster)
    done = live.committed([TopicPartition(topic, p) for p in range(N_PARTITIONS)], timeout=20)
    assert sum(tp.offset for tp in done) == N_MESSAGES
    live.close()


def test_no_broker_names_a_killed_coordinator_while_it_awaits_its_fence(
    cluster: ClusterProcesses,
) -> None:
    """librdkafka's admin client caches the coordinator FindCoordinator names and, while that
    broker is down, waits for it instead of asking again (describe_consumer_groups then timed
    out for a minute after a coordinator's SIGKILL, and librdkafka 2.16 can abort in that path).
    So between a coordinator's crash and its fence no survivor that saw its connection fail may
    name it: it answers COORDINATOR_NOT_AVAILABLE, which clients retry. The active controller is
    paused here, so that window lasts as long as the test needs instead of milliseconds; after
    the fence the survivors name the new coordinator, and a client finds the group there.
    The failing answer is checked on the wire, not through librdkafka, whose timed-out coordinator
    requests can abort the test process."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("fc")
    create_topic(admin, topic, 1, 3)
    wait_until("__consumer_offsets", lambda: group_coordinator(admin, unique_topic("probe")), cluster)
    controller = int(admin.describe_cluster(request_timeout=20).result().controller.id)
    leaders = {p: leader for p, (leader, _, _) in partitions(admin, "__consumer_offsets").items()}
    group = next(g for i in range(1000) if leaders[
        offsets_partition_for(g := f"{topic}-g{i}", OFFSETS_PARTITIONS)] not in (controller, -1))
    committer = consumer(cluster.bootstrap, group)
    committer.commit(offsets=[TopicPartition(topic, 0, 7)], asynchronous=False)
    committer.close()
    victim = group_coordinator(admin, group)
    (witness,) = (i for i in cluster.nodes if i not in (victim, controller))

    cluster.pause(controller)  # no fencing while it sleeps
    try:
        cluster.kill(victim)
        error, named = find_coordinator(cluster.bootstrap_of(witness), group, key_type=0)
        assert (error, named) == (ErrorCode.COORDINATOR_NOT_AVAILABLE, -1), \
            f"node {witness} named {named} (error {error}) right after coordinator {victim} died"
    finally:
        cluster.resume(controller)
    moved = wait_until("the new coordinator", lambda: (
        n if (a := find_coordinator(cluster.bootstrap_of(witness), group, key_type=0))[0] == 0
        and (n := a[1]) != victim else None
    ), cluster)
    assert moved in (controller, witness)
    fresh = AdminClient({"bootstrap.servers": cluster.bootstrap_of(controller, witness)})
    assert group_coordinator(fresh, group) == moved


def same_partition_group(group: str) -> str:
    """Another group id in the same `__consumer_offsets` partition (so the same coordinator)."""
    wanted = offsets_partition_for(group, OFFSETS_PARTITIONS)
    return next(f"{group}-live{i}" for i in range(10_000)
                if offsets_partition_for(f"{group}-live{i}", OFFSETS_PARTITIONS) == wanted)


def commit_ok(c: Consumer) -> bool:
    """A synchronous commit of the consumer's positions; False if it failed (e.g. while the
    client still looks for the coordinator), so the caller retries as applications do."""
    try:
        c.commit(asynchronous=False)
    except KafkaException:
        return False
    return True


def test_transactions_across_partition_leaders_show_only_committed_data(
    cluster: ClusterProcesses,
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("txn")
    create_topic(admin, topic, N_PARTITIONS, 3, {"min.insync.replicas": "2"})
    def led_by() -> set[int] | None:
        found = [leader for leader, _, _ in partitions(admin, topic).values()]
        return set(found) if all(leader > 0 for leader in found) else None

    leaders = wait_until("the topic's partitions led", led_by, cluster)
    tid = unique_topic("tx")
    producer = Producer({
        "bootstrap.servers": cluster.bootstrap, "transactional.id": tid,
        "transaction.timeout.ms": 60_000,
    })
    producer.init_transactions(60)
    expected: list[bytes] = []
    for round_, (count, commit) in enumerate([(50, True), (20, False), (30, True)]):
        producer.begin_transaction()
        batch = [f"r{round_}-{i}".encode() for i in range(count)]
        for i, v in enumerate(batch):
            producer.produce(topic, v, partition=i % N_PARTITIONS)
        if commit:
            producer.commit_transaction(60)
            expected += batch
        else:
            assert producer.flush(60) == 0  # in the log first, so the abort must mark it
            producer.abort_transaction(60)
    assert len(leaders) >= 2, "markers should have had to reach other brokers"

    reader = consumer(cluster.bootstrap, unique_topic("rc"), **{"isolation.level": "read_committed"})
    reader.assign([TopicPartition(topic, p, 0) for p in range(N_PARTITIONS)])
    seen = drain(reader)
    reader.close()
    assert sorted(seen) == sorted(expected)
    everything = consumer(cluster.bootstrap, unique_topic("ru"),
                          **{"isolation.level": "read_uncommitted"})
    everything.assign([TopicPartition(topic, p, 0) for p in range(N_PARTITIONS)])
    raw = drain(everything)
    everything.close()
    assert len(raw) == 100  # the aborted round is in the log, hidden only from read_committed

    # the transaction coordinator's broker dies: the producer carries on with the new leader
    # of its __transaction_state partition, which loaded the id's state from its replica
    victim = txn_coordinator(cluster, tid)
    cluster.kill(victim)
    survivors = cluster.bootstrap_of(*[i for i in cluster.nodes if i != victim])
    wait_until("a new transaction coordinator",
               lambda: txn_coordinator(cluster, tid, survivors) not in (victim, -1), cluster)
    producer.begin_transaction()
    last = [f"r3-{i}".encode() for i in range(15)]
    for i, v in enumerate(last):
        producer.produce(topic, v, partition=i % N_PARTITIONS)
    wait_until("the commit at the new coordinator", lambda: txn_commit_ok(producer), cluster,
               timeout_s=120)
    reader = consumer(survivors, unique_topic("rc2"), **{"isolation.level": "read_committed"})
    reader.assign([TopicPartition(topic, p, 0) for p in range(N_PARTITIONS)])
    seen = drain(reader)
    reader.close()
    assert sorted(seen) == sorted(expected + last)


def find_coordinator(address: str, key: str, key_type: int) -> tuple[int, int]:
    """(error code, node id) of one broker's FindCoordinator answer."""
    with KafkaWireClient(address, timeout_s=10) as client:
        r = client.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
            key_type=key_type, coordinator_keys=[key]), cap=4)
    return int(r.coordinators[0].error_code), int(r.coordinators[0].node_id)


def txn_coordinator(cluster: ClusterProcesses, tid: str, bootstrap: str | None = None) -> int:
    """FindCoordinator (transaction key) through any live broker; -1 while there is none."""
    for address in (bootstrap or cluster.bootstrap).split(","):
        try:
            with KafkaWireClient(address, timeout_s=10) as client:
                r = client.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(
                    key_type=1, coordinator_keys=[tid]), cap=4)
        except Exception:  # that broker is down: ask the next
            continue
        found = r.coordinators[0]
        return int(found.node_id) if found.error_code == 0 else -1
    return -1


def txn_commit_ok(producer: Producer) -> bool:
    """commit_transaction, retried on the retriable errors librdkafka reports while it finds
    the new coordinator (what its documentation asks applications to do)."""
    try:
        producer.commit_transaction(30)
    except KafkaException as exc:
        if exc.args[0].retriable():
            return False
        raise
    return True
