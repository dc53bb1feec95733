"""Broker configuration: properties parsing, precedence, env overrides, listeners, KRaft files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.broker.config import (
    BrokerConfig,
    ConfigError,
    ConfigSource,
    env_overrides,
    parse_listeners,
    parse_properties,
    validate_topic_config,
)

KRAFT_PROPERTIES = """\
# A single-node KRaft server.properties, as Kafka's quickstart ships it
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""


def test_kraft_single_node_file_is_accepted_as_is(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "server.properties"
    path.write_text(KRAFT_PROPERTIES)
    with caplog.at_level(logging.INFO):
        config = BrokerConfig.load(path)
    assert config.node_id == 1
    assert [(lst.name, lst.host, lst.port) for lst in config.listeners] == [("PLAINTEXT", "", 9092)]
    assert [(a.host, a.port) for a in config.advertised_listeners] == [("localhost", 9092)]
    assert config.data_dirs == [Path("/tmp/kraft-combined-logs")]
    assert config.topic_default("retention.ms") == ("604800000", "log.retention.hours", ConfigSource.STATIC_BROKER_CONFIG)
    assert "num.network.threads" in caplog.text


def test_unknown_keys_are_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        BrokerConfig({"some.future.key.xyz": "1"})
        BrokerConfig({"some.future.key.xyz": "2"})
    assert caplog.text.count("some.future.key.xyz") == 1


def test_precedence_file_env_overrides(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nlog.retention.ms=10\nmessage.max.bytes=100\n")
    config = BrokerConfig.load(
        path,
        {"KAFKAPY_NUM_PARTITIONS": "3", "KAFKAPY_LOG_RETENTION_MS": "20", "OTHER": "x"},
        {"num.partitions": "4"},
    )
    assert config.get_int("num.partitions") == 4
    assert config.get_int("log.retention.ms") == 20
    assert config.get_int("message.max.bytes") == 100
    assert config.source("message.max.bytes") == ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("log.segment.bytes") == ConfigSource.DEFAULT_CONFIG


def test_defaults_are_the_embedded_dev_broker() -> None:
    config = BrokerConfig()
    assert config.node_id == 1
    assert [(lst.host, lst.port) for lst in config.listeners] == [("127.0.0.1", 9092)]
    assert config.data_dirs == [Path("./data")]
    assert config.get_bool("auto.create.topics.enable")
    assert config.get_int("num.partitions") == 1
    assert config.get_int("group.initial.rebalance.delay.ms") == 0
    assert config.get_int("offsets.topic.num.partitions") == 50
    assert config.get_int("socket.request.max.bytes") == 100 * 1024 * 1024
    assert config.get_int("kafkapy.test.fault.drop.after.produce.append") == 0


def test_env_override_names() -> None:
    env = env_overrides({
        "KAFKAPY_LOG_RETENTION_MS": "1",
        "KAFKAPY_TEST_FAULT_DROP_AFTER_PRODUCE_APPEND": "2",
        "KAFKAPY_SOME__UNDERSCORE": "3",
        "KAFKAPY_SASL_USERS": "alice:pw",
        "KAFKA_LOG_DIRS": "ignored",
    })
    assert env == {
        "log.retention.ms": "1",
        "kafkapy.test.fault.drop.after.produce.append": "2",
        "some_underscore": "3",
        "kafkapy.sasl.users": "alice:pw",
    }


@pytest.mark.parametrize(
    ("key", "value"),
    [("num.partitions", "many"), ("auto.create.topics.enable", "yes"), ("message.max.bytes", "99999999999")],
)
def test_bad_values_are_one_clear_error(key: str, value: str) -> None:
    with pytest.raises(ConfigError, match=key):
        BrokerConfig({key: value})


def test_listener_parsing() -> None:
    protocols = {"PLAINTEXT": "PLAINTEXT", "INTERNAL": "PLAINTEXT"}
    got = parse_listeners("PLAINTEXT://[::1]:9092, INTERNAL://0.0.0.0:0", protocols)
    assert [(g.name, g.host, g.port) for g in got] == [("PLAINTEXT", "::1", 9092), ("INTERNAL", "0.0.0.0", 0)]
    for bad in ["127.0.0.1:9092", "PLAINTEXT://host", "PLAINTEXT://h:99999", "NOPE://h:1"]:
        with pytest.raises(ConfigError):
            parse_listeners(bad, protocols)


def test_secured_listeners_are_served_and_unknown_protocols_refused() -> None:
    config = BrokerConfig({"listeners": "SSL://:9093,PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://:9094"})
    assert [(lst.name, lst.security_protocol) for lst in config.listeners] == [
        ("SSL", "SSL"), ("PLAINTEXT", "PLAINTEXT"), ("SASL_PLAINTEXT", "SASL_PLAINTEXT"),
    ]  # fmt: skip
    with pytest.raises(ConfigError, match="security protocol"):
        BrokerConfig({"listeners": "X://:1", "listener.security.protocol.map": "X:KERBEROS"})


def test_properties_syntax() -> None:
    text = "a=1\n  b : 2\nc 3\n# comment\n! also\nd=x\\\n   y\ne=tab\\there\nf=\\u0041\ng\nh=a=b\n"
    assert parse_properties(text) == {
        "a": "1", "b": "2", "c": "3", "d": "xy", "e": "tab\there", "f": "A", "g": "", "h": "a=b",
    }


_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz.-_0123456789", min_size=1, max_size=20)
_values = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=30)


def _escape(s: str) -> str:
    out = s.replace("\\", "\\\\")
    out = out.replace("=", "\\=").replace(":", "\\:")
    return ("\\" + out) if out.startswith(" ") else out


@settings(max_examples=200)
@given(st.dictionaries(_keys, _values, max_size=8))
def test_properties_round_trip(entries: dict[str, str]) -> None:
    text = "".join(f"{k}={_escape(v)}\n" for k, v in entries.items())
    assert parse_properties(text) == entries


@settings(max_examples=200)
@given(st.text(max_size=200))
def test_properties_never_crash(text: str) -> None:
    assert isinstance(parse_properties(text), dict)


def test_topic_config_validation() -> None:
    validate_topic_config("retention.ms", "-1")
    validate_topic_config("cleanup.policy", "compact,delete")
    validate_topic_config("cleanup.policy", "")  # Kafka accepts an emptied list (SUBTRACT)
    for key, value in [
        ("retention.ms", "soon"), ("cleanup.policy", "shred"), ("message.timestamp.type", "Now"),
        ("no.such.config", "1"), ("segment.bytes", None),
    ]:
        with pytest.raises(ConfigError):
            validate_topic_config(key, value)


def test_retention_unit_synonyms() -> None:
    assert BrokerConfig({"log.retention.minutes": "2"}).topic_default("retention.ms")[0] == "120000"
    both = BrokerConfig({"log.retention.minutes": "2", "log.retention.ms": "5"})
    assert both.topic_default("retention.ms") == ("5", "log.retention.ms", ConfigSource.STATIC_BROKER_CONFIG)
    assert BrokerConfig().topic_default("retention.ms") == ("604800000", "log.retention.hours", ConfigSource.DEFAULT_CONFIG)


def test_scaling_levers_are_known_keys_and_only_kafkas_rack_aware_selector_is_taken() -> None:
    config = BrokerConfig({
        "broker.rack": "eu-west-1a",
        "replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector",
        "leader.imbalance.check.interval.seconds": "2",
        "max.broker.partitions": "500",
    })
    assert config.get("broker.rack") == "eu-west-1a"
    assert config.get_int("leader.imbalance.check.interval.seconds") == 2
    assert config.get_int("max.broker.partitions") == 500
    assert config.get_bool("auto.leader.rebalance.enable")
    assert config.get_int("max.partitions") == 2147483647
    with pytest.raises(ConfigError, match="must be at least 1"):
        BrokerConfig({"leader.imbalance.check.interval.seconds": "0"})
    with pytest.raises(ConfigError, match=r"replica\.selector\.class"):
        BrokerConfig({"replica.selector.class": "com.example.NearestSelector"})
