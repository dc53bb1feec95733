"""Group configs (KIP-848): a group's own session timeout and heartbeat interval, and their checks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kafkapy.coordinator.group import GROUP_CONFIGS, GroupConfig, group_config_problem

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
        ({"share.session.timeout.ms": "45000"}, False),
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


def test_the_table_names_kafkas_consumer_group_configs() -> None:
    assert set(GROUP_CONFIGS) == {"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"}
    for key in GROUP_CONFIGS.values():
        for broker_key in (key.broker_default, key.min_key, key.max_key):
            assert broker_key.startswith("group.consumer.")
