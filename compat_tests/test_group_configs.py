"""KIP-848 group configs (GROUP config resources, type 32) through confluent-kafka's AdminClient
(librdkafka 2.16 maps its ResourceType.GROUP to config resource 32), and honoured by the
group coordinator for a real `group.protocol=consumer` member.

What users rely on: `kafka-configs --entity-type groups` (or an AdminClient) gives one group a
shorter session timeout without touching the broker's `group.consumer.session.timeout.ms`, so a
crashed member of that group is removed - and its partitions handed on - sooner, while other
groups keep the broker's timeout.

The broker lowers `group.consumer.min.session.timeout.ms` to 2 s so a 3 s group session timeout
is within bounds; its default session timeout stays Kafka's 45 s. Members run in subprocesses so
they can be SIGKILLed (librdkafka's background thread would go on heartbeating in-process).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # stubs lack re-exports
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)

from compat_tests.conftest import BrokerFactory, BrokerProcess, unique_topic
from compat_tests.test_groups_confluent import create_topic

pytestmark = pytest.mark.timeout(150)

TIMEOUT_S = 30
SESSION_MS = 3000
BROKER_SESSION_MS = 45_000  # Kafka's default group.consumer.session.timeout.ms, left as is
DEADLINE_S = 40.0  # well past SESSION_MS on a loaded machine, well short of BROKER_SESSION_MS

# a KIP-848 member that polls until it is killed
_MEMBER = """
import sys
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "group.protocol": "consumer", "auto.offset.reset": "earliest"})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.2)
"""


@pytest.fixture(scope="module")
def group_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("group-configs"))
    try:
        yield factory.start(extra_args=[
            "--override", "group.consumer.min.session.timeout.ms=2000",
            "--override", "group.consumer.heartbeat.interval.ms=500",
        ])
    finally:
        problems = factory.close()
        assert not problems, problems


def _alter(admin: AdminClient, group: str, *entries: ConfigEntry) -> None:
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=list(entries))
    futures = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)
    next(iter(futures.values())).result(timeout=TIMEOUT_S)


def _describe(admin: AdminClient, group: str) -> dict[str, ConfigEntry]:
    futures = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)], request_timeout=TIMEOUT_S)
    entries: dict[str, ConfigEntry] = next(iter(futures.values())).result(timeout=TIMEOUT_S)
    return entries


def _source(entry: ConfigEntry) -> int:
    """librdkafka gives the source as an int where the stubs say ConfigSource."""
    source: Any = entry.source
    return int(getattr(source, "value", source))


def _members(admin: AdminClient, group: str) -> int:
    described = admin.describe_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(timeout=TIMEOUT_S)
    return len(described.members)


def _wait_members(admin: AdminClient, group: str, count: int, deadline_s: float) -> float:
    """Seconds until `group` has `count` members; fails after `deadline_s`."""
    started = time.monotonic()
    while (n := _members(admin, group)) != count:
        assert time.monotonic() - started < deadline_s, f"group {group} still has {n} members, wanted {count}"
        time.sleep(0.2)
    return time.monotonic() - started


def test_group_session_timeout_set_by_admin_client_is_described(group_broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    group = unique_topic("cfg-described")
    before = _describe(admin, group)  # a group need not exist to have configs
    entry = before["consumer.session.timeout.ms"]
    assert (entry.value, _source(entry)) == (str(BROKER_SESSION_MS), ConfigSource.DEFAULT_CONFIG.value)
    assert "consumer.heartbeat.interval.ms" in before
    _alter(admin, group, ConfigEntry("consumer.session.timeout.ms", str(SESSION_MS),
                                     incremental_operation=AlterConfigOpType.SET))
    entry = _describe(admin, group)["consumer.session.timeout.ms"]
    assert (entry.value, _source(entry)) == (str(SESSION_MS), ConfigSource.GROUP_CONFIG.value)
    assert entry.is_read_only is False

    with pytest.raises(KafkaException) as refused:  # below group.consumer.min.session.timeout.ms
        _alter(admin, group, ConfigEntry("consumer.session.timeout.ms", "1000",
                                         incremental_operation=AlterConfigOpType.SET))
    assert refused.value.args[0].name() == "INVALID_CONFIG"
    assert _describe(admin, group)["consumer.session.timeout.ms"].value == str(SESSION_MS)

    _alter(admin, group, ConfigEntry("consumer.session.timeout.ms", None,
                                     incremental_operation=AlterConfigOpType.DELETE))
    entry = _describe(admin, group)["consumer.session.timeout.ms"]
    assert (entry.value, _source(entry)) == (str(BROKER_SESSION_MS), ConfigSource.DEFAULT_CONFIG.value)


def _start_member(bootstrap: str, group: str, topic: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _MEMBER, bootstrap, group, topic],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_a_killed_member_leaves_after_its_groups_session_timeout(group_broker: BrokerProcess) -> None:
    """Two groups on one topic, one with consumer.session.timeout.ms=3000: after both members are
    SIGKILLed, the fast group's member is removed within seconds while the other group's member
    (the broker's 45 s) is still there."""
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    topic = unique_topic("cfg-session")
    create_topic(group_broker.bootstrap, topic, 2)
    fast, slow = unique_topic("cfg-fast"), unique_topic("cfg-slow")
    _alter(admin, fast, ConfigEntry("consumer.session.timeout.ms", str(SESSION_MS),
                                    incremental_operation=AlterConfigOpType.SET))
    members = [_start_member(group_broker.bootstrap, g, topic) for g in (fast, slow)]
    try:
        for g in (fast, slow):
            _wait_members(admin, g, 1, DEADLINE_S)
        for m in members:
            m.send_signal(signal.SIGKILL)
            m.wait(timeout=10)
        _wait_members(admin, fast, 0, DEADLINE_S)
        assert _members(admin, slow) == 1, "the group without an override kept the broker's session timeout"
    finally:
        for m in members:
            if m.poll() is None:
                m.kill()
                m.wait(timeout=10)
