"""pytest plugin (entry point `pytest11`): Kafka brokers, clusters, topics and faults as fixtures.

Installed with kafkapy, so any project's tests can ask for a real Kafka-protocol broker::

    def test_roundtrip(kafka_broker, kafka_topic):
        producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker})

Fixtures (all names start with `kafka_`):

- `kafka_broker`: the bootstrap string (`127.0.0.1:PORT`) of a broker with a temporary data dir.
  `--kafka-broker-mode=thread|subprocess` (ini `kafka_broker_mode`, default thread: a broker
  in a thread of the test process) and `--kafka-broker-scope=session|function` (ini
  `kafka_broker_scope`, default session: one broker for the run; function: a fresh one per test).
- `kafka_broker_instance`: that broker's object (`ThreadBroker` / `SubprocessBroker`: `.bootstrap`,
  `.faults`; a subprocess one also `.pause()` / `.resume()`).
- `kafka_faults`: its request fault injector (`fail` / `drop` / `delay` / `requests`, see
  kafkapy.broker.faults), cleared after each test so a session broker starts every test clean.
- `kafka_admin`: a `KafkaAdmin` (create/delete/list topics) for `kafka_broker`.
- `kafka_topic_factory`: `make(partitions=1, replication_factor=-1, configs=None, name=None)`
  creates a topic with a unique name, returns the name, and deletes it after the test;
  `kafka_topic` is one such topic with one partition.
- `kafka_cluster`: a `ClusterProcesses` of N subprocess nodes (`@pytest.mark.kafka_cluster(nodes=N)`,
  ini `kafka_cluster_nodes`, default 3) with `kill` / `pause` / `resume` / `restart` of a node,
  `faults(node_id)` and `bootstrap`; fresh for each test, stopped after it.

Why nothing happens at import: pytest loads this module in every session of every project that
has kafkapy installed (kafkapy's own suite too), so it imports only pytest and the standard
library at module level and registers only its options and marker; brokers start only when a
test asks for one of these fixtures.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kafkapy.testing.admin import KafkaAdmin
    from kafkapy.testing.broker import TestBroker
    from kafkapy.testing.cluster import ClusterProcesses
    from kafkapy.testing.faults import FaultControl

__all__ = ["TopicFactory"]

MODES = ("thread", "subprocess")
SCOPES = ("session", "function")
DEFAULT_CLUSTER_NODES = 3

TopicFactory = Callable[..., str]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kafkapy", "kafkapy Kafka broker fixtures")
    group.addoption(
        "--kafka-broker-mode", choices=MODES, default=None,
        help="kafka_broker in a thread of the test process or as a subprocess (default: thread)",
    )
    group.addoption(
        "--kafka-broker-scope", choices=SCOPES, default=None,
        help="one kafka_broker per session or a fresh one per test (default: session)",
    )
    parser.addini("kafka_broker_mode", "thread or subprocess (default thread)", default="thread")
    parser.addini("kafka_broker_scope", "session or function (default session)", default="session")
    parser.addini("kafka_cluster_nodes", "nodes of kafka_cluster (default 3)", default=str(DEFAULT_CLUSTER_NODES))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kafka_cluster(nodes=3): the kafka_cluster fixture's size for this test")


def _setting(config: pytest.Config, name: str, allowed: tuple[str, ...]) -> str:
    value = config.getoption(name) or config.getini(name)
    if value not in allowed:
        raise pytest.UsageError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return str(value)


def _broker_scope(fixture_name: str, config: pytest.Config) -> Any:
    return _setting(config, "kafka_broker_scope", SCOPES)


@pytest.fixture(scope=_broker_scope)
def kafka_broker_instance(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestBroker]:
    """A started broker (see the module doc); stopped when its scope ends."""
    from kafkapy.testing.broker import SubprocessBroker, ThreadBroker

    mode = _setting(request.config, "kafka_broker_mode", MODES)
    broker: TestBroker
    if mode == "thread":
        broker = ThreadBroker()
    else:
        log_path = tmp_path_factory.mktemp("kafka_broker") / "broker.log"
        broker = SubprocessBroker(log_path=log_path)
    with broker:
        yield broker


@pytest.fixture
def kafka_broker(kafka_broker_instance: TestBroker) -> str:
    """`host:port` of the broker, for a client's bootstrap servers."""
    return kafka_broker_instance.bootstrap


@pytest.fixture
def kafka_faults(kafka_broker_instance: TestBroker) -> Iterator[FaultControl]:
    """The broker's request fault injector; rules and observed requests are cleared after the test."""
    faults = kafka_broker_instance.faults
    faults.clear()
    yield faults
    faults.clear()


@pytest.fixture
def kafka_admin(kafka_broker: str) -> KafkaAdmin:
    from kafkapy.testing.admin import KafkaAdmin

    return KafkaAdmin(kafka_broker)


_topic_serial = itertools.count(1)


def _topic_name(node_name: str) -> str:
    stem = re.sub(r"[^a-zA-Z0-9._-]", "-", node_name)[:120]
    return f"{stem}-{next(_topic_serial)}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic_factory(request: pytest.FixtureRequest, kafka_admin: KafkaAdmin) -> Iterator[TopicFactory]:
    """`make(partitions=1, replication_factor=-1, configs=None, name=None) -> name`; the topics
    made are deleted after the test."""
    made: list[str] = []

    def make(
        partitions: int = 1,
        replication_factor: int = -1,
        configs: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> str:
        topic = name or _topic_name(request.node.name)
        kafka_admin.create_topic(topic, partitions, replication_factor, configs)
        made.append(topic)
        return topic

    yield make
    from kafkapy.testing.admin import AdminError

    for topic in made:
        # AdminError: the test deleted it, or the broker is gone (its own fixture reports that)
        with contextlib.suppress(AdminError):
            kafka_admin.delete_topic(topic)


@pytest.fixture
def kafka_topic(kafka_topic_factory: TopicFactory) -> str:
    """A fresh topic with one partition (deleted after the test)."""
    return kafka_topic_factory()


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    """A fresh N-node cluster (subprocesses, fault control on), stopped after the test."""
    from kafkapy.testing.cluster import ClusterProcesses

    marker = request.node.get_closest_marker("kafka_cluster")
    nodes = int(request.config.getini("kafka_cluster_nodes"))
    if marker is not None:
        nodes = int(marker.kwargs.get("nodes", marker.args[0] if marker.args else nodes))
    base = tmp_path_factory.mktemp("kafka_cluster")
    cluster = ClusterProcesses(Path(base), nodes, fault_control=True, log_level=os.environ.get("KAFKAPY_LOG_LEVEL", "INFO"))
    with cluster:
        yield cluster
