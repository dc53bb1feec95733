"""Group configs (KIP-848): per-group overrides of the broker's consumer-group settings.

Why: `kafka-configs --entity-type groups` (and `kafkapy configs --group`) set a consumer
group's session timeout or heartbeat interval without changing the broker's
`group.consumer.session.timeout.ms` / `group.consumer.heartbeat.interval.ms` for every group.
As in Kafka 4.0 they are GROUP config resources (type 32), stored with the cluster metadata
(ConfigRecord), validated against the broker's `group.consumer.min/max.*` bounds, and applied by
the coordinator to the group's members from their next heartbeat on. A group need not exist to
have configs. The `share.*` configs of share groups are not here (kafkapy has no share groups).

This module is the table (names, types, the broker key each one overrides, docs) and the
check; the server stores and describes the values, the controller commits them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from kafkapy.coordinator.group.results import GroupConfig
from kafkapy.protocol.config_types import ConfigType

__all__ = ["GROUP_CONFIGS", "GroupConfigKey", "group_config_problem", "group_setting"]


@dataclasses.dataclass(frozen=True, slots=True)
class GroupConfigKey:
    """One group config: its type, the broker key whose value is its default, and the broker
    keys bounding it (Kafka's GroupConfig)."""

    name: str
    type: ConfigType
    broker_default: str
    min_key: str
    max_key: str
    doc: str


GROUP_CONFIGS: dict[str, GroupConfigKey] = {
    k.name: k
    for k in [
        GroupConfigKey(
            "consumer.session.timeout.ms",
            ConfigType.INT,
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
            "A member of this consumer group silent this long is removed from it.",
        ),
        GroupConfigKey(
            "consumer.heartbeat.interval.ms",
            ConfigType.INT,
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
            "Heartbeat interval given to the members of this consumer group.",
        ),
    ]
}

# GroupConfig attribute holding each bound / default, by broker key
_SETTINGS = {
    "group.consumer.session.timeout.ms": "consumer_session_timeout_ms",
    "group.consumer.min.session.timeout.ms": "consumer_min_session_timeout_ms",
    "group.consumer.max.session.timeout.ms": "consumer_max_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "consumer_heartbeat_interval_ms",
    "group.consumer.min.heartbeat.interval.ms": "consumer_min_heartbeat_interval_ms",
    "group.consumer.max.heartbeat.interval.ms": "consumer_max_heartbeat_interval_ms",
}


def _broker_value(config: GroupConfig, broker_key: str) -> int:
    value: int = getattr(config, _SETTINGS[broker_key])
    return value


def group_setting(config: GroupConfig, group_id: str, name: str) -> int:
    """The value of group config `name` for `group_id`: its override, else the broker's."""
    raw = config.group_overrides.get(group_id, {}).get(name)
    if raw is not None:
        try:
            return int(raw)
        except ValueError:
            pass  # checked before it was stored; an older kafkapy's bad value keeps the default
    return _broker_value(config, GROUP_CONFIGS[name].broker_default)


def group_config_problem(configs: Mapping[str, str], config: GroupConfig) -> str | None:
    """Why `configs` (a group's whole override set) cannot be stored (INVALID_CONFIG), or None.

    Each value must be an int within the broker's bounds, and the effective heartbeat interval
    must stay below the effective session timeout, as Kafka's GroupConfig.validate requires."""
    values: dict[str, int] = {}
    for name, raw in configs.items():
        key = GROUP_CONFIGS.get(name)
        if key is None:
            if name.startswith("share."):  # Kafka 4.0's share group configs (KIP-932)
                return f"Unknown group config name: {name} (kafkapy has no share groups, KIP-932)"
            return f"Unknown group config name: {name}"
        try:
            values[name] = int(raw.strip())
        except ValueError:
            return f"Invalid value {raw} for configuration {name}: not an int"
        low, high = _broker_value(config, key.min_key), _broker_value(config, key.max_key)
        if not low <= values[name] <= high:
            return (
                f"Invalid value {raw} for configuration {name}: must be within [{low}, {high}] "
                f"({key.min_key} and {key.max_key})"
            )
    session = values.get(
        "consumer.session.timeout.ms", _broker_value(config, "group.consumer.session.timeout.ms")
    )
    heartbeat = values.get(
        "consumer.heartbeat.interval.ms",
        _broker_value(config, "group.consumer.heartbeat.interval.ms"),
    )
    if heartbeat >= session:
        return (
            f"consumer.heartbeat.interval.ms ({heartbeat}) must be less than "
            f"consumer.session.timeout.ms ({session})"
        )
    return None
