"""The one catalogue of Kafka topic configs: names, types, defaults, checks and broker defaults.

Why one table in the storage layer: CreateTopics, AlterConfigs and IncrementalAlterConfigs are
validated by the broker (single node) and by the controller (cluster), DescribeConfigs lists
every key with its broker-supplied default, and `LogConfig` turns the values into the settings
of a partition log. Two catalogues drifted before (a key refused by one and accepted by the
other); here both the broker and the controller, which may only import the layers below them,
read the same rows, and `tests/storage/test_topic_config.py` ties them to `LogConfig`'s fields.

Each row says:
- `type` and `default` as Kafka's DescribeConfigs reports them (the defaults are Kafka's);
- `broker_synonyms`: the broker keys that supply the default, best first (Kafka's
  `ServerTopicConfigSynonyms`), so a broker's `log.retention.hours` is the default of every
  topic's `retention.ms`;
- `log_setting`: `LogConfig` has a field for it (its name with `_` for `.`); otherwise the value
  is kept verbatim in `LogConfig.extra` and acted on elsewhere (replication reads
  `min.insync.replicas`) or only described;
- the checks of Kafka's ConfigDef: `at_least` / `at_most`, `choices` (each element of a list),
  `check` for a shape those cannot say.
- `listed`: False for names Kafka 4.0 removed; they are still accepted so scripts written for
  Kafka 3 run, and DescribeConfigs shows them only when a topic sets them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping

from kafkapy.protocol.config_types import ConfigType

__all__ = [
    "INT64_MAX_TEXT",
    "TOPIC_CONFIGS",
    "TopicConfigKey",
    "tiered_storage_problem",
    "topic_config_problem",
]

INT64_MAX_TEXT = str((1 << 63) - 1)
_BITS = {ConfigType.INT: 31, ConfigType.SHORT: 15, ConfigType.LONG: 63}


@dataclasses.dataclass(frozen=True, slots=True)
class TopicConfigKey:
    """One topic config (see the module doc for what each field means)."""

    name: str
    type: ConfigType
    default: str
    broker_synonyms: tuple[str, ...]
    doc: str
    log_setting: bool = False
    at_least: float | None = None
    at_most: float | None = None
    choices: tuple[str, ...] = ()
    check: Callable[[str], str | None] | None = None
    listed: bool = True


_THROTTLED = re.compile(r"^(\*|[0-9]+:[0-9]+)$")


def _throttled_replicas(value: str) -> str | None:
    """Kafka's ThrottledReplicaListValidator: `*` or `partition:broker,...`."""
    entries = [v.strip() for v in value.split(",") if v.strip()]
    if all(_THROTTLED.match(v) for v in entries) and ("*" not in entries or len(entries) == 1):
        return None
    return "must be * or a list of partition:broker pairs"


_T = ConfigType
_MAX = INT64_MAX_TEXT

TOPIC_CONFIGS: dict[str, TopicConfigKey] = {
    k.name: k
    for k in [
        TopicConfigKey(
            "cleanup.policy",
            _T.LIST,
            "delete",
            ("log.cleanup.policy",),
            "delete, compact or both; empty: neither.",
            log_setting=True,
            choices=("delete", "compact"),
        ),
        TopicConfigKey(
            "compression.type",
            _T.STRING,
            "producer",
            ("compression.type",),
            "Accepted; batches are stored as produced.",
            choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        ),
        TopicConfigKey(
            "compression.gzip.level",
            _T.INT,
            "-1",
            ("compression.gzip.level",),
            "Accepted; batches are stored as produced.",
            at_least=-1,
            at_most=9,
        ),
        TopicConfigKey(
            "compression.lz4.level",
            _T.INT,
            "9",
            ("compression.lz4.level",),
            "Accepted; batches are stored as produced.",
            at_least=1,
            at_most=17,
        ),
        TopicConfigKey(
            "compression.zstd.level",
            _T.INT,
            "3",
            ("compression.zstd.level",),
            "Accepted; batches are stored as produced.",
            at_least=-131072,
            at_most=22,
        ),
        TopicConfigKey(
            "delete.retention.ms",
            _T.LONG,
            "86400000",
            ("log.cleaner.delete.retention.ms",),
            "How long compaction keeps tombstones.",
            log_setting=True,
            at_least=0,
        ),
        TopicConfigKey(
            "file.delete.delay.ms",
            _T.LONG,
            "60000",
            ("log.segment.delete.delay.ms",),
            "Delay before deleting a segment file.",
            log_setting=True,
            at_least=0,
        ),
        TopicConfigKey(
            "flush.messages",
            _T.LONG,
            _MAX,
            ("log.flush.interval.messages",),
            "Force fsync after this many messages.",
            log_setting=True,
            at_least=1,
        ),
        TopicConfigKey(
            "flush.ms",
            _T.LONG,
            _MAX,
            ("log.flush.interval.ms",),
            "Force fsync after this long.",
            log_setting=True,
            at_least=0,
        ),
        TopicConfigKey(
            "follower.replication.throttled.replicas",
            _T.LIST,
            "",
            (),
            "Accepted; replication is not throttled.",
            check=_throttled_replicas,
        ),
        TopicConfigKey(
            "index.interval.bytes",
            _T.INT,
            "4096",
            ("log.index.interval.bytes",),
            "Bytes between index entries.",
            log_setting=True,
            at_least=0,
        ),
        TopicConfigKey(
            "leader.replication.throttled.replicas",
            _T.LIST,
            "",
            (),
            "Accepted; replication is not throttled.",
            check=_throttled_replicas,
        ),
        TopicConfigKey(
            "local.retention.bytes",
            _T.LONG,
            "-2",
            ("log.local.retention.bytes",),
            "Bytes kept on local disk once copied to the remote tier; -2: retention.bytes.",
            at_least=-2,
        ),
        TopicConfigKey(
            "local.retention.ms",
            _T.LONG,
            "-2",
            ("log.local.retention.ms",),
            "Time kept on local disk once copied to the remote tier; -2: retention.ms.",
            at_least=-2,
        ),
        TopicConfigKey(
            "max.compaction.lag.ms",
            _T.LONG,
            _MAX,
            ("log.cleaner.max.compaction.lag.ms",),
            "Records older than this get compacted.",
            at_least=1,
        ),
        TopicConfigKey(
            "max.message.bytes",
            _T.INT,
            "1048588",
            ("message.max.bytes",),
            "Largest record batch accepted.",
            log_setting=True,
            at_least=0,
        ),
        TopicConfigKey(
            "message.timestamp.after.max.ms",
            _T.LONG,
            "3600000",
            ("log.message.timestamp.after.max.ms",),
            "CreateTime topics: refuse records further than this in the future (INVALID_TIMESTAMP).",
            log_setting=True,
            at_least=0,
        ),
        TopicConfigKey(
            "message.timestamp.before.max.ms",
            _T.LONG,
            _MAX,
            ("log.message.timestamp.before.max.ms",),
            "CreateTime topics: refuse records older than this (INVALID_TIMESTAMP).",
            log_setting=True,
            at_least=0,
        ),
        TopicConfigKey(
            "message.timestamp.type",
            _T.STRING,
            "CreateTime",
            ("log.message.timestamp.type",),
            "CreateTime or LogAppendTime.",
            log_setting=True,
            choices=("CreateTime", "LogAppendTime"),
        ),
        TopicConfigKey(
            "min.cleanable.dirty.ratio",
            _T.DOUBLE,
            "0.5",
            ("log.cleaner.min.cleanable.ratio",),
            "Dirty ratio that triggers compaction.",
            log_setting=True,
            at_least=0,
            at_most=1,
        ),
        TopicConfigKey(
            "min.compaction.lag.ms",
            _T.LONG,
            "0",
            ("log.cleaner.min.compaction.lag.ms",),
            "Records younger than this stay uncompacted.",
            log_setting=True,
            at_least=0,
        ),
        TopicConfigKey(
            "min.insync.replicas",
            _T.INT,
            "1",
            ("min.insync.replicas",),
            "acks=all needs this many in-sync replicas (NOT_ENOUGH_REPLICAS below).",
            at_least=1,
        ),
        TopicConfigKey(
            "preallocate",
            _T.BOOLEAN,
            "false",
            ("log.preallocate",),
            "Accepted; segment files grow as written.",
        ),
        TopicConfigKey(
            "remote.log.copy.disable",
            _T.BOOLEAN,
            "false",
            (),
            "Tiered topic turned read-only (KIP-950): nothing more is copied.",
        ),
        TopicConfigKey(
            "remote.log.delete.on.disable",
            _T.BOOLEAN,
            "false",
            (),
            "Required to turn remote storage off (KIP-950); the remote data goes with it.",
        ),
        TopicConfigKey(
            "remote.storage.enable",
            _T.BOOLEAN,
            "false",
            (),
            "Copy rolled segments to the remote tier (needs remote.log.storage.system.enable).",
        ),
        TopicConfigKey(
            "retention.bytes",
            _T.LONG,
            "-1",
            ("log.retention.bytes",),
            "Per-partition size bound; -1 unbounded.",
            log_setting=True,
        ),
        TopicConfigKey(
            "retention.ms",
            _T.LONG,
            "604800000",
            ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
            "Age after which segments are deleted; -1 keeps forever.",
            log_setting=True,
            at_least=-1,
        ),
        TopicConfigKey(
            "segment.bytes",
            _T.INT,
            "1073741824",
            ("log.segment.bytes",),
            "Segment file size before rolling.",
            log_setting=True,
            at_least=14,
        ),
        TopicConfigKey(
            "segment.index.bytes",
            _T.INT,
            "10485760",
            ("log.index.size.max.bytes",),
            "Index file size.",
            at_least=4,
        ),
        TopicConfigKey(
            "segment.jitter.ms",
            _T.LONG,
            "0",
            ("log.roll.jitter.ms", "log.roll.jitter.hours"),
            "Accepted; segments roll at segment.ms without jitter.",
            at_least=0,
        ),
        TopicConfigKey(
            "segment.ms",
            _T.LONG,
            "604800000",
            ("log.roll.ms", "log.roll.hours"),
            "Segment age before rolling.",
            log_setting=True,
            at_least=1,
        ),
        TopicConfigKey(
            "unclean.leader.election.enable",
            _T.BOOLEAN,
            "false",
            ("unclean.leader.election.enable",),
            "Cluster: let a live out-of-sync replica lead when the whole ISR is down.",
        ),
        TopicConfigKey(
            "message.downconversion.enable",
            _T.BOOLEAN,
            "true",
            (),
            "Kafka 3 name (removed in Kafka 4.0); accepted, not acted on.",
            listed=False,
        ),
        TopicConfigKey(
            "message.format.version",
            _T.STRING,
            "3.0-IV1",
            (),
            "Kafka 3 name (removed in Kafka 4.0); accepted, not acted on.",
            listed=False,
        ),
        TopicConfigKey(
            "message.timestamp.difference.max.ms",
            _T.LONG,
            _MAX,
            (),
            "Kafka 3 name (removed in Kafka 4.0); accepted, not acted on.",
            listed=False,
            at_least=0,
        ),
    ]
}


def _type_problem(key: TopicConfigKey, value: str) -> str | None:
    text = value.strip()
    try:
        if key.type in _BITS:
            n: float = int(text)
            bits = _BITS[key.type]
            if not -(1 << bits) <= n < (1 << bits):
                return f"{text} is out of range of a {key.type.name.lower()}"
        elif key.type == ConfigType.DOUBLE:
            n = float(text)
        elif key.type == ConfigType.BOOLEAN:
            if text.lower() not in ("true", "false"):
                return f"{value!r} is not a boolean"
            return None
        else:
            return None
    except ValueError:
        return f"{value!r} is not a {key.type.name.lower()}"
    if key.at_least is not None and n < key.at_least:
        return f"value must be at least {key.at_least:g}"
    if key.at_most is not None and n > key.at_most:
        return f"value must be at most {key.at_most:g}"
    return None


def topic_config_problem(name: str, value: str | None) -> str | None:
    """Why `name=value` cannot be a topic config override (INVALID_CONFIG), or None.

    Per key only; the combination is checked by building a `LogConfig` from it."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        return f"Unknown topic config name: {name}"
    if value is None:
        return f"Null value not supported for topic config {name}"
    problem = _type_problem(key, value)
    if problem is None and key.choices:
        items = [v.strip() for v in value.split(",")] if key.type == ConfigType.LIST else [value]
        bad = [v for v in items if v and v not in key.choices]
        if bad or (key.type != ConfigType.LIST and not items[0]):
            problem = f"must be {'a list of ' if key.type == ConfigType.LIST else ''}" + (
                ", ".join(key.choices)
            )
    if problem is None and key.check is not None:
        problem = key.check(value)
    return None if problem is None else f"Invalid value {value} for configuration {name}: {problem}"


def _flag(configs: Mapping[str, str], name: str) -> bool:
    return configs.get(name, TOPIC_CONFIGS[name].default or "false").strip().lower() == "true"


def _local_retention_problem(name: str, local: int, limit_name: str, limit: int) -> str | None:
    """Kafka's rule for `local.retention.*` on a tiered topic: -2 means "as `retention.*`",
    anything else must be a real limit no larger than the total one (when that is limited)."""
    if limit == -1 or local == -2:
        return None
    if local == -1:
        return f"Invalid value {local} for configuration {name}: Value must not be -1 as {limit_name} value is set as {limit}."
    if local > limit:
        return f"Invalid value {local} for configuration {name}: Value must not be more than {limit_name} property value: {limit}"
    return None


def tiered_storage_problem(
    configs: Mapping[str, str], existing: Mapping[str, str], *, system_enabled: bool,
    retention_ms: int, retention_bytes: int, cleanup_policy: str,
) -> str | None:
    """Why a topic's whole new override set breaks Kafka's tiered-storage rules (INVALID_CONFIG).

    `configs` / `existing`: the new and the current overrides; the retention and cleanup policy
    are the effective ones (overrides over broker defaults). Kafka's rules and messages
    (LogConfig.validateTopicLogConfigValues): remote storage needs the broker's
    `remote.log.storage.system.enable` and a delete-only cleanup policy; `local.retention.*`
    must fit within `retention.*`; with `remote.log.copy.disable` the local and total
    retention must be the same (KIP-950: nothing more is copied); and turning remote storage
    off needs `remote.log.delete.on.disable=true` (the remote data goes with it).
    """
    if not _flag(configs, "remote.storage.enable"):
        if _flag(existing, "remote.storage.enable") and not _flag(configs, "remote.log.delete.on.disable"):
            return ("It is invalid to disable remote storage without deleting remote data. If you want to "
                    "keep the remote data and turn to read only, please set `remote.storage.enable=true,"
                    "remote.log.copy.disable=true`. If you want to disable remote storage and delete all "
                    "remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
        return None
    if not system_enabled:
        return ("Tiered Storage functionality is disabled in the broker. "
                "Topic cannot be configured with remote log storage.")
    policies = [p.strip() for p in cleanup_policy.split(",") if p.strip()]
    if policies and policies != ["delete"]:
        return ("Remote log storage only supports topics with cleanup.policy=delete or "
                "cleanup.policy being an empty list.")
    local_bytes = int(configs.get("local.retention.bytes", "-2"))
    local_ms = int(configs.get("local.retention.ms", "-2"))
    problem = _local_retention_problem(
        "local.retention.bytes", local_bytes, "retention.bytes", retention_bytes,
    ) or _local_retention_problem("local.retention.ms", local_ms, "retention.ms", retention_ms)
    if problem is None and _flag(configs, "remote.log.copy.disable"):
        for kind, local, total in (("bytes", local_bytes, retention_bytes), ("ms", local_ms, retention_ms)):
            if local not in (-2, total):
                return (f"When `remote.log.copy.disable` is set to true, the `local.retention.{kind}` and "
                        f"`retention.{kind}` must be set to the identical value because there will be no "
                        "more logs copied to the remote storage.")
    return problem
