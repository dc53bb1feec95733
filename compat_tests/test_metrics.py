"""`/metrics` moves with real traffic: confluent-kafka produces and consumes against a broker
subprocess started with `--http`, and the scrapes (parsed with prometheus_client's own text
parser) must show exactly what the clients did."""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from prometheus_client.parser import text_string_to_metric_families

from compat_tests.conftest import BrokerFactory, BrokerProcess, unique_topic

pytestmark = pytest.mark.timeout(120)

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def http_url(broker: BrokerProcess) -> str:
    match = re.search(r"HTTP on (http://\S+/)", broker.log_text())
    assert match, broker.log_tail()
    return match.group(1)


def scrape(url: str) -> Samples:
    with urllib.request.urlopen(url + "metrics", timeout=10) as response:
        assert response.status == 200
        assert response.headers["content-type"].startswith("text/plain")
        text = response.read().decode()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum over the series of `name` whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerProcess, str]]:
    factory = BrokerFactory(tmp_path_factory.mktemp("observed"))
    try:
        broker = factory.start(extra_args=["--http", "127.0.0.1:0"])
        yield broker, http_url(broker)
    finally:
        assert not factory.close()


def produce(bootstrap: str, topic: str, count: int, size: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"v" * size, key=str(i).encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def test_produce_and_consume_move_the_topic_and_request_counters(
    observed: tuple[BrokerProcess, str],
) -> None:
    broker, url = observed
    topic = unique_topic("metrics")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(15)
    before = scrape(url)

    produce(broker.bootstrap, topic, 300, 100, 2)
    after_produce = scrape(url)
    name = "kafka_server_brokertopicmetrics_messagesin_total"
    assert value(after_produce, name, topic=topic) - value(before, name, topic=topic) == 300
    # every byte a produce request appended is in the log (one segment, nothing deleted)
    log_bytes = total(after_produce, "kafka_log_log_size", topic=topic)
    assert log_bytes > 300 * 100
    bytes_in = "kafka_server_brokertopicmetrics_bytesin_total"
    assert value(after_produce, bytes_in, topic=topic) == log_bytes
    assert total(after_produce, "kafka_log_log_logendoffset", topic=topic) == 300
    assert total(after_produce, "kafka_log_log_numlogsegments", topic=topic) == 2
    produces = total(after_produce, "kafka_network_requestmetrics_requests_total", request="Produce") - total(
        before, "kafka_network_requestmetrics_requests_total", request="Produce"
    )
    assert produces >= 1
    timed = "kafka_network_requestmetrics_totaltimems_count"
    assert value(after_produce, timed, request="Produce") - value(before, timed, request="Produce") == produces
    queued = "kafka_network_requestmetrics_requestqueuetimems_count"
    assert value(after_produce, queued, request="Produce") - value(before, queued, request="Produce") == produces
    assert value(after_produce, "kafka_network_requestmetrics_totaltimems_bucket", request="Produce", le="+Inf") == value(
        after_produce, timed, request="Produce"
    )

    # consume everything once, by assignment (no rebalance), and commit part of it
    consumer = Consumer({
        "bootstrap.servers": broker.bootstrap,
        "group.id": f"g-{topic}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    got = 0
    deadline = time.monotonic() + 30
    while got < 300 and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(100, 1.0) if m.error() is None)
    assert got == 300
    consumer.commit(offsets=[TopicPartition(topic, 0, 100), TopicPartition(topic, 1, 150)], asynchronous=False)
    after_consume = scrape(url)
    consumer.close()
    bytes_out = "kafka_server_brokertopicmetrics_bytesout_total"
    assert value(after_consume, bytes_out, topic=topic) - value(before, bytes_out, topic=topic) == log_bytes
    group = f"g-{topic}"
    assert value(after_consume, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic, partition="0") == 100
    assert value(after_consume, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="0") == 50
    assert value(after_consume, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition="1") == 0
    assert value(after_consume, "kafka_consumergroup_lag_sum", consumergroup=group) == 50
    fetches = "kafka_network_requestmetrics_requests_total"
    fetched = total(after_consume, fetches, request="Fetch") - total(before, fetches, request="Fetch")
    assert fetched > 0
    # as in Kafka, a consumer's fetch is also counted and timed as FetchConsumer
    assert total(after_consume, fetches, request="FetchConsumer") - total(before, fetches, request="FetchConsumer") == fetched
    assert value(after_consume, timed, request="FetchConsumer") - value(before, timed, request="FetchConsumer") == fetched
    assert value(after_consume, "kafka_network_requestmetrics_errors_total", request="OffsetCommit", error="NONE") >= 2


def test_gauges_describe_the_single_node(observed: tuple[BrokerProcess, str]) -> None:
    broker, url = observed
    with socket.create_connection((broker.host, broker.port), timeout=10):
        samples = scrape(url)
        assert value(samples, "kafka_server_socket_server_metrics_connection_count", listener="PLAINTEXT") >= 1
    assert value(samples, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert value(samples, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(samples, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    leaders = value(samples, "kafka_server_replicamanager_leadercount")
    assert leaders == value(samples, "kafka_controller_kafkacontroller_globalpartitioncount") > 0
    assert value(samples, "process_resident_memory_bytes") > 0


def test_an_http_request_on_the_kafka_port_is_named_and_counted(
    observed: tuple[BrokerProcess, str],
) -> None:
    broker, url = observed
    name = "kafkapy_non_kafka_connections_total"
    before = value(scrape(url), name, listener="PLAINTEXT", protocol="HTTP")
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        sock.settimeout(10)
        assert sock.recv(100) == b""  # closed without an answer
    assert value(scrape(url), name, listener="PLAINTEXT", protocol="HTTP") == before + 1
    assert "a non-Kafka client (HTTP)" in broker.log_text()
    assert "not a Kafka client (this is a Kafka listener)" in broker.log_text()


def test_openmetrics_when_the_scraper_asks_for_it(observed: tuple[BrokerProcess, str]) -> None:
    _, url = observed
    request = urllib.request.Request(
        url + "metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.headers["content-type"].startswith("application/openmetrics-text")
        assert response.read().decode().rstrip().endswith("# EOF")


def test_fetch_sessions_of_a_kafka_python_consumer(observed: tuple[BrokerProcess, str]) -> None:
    """kafka-python fetches through incremental fetch sessions (KIP-227; librdkafka does not)."""
    from kafka import KafkaConsumer

    broker, url = observed
    topic = unique_topic("sessions")
    produce(broker.bootstrap, topic, 10, 10, 1)
    consumer = KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=5000)
    try:
        assert sum(1 for _ in consumer) == 10
        samples = scrape(url)
        assert value(samples, "kafka_server_fetchsessioncache_numincrementalfetchsessions") >= 1
        assert value(samples, "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached") >= 1
    finally:
        consumer.close()


def test_transactions_committed_and_aborted_are_counted(observed: tuple[BrokerProcess, str]) -> None:
    broker, url = observed
    topic = unique_topic("txn-metrics")
    completed = "kafka_coordinator_transaction_completed_total"
    before = scrape(url)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    for commit in (True, False, True):
        producer.begin_transaction()
        producer.produce(topic, value=b"in a transaction")
        producer.flush(30)  # sent, so the broker has the partition in the transaction
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    deadline = time.monotonic() + 20
    while True:  # markers are written after the client's EndTxn is answered
        after = scrape(url)
        done = (
            value(after, completed, result="commit") - value(before, completed, result="commit"),
            value(after, completed, result="abort") - value(before, completed, result="abort"),
        )
        if done == (2, 1) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert done == (2, 1)
    states = "kafka_coordinator_transaction_transactions"
    assert value(after, states, state="CompleteCommit") + value(after, states, state="CompleteAbort") >= 1
    assert value(after, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == 3
