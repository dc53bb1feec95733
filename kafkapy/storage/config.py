"""Per-partition log configuration, named after Kafka's topic configs.

Why a dataclass keyed by Kafka's names: CreateTopics / AlterConfigs / DescribeConfigs speak in
`segment.bytes`-style strings, and operators know those names, so the mapping is mechanical
(`segment.bytes` <-> `segment_bytes`). Which names exist is said once, by the topic-config table
(`kafkapy.storage.topic_config`): the ones it marks as log settings are fields here, the other
known ones (`min.insync.replicas`, `compression.type`, ...) are kept in `extra` so a describe
round-trips them; unknown names are rejected with INVALID_CONFIG.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from kafkapy.storage.errors import InvalidLogConfigError
from kafkapy.storage.topic_config import TOPIC_CONFIGS, tiered_storage_problem, topic_config_problem

__all__ = ["INT64_MAX", "LogConfig", "validate_topic_configs"]

INT64_MAX = (1 << 63) - 1

_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_POLICIES = frozenset({"delete", "compact"})


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LogConfig:
    """Settings of one partition log; defaults are Apache Kafka's topic defaults.

    `-1` means "unlimited" for `retention_ms` / `retention_bytes`, as in Kafka.
    `flush_messages=1` makes `append` ask for an fsync before the produce is acknowledged
    (see `AppendResult.flush_needed`).
    """

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: str = "delete"
    index_interval_bytes: int = 4096
    flush_messages: int = INT64_MAX
    flush_ms: int = INT64_MAX
    max_message_bytes: int = 1024 * 1024 + 12
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = INT64_MAX
    message_timestamp_after_max_ms: int = 3_600_000
    delete_retention_ms: int = 24 * 3600 * 1000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    file_delete_delay_ms: int = 60_000
    extra: Mapping[str, str] = dataclasses.field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.segment_bytes < 14 + 61:
            raise InvalidLogConfigError(f"segment.bytes {self.segment_bytes} is too small")
        if self.segment_ms < 1:
            raise InvalidLogConfigError("segment.ms must be positive")
        if self.index_interval_bytes < 0:
            raise InvalidLogConfigError("index.interval.bytes must be >= 0")
        if self.max_message_bytes < 0:
            raise InvalidLogConfigError("max.message.bytes must be >= 0")
        if self.flush_messages < 1 or self.flush_ms < 0:
            raise InvalidLogConfigError("flush.messages must be >= 1 and flush.ms >= 0")
        if self.message_timestamp_type not in _TIMESTAMP_TYPES:
            raise InvalidLogConfigError(
                f"message.timestamp.type must be one of {_TIMESTAMP_TYPES}, "
                f"not {self.message_timestamp_type!r}"
            )
        policies = {p.strip() for p in self.cleanup_policy.split(",") if p.strip()}
        if not policies <= _POLICIES:
            raise InvalidLogConfigError(f"cleanup.policy {self.cleanup_policy!r} is not valid")
        if not 0.0 <= self.min_cleanable_dirty_ratio <= 1.0:
            raise InvalidLogConfigError("min.cleanable.dirty.ratio must be within [0, 1]")
        if self.message_timestamp_before_max_ms < 0 or self.message_timestamp_after_max_ms < 0:
            raise InvalidLogConfigError("message.timestamp.(before|after).max.ms must be >= 0")
        if self.delete_retention_ms < 0 or self.min_compaction_lag_ms < 0:
            raise InvalidLogConfigError("delete.retention.ms / min.compaction.lag.ms must be >= 0")

    @property
    def compact(self) -> bool:
        """True for `compact` and `compact,delete`: the cleaner keeps the latest value per key."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """True for `delete` and `compact,delete`: retention by time/size deletes old segments."""
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """The broker stamps batches with its clock (`message.timestamp.type=LogAppendTime`)."""
        return self.message_timestamp_type == "LogAppendTime"

    @classmethod
    def from_topic_configs(
        cls, configs: Mapping[str, str], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Overlay Kafka-named string configs (`{"segment.bytes": "1024"}`) on `defaults`.

        Raises `InvalidLogConfigError` (INVALID_CONFIG) for unknown names or bad values.
        """
        base = defaults if defaults is not None else cls()
        changes: dict[str, Any] = {}
        extra = dict(base.extra)
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        for name, raw in configs.items():
            key = TOPIC_CONFIGS.get(name)
            if key is None:
                raise InvalidLogConfigError(f"unknown topic config {name!r}")
            if key.log_setting:
                attr = name.replace(".", "_")
                changes[attr] = _parse(name, raw, types[attr])
            else:
                extra[name] = raw
        changes["extra"] = extra
        return dataclasses.replace(base, **changes)

    def to_topic_configs(self) -> dict[str, str]:
        """Every setting as Kafka-named strings (for DescribeConfigs and persistence)."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            if f.name == "extra":
                continue
            value = getattr(self, f.name)
            out[f.name.replace("_", ".")] = str(value)
        out.update(self.extra)
        return out

    def overrides(self, defaults: LogConfig) -> dict[str, str]:
        """Only the Kafka-named settings that differ from `defaults`."""
        mine, theirs = self.to_topic_configs(), defaults.to_topic_configs()
        return {k: v for k, v in mine.items() if theirs.get(k) != v}


def validate_topic_configs(
    configs: Mapping[str, str | None],
    defaults: LogConfig | None = None,
    *,
    existing: Mapping[str, str] | None = None,
    remote_storage_system_enabled: bool = False,
) -> LogConfig:
    """Check topic config overrides as CreateTopics and the alter APIs need them, on the broker
    and in the controller alike: every name and value against the topic-config table, then the
    whole set as a `LogConfig` over `defaults`, then Kafka's tiered-storage rules
    (`tiered_storage_problem`; `existing` is the topic's current override set, for turning
    remote storage off). Raises `InvalidLogConfigError` (INVALID_CONFIG)."""
    clean: dict[str, str] = {}
    for name, value in configs.items():
        problem = topic_config_problem(name, value)
        if problem is not None:
            raise InvalidLogConfigError(problem)
        assert value is not None
        clean[name] = value
    config = LogConfig.from_topic_configs(clean, defaults)
    problem = tiered_storage_problem(
        clean, existing or {}, system_enabled=remote_storage_system_enabled,
        retention_ms=config.retention_ms, retention_bytes=config.retention_bytes,
        cleanup_policy=config.cleanup_policy)
    if problem is not None:
        raise InvalidLogConfigError(problem)
    return config


def _parse(name: str, raw: str, type_name: object) -> object:
    text = str(raw).strip()
    try:
        if type_name in ("int", int):
            return int(text)
        if type_name in ("float", float):
            return float(text)
    except ValueError:
        raise InvalidLogConfigError(f"config {name}={raw!r} is not a number") from None
    return text
