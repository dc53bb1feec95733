"""Which config values the broker and the controller accept at run time, and the group
coordinator's settings from the broker's config: pure functions over the config tables.

Why a module of its own: the broker applies these rules (`dynamic_config`, the group driver) and
the active controller checks the same ones before it commits a ConfigRecord
(`cluster/controller_driver.py`); neither side needs the other's machinery for it, so the
cluster parts do not import the broker through here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kafkapy.broker.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    ConfigType,
    check_broker_value,
    validate_topic_config,
)

if TYPE_CHECKING:
    from kafkapy.coordinator.group import GroupConfig

__all__ = [
    "DYNAMIC_BROKER_KEYS",
    "DYNAMIC_BROKER_LISTS",
    "PER_BROKER_KEYS",
    "dynamic_config_problem",
    "group_config_check",
    "group_config_from",
]

#: broker key -> the topic config it is the default of
_TOPIC_OF: dict[str, str] = {
    syn: name
    for name, key in TOPIC_CONFIGS.items()
    for syn in key.broker_synonyms
    if syn in BROKER_CONFIGS
}
#: Kafka's per-broker dynamic keys (DynamicBrokerConfig.PerBrokerConfigs) that kafkapy stores:
#: the Kerberos ones, inert (GSSAPI is refused at start), so a Kafka tool or test that sets them
#: at run time (librdkafka's 0081) gets Kafka's answer. One broker only, never the cluster default.
PER_BROKER_KEYS = frozenset(k for k in BROKER_CONFIGS if k.startswith("sasl.kerberos."))
#: the broker keys kafkapy takes at run time: the broker defaults of topic configs and the above
DYNAMIC_BROKER_KEYS = frozenset(_TOPIC_OF) | PER_BROKER_KEYS
#: the list-typed ones (APPEND / SUBTRACT) -> the built-in default they start from
DYNAMIC_BROKER_LISTS = {
    name: BROKER_CONFIGS[name].default or ""
    for name in sorted(DYNAMIC_BROKER_KEYS)
    if BROKER_CONFIGS[name].type == ConfigType.LIST
}
_UNIT_KEYS = frozenset({"log.retention.minutes", "log.retention.hours", "log.roll.hours"})


def dynamic_config_problem(name: str, value: str) -> str | None:
    """Why `name` cannot be set to `value` at run time, or None (the controller answers
    INVALID_REQUEST, Kafka's code for a broker config it cannot validate)."""
    if name not in DYNAMIC_BROKER_KEYS:
        known = "unknown broker config" if name not in BROKER_CONFIGS else "not dynamic in kafkapy"
        return f"{name}: {known}; cannot update it at run time"
    try:
        check_broker_value(name, value)
        if name in _TOPIC_OF and name not in _UNIT_KEYS:
            validate_topic_config(_TOPIC_OF[name], value)
    except ConfigError as e:
        return str(e) or name
    return None


def group_config_from(config: BrokerConfig) -> GroupConfig:
    """Kafka's broker settings for groups (every key is in the broker's config table)."""
    from kafkapy.coordinator.group import GroupConfig  # the coordinator's classes load on use

    return GroupConfig(
        initial_rebalance_delay_ms=config.get_int("group.initial.rebalance.delay.ms"),
        min_session_timeout_ms=config.get_int("group.min.session.timeout.ms"),
        max_session_timeout_ms=config.get_int("group.max.session.timeout.ms"),
        max_size=config.get_int("group.max.size"),
        offsets_retention_ms=config.get_int("offsets.retention.minutes") * 60_000,
        offsets_retention_check_interval_ms=config.get_int("offsets.retention.check.interval.ms"),
        offset_metadata_max_bytes=config.get_int("offset.metadata.max.bytes"),
        consumer_heartbeat_interval_ms=config.get_int("group.consumer.heartbeat.interval.ms"),
        consumer_session_timeout_ms=config.get_int("group.consumer.session.timeout.ms"),
        consumer_assignors=tuple(config.get_list("group.consumer.assignors")) or ("uniform",),
        consumer_max_size=config.get_int("group.consumer.max.size"),
        consumer_min_session_timeout_ms=config.get_int("group.consumer.min.session.timeout.ms"),
        consumer_max_session_timeout_ms=config.get_int("group.consumer.max.session.timeout.ms"),
        consumer_min_heartbeat_interval_ms=config.get_int(
            "group.consumer.min.heartbeat.interval.ms"
        ),
        consumer_max_heartbeat_interval_ms=config.get_int(
            "group.consumer.max.heartbeat.interval.ms"
        ),
        share_session_timeout_ms=config.get_int("group.share.session.timeout.ms"),
        share_min_session_timeout_ms=config.get_int("group.share.min.session.timeout.ms"),
        share_max_session_timeout_ms=config.get_int("group.share.max.session.timeout.ms"),
        share_heartbeat_interval_ms=config.get_int("group.share.heartbeat.interval.ms"),
        share_min_heartbeat_interval_ms=config.get_int("group.share.min.heartbeat.interval.ms"),
        share_max_heartbeat_interval_ms=config.get_int("group.share.max.heartbeat.interval.ms"),
        share_record_lock_duration_ms=config.get_int("group.share.record.lock.duration.ms"),
        share_min_record_lock_duration_ms=config.get_int("group.share.min.record.lock.duration.ms"),
        share_max_record_lock_duration_ms=config.get_int("group.share.max.record.lock.duration.ms"),
        group_overrides=config.group_configs,
    )


def group_config_check(config: BrokerConfig) -> Callable[[Mapping[str, str]], str | None]:
    """Why a group's new config set cannot be stored (INVALID_CONFIG), or None: the group
    coordinator's table against `config`'s bounds (also the controller's check)."""
    bounds: list[GroupConfig] = []  # read on the first check, so a start builds no coordinator classes

    def check(configs: Mapping[str, str]) -> str | None:
        from kafkapy.coordinator.group import group_config_problem

        if not bounds:
            bounds.append(group_config_from(config))
        return group_config_problem(configs, bounds[0])

    return check
