"""Group configs (KIP-848): a group's own session timeout and heartbeat interval, and their checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kafkapy.coordinator.group import GROUP_CONFIGS, GroupConfig, group_config_problem
from kafkapy.protocol.config_types import ConfigType

from .test_group_consumer import CH, Consumer


def _harness(overrides: dict[str, dict[str, str]]) -> CH:
    return CH(config=GroupConfig(group_overrides=overrides))


def test_a_groups_heartbeat_interval_is_its_own_and_follows_a_change() -> None:
    overrides: dict[str, dict[str, str]] = {"g": {"consumer.heartbeat.interval.ms": "7000"}}
    h, a, b = _harness(overrides), Consumer(), Consumer()
    assert h.join(a, ["t"]).heartbeat_interval_ms == 7000
    assert h.join(b, ["t"], group="other").heartbeat_interval_ms == 5000  # the broker's
    overrides["g"] = {"consumer.heartbeat.interval.ms": "9000"}  # the server updates in place
    assert h.ack(a).heartbeat_interval_ms == 9000
    del overrides["g"]
    assert h.ack(a).heartbeat_interval_ms == 5000


def test_a_groups_session_timeout_fences_its_silent_members() -> None:
    overrides = {"short": {"consumer.session.timeout.ms": "20000"}}
    h, a, b = _harness(overrides), Consumer(), Consumer()
    h.join(a, ["t"], group="short")
    h.join(b, ["t"])  # group "g": the broker's 45 s
    h.tick(25_000)
    assert h.coordinator.consumer_groups["short"].members == {}
    assert set(h.coordinator.consumer_groups["g"].members) == {b.member_id}


def test_a_changed_session_timeout_counts_from_the_next_heartbeat() -> None:
    overrides: dict[str, dict[str, str]] = {}
    h, a = _harness(overrides), Consumer()
    h.join(a, ["t"])
    overrides["g"] = {"consumer.session.timeout.ms": "50000"}
    h.tick(30_000)
    h.ack(a)  # schedules the session with 50 s from now
    h.tick(47_000)  # 47 s silent: the broker's 45 s would have fenced it
    assert set(h.coordinator.consumer_groups["g"].members) == {a.member_id}
    h.tick(4_000)
    assert h.coordinator.consumer_groups["g"].members == {}


BOUNDS = GroupConfig()


@pytest.mark.parametrize(
    ("configs", "ok"),
    [
        ({}, True),
        ({"consumer.session.timeout.ms": "45000"}, True),
        ({"consumer.session.timeout.ms": "60000"}, True),
        ({"consumer.session.timeout.ms": "44999"}, False),
        ({"consumer.session.timeout.ms": "60001"}, False),
        ({"consumer.session.timeout.ms": "soon"}, False),
        ({"consumer.heartbeat.interval.ms": "5000"}, True),
        ({"consumer.heartbeat.interval.ms": "15000"}, True),
        ({"consumer.heartbeat.interval.ms": "4999"}, False),
        ({"consumer.heartbeat.interval.ms": "15001"}, False),
        ({"share.session.timeout.ms": "45000"}, True),
        ({"share.session.timeout.ms": "44999"}, False),
        ({"share.session.timeout.ms": "60001"}, False),
        ({"share.heartbeat.interval.ms": "15000"}, True),
        ({"share.heartbeat.interval.ms": "4999"}, False),
        ({"share.record.lock.duration.ms": "15000"}, True),
        ({"share.record.lock.duration.ms": "60000"}, True),
        ({"share.record.lock.duration.ms": "14999"}, False),
        ({"share.record.lock.duration.ms": "60001"}, False),
        ({"share.record.lock.duration.ms": "soon"}, False),
        ({"share.auto.offset.reset": "earliest"}, True),
        ({"share.auto.offset.reset": "latest"}, True),
        ({"share.auto.offset.reset": "EARLIEST"}, False),
        ({"share.auto.offset.reset": "none"}, False),
        ({"share.isolation.level": "read_committed"}, False),  # Kafka 4.1's, not 4.0's
        ({"no.such.config": "1"}, False),
    ],
)
def test_values_are_checked_against_the_brokers_bounds(configs: dict[str, str], ok: bool) -> None:
    assert (group_config_problem(configs, BOUNDS) is None) == ok


def test_the_heartbeat_interval_must_stay_below_the_session_timeout() -> None:
    wide = replace(BOUNDS, consumer_min_session_timeout_ms=1000, consumer_max_heartbeat_interval_ms=60000)
    problem = group_config_problem(
        {"consumer.session.timeout.ms": "10000", "consumer.heartbeat.interval.ms": "10000"}, wide
    )
    assert problem is not None
    assert "less than" in problem
    # against the broker's session timeout too when the group sets only its heartbeat
    assert group_config_problem({"consumer.heartbeat.interval.ms": "50000"}, wide) is not None
    assert group_config_problem({"consumer.heartbeat.interval.ms": "44000"}, wide) is None


def test_the_table_names_kafka_4_0s_group_configs() -> None:
    assert set(GROUP_CONFIGS) == {
        "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms", "share.session.timeout.ms",
        "share.heartbeat.interval.ms", "share.record.lock.duration.ms", "share.auto.offset.reset",
    }
    for key in GROUP_CONFIGS.values():
        kind = key.name.split(".")[0]
        if key.type == ConfigType.STRING:
            assert key.default in key.choices
            continue
        for broker_key in (key.broker_default, key.min_key, key.max_key):
            assert broker_key is not None
            assert broker_key.startswith(f"group.{kind}.")


def test_share_configs_are_bounded_by_the_brokers_group_share_keys() -> None:
    """Kafka 4.0's share.* group configs: the broker's group.share.* bounds, Kafka's own lower
    bound of 1000 ms on the record lock duration, and heartbeat < session timeout."""
    wide = replace(BOUNDS, share_min_record_lock_duration_ms=1, share_min_session_timeout_ms=1000,
                   share_max_heartbeat_interval_ms=60000)
    assert group_config_problem({"share.record.lock.duration.ms": "999"}, wide) is not None  # at least 1000
    assert group_config_problem({"share.record.lock.duration.ms": "1000"}, wide) is None
    problem = group_config_problem({"share.session.timeout.ms": "10000", "share.heartbeat.interval.ms": "10000"}, wide)
    assert problem is not None
    assert "share.heartbeat.interval.ms" in problem
    # the consumer and share pairs are checked apart
    assert group_config_problem({"share.session.timeout.ms": "10000", "consumer.heartbeat.interval.ms": "10000"},
                                replace(wide, consumer_max_heartbeat_interval_ms=60000)) is None
