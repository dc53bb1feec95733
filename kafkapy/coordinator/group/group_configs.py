"""Group configs (KIP-848): per-group overrides of the broker's consumer-group settings.

Why: `kafka-configs --entity-type groups` (and `kafkapy configs --group`) set a consumer
group's session timeout or heartbeat interval without changing the broker's
`group.consumer.session.timeout.ms` / `group.consumer.heartbeat.interval.ms` for every group.
As in Kafka 4.0 they are GROUP config resources (type 32), stored with the cluster metadata
(ConfigRecord), validated against the broker's `group.consumer.min/max.*` bounds, and applied by
the coordinator to the group's members from their next heartbeat on. A group need not exist to
have configs. Kafka 4.0's `share.*` configs (KIP-932 share groups) are here too, stored,
described and checked against the broker's `group.share.*` bounds as Kafka does, so tools and
scripts written for Kafka 4.0 work unchanged; kafkapy has no share groups, so nothing reads them.

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
    """One group config (Kafka's GroupConfig): its type, the broker key whose value is its
    default (None: the fixed `default`), the broker keys bounding an INT one, and the values a
    STRING one may take."""

    name: str
    type: ConfigType
    broker_default: str | None
    min_key: str | None
    max_key: str | None
    doc: str
    default: str | None = None
    choices: tuple[str, ...] = ()
    at_least: int = 1  # Kafka's ConfigDef lower bound, checked before the broker's bounds


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
        GroupConfigKey(
            "share.session.timeout.ms",
            ConfigType.INT,
            "group.share.session.timeout.ms",
            "group.share.min.session.timeout.ms",
            "group.share.max.session.timeout.ms",
            "A member of this share group silent this long is removed (no share groups in kafkapy).",
        ),
        GroupConfigKey(
            "share.heartbeat.interval.ms",
            ConfigType.INT,
            "group.share.heartbeat.interval.ms",
            "group.share.min.heartbeat.interval.ms",
            "group.share.max.heartbeat.interval.ms",
            "Heartbeat interval given to the members of this share group (no share groups in kafkapy).",
        ),
        GroupConfigKey(
            "share.record.lock.duration.ms",
            ConfigType.INT,
            "group.share.record.lock.duration.ms",
            "group.share.min.record.lock.duration.ms",
            "group.share.max.record.lock.duration.ms",
            "How long a share group member holds a record it acquired (no share groups in kafkapy).",
            at_least=1000,
        ),
        GroupConfigKey(
            "share.auto.offset.reset",
            ConfigType.STRING,
            None,
            None,
            None,
            "Where a share group starts in a partition (no share groups in kafkapy).",
            default="latest",
            choices=("latest", "earliest"),
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
    "group.share.session.timeout.ms": "share_session_timeout_ms",
    "group.share.min.session.timeout.ms": "share_min_session_timeout_ms",
    "group.share.max.session.timeout.ms": "share_max_session_timeout_ms",
    "group.share.heartbeat.interval.ms": "share_heartbeat_interval_ms",
    "group.share.min.heartbeat.interval.ms": "share_min_heartbeat_interval_ms",
    "group.share.max.heartbeat.interval.ms": "share_max_heartbeat_interval_ms",
    "group.share.record.lock.duration.ms": "share_record_lock_duration_ms",
    "group.share.min.record.lock.duration.ms": "share_min_record_lock_duration_ms",
    "group.share.max.record.lock.duration.ms": "share_max_record_lock_duration_ms",
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
    broker_default = GROUP_CONFIGS[name].broker_default
    assert broker_default is not None, f"{name} is not an int group config"
    return _broker_value(config, broker_default)


def _value_problem(key: GroupConfigKey, raw: str, config: GroupConfig) -> tuple[int | None, str | None]:
    """(the int value, None), (None, None) for a good STRING, or (None, why it is refused)."""
    if key.type == ConfigType.STRING:
        if raw.strip() not in key.choices:  # case matters, as in Kafka's ConfigDef.ValidString
            return None, f"Invalid value {raw} for configuration {key.name}: must be one of {', '.join(key.choices)}"
        return None, None
    try:
        value = int(raw.strip())
    except ValueError:
        return None, f"Invalid value {raw} for configuration {key.name}: not an int"
    if value < key.at_least:
        return None, f"Invalid value {raw} for configuration {key.name}: must be at least {key.at_least}"
    assert key.min_key is not None
    assert key.max_key is not None
    low, high = _broker_value(config, key.min_key), _broker_value(config, key.max_key)
    if not low <= value <= high:
        return None, (
            f"Invalid value {raw} for configuration {key.name}: must be within [{low}, {high}] "
            f"({key.min_key} and {key.max_key})"
        )
    return value, None


def group_config_problem(configs: Mapping[str, str], config: GroupConfig) -> str | None:
    """Why `configs` (a group's whole override set) cannot be stored (INVALID_CONFIG), or None.

    Each int must be within the broker's bounds, a string one of its values, and the effective
    heartbeat interval below the effective session timeout (consumer and share alike), as
    Kafka's GroupConfig.validate requires."""
    values: dict[str, int] = {}
    for name, raw in configs.items():
        key = GROUP_CONFIGS.get(name)
        if key is None:
            return f"Unknown group config name: {name}"
        value, problem = _value_problem(key, raw, config)
        if problem is not None:
            return problem
        if value is not None:
            values[name] = value
    for kind in ("consumer", "share"):
        session_name, heartbeat_name = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        session = values.get(session_name, _broker_value(config, f"group.{kind}.session.timeout.ms"))
        heartbeat = values.get(heartbeat_name, _broker_value(config, f"group.{kind}.heartbeat.interval.ms"))
        if heartbeat >= session:
            return f"{heartbeat_name} ({heartbeat}) must be less than {session_name} ({session})"
    return None
