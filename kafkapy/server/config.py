"""Broker configuration: Kafka's own key names, from defaults < server.properties < env < flags.

Why Kafka's names: users bring a `server.properties` written for a single-node KRaft Kafka and
expect it to work unchanged, and admin clients describe configs by those names. Values are kept
as strings (as Kafka's DescribeConfigs reports them) with typed accessors, and every value keeps
its *source* so DescribeConfigs can say whether it is a default or was set statically.

Keys kafkapy does not know are logged once as ignored - never fatal - so a full Kafka config file
(thread counts, socket buffers, controller quorum settings) starts without edits.

Environment overrides: `KAFKAPY_LOG_RETENTION_MS=1000` sets `log.retention.ms` (upper case,
`_` for `.`, `__` for a literal `_`); `KAFKAPY_TEST_FAULT_...` maps to `kafkapy.test.fault....`.
"""

from __future__ import annotations

import enum
import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BROKER_CONFIGS",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ConfigError",
    "ConfigSource",
    "ConfigType",
    "Listener",
    "TopicConfigKey",
    "env_overrides",
    "parse_listeners",
    "parse_properties",
    "validate_topic_config",
]

log = logging.getLogger(__name__)


class ConfigError(ValueError):
    """A configuration value that cannot be used (bad type, bad listener, unknown topic key)."""


class ConfigType(enum.IntEnum):
    """Config value types, numbered as DescribeConfigs v3+ reports them."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(enum.IntEnum):
    """Where a value came from, numbered as DescribeConfigs v1+ reports it."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


@dataclass(frozen=True, slots=True)
class BrokerConfigKey:
    name: str
    type: ConfigType
    default: str | None
    doc: str


@dataclass(frozen=True, slots=True)
class TopicConfigKey:
    """A topic-level key; `broker_synonyms` are the broker keys supplying its default, best first."""

    name: str
    type: ConfigType
    default: str
    broker_synonyms: tuple[str, ...]
    doc: str


_B = BrokerConfigKey
_T = ConfigType

# Broker keys kafkapy acts on. Defaults are the embedded developer defaults (see the module doc of
# kafkapy.cli.main); where they differ from Kafka's the doc says so.
BROKER_CONFIGS: dict[str, BrokerConfigKey] = {
    k.name: k
    for k in [
        _B("node.id", _T.INT, "1", "This broker's id; a single node is always the leader."),
        _B("broker.id", _T.INT, None, "Legacy synonym of node.id."),
        _B("process.roles", _T.LIST, "broker,controller", "Accepted for KRaft files; kafkapy is always a combined node."),
        _B("listeners", _T.LIST, "PLAINTEXT://127.0.0.1:9092", "Where to listen (Kafka's default binds all interfaces; ours is loopback)."),
        _B("advertised.listeners", _T.LIST, None, "Addresses handed to clients in Metadata; defaults to listeners."),
        _B("listener.security.protocol.map", _T.LIST, "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", "Listener name to security protocol."),
        _B("controller.listener.names", _T.LIST, "CONTROLLER", "Listeners reserved for the KRaft controller; kafkapy does not serve them."),
        _B("inter.broker.listener.name", _T.STRING, None, "Accepted; a single node has no inter-broker traffic."),
        _B("controller.quorum.voters", _T.LIST, "", "Accepted for KRaft files; unused on one node."),
        _B("controller.quorum.bootstrap.servers", _T.LIST, "", "Accepted for KRaft files; unused on one node."),
        _B("log.dirs", _T.LIST, None, "Data directories; the first also holds topic metadata."),
        _B("log.dir", _T.STRING, "./data", "Data directory when log.dirs is not set."),
        _B("num.partitions", _T.INT, "1", "Partitions of an auto-created topic or a CreateTopics with -1."),
        _B("default.replication.factor", _T.SHORT, "1", "Replication factor for -1; only 1 is possible on one node."),
        _B("min.insync.replicas", _T.INT, "1", "Default min.insync.replicas of topics."),
        _B("auto.create.topics.enable", _T.BOOLEAN, "true", "Create unknown topics on Metadata and Produce."),
        _B("delete.topic.enable", _T.BOOLEAN, "true", "Allow DeleteTopics."),
        _B("log.retention.ms", _T.LONG, None, "Default retention.ms; wins over minutes and hours."),
        _B("log.retention.minutes", _T.INT, None, "Default retention in minutes."),
        _B("log.retention.hours", _T.INT, "168", "Default retention in hours."),
        _B("log.retention.bytes", _T.LONG, "-1", "Default retention.bytes."),
        _B("log.segment.bytes", _T.INT, "1073741824", "Default segment.bytes."),
        _B("log.roll.ms", _T.LONG, None, "Default segment.ms; wins over hours."),
        _B("log.roll.hours", _T.INT, "168", "Default segment roll time in hours."),
        _B("log.cleanup.policy", _T.LIST, "delete", "Default cleanup.policy."),
        _B("log.cleaner.enable", _T.BOOLEAN, "true", "Run the compaction cleaner."),
        _B("log.cleaner.delete.retention.ms", _T.LONG, "86400000", "Default delete.retention.ms."),
        _B("log.cleaner.min.cleanable.ratio", _T.DOUBLE, "0.5", "Default min.cleanable.dirty.ratio."),
        _B("log.cleaner.min.compaction.lag.ms", _T.LONG, "0", "Default min.compaction.lag.ms."),
        _B("log.cleaner.max.compaction.lag.ms", _T.LONG, "9223372036854775807", "Default max.compaction.lag.ms."),
        _B("log.index.interval.bytes", _T.INT, "4096", "Default index.interval.bytes."),
        _B("log.index.size.max.bytes", _T.INT, "10485760", "Default segment.index.bytes."),
        _B("log.segment.delete.delay.ms", _T.LONG, "60000", "Default file.delete.delay.ms."),
        _B("log.flush.interval.messages", _T.LONG, "9223372036854775807", "Default flush.messages."),
        _B("log.flush.interval.ms", _T.LONG, None, "Default flush.ms (unset: rely on the periodic flusher)."),
        _B("log.flush.scheduler.interval.ms", _T.LONG, "1000", "How often the background flusher looks for dirty logs."),
        _B("log.retention.check.interval.ms", _T.LONG, "300000", "How often retention and the cleaner run."),
        _B("log.message.timestamp.type", _T.STRING, "CreateTime", "Default message.timestamp.type."),
        _B("message.max.bytes", _T.INT, "1048588", "Default max.message.bytes (largest batch accepted)."),
        _B("compression.type", _T.STRING, "producer", "Default compression.type (only 'producer' is applied)."),
        _B("unclean.leader.election.enable", _T.BOOLEAN, "false", "Accepted; meaningless on one node."),
        _B("socket.request.max.bytes", _T.INT, "104857600", "Largest request frame; checked from the size prefix."),
        _B("connections.max.idle.ms", _T.LONG, "600000", "Close connections idle this long."),
        _B("max.incremental.fetch.session.cache.slots", _T.INT, "1000", "Fetch sessions kept (KIP-227)."),
        _B("group.initial.rebalance.delay.ms", _T.INT, "0", "Kafka's default is 3000; 0 makes a dev broker snappy."),
        _B("group.min.session.timeout.ms", _T.INT, "6000", "Smallest consumer session timeout accepted."),
        _B("group.max.session.timeout.ms", _T.INT, "1800000", "Largest consumer session timeout accepted."),
        _B("group.max.size", _T.INT, "2147483647", "Most members a classic group admits (GROUP_MAX_SIZE_REACHED beyond)."),
        _B("offsets.topic.num.partitions", _T.INT, "50", "Partitions of __consumer_offsets."),
        _B("offsets.topic.replication.factor", _T.SHORT, "1", "Accepted; one node."),
        _B("offsets.retention.minutes", _T.INT, "10080", "Committed offset retention."),
        _B("offsets.retention.check.interval.ms", _T.LONG, "600000", "How often expired committed offsets are removed."),
        _B("offset.metadata.max.bytes", _T.INT, "4096", "Longest commit metadata string (OFFSET_METADATA_TOO_LARGE beyond)."),
        _B("transaction.state.log.num.partitions", _T.INT, "50", "Partitions of __transaction_state."),
        _B("transaction.state.log.replication.factor", _T.SHORT, "1", "Accepted; one node."),
        _B("transaction.state.log.min.isr", _T.INT, "1", "Accepted; one node."),
        _B("transaction.max.timeout.ms", _T.INT, "900000", "Largest transaction timeout accepted."),
        _B("transactional.id.expiration.ms", _T.INT, "604800000", "Idle transactional ids expire after this."),
        _B("producer.id.expiration.ms", _T.INT, "86400000", "Idle idempotent producer state expires after this."),
        _B("kafkapy.shutdown.grace.ms", _T.LONG, "1500", "How long shutdown waits for in-flight requests."),
        _B("kafkapy.max.inflight.requests.per.connection", _T.INT, "64", "Pipelined requests read ahead per connection."),
        _B("kafkapy.test.fault.drop.after.produce.append", _T.INT, "0", "TEST ONLY: drop the connection after this many produce appends instead of answering them (0 = off)."),
    ]
}

TOPIC_CONFIGS: dict[str, TopicConfigKey] = {
    k.name: k
    for k in [
        TopicConfigKey("cleanup.policy", _T.LIST, "delete", ("log.cleanup.policy",), "delete, compact or both."),
        TopicConfigKey("retention.ms", _T.LONG, "604800000", ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), "Age after which segments are deleted; -1 keeps forever."),
        TopicConfigKey("retention.bytes", _T.LONG, "-1", ("log.retention.bytes",), "Per-partition size bound; -1 unbounded."),
        TopicConfigKey("segment.bytes", _T.INT, "1073741824", ("log.segment.bytes",), "Segment file size before rolling."),
        TopicConfigKey("segment.ms", _T.LONG, "604800000", ("log.roll.ms", "log.roll.hours"), "Segment age before rolling."),
        TopicConfigKey("segment.index.bytes", _T.INT, "10485760", ("log.index.size.max.bytes",), "Index file size."),
        TopicConfigKey("index.interval.bytes", _T.INT, "4096", ("log.index.interval.bytes",), "Bytes between index entries."),
        TopicConfigKey("max.message.bytes", _T.INT, "1048588", ("message.max.bytes",), "Largest record batch accepted."),
        TopicConfigKey("message.timestamp.type", _T.STRING, "CreateTime", ("log.message.timestamp.type",), "CreateTime or LogAppendTime."),
        TopicConfigKey("min.insync.replicas", _T.INT, "1", ("min.insync.replicas",), "Always satisfied on one node."),
        TopicConfigKey("flush.messages", _T.LONG, "9223372036854775807", ("log.flush.interval.messages",), "Force fsync after this many messages."),
        TopicConfigKey("flush.ms", _T.LONG, "9223372036854775807", ("log.flush.interval.ms",), "Force fsync after this long."),
        TopicConfigKey("delete.retention.ms", _T.LONG, "86400000", ("log.cleaner.delete.retention.ms",), "How long compaction keeps tombstones."),
        TopicConfigKey("min.cleanable.dirty.ratio", _T.DOUBLE, "0.5", ("log.cleaner.min.cleanable.ratio",), "Dirty ratio that triggers compaction."),
        TopicConfigKey("min.compaction.lag.ms", _T.LONG, "0", ("log.cleaner.min.compaction.lag.ms",), "Records younger than this stay uncompacted."),
        TopicConfigKey("max.compaction.lag.ms", _T.LONG, "9223372036854775807", ("log.cleaner.max.compaction.lag.ms",), "Records older than this get compacted."),
        TopicConfigKey("file.delete.delay.ms", _T.LONG, "60000", ("log.segment.delete.delay.ms",), "Delay before deleting a segment file."),
        TopicConfigKey("compression.type", _T.STRING, "producer", ("compression.type",), "Accepted; batches are stored as produced."),
        TopicConfigKey("unclean.leader.election.enable", _T.BOOLEAN, "false", ("unclean.leader.election.enable",), "Meaningless on one node."),
    ]
}

_MS_PER_UNIT = {"log.retention.minutes": 60_000, "log.retention.hours": 3_600_000, "log.roll.hours": 3_600_000}
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
_CLEANUP_POLICIES = ("delete", "compact")
_warned_unknown: set[str] = set()


def _check_value(name: str, typ: ConfigType, value: str) -> None:
    """Raise ConfigError unless `value` parses as `typ` (Kafka's ConfigDef type check)."""
    try:
        if typ in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
            n = int(value.strip())
            bits = {ConfigType.INT: 31, ConfigType.SHORT: 15, ConfigType.LONG: 63}[typ]
            if not -(1 << bits) <= n < (1 << bits):
                raise ValueError("out of range")
        elif typ == ConfigType.DOUBLE:
            float(value)
        elif typ == ConfigType.BOOLEAN and value.strip().lower() not in ("true", "false"):
            raise ValueError("not a boolean")
    except ValueError as e:
        raise ConfigError(f"invalid value {value!r} for {name} ({typ.name.lower()}): {e}") from None


def validate_topic_config(name: str, value: str | None) -> None:
    """Check a topic-level override the way CreateTopics/AlterConfigs need (-> INVALID_CONFIG)."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise ConfigError(f"unknown topic config {name!r}")
    if value is None:
        raise ConfigError(f"null value for topic config {name!r}")
    _check_value(name, key.type, value)
    if name == "message.timestamp.type" and value not in _TIMESTAMP_TYPES:
        raise ConfigError(f"{name} must be one of {', '.join(_TIMESTAMP_TYPES)}")
    if name == "cleanup.policy":
        parts = [p.strip() for p in value.split(",") if p.strip()]
        if not parts or any(p not in _CLEANUP_POLICIES for p in parts):
            raise ConfigError(f"{name} must be a list of {', '.join(_CLEANUP_POLICIES)}")
    if name in ("segment.bytes", "max.message.bytes") and int(value) < (14 if name == "segment.bytes" else 0):
        raise ConfigError(f"{name} too small: {value}")


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", s[i + 2 : i + 6]):
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            out.append(_ESCAPES.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def _split_key_value(line: str) -> tuple[str, str]:
    """Split at the first unescaped '=', ':' or whitespace, as java.util.Properties does."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            rest = line[i:].lstrip(" \t\f")
            if c in "=:":
                rest = line[i + 1 :]
            elif rest[:1] in ("=", ":"):
                rest = rest[1:]
            return _unescape(line[:i]), _unescape(rest.lstrip(" \t\f"))
        i += 1
    return _unescape(line), ""


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text: comments (#, !), continuations (trailing \\), escapes."""
    result: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            continue
        logical.append(line)
        key, value = _split_key_value("".join(logical))
        logical = []
        result[key] = value
    if logical:
        key, value = _split_key_value("".join(logical))
        result[key] = value
    return result


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """Map `KAFKAPY_*` variables to config keys (see the module doc)."""
    out: dict[str, str] = {}
    for var, value in environ.items():
        if not var.startswith("KAFKAPY_") or len(var) == len("KAFKAPY_"):
            continue
        rest = var[len("KAFKAPY_") :].lower()
        key = ".".join(part.replace("\0", "_") for part in rest.replace("__", "\0").split("_"))
        if key.startswith("test.fault."):
            key = "kafkapy." + key
        out[key] = value
    return out


@dataclass(frozen=True, slots=True)
class Listener:
    """One `NAME://host:port` entry; `host` "" means every interface (Kafka's meaning)."""

    name: str
    host: str
    port: int
    security_protocol: str

    @property
    def bind_host(self) -> str:
        return self.host or "0.0.0.0"


_LISTENER_RE = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:/\[\]]*):(\d+)$")


def parse_listeners(value: str, protocol_map: Mapping[str, str]) -> list[Listener]:
    """Parse Kafka's listener list; the name picks the security protocol via the map."""
    listeners: list[Listener] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        m = _LISTENER_RE.match(item)
        if m is None:
            raise ConfigError(f"invalid listener {item!r} (expected NAME://HOST:PORT)")
        name, host, port = m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))
        if port > 65535:
            raise ConfigError(f"invalid port in listener {item!r}")
        protocol = protocol_map.get(name, name if name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL") else "")
        if not protocol:
            raise ConfigError(f"listener {name} has no entry in listener.security.protocol.map")
        if any(existing.name == name for existing in listeners):
            raise ConfigError(f"listener name {name} used twice")
        listeners.append(Listener(name, host, port, protocol))
    return listeners


class BrokerConfig:
    """The effective broker configuration with per-key sources (see the module doc).

    Immutable after load: dynamic broker configs are not supported yet, so the server can read
    values without locking and DescribeConfigs reports STATIC_BROKER_CONFIG / DEFAULT_CONFIG.
    """

    def __init__(self, explicit: Mapping[str, str] | None = None) -> None:
        explicit = dict(explicit or {})
        self._explicit: dict[str, str] = {}
        for key, value in explicit.items():
            known = BROKER_CONFIGS.get(key)
            if known is None:
                if key not in _warned_unknown:
                    _warned_unknown.add(key)
                    log.info("ignoring config %s (not supported by kafkapy yet)", key)
                continue
            _check_value(key, known.type, value)
            self._explicit[key] = value.strip() if known.type != ConfigType.STRING else value
        ts = self.get_str("log.message.timestamp.type")
        if ts not in _TIMESTAMP_TYPES:
            raise ConfigError(f"log.message.timestamp.type must be one of {', '.join(_TIMESTAMP_TYPES)}")
        self.listeners = self._broker_listeners(self.get_str("listeners"))
        advertised = self.get("advertised.listeners")
        self.advertised_listeners = (
            self._broker_listeners(advertised) if advertised else list(self.listeners)
        )
        if not self.listeners:
            raise ConfigError("no PLAINTEXT listener configured (see 'listeners')")

    @classmethod
    def load(
        cls,
        config_file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Defaults < config file < `KAFKAPY_*` environment < command-line overrides."""
        merged: dict[str, str] = {}
        if config_file is not None:
            try:
                merged.update(parse_properties(config_file.read_text(encoding="utf-8")))
            except OSError as e:
                raise ConfigError(f"cannot read config file {config_file}: {e}") from None
        merged.update(env_overrides(environ or {}))
        merged.update(overrides or {})
        return cls(merged)

    def _broker_listeners(self, value: str) -> list[Listener]:
        protocol_map: dict[str, str] = {}
        for entry in self.get_list("listener.security.protocol.map"):
            name, _, proto = entry.partition(":")
            protocol_map[name.strip().upper()] = proto.strip().upper()
        controller_names = {n.upper() for n in self.get_list("controller.listener.names")}
        result: list[Listener] = []
        for listener in parse_listeners(value, protocol_map):
            if listener.name in controller_names:
                continue
            if listener.security_protocol != "PLAINTEXT":
                log.warning(
                    "listener %s uses %s, which kafkapy does not support yet; not serving it",
                    listener.name, listener.security_protocol,
                )
                continue
            result.append(listener)
        return result

    # -- raw access -------------------------------------------------------------------------------
    def get(self, name: str) -> str | None:
        if name in self._explicit:
            return self._explicit[name]
        key = BROKER_CONFIGS.get(name)
        return key.default if key is not None else None

    def get_str(self, name: str) -> str:
        value = self.get(name)
        if value is None:
            raise KeyError(name)
        return value

    def get_int(self, name: str) -> int:
        return int(self.get_str(name))

    def get_bool(self, name: str) -> bool:
        return self.get_str(name).strip().lower() == "true"

    def get_list(self, name: str) -> list[str]:
        value = self.get(name)
        return [v.strip() for v in value.split(",") if v.strip()] if value else []

    def source(self, name: str) -> ConfigSource:
        return ConfigSource.STATIC_BROKER_CONFIG if name in self._explicit else ConfigSource.DEFAULT_CONFIG

    def is_set(self, name: str) -> bool:
        return name in self._explicit

    def items(self) -> Iterable[tuple[str, str | None, ConfigSource]]:
        """Every known broker key with its effective value and source (for DescribeConfigs)."""
        for name in BROKER_CONFIGS:
            yield name, self.get(name), self.source(name)

    # -- derived values ---------------------------------------------------------------------------
    @property
    def node_id(self) -> int:
        if self.is_set("node.id") or not self.is_set("broker.id"):
            return self.get_int("node.id")
        return self.get_int("broker.id")

    @property
    def data_dirs(self) -> list[Path]:
        dirs = self.get_list("log.dirs") or [self.get_str("log.dir")]
        return [Path(d).expanduser() for d in dirs]

    def topic_default(self, topic_key: str) -> tuple[str, str, ConfigSource]:
        """Broker-supplied default of a topic key: (value, broker key it came from, source)."""
        key = TOPIC_CONFIGS[topic_key]
        for syn in key.broker_synonyms:
            if self.is_set(syn):
                value = self.get_str(syn)
                if syn in _MS_PER_UNIT:
                    value = str(int(value) * _MS_PER_UNIT[syn])
                return value, syn, ConfigSource.STATIC_BROKER_CONFIG
        for syn in key.broker_synonyms:
            value_or_none = self.get(syn)
            if value_or_none is not None:
                value = value_or_none
                if syn in _MS_PER_UNIT:
                    value = str(int(value) * _MS_PER_UNIT[syn])
                return value, syn, ConfigSource.DEFAULT_CONFIG
        return key.default, key.broker_synonyms[0], ConfigSource.DEFAULT_CONFIG

    def topic_defaults(self) -> dict[str, str]:
        """Every topic key's broker-level default (the base under per-topic overrides)."""
        return {name: self.topic_default(name)[0] for name in TOPIC_CONFIGS}
