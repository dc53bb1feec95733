"""Broker membership under crashes and controller fail-overs, on a real 3-node cluster.

What users rely on (issue 12's randomized fault runs):
- a broker SIGKILLed and restarted on its own data dir takes its place again at once: the
  controller must not refuse it as a duplicate until the dead process's session lapses (which a
  controller fail-over restarts), leaving its partitions one replica short meanwhile;
- a crashed broker (SIGKILL) is fenced as soon as its ports refuse connections, not after its
  session timeout, so its partitions get new leaders within seconds; a paused one (SIGSTOP:
  no TCP signal) is not fenced before its session expires;
- a rolling restart (SIGTERM each node in turn) fails no acks=all write: controlled shutdown
  moves leadership away before a process exits;
- a node restarted while the quorum is down serves no Metadata from the empty image it
  replayed: clients ask another broker instead of caching "unknown topic";
- a leader that was paused (SIGSTOP) for longer than a session, and so may have been fenced
  and replaced, refuses acks=1 writes when it resumes instead of accepting writes that the new
  leader's log will truncate (the leader lease, `kafkapy.leader.lease.enable`).

Each test starts its own cluster (3 combined nodes) and ends it.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import trio
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.conftest import unique_topic
from compat_tests.test_cluster_basics import (  # noqa: F401  (the autouse fixture)
    ADMIN_TIMEOUT_S,
    _cluster_logs_on_failure,
    create_topic,
    partitions,
    start_cluster,
    wait_until,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import MetadataRequest, ProduceRequest
from kafkapy.protocol.records import Record, build_batch
from kafkapy.server.cluster.peer import PeerClient, PeerError
from kafkapy.testing.cluster import TEST_OVERRIDES, ClusterProcesses

pytestmark = pytest.mark.timeout(240)

#: far longer than a restart takes, so a refused registration waits it out (and fails the test)
LONG_SESSION_MS = "120000"
#: bounds for the waits below: generous for a loaded machine, far below LONG_SESSION_MS
JOIN_TIMEOUT_S = 45.0


def _log_since_last_start(cluster: ClusterProcesses, node_id: int) -> str:
    text = cluster.nodes[node_id].log_path.read_text(encoding="utf-8", errors="replace")
    return text.rsplit("--- start ", 1)[-1]


def _active_controller(cluster: ClusterProcesses) -> int:
    """The node whose log last said it became the active controller."""
    latest: tuple[str, int] | None = None
    for node_id in cluster.live():
        for line in cluster.nodes[node_id].log_path.read_text(encoding="utf-8", errors="replace").splitlines():
            if re.search(r"node \d+ is the active controller", line):
                stamp = line[:23]
                if latest is None or stamp >= latest[0]:
                    latest = (stamp, node_id)
    assert latest is not None, cluster.logs()
    return latest[1]


@pytest.fixture
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(
        tmp_path_factory.mktemp("membership"),
        3,
        overrides={"broker.session.timeout.ms": LONG_SESSION_MS, "min.insync.replicas": "2"},
    )
    try:
        yield c
    finally:
        c.stop()


@pytest.mark.parametrize("victim", ["follower", "controller"])
def test_restarted_broker_replaces_its_dead_incarnation_at_once(cluster: ClusterProcesses, victim: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("restart")
    create_topic(admin, topic, 3, 3)
    controller = _active_controller(cluster)
    node_id = controller if victim == "controller" else next(i for i in cluster.nodes if i != controller)
    cluster.kill(node_id)
    cluster.spawn(node_id)
    # the old incarnation's session (120 s) has not lapsed: only the restarted process's
    # proof that it owns the old data dir lets it register now
    cluster.wait_ready(node_id, timeout_s=JOIN_TIMEOUT_S)
    assert "DUPLICATE_BROKER_REGISTRATION" not in _log_since_last_start(cluster, node_id)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(*(i for i in cluster.nodes if i != node_id))})
    wait_until(
        f"node {node_id} back in every ISR of {topic}",
        lambda: all(node_id in isr and leader >= 0 for leader, _, isr in partitions(admin, topic).values()),
        cluster,
        timeout_s=JOIN_TIMEOUT_S,
    )


@pytest.fixture
def short_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    c = start_cluster(tmp_path_factory.mktemp("lease"), 3, overrides={"min.insync.replicas": "2"})
    try:
        yield c
    finally:
        c.stop()


def _produce_acks1(topic: str) -> ProduceRequest:
    batch = build_batch([Record(0, 0, None, b"after-pause", [])], base_timestamp=int(time.time() * 1000))
    return ProduceRequest(
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)]
            )
        ],
    )


def _error_of(answer: Any) -> ErrorCode:
    return ErrorCode(answer.responses[0].partition_responses[0].error_code)


@pytest.mark.parametrize("also_controller", [False, True], ids=["leader", "leader_and_controller"])
def test_a_paused_leader_refuses_acks1_writes_once_its_lease_ran_out(
    short_cluster: ClusterProcesses, also_controller: bool
) -> None:
    """Also when the paused leader is the active controller: Raft fetches the other voters sent
    during the pause are read when it resumes, and must not pass for quorum contact that lets
    its stale controller renew its own lease."""
    cluster = short_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("lease")
    controller = _active_controller(cluster)
    chosen = controller if also_controller else next(i for i in cluster.nodes if i != controller)
    replicas = [chosen, *sorted(i for i in cluster.nodes if i != chosen)]
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[replicas])], operation_timeout=ADMIN_TIMEOUT_S)
    futures[topic].result(timeout=ADMIN_TIMEOUT_S)
    wait_until(f"node {chosen} leading {topic}", lambda: partitions(admin, topic)[0][0] == chosen, cluster)
    leader = chosen
    node = cluster.nodes[leader]
    assert node.proc is not None
    pause_s = 2 * int(TEST_OVERRIDES["broker.session.timeout.ms"]) / 1000 + 1
    answers: list[Any] = []

    async def scenario() -> None:
        client = PeerClient(node.host, node.broker_port, client_id="lease-test")
        try:
            first = await client.request(ApiKey.PRODUCE, 9, _produce_acks1(topic), timeout_s=30)
            assert _error_of(first) is ErrorCode.NONE
            assert node.proc is not None
            node.proc.send_signal(signal.SIGSTOP)
            try:
                await trio.sleep(pause_s)  # the others fence it and elect a new leader

                async def send() -> None:  # queued in the paused process's socket
                    answers.append(await client.request(ApiKey.PRODUCE, 9, _produce_acks1(topic), timeout_s=30))

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(send)
                    await trio.sleep(0.5)
                    node.proc.send_signal(signal.SIGCONT)
            finally:
                node.proc.send_signal(signal.SIGCONT)
        finally:
            await client.aclose()

    trio.run(scenario)
    # Kafka's answer here is NONE, for a write the new leader's log truncates
    assert _error_of(answers[0]) is ErrorCode.NOT_LEADER_OR_FOLLOWER, cluster.logs()


@pytest.mark.parametrize("victim", ["follower", "controller"])
def test_a_crashed_leader_is_fenced_long_before_its_session_expires(cluster: ClusterProcesses, victim: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("crash")
    create_topic(admin, topic, 6, 3)
    controller = _active_controller(cluster)
    node_id = controller if victim == "controller" else next(i for i in cluster.nodes if i != controller)
    led = wait_until(
        f"node {node_id} leading a partition of {topic}",
        lambda: [p for p, (leader, _, _) in partitions(admin, topic).items() if leader == node_id],
        cluster,
    )
    cluster.kill(node_id)
    survivors = AdminClient({"bootstrap.servers": cluster.bootstrap_of(*(i for i in cluster.nodes if i != node_id))})

    def moved() -> bool:
        now = partitions(survivors, topic)
        return all(now[p][0] not in (node_id, -1) and node_id not in now[p][2] for p in now)

    # the session is 120 s: only the refused connections can explain a fence within this
    wait_until(f"{topic}'s partitions {led} led elsewhere, {node_id} out of every ISR", moved, cluster, timeout_s=JOIN_TIMEOUT_S)
    logs = "".join(_log_since_last_start(cluster, i) for i in cluster.live())
    assert re.search(rf"fenced broker {node_id} \(epoch \d+\) before its session expired", logs), logs


def test_a_paused_broker_is_fenced_only_by_its_session(short_cluster: ClusterProcesses) -> None:
    """SIGSTOP leaves the ports accepting connections (the kernel completes the handshake), so
    there is no evidence of death: the broker is fenced by its session expiring."""
    cluster = short_cluster
    controller = _active_controller(cluster)
    node_id = next(i for i in cluster.nodes if i != controller)
    proc = cluster.nodes[node_id].proc
    assert proc is not None
    proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(
            f"node {node_id} fenced by its session",
            lambda: "their sessions expired" in _log_since_last_start(cluster, controller),
            cluster,
            timeout_s=JOIN_TIMEOUT_S,
        )
    finally:
        proc.send_signal(signal.SIGCONT)
    assert "before its session expired" not in _log_since_last_start(cluster, controller)


def test_restart_then_controller_takeover_leaves_nothing_leaderless(cluster: ClusterProcesses) -> None:
    """Issue 12's sequence: a broker restarted within its session, then the active controller's
    node dies. The two live nodes hold every partition: each must get a leader and an ISR of both,
    not wait for the dead node (the report: `leader=-1, isr=[3]` for 73 s)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("sequence")
    create_topic(admin, topic, 6, 3)
    controller = _active_controller(cluster)
    restarted = next(i for i in cluster.nodes if i != controller)
    cluster.kill(restarted)
    cluster.spawn(restarted)
    cluster.wait_ready(restarted, timeout_s=JOIN_TIMEOUT_S)
    wait_until(
        f"node {restarted} back in every ISR",
        lambda: all(restarted in isr for _, _, isr in partitions(admin, topic).values()),
        cluster,
        timeout_s=JOIN_TIMEOUT_S,
    )
    cluster.kill(controller)
    live = sorted(i for i in cluster.nodes if i != controller)
    survivors = AdminClient({"bootstrap.servers": cluster.bootstrap_of(*live)})
    wait_until(
        f"every partition of {topic} led by {live} with ISR {live}",
        lambda: all(
            leader in live and sorted(isr) == live for leader, _, isr in partitions(survivors, topic).values()
        ),
        cluster,
        timeout_s=JOIN_TIMEOUT_S,
    )


def test_rolling_restart_under_load_fails_no_acks_all_write(cluster: ClusterProcesses) -> None:
    """SIGTERM each node in turn, as an operator does (the next one once every ISR is full
    again): controlled shutdown hands leadership over before the process exits, so an
    idempotent acks=all producer writing all along gets every record acknowledged."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("rolling-all")
    create_topic(admin, topic, 3, 3)
    failed: list[str] = []
    acked: list[int] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 30000,
        }
    )

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        else:
            acked.append(int(msg.value()))

    stop = threading.Event()

    def produce() -> int:
        sent = 0
        while not stop.is_set():
            producer.produce(topic, str(sent).encode(), partition=sent % 3, on_delivery=report)
            sent += 1
            producer.poll(0.01)
        producer.flush(60)
        return sent

    with ThreadPoolExecutor(1) as pool:
        sending = pool.submit(produce)
        try:
            for node_id in sorted(cluster.nodes):
                wait_until(
                    "every ISR full",
                    lambda: all(len(isr) == 3 for _, _, isr in partitions(admin, topic).values()),
                    cluster,
                    timeout_s=JOIN_TIMEOUT_S,
                )
                assert cluster.terminate(node_id, timeout_s=30) == 0, cluster.logs()
                cluster.restart(node_id)
        finally:
            stop.set()
            sent = sending.result(timeout=90)
    assert failed == [], cluster.logs()
    assert sorted(acked) == list(range(sent))


def test_a_restarted_node_serves_no_metadata_before_it_rejoins(short_cluster: ClusterProcesses) -> None:
    """A node restarted while the quorum is down has only what it replayed from disk - nothing is
    known committed until a Raft leader answers. Its Metadata answer then lacked every topic,
    and librdkafka failed each produce with "Unknown topic" until its next refresh (5 min;
    `kafkapy chaos --seed 8`). It now holds the request, then closes the connection (the client
    asks another broker); once it has rejoined it answers with the cluster's topics."""
    cluster = short_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    topic = unique_topic("rejoin")
    create_topic(admin, topic, 1, 3)
    for node_id in cluster.nodes:
        cluster.kill(node_id)
    cluster.spawn(1)  # alone: no quorum, so it cannot rejoin
    node = cluster.nodes[1]
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)], allow_auto_topic_creation=False)

    async def ask() -> Any:
        client = PeerClient(node.host, node.broker_port, client_id="rejoin-test")
        try:
            with trio.fail_after(JOIN_TIMEOUT_S):
                while True:  # until its listener is up
                    try:
                        return await client.request(ApiKey.METADATA, 9, request, timeout_s=15)
                    except PeerError as e:
                        if "closed the connection" in str(e):
                            return e
                        await trio.sleep(0.2)
        finally:
            await client.aclose()

    alone = trio.run(ask)
    assert isinstance(alone, PeerError), f"answered before rejoining: {alone}"
    cluster.spawn(2)
    cluster.spawn(3)
    cluster.wait_ready(1, 2, 3)
    joined = trio.run(ask)
    assert not isinstance(joined, PeerError), joined
    assert joined.topics[0].error_code == ErrorCode.NONE
