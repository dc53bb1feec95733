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
  `.faults`; a subprocess one also `.pause()` / `.resume()`). Function-scoped, as the fixtures
  on it, because a test's markers choose the broker; the shared brokers live in the session's
  `kafka_broker_pool` (`kafka_broker_pool.shared({})`: the default one, for wider fixtures).
- `@pytest.mark.kafka_broker_config(**{"log.retention.ms": "1000"})` (and the ini linelist
  `kafka_broker_config = key=value` for every broker): broker settings. With session scope,
  static keys pick a broker of their own, started once per distinct set and shared by every
  test asking for the same set; dynamic keys (DescribeConfigs says not read-only) are set on
  that broker with IncrementalAlterConfigs as cluster defaults and deleted after the test. With
  function scope every key is simply a setting of the fresh broker.
- `kafka_faults`: its request fault injector (`fail` / `drop` / `delay` / `requests`, see
  kafkapy.broker.faults; APIs and errors by number, enum member or Kafka's name:
  `fail("Produce", "NOT_LEADER_OR_FOLLOWER")`), cleared after each test so a shared broker
  starts every test clean.
- `kafka_consume`: `consume(topic, n, timeout=10.0)` -> the first n `ConsumedRecord`s of the
  topic (every partition from its start, no group), ConsumeTimeout when fewer arrive.
- `kafka_admin`: a `KafkaAdmin` (create/delete/list topics) for `kafka_broker`.
- `kafka_topic_factory`: `make(partitions=1, replication_factor=-1, configs=None, name=None)`
  creates a topic with a unique name, returns the name, and deletes it after the test;
  `kafka_topic` is one such topic with one partition.
- `kafka_cluster`: a `ClusterProcesses` of N subprocess nodes (`@pytest.mark.kafka_cluster(nodes=N,
  racks=("a", "b"), overrides={...})`: `broker.rack` of node i is racks[(i - 1) % len]),
  ini `kafka_cluster_nodes`, default 3) with `kill` / `pause` / `resume` / `restart` of a node,
  `faults(node_id)` and `bootstrap`; fresh for each test, stopped after it.
  `kafka_cluster_module` / `kafka_cluster_session`: one cluster for a module (size from a module
  `pytestmark = pytest.mark.kafka_cluster(nodes=N)` or the ini) or for the whole run; a test
  that kills or pauses a node of a shared cluster restores it before it ends.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from kafkapy.testing.admin import KafkaAdmin
    from kafkapy.testing.broker import TestBroker
    from kafkapy.testing.cluster import ClusterProcesses
    from kafkapy.testing.consume import ConsumedRecord
    from kafkapy.testing.faults import FaultControl

__all__ = ["TopicFactory"]

MODES = ("thread", "subprocess")
SCOPES = ("session", "function")
DEFAULT_CLUSTER_NODES = 3

TopicFactory = Callable[..., str]
ConsumeHelper = Callable[..., "list[ConsumedRecord]"]
#: the broker id DescribeConfigs is asked about (the test brokers' `node.id`)
TEST_BROKER_ID = 1


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
    parser.addini("kafka_broker_config", "key=value broker settings of every kafka_broker", type="linelist", default=[])
    parser.addini("kafka_cluster_nodes", "nodes of kafka_cluster (default 3)", default=str(DEFAULT_CLUSTER_NODES))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "kafka_cluster(nodes=3, racks=(), overrides=None): the kafka_cluster fixtures' size, broker.rack of "
        "node i (racks[(i - 1) % len]) and broker settings for this test or module",
    )
    config.addinivalue_line(
        "markers", "kafka_broker_config(**settings): broker settings of kafka_broker for this test (static keys: "
        "a broker per distinct set; dynamic keys: set with IncrementalAlterConfigs, reverted after)",
    )


def _setting(config: pytest.Config, name: str, allowed: tuple[str, ...]) -> str:
    value = config.getoption(name) or config.getini(name)
    if value not in allowed:
        raise pytest.UsageError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return str(value)


def _ini_broker_config(config: pytest.Config) -> dict[str, str]:
    settings: dict[str, str] = {}
    for line in config.getini("kafka_broker_config"):
        key, sep, value = str(line).partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"kafka_broker_config lines are key=value, not {line!r}")
        settings[key.strip()] = value.strip()
    return settings


def _marker_broker_config(request: pytest.FixtureRequest) -> dict[str, str]:
    """Every kafka_broker_config marker's settings, the closest (the test's own) winning."""
    settings: dict[str, str] = {}
    for marker in reversed(list(request.node.iter_markers("kafka_broker_config"))):
        if marker.args:
            raise pytest.UsageError("kafka_broker_config takes keyword settings: kafka_broker_config(**{'key': value})")
        settings.update({k: _config_value(v) for k, v in marker.kwargs.items()})
    return settings


def _config_value(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class BrokerPool:
    """The run's shared brokers, one per distinct static setting set, started on first use."""

    mode: str
    base: dict[str, str]
    tmp_path_factory: pytest.TempPathFactory
    brokers: dict[frozenset[tuple[str, str]], TestBroker] = field(default_factory=dict)
    read_only: dict[str, bool] = field(default_factory=dict)
    stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    def make(self, overrides: Mapping[str, str]) -> TestBroker:
        """A broker (not started: enter it) with `overrides` on top of the ini settings."""
        from kafkapy.testing.broker import SubprocessBroker, ThreadBroker

        settings = {**self.base, **overrides}
        broker: TestBroker
        if self.mode == "thread":
            broker = ThreadBroker(overrides=settings)
        else:
            log_path = self.tmp_path_factory.mktemp("kafka_broker") / "broker.log"
            broker = SubprocessBroker(overrides=settings, log_path=log_path)
        return broker

    def shared(self, static: Mapping[str, str]) -> TestBroker:
        """The running broker for `static`, started now if none is (stopped with the pool)."""
        key = frozenset(static.items())
        if key not in self.brokers:
            broker = self.make(static)
            self.stack.enter_context(broker)
            self.brokers[key] = broker
        return self.brokers[key]

    def split(self, settings: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        """(static, dynamic) by DescribeConfigs' read-only flag, asked of the default broker."""
        from kafkapy.testing.admin import KafkaAdmin

        unknown = [k for k in settings if k not in self.read_only]
        if unknown:
            admin = KafkaAdmin(self.shared({}).bootstrap)
            flags = admin.broker_configs_read_only(TEST_BROKER_ID, unknown)
            self.read_only.update({k: flags.get(k, True) for k in unknown})
        static = {k: v for k, v in settings.items() if self.read_only[k]}
        return static, {k: v for k, v in settings.items() if not self.read_only[k]}


@pytest.fixture(scope="session")
def kafka_broker_pool(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerPool]:
    """The brokers shared across tests (see the module doc); stopped at the end of the run."""
    mode = _setting(request.config, "kafka_broker_mode", MODES)
    _setting(request.config, "kafka_broker_scope", SCOPES)
    pool = BrokerPool(mode, _ini_broker_config(request.config), tmp_path_factory)
    with pool.stack:
        yield pool


@pytest.fixture
def kafka_broker_instance(request: pytest.FixtureRequest, kafka_broker_pool: BrokerPool) -> Iterator[TestBroker]:
    """The test's broker (see the module doc): shared, or fresh with function scope."""
    settings = _marker_broker_config(request)
    if _setting(request.config, "kafka_broker_scope", SCOPES) == "function":
        with kafka_broker_pool.make(settings) as fresh:
            yield fresh
        return
    static, dynamic = kafka_broker_pool.split(settings) if settings else ({}, {})
    broker = kafka_broker_pool.shared(static)
    if not dynamic:
        yield broker
        return
    from kafkapy.testing.admin import KafkaAdmin

    admin = KafkaAdmin(broker.bootstrap)
    admin.alter_broker_defaults(dynamic)
    try:
        yield broker
    finally:
        admin.alter_broker_defaults(dict.fromkeys(dynamic))


@pytest.fixture
def kafka_broker(kafka_broker_instance: TestBroker) -> str:
    """`host:port` of the broker, for a client's bootstrap servers."""
    return kafka_broker_instance.bootstrap


@pytest.fixture
def kafka_faults(kafka_broker_instance: TestBroker) -> Iterator[FaultControl]:
    """The broker's request fault injector; rules and observed requests are cleared after the test."""
    from kafkapy.testing.faults import FaultClient, NamedFaults

    own = kafka_broker_instance.faults
    faults: FaultControl = own if isinstance(own, FaultClient) else NamedFaults(own)
    faults.clear()
    yield faults
    faults.clear()


@pytest.fixture
def kafka_admin(kafka_broker: str) -> KafkaAdmin:
    from kafkapy.testing.admin import KafkaAdmin

    return KafkaAdmin(kafka_broker)


@pytest.fixture
def kafka_consume(kafka_broker: str) -> ConsumeHelper:
    """`consume(topic, n, timeout=10.0, config=None)`: the first n records of `topic`."""
    from kafkapy.testing.consume import consume_records

    def consume(topic: str, n: int, timeout: float = 10.0, config: dict[str, str] | None = None) -> list[ConsumedRecord]:
        return consume_records(kafka_broker, topic, n, timeout_s=timeout, config=config)

    return consume


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


def _cluster_nodes(request: pytest.FixtureRequest) -> int:
    nodes = int(request.config.getini("kafka_cluster_nodes"))
    marker = request.node.get_closest_marker("kafka_cluster")
    if marker is not None:
        nodes = int(marker.kwargs.get("nodes", marker.args[0] if marker.args else nodes))
    return nodes


def _cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> ClusterProcesses:
    from kafkapy.testing.cluster import ClusterProcesses

    base = tmp_path_factory.mktemp("kafka_cluster")
    level = os.environ.get("KAFKAPY_LOG_LEVEL", "INFO")
    marker = request.node.get_closest_marker("kafka_cluster")
    layout = marker.kwargs if marker is not None else {}
    return ClusterProcesses(
        Path(base),
        _cluster_nodes(request),
        fault_control=True,
        log_level=level,
        racks=layout.get("racks", ()),
        overrides=layout.get("overrides"),
    )


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    """A fresh N-node cluster (subprocesses, fault control on), stopped after the test."""
    with _cluster(request, tmp_path_factory) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def kafka_cluster_module(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    """One cluster for every test of a module (size: the module's kafka_cluster marker)."""
    with _cluster(request, tmp_path_factory) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_cluster_session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcesses]:
    """One cluster for the whole run (size: ini kafka_cluster_nodes)."""
    with _cluster(request, tmp_path_factory) as cluster:
        yield cluster
