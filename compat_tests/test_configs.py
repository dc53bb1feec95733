"""Config APIs as confluent-kafka's admin client uses them (librdkafka's 0081 story): list
configs emptied by SUBTRACT, dynamic broker configs and their synonyms."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # stubs lack re-exports
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewTopic,
    ResourceType,
)

from .conftest import BrokerFactory, BrokerProcess

pytestmark = pytest.mark.timeout(120)
TIMEOUT_S = 30


@pytest.fixture
def admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _incremental(admin: AdminClient, resource: ConfigResource) -> None:
    futures = admin.incremental_alter_configs([resource], request_timeout=TIMEOUT_S)
    next(iter(futures.values())).result(timeout=TIMEOUT_S)


def _describe(admin: AdminClient, resource: ConfigResource) -> dict[str, ConfigEntry]:
    result = admin.describe_configs([resource], request_timeout=TIMEOUT_S)
    entries: dict[str, ConfigEntry] = next(iter(result.values())).result(timeout=TIMEOUT_S)
    return entries


def test_subtract_that_empties_cleanup_policy_is_accepted(admin: AdminClient, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"cleanup.policy": "compact,delete"})])[
        topic_name
    ].result(timeout=TIMEOUT_S)
    for policy in ("compact", "delete"):
        _incremental(admin, ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
            ConfigEntry("cleanup.policy", policy, incremental_operation=AlterConfigOpType.SUBTRACT)]))
    assert _describe(admin, ConfigResource(ResourceType.TOPIC, topic_name))["cleanup.policy"].value == ""
    _incremental(admin, ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)]))
    assert _describe(admin, ConfigResource(ResourceType.TOPIC, topic_name))["cleanup.policy"].value == "compact"


def _broker_id(admin: AdminClient) -> str:
    return str(admin.describe_cluster().result(timeout=TIMEOUT_S).nodes[0].id)


def _sources(entry: ConfigEntry) -> list[tuple[str, int]]:
    """(name, source) of the synonyms; librdkafka keys them by name, so of two synonyms of one
    name only the last shows (tests/server/test_dynamic_config.py checks the full list)."""
    return [(s.name, int(getattr(s.source, "value", s.source))) for s in entry.synonyms.values()]


def test_dynamic_broker_configs_take_effect_and_describe_with_synonyms(
    broker_factory: BrokerFactory, topic_name: str
) -> None:
    """librdkafka's 0081 story: IncrementalAlterConfigs on a BROKER resource, DescribeConfigs'
    sources and synonyms, the change applied to topics without an override at once, and kept
    across a restart. (The cluster default "" cannot be named by librdkafka or kafka-python:
    tests/server/test_dynamic_config.py covers it on the wire.)"""
    broker = broker_factory.start(extra_args=["--override", "log.retention.hours=100"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    node = _broker_id(admin)
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(timeout=TIMEOUT_S)
    _incremental(admin, ConfigResource(ResourceType.BROKER, node, incremental_configs=[
        ConfigEntry("log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("message.max.bytes", "2000", incremental_operation=AlterConfigOpType.SET)]))
    entry = _describe(admin, ConfigResource(ResourceType.BROKER, node))["log.retention.ms"]
    assert (entry.value, entry.is_read_only) == ("3600000", False)
    assert _sources(entry) == [("log.retention.ms", ConfigSource.DYNAMIC_BROKER_CONFIG.value)]
    topic = _describe(admin, ConfigResource(ResourceType.TOPIC, topic_name))["retention.ms"]
    assert topic.value == "3600000"
    assert _sources(topic) == [
        ("log.retention.ms", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
        ("log.retention.hours", ConfigSource.DEFAULT_CONFIG.value),
    ]
    # message.max.bytes is the default max.message.bytes: a larger batch is refused at once
    errors: list[object] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 10000, "retries": 0,
                  "message.max.bytes": 100_000})
    p.produce(topic_name, value=b"x" * 5000, on_delivery=lambda err, _m: errors.append(err))
    p.flush(15)
    assert len(errors) == 1
    assert getattr(errors[0], "code", lambda: None)() == KafkaError.MSG_SIZE_TOO_LARGE
    # not dynamic, or another broker: refused
    bad = admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, node, incremental_configs=[
        ConfigEntry("num.io.threads", "4", incremental_operation=AlterConfigOpType.SET)])])
    with pytest.raises(KafkaException) as info:
        next(iter(bad.values())).result(timeout=TIMEOUT_S)
    assert info.value.args[0].code() == KafkaError.INVALID_REQUEST  # Kafka's code here (KAFKA-13609)
    broker.stop()
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    again = _describe(admin, ConfigResource(ResourceType.BROKER, node))["log.retention.ms"]
    assert (again.value, _sources(again)[0]) == ("3600000", ("log.retention.ms", ConfigSource.DYNAMIC_BROKER_CONFIG.value))


def test_kerberos_broker_config_is_taken_per_broker_as_librdkafka_0081_sets_it(
    admin: AdminClient, topic_name: str
) -> None:
    """librdkafka's 0081 (do_test_AlterConfigs): one AlterConfigs with a topic resource and a
    BROKER resource setting `sasl.kerberos.min.time.before.relogin` - a per-broker dynamic key in
    Kafka (inert here: kafkapy has no GSSAPI) - expects NO_ERROR for both; the value is then
    described as this broker's dynamic config."""
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(timeout=TIMEOUT_S)
    node = _broker_id(admin)
    key = "sasl.kerberos.min.time.before.relogin"
    futures = admin.alter_configs([
        ConfigResource(ResourceType.TOPIC, topic_name, set_config={"compression.type": "gzip"}),
        ConfigResource(ResourceType.BROKER, node, set_config={key: "58000"}),
    ], request_timeout=TIMEOUT_S)
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)
    entry = _describe(admin, ConfigResource(ResourceType.BROKER, node))[key]
    assert (entry.value, entry.is_read_only) == ("58000", False)
    assert int(getattr(entry.source, "value", entry.source)) == ConfigSource.DYNAMIC_BROKER_CONFIG.value
