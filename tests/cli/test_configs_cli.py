"""`kafkapy configs` for groups (KIP-848 group configs) against a real broker, as a user runs it."""

from __future__ import annotations

import pytest

from .conftest import kafkapy


def test_group_configs_describe_alter_and_delete(bootstrap: str) -> None:
    def described(*flags: str) -> dict[str, tuple[str, str]]:
        r = kafkapy("configs", "describe", "--group", "orders", *flags, "--json", bootstrap=bootstrap)
        assert r.code == 0, r.stderr
        return {c["name"]: (c["value"], c["source"]) for c in r.json()}

    assert described() == {}  # nothing set; --all shows the broker's defaults
    table = kafkapy("configs", "describe", "--group", "orders", bootstrap=bootstrap)
    assert table.stdout == "no configs set on group orders (--all lists the defaults)\n"
    assert described("--all") == {
        "consumer.heartbeat.interval.ms": ("5000", "DEFAULT_CONFIG"),
        "consumer.session.timeout.ms": ("45000", "DEFAULT_CONFIG"),
        "share.auto.offset.reset": ("latest", "DEFAULT_CONFIG"),
        "share.heartbeat.interval.ms": ("5000", "DEFAULT_CONFIG"),
        "share.record.lock.duration.ms": ("30000", "DEFAULT_CONFIG"),
        "share.session.timeout.ms": ("45000", "DEFAULT_CONFIG"),
    }
    r = kafkapy("configs", "alter", "--group", "orders", "--add-config",
                "consumer.session.timeout.ms=50000,consumer.heartbeat.interval.ms=6000", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert described() == {
        "consumer.heartbeat.interval.ms": ("6000", "DYNAMIC_GROUP_CONFIG"),
        "consumer.session.timeout.ms": ("50000", "DYNAMIC_GROUP_CONFIG"),
    }
    table = kafkapy("configs", "describe", "--group", "orders", bootstrap=bootstrap)
    assert table.code == 0, table.stderr
    assert "consumer.session.timeout.ms" in table.stdout
    assert "DYNAMIC_GROUP_CONFIG" in table.stdout
    r = kafkapy("configs", "alter", "--group", "orders", "--delete-config", "consumer.heartbeat.interval.ms",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert described() == {"consumer.session.timeout.ms": ("50000", "DYNAMIC_GROUP_CONFIG")}


def test_group_config_errors_name_the_kafka_code(bootstrap: str) -> None:
    r = kafkapy("configs", "alter", "--group", "orders", "--add-config", "consumer.session.timeout.ms=1000",
                bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_CONFIG (error code 40)" in r.stderr
    assert "group.consumer.min.session.timeout.ms" in r.stderr
    r = kafkapy("configs", "alter", "--group", "orders", "--add-config", "share.record.lock.duration.ms=1",
                bootstrap=bootstrap)
    assert r.code == 1
    assert "INVALID_CONFIG" in r.stderr
    assert "share.record.lock.duration.ms: must be at least 1000" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("flag", ["--group", "--topic", "--broker", "--broker-logger"])
def test_an_empty_resource_name_is_a_usage_error(flag: str) -> None:
    """An empty name is not sent (a broker would read "" as another resource or refuse it)."""
    for verb in (["describe"], ["alter", "--add-config", "k=v"]):
        r = kafkapy("configs", *verb, flag, "", bootstrap="127.0.0.1:1")
        assert r.code == 2, r.stderr
        assert f"{flag} needs a non-empty name" in r.stderr


def test_broker_logger_levels(bootstrap: str) -> None:
    def levels() -> dict[str, tuple[str, str]]:
        r = kafkapy("configs", "describe", "--broker-logger", "1", "--json", bootstrap=bootstrap)
        assert r.code == 0, r.stderr
        return {c["name"]: (c["value"], c["source"]) for c in r.json()}

    before = levels()
    assert before["root"] == ("WARN", "DYNAMIC_BROKER_LOGGER_CONFIG")  # the broker's --log-level
    assert "kafkapy.server.broker" in before
    r = kafkapy("configs", "alter", "--broker-logger", "1", "--add-config", "kafkapy.server.broker=DEBUG",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert levels()["kafkapy.server.broker"] == ("DEBUG", "DYNAMIC_BROKER_LOGGER_CONFIG")
    r = kafkapy("configs", "alter", "--broker-logger", "1", "--delete-config", "kafkapy.server.broker",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert levels()["kafkapy.server.broker"] == ("WARN", "DYNAMIC_BROKER_LOGGER_CONFIG")
    bad = kafkapy("configs", "alter", "--broker-logger", "1", "--add-config", "kafkapy.server.broker=LOUD",
                  bootstrap=bootstrap)
    assert bad.code == 1
    assert "INVALID_CONFIG (error code 40)" in bad.stderr


def test_kafka_configs_entity_spelling(bootstrap: str) -> None:
    """`--entity-type groups --entity-name g` (and brokers --entity-default) as kafka-configs.sh
    takes them, the same as kafkapy's --group / --broker-defaults."""
    r = kafkapy("configs", "alter", "--entity-type", "groups", "--entity-name", "entity-g", "--add-config",
                "consumer.session.timeout.ms=55000", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    r = kafkapy("configs", "describe", "--group", "entity-g", "--json", bootstrap=bootstrap)
    assert [(c["name"], c["value"]) for c in r.json()] == [("consumer.session.timeout.ms", "55000")]
    r = kafkapy("configs", "alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                "log.retention.ms=7200000", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    r = kafkapy("configs", "describe", "--broker-defaults", "--json", bootstrap=bootstrap)
    assert ("log.retention.ms", "7200000") in [(c["name"], c["value"]) for c in r.json()]
    assert kafkapy("configs", "alter", "--broker-defaults", "--delete-config", "log.retention.ms",
                   bootstrap=bootstrap).code == 0

    for args, message in [
        (["--entity-type", "topics", "--entity-name", "t", "--topic", "t"], "name the same thing"),
        (["--entity-type", "topics", "--entity-default"], "topics have no default entity"),
        (["--entity-type", "groups"], "--entity-name NAME or --entity-default"),
        (["--entity-name", "g"], "go with --entity-type"),
        (["--entity-type", "users", "--entity-name", "u"], "kafkapy users"),
    ]:
        r = kafkapy("configs", "describe", *args, bootstrap=bootstrap)
        assert r.code == 2, args
        assert message in r.stderr, r.stderr
