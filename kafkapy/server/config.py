"""Broker configuration: Kafka's own key names, from defaults < server.properties < env < flags.

Why Kafka's names: users bring a `server.properties` written for a single-node KRaft Kafka and
expect it to work unchanged, and admin clients describe configs by those names. Values are kept
as strings (as Kafka's DescribeConfigs reports them) with typed accessors, and every value keeps
its *source* so DescribeConfigs can say whether it is a default or was set statically.

Keys kafkapy does not know are logged once as ignored - never fatal - so a full Kafka config file
(thread counts, socket buffers, controller quorum settings) starts without edits. The exception
is a security setting kafkapy cannot honour (an authorizer other than StandardAuthorizer, a Java
SASL plugin, ...): that refuses to start, naming the key (`kafkapy.server.security_settings`).

Environment overrides: `KAFKAPY_LOG_RETENTION_MS=1000` sets `log.retention.ms` (upper case,
`_` for `.`, `__` for a literal `_`); `KAFKAPY_TEST_FAULT_...` maps to `kafkapy.test.fault....`,
and a name only known with the `kafkapy.` prefix gets it (`KAFKAPY_SASL_USERS`).
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kafkapy.protocol.config_types import ConfigSource, ConfigType
from kafkapy.server.security_settings import INTER_NODE_KEYS, unsupported_security_setting
from kafkapy.storage.topic_config import TOPIC_CONFIGS, TopicConfigKey, topic_config_problem

__all__ = [
    "BROKER_CONFIGS",
    "SECURITY_PROTOCOLS",
    "STANDARD_AUTHORIZER",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "ClusterConfig",
    "ConfigError",
    "ConfigSource",
    "ConfigType",
    "Listener",
    "TopicConfigKey",
    "env_overrides",
    "parse_listeners",
    "parse_properties",
    "parse_voters",
    "validate_topic_config",
]

log = logging.getLogger(__name__)


#: the one authorizer kafkapy has (Kafka's KRaft authorizer: ACLs in the metadata log)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class ConfigError(ValueError):
    """A configuration value that cannot be used (bad type, bad listener, unknown topic key)."""


@dataclass(frozen=True, slots=True)
class BrokerConfigKey:
    name: str
    type: ConfigType
    default: str | None
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
        _B(
            "process.roles",
            _T.LIST,
            "broker,controller",
            "broker, controller or both; a broker-only node is always a cluster member.",
        ),
        _B(
            "listeners",
            _T.LIST,
            "PLAINTEXT://127.0.0.1:9092",
            "Where to listen (Kafka's default binds all interfaces; ours is loopback).",
        ),
        _B(
            "advertised.listeners",
            _T.LIST,
            None,
            "Addresses handed to clients in Metadata; defaults to listeners.",
        ),
        _B(
            "listener.security.protocol.map",
            _T.LIST,
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "Listener name to security protocol.",
        ),
        _B(
            "controller.listener.names",
            _T.LIST,
            "CONTROLLER",
            "Listeners the controller quorum is served on (cluster mode only; one node does not bind them).",
        ),
        _B(
            "inter.broker.listener.name",
            _T.STRING,
            None,
            "Broker listener replicas fetch over (default: the first broker listener).",
        ),
        _B(
            "sasl.enabled.mechanisms",
            _T.LIST,
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "SASL mechanisms of SASL_* listeners (Kafka's default is GSSAPI, which kafkapy lacks).",
        ),
        _B(
            "sasl.jaas.config",
            _T.PASSWORD,
            None,
            'JAAS line; its user_NAME="PASSWORD" options are SASL users (also read from listener.name.L.MECH.sasl.jaas.config).',
        ),
        _B(
            "kafkapy.sasl.users",
            _T.PASSWORD,
            None,
            "SASL users NAME:PASSWORD,... for PLAIN and SCRAM-SHA-256/512 (see README, Security).",
        ),
        _B(
            "authorizer.class.name",
            _T.STRING,
            "",
            f"Empty (no authorizer: any client may do anything) or {STANDARD_AUTHORIZER} "
            "(ACLs in the metadata log); any other class refuses to start.",
        ),
        _B(
            "super.users",
            _T.STRING,
            None,
            "Principals the authorizer allows everything, e.g. User:admin;User:ops.",
        ),
        _B(
            "allow.everyone.if.no.acl.found",
            _T.BOOLEAN,
            "false",
            "The authorizer allows what no ACL of the resource speaks about.",
        ),
        _B(
            "ssl.keystore.type",
            _T.STRING,
            "PEM",
            "Only PEM: ssl.keystore.location is a PEM file holding the certificate chain and the private key.",
        ),
        _B(
            "ssl.keystore.location",
            _T.STRING,
            None,
            "PEM file with this broker's certificate chain and private key (SSL/SASL_SSL listeners).",
        ),
        _B(
            "ssl.keystore.password",
            _T.PASSWORD,
            None,
            "Password of the private key in ssl.keystore.location (synonym of ssl.key.password).",
        ),
        _B(
            "ssl.key.password",
            _T.PASSWORD,
            None,
            "Password of the private key, if it is encrypted.",
        ),
        _B(
            "ssl.certificate.location",
            _T.STRING,
            None,
            "PEM certificate chain (librdkafka-style name; with ssl.key.location instead of a keystore).",
        ),
        _B(
            "ssl.key.location",
            _T.STRING,
            None,
            "PEM private key belonging to ssl.certificate.location.",
        ),
        _B("ssl.truststore.type", _T.STRING, "PEM", "Only PEM."),
        _B(
            "ssl.truststore.location",
            _T.STRING,
            None,
            "PEM CA certificates that client certificates must chain to (ssl.client.auth).",
        ),
        _B(
            "ssl.ca.location",
            _T.STRING,
            None,
            "librdkafka-style synonym of ssl.truststore.location.",
        ),
        _B(
            "ssl.client.auth",
            _T.STRING,
            "none",
            "none, requested or required: whether TLS clients must present a certificate.",
        ),
        _B(
            "ssl.endpoint.identification.algorithm",
            _T.STRING,
            "https",
            "Inter-node TLS: check the other node's host name against its certificate (empty: do not).",
        ),
        _B(
            "controller.quorum.voters",
            _T.LIST,
            "",
            "The controller quorum, id@host:port,...; more than one voter turns cluster mode on.",
        ),
        _B(
            "controller.quorum.bootstrap.servers",
            _T.LIST,
            "",
            "Controller addresses host:port,...; kafkapy still needs controller.quorum.voters for a cluster.",
        ),
        _B(
            "controller.quorum.election.timeout.ms",
            _T.INT,
            "1000",
            "Raft: a candidate's election timeout (randomised up to twice this).",
        ),
        _B(
            "controller.quorum.fetch.timeout.ms",
            _T.INT,
            "2000",
            "Raft: a voter without a leader's answer this long starts an election.",
        ),
        _B(
            "controller.quorum.request.timeout.ms",
            _T.INT,
            "2000",
            "Timeout of one request between controller quorum members.",
        ),
        _B(
            "metadata.log.max.record.bytes.between.snapshots",
            _T.LONG,
            "20971520",
            "Cluster mode: a node snapshots its metadata image after this many bytes of new records.",
        ),
        _B(
            "broker.session.timeout.ms",
            _T.LONG,
            "9000",
            "A broker without a heartbeat this long is fenced by the controller.",
        ),
        _B(
            "broker.heartbeat.interval.ms",
            _T.INT,
            "2000",
            "How often a broker heartbeats to the active controller.",
        ),
        _B(
            "replica.lag.time.max.ms",
            _T.LONG,
            "30000",
            "A follower not caught up for this long leaves the ISR.",
        ),
        _B(
            "replica.fetch.max.bytes",
            _T.INT,
            "1048576",
            "Bytes a follower asks for per partition per fetch (at least one batch).",
        ),
        _B(
            "replica.fetch.response.max.bytes",
            _T.INT,
            "10485760",
            "Bytes a follower asks for per fetch in all.",
        ),
        _B("replica.fetch.wait.max.ms", _T.INT, "500", "Long-poll time of a follower's fetch."),
        _B("replica.fetch.min.bytes", _T.INT, "1", "Bytes a follower's fetch waits for."),
        _B("replica.fetch.backoff.ms", _T.INT, "1000", "Pause after a failed follower fetch."),
        _B("log.dirs", _T.LIST, None, "Data directories; the first also holds topic metadata."),
        _B("log.dir", _T.STRING, "./data", "Data directory when log.dirs is not set."),
        _B(
            "num.partitions",
            _T.INT,
            "1",
            "Partitions of an auto-created topic or a CreateTopics with -1.",
        ),
        _B(
            "default.replication.factor",
            _T.SHORT,
            "1",
            "Replication factor for -1 (only 1 is possible on one node).",
        ),
        _B("min.insync.replicas", _T.INT, "1", "Default min.insync.replicas of topics."),
        _B(
            "auto.create.topics.enable",
            _T.BOOLEAN,
            "true",
            "Create unknown topics on Metadata and Produce.",
        ),
        _B("delete.topic.enable", _T.BOOLEAN, "true", "Allow DeleteTopics."),
        _B("log.retention.ms", _T.LONG, None, "Default retention.ms; wins over minutes and hours."),
        _B("log.retention.minutes", _T.INT, None, "Default retention in minutes."),
        _B("log.retention.hours", _T.INT, "168", "Default retention in hours."),
        _B("log.retention.bytes", _T.LONG, "-1", "Default retention.bytes."),
        _B("log.segment.bytes", _T.INT, "1073741824", "Default segment.bytes."),
        _B("log.roll.ms", _T.LONG, None, "Default segment.ms; wins over hours."),
        _B("log.roll.hours", _T.INT, "168", "Default segment roll time in hours."),
        _B("log.roll.jitter.ms", _T.LONG, None, "Default segment.jitter.ms; wins over hours."),
        _B("log.roll.jitter.hours", _T.INT, "0", "Default segment.jitter.ms in hours."),
        _B("log.preallocate", _T.BOOLEAN, "false", "Default preallocate."),
        _B("log.local.retention.ms", _T.LONG, "-2", "Default local.retention.ms."),
        _B("log.local.retention.bytes", _T.LONG, "-2", "Default local.retention.bytes."),
        _B("compression.gzip.level", _T.INT, "-1", "Default compression.gzip.level."),
        _B("compression.lz4.level", _T.INT, "9", "Default compression.lz4.level."),
        _B("compression.zstd.level", _T.INT, "3", "Default compression.zstd.level."),
        _B("log.cleanup.policy", _T.LIST, "delete", "Default cleanup.policy."),
        _B("log.cleaner.enable", _T.BOOLEAN, "true", "Run the compaction cleaner."),
        _B(
            "log.cleaner.backoff.ms",
            _T.LONG,
            "15000",
            "How often the cleaner looks for logs to compact.",
        ),
        _B("log.cleaner.delete.retention.ms", _T.LONG, "86400000", "Default delete.retention.ms."),
        _B(
            "log.cleaner.min.cleanable.ratio",
            _T.DOUBLE,
            "0.5",
            "Default min.cleanable.dirty.ratio.",
        ),
        _B("log.cleaner.min.compaction.lag.ms", _T.LONG, "0", "Default min.compaction.lag.ms."),
        _B(
            "log.cleaner.max.compaction.lag.ms",
            _T.LONG,
            "9223372036854775807",
            "Default max.compaction.lag.ms.",
        ),
        _B("log.index.interval.bytes", _T.INT, "4096", "Default index.interval.bytes."),
        _B("log.index.size.max.bytes", _T.INT, "10485760", "Default segment.index.bytes."),
        _B("log.segment.delete.delay.ms", _T.LONG, "60000", "Default file.delete.delay.ms."),
        _B(
            "log.flush.interval.messages", _T.LONG, "9223372036854775807", "Default flush.messages."
        ),
        _B(
            "log.flush.interval.ms",
            _T.LONG,
            None,
            "Default flush.ms (unset: rely on the periodic flusher).",
        ),
        _B(
            "log.flush.scheduler.interval.ms",
            _T.LONG,
            "1000",
            "How often the background flusher looks for dirty logs.",
        ),
        _B(
            "log.retention.check.interval.ms",
            _T.LONG,
            "300000",
            "How often retention and the cleaner run.",
        ),
        _B(
            "log.message.timestamp.type", _T.STRING, "CreateTime", "Default message.timestamp.type."
        ),
        _B(
            "log.message.timestamp.before.max.ms",
            _T.LONG,
            "9223372036854775807",
            "Default message.timestamp.before.max.ms.",
        ),
        _B(
            "log.message.timestamp.after.max.ms",
            _T.LONG,
            "3600000",
            "Default message.timestamp.after.max.ms.",
        ),
        _B(
            "message.max.bytes",
            _T.INT,
            "1048588",
            "Default max.message.bytes (largest batch accepted).",
        ),
        _B(
            "compression.type",
            _T.STRING,
            "producer",
            "Default compression.type (only 'producer' is applied).",
        ),
        _B(
            "unclean.leader.election.enable",
            _T.BOOLEAN,
            "false",
            "Cluster: elect a live replica outside the ISR when the whole ISR is down (risks losing acknowledged writes; per topic too).",
        ),
        _B(
            "socket.request.max.bytes",
            _T.INT,
            "104857600",
            "Largest request frame; checked from the size prefix.",
        ),
        _B("connections.max.idle.ms", _T.LONG, "600000", "Close connections idle this long."),
        _B("max.connections", _T.INT, "2147483647", "Broker-wide connections; accepting waits at the limit."),
        _B("max.connections.per.ip", _T.INT, "2147483647", "Connections per client IP; more are closed."),
        _B(
            "max.connections.per.ip.overrides",
            _T.STRING,
            "",
            "Per-IP limits HOST_OR_IP:N,... overriding max.connections.per.ip.",
        ),
        _B(
            "max.connection.creation.rate",
            _T.INT,
            "2147483647",
            "New connections accepted per second, broker-wide; accepting waits above it.",
        ),
        _B(
            "connection.failed.authentication.delay.ms",
            _T.INT,
            "100",
            "How long a connection that failed SASL authentication stays open after the answer.",
        ),
        _B(
            "sasl.server.max.receive.size",
            _T.INT,
            "524288",
            "Largest frame a SASL listener takes before authentication (Kafka's CVE-2022-34917 cap).",
        ),
        _B(
            "max.incremental.fetch.session.cache.slots",
            _T.INT,
            "1000",
            "Fetch sessions kept (KIP-227).",
        ),
        _B("quota.window.num", _T.INT, "11", "Samples a client quota rate is measured over."),
        _B("quota.window.size.seconds", _T.INT, "1", "Length of one client quota sample."),
        _B(
            "group.initial.rebalance.delay.ms",
            _T.INT,
            "0",
            "Kafka's default is 3000; 0 makes a dev broker snappy.",
        ),
        _B(
            "group.min.session.timeout.ms",
            _T.INT,
            "6000",
            "Smallest consumer session timeout accepted.",
        ),
        _B(
            "group.max.session.timeout.ms",
            _T.INT,
            "1800000",
            "Largest consumer session timeout accepted.",
        ),
        _B(
            "group.max.size",
            _T.INT,
            "2147483647",
            "Most members a classic group admits (GROUP_MAX_SIZE_REACHED beyond).",
        ),
        _B(
            "group.consumer.heartbeat.interval.ms",
            _T.INT,
            "5000",
            "Heartbeat interval the coordinator gives KIP-848 consumer group members.",
        ),
        _B(
            "group.consumer.session.timeout.ms",
            _T.INT,
            "45000",
            "A KIP-848 consumer group member silent this long is removed from its group.",
        ),
        _B(
            "group.consumer.assignors",
            _T.LIST,
            "uniform,range",
            "Server-side assignors of KIP-848 consumer groups; the first is the default.",
        ),
        _B(
            "group.consumer.max.size",
            _T.INT,
            "2147483647",
            "Most members a KIP-848 consumer group admits (GROUP_MAX_SIZE_REACHED beyond).",
        ),
        _B(
            "group.consumer.min.session.timeout.ms",
            _T.INT,
            "45000",
            "Smallest consumer.session.timeout.ms a consumer group's config may set.",
        ),
        _B(
            "group.consumer.max.session.timeout.ms",
            _T.INT,
            "60000",
            "Largest consumer.session.timeout.ms a consumer group's config may set.",
        ),
        _B(
            "group.consumer.min.heartbeat.interval.ms",
            _T.INT,
            "5000",
            "Smallest consumer.heartbeat.interval.ms a consumer group's config may set.",
        ),
        _B(
            "group.consumer.max.heartbeat.interval.ms",
            _T.INT,
            "15000",
            "Largest consumer.heartbeat.interval.ms a consumer group's config may set.",
        ),
        _B("offsets.topic.num.partitions", _T.INT, "50", "Partitions of __consumer_offsets."),
        _B(
            "offsets.topic.replication.factor",
            _T.SHORT,
            "3",
            "Replicas of __consumer_offsets in a cluster (capped at the registered brokers); one node ignores it.",
        ),
        _B("offsets.retention.minutes", _T.INT, "10080", "Committed offset retention."),
        _B(
            "offsets.retention.check.interval.ms",
            _T.LONG,
            "600000",
            "How often expired committed offsets are removed.",
        ),
        _B(
            "offset.metadata.max.bytes",
            _T.INT,
            "4096",
            "Longest commit metadata string (OFFSET_METADATA_TOO_LARGE beyond).",
        ),
        _B(
            "transaction.state.log.num.partitions",
            _T.INT,
            "50",
            "Partitions of __transaction_state.",
        ),
        _B(
            "transaction.state.log.replication.factor",
            _T.SHORT,
            "3",
            "Replicas of __transaction_state in a cluster (capped at the registered brokers); one node ignores it.",
        ),
        _B("transaction.state.log.min.isr", _T.INT, "1", "Accepted; one node."),
        _B("transaction.max.timeout.ms", _T.INT, "900000", "Largest transaction timeout accepted."),
        _B(
            "transactional.id.expiration.ms",
            _T.INT,
            "604800000",
            "Idle transactional ids expire after this.",
        ),
        _B(
            "producer.id.expiration.ms",
            _T.INT,
            "86400000",
            "Idle idempotent producer state expires after this.",
        ),
        _B(
            "producer.id.expiration.check.interval.ms",
            _T.INT,
            "600000",
            "How often idle producer state is swept (the only place it expires).",
        ),
        _B(
            "kafkapy.leader.lease.enable",
            _T.BOOLEAN,
            "true",
            "Cluster mode: a broker whose last heartbeat answer is older than broker.session.timeout.ms refuses writes (NOT_LEADER_OR_FOLLOWER) until the controller answers again; false = Kafka's behaviour.",
        ),
        _B(
            "kafkapy.shutdown.grace.ms",
            _T.LONG,
            "1500",
            "How long shutdown waits for in-flight requests.",
        ),
        _B(
            "kafkapy.http.listener",
            _T.STRING,
            "",
            "HOST:PORT of the HTTP listener (/metrics, /healthz, /readyz, status page at /); "
            "empty: off. A bare PORT binds loopback.",
        ),
        _B(
            "kafkapy.log.requests",
            _T.LIST,
            "",
            "APIs (Kafka's names: Produce,Fetch,...; or all) whose requests are logged one line "
            "each (logger kafkapy.request) with client id, principal, latency and error code.",
        ),
        _B(
            "kafkapy.max.inflight.requests.per.connection",
            _T.INT,
            "64",
            "Pipelined requests read ahead per connection.",
        ),
        _B(
            "kafkapy.test.fault.drop.after.produce.append",
            _T.INT,
            "0",
            "TEST ONLY: drop the connection after this many produce appends instead of answering them (0 = off).",
        ),
        _B(
            "kafkapy.test.fault.control.socket",
            _T.STRING,
            "",
            "TEST ONLY: a Unix socket path where tests install request faults (kafkapy.server.faults; empty = off).",
        ),
    ]
}

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_LISTENER_KEY_RE = re.compile(r"^listener\.name\.[A-Za-z0-9_]+\.(.+)$")


def _is_listener_security_key(key: str) -> bool:
    """`listener.name.<listener>.<ssl.* / sasl.* key>` or `...<mechanism>.sasl.jaas.config`."""
    m = _LISTENER_KEY_RE.match(key)
    if m is None:
        return False
    rest = m.group(1)
    return rest.endswith(".sasl.jaas.config") or (
        rest in BROKER_CONFIGS and rest.startswith(("ssl.", "sasl."))
    )


_MS_PER_UNIT = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}
_warned_unknown: set[str] = set()


# Kafka's ConfigDef lower bounds (atLeast) for the keys whose bad value would only fail later, as
# a topic that cannot be created or a loop that never runs.
_AT_LEAST = {
    "num.partitions": 1,
    "default.replication.factor": 1,
    "offsets.topic.num.partitions": 1,
    "offsets.topic.replication.factor": 1,
    "transaction.state.log.num.partitions": 1,
    "transaction.state.log.replication.factor": 1,
    "min.insync.replicas": 1,
    "log.segment.bytes": 14,
    "message.max.bytes": 0,
    "log.index.interval.bytes": 0,
    "log.retention.check.interval.ms": 1,
    "group.initial.rebalance.delay.ms": 0,
    "socket.request.max.bytes": 1,
}


def _check_range(name: str, value: str) -> None:
    low = _AT_LEAST.get(name)
    if low is not None and int(value.strip()) < low:
        raise ConfigError(f"invalid value {value.strip()} for {name}: must be at least {low}")


def unknown_key_message(key: str) -> str:
    """The start-up warning for a key kafkapy does not know, with the known key it is close to."""
    close = difflib.get_close_matches(key, BROKER_CONFIGS, n=1, cutoff=0.85)
    hint = f" - did you mean {close[0]}?" if close else ""
    return f"ignoring config {key}: kafkapy does not know it{hint}"


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


def check_broker_value(name: str, value: str) -> None:
    """Raise ConfigError unless `value` is valid for broker key `name` (type and range)."""
    key = BROKER_CONFIGS.get(name)
    if key is None:
        raise ConfigError(f"unknown broker config {name!r}")
    _check_value(name, key.type, value)
    _check_range(name, value)


def validate_topic_config(name: str, value: str | None) -> None:
    """Check one topic-level override against the topic-config table (-> INVALID_CONFIG)."""
    problem = topic_config_problem(name, value)
    if problem is not None:
        raise ConfigError(problem)


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


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, logical line) of Java `.properties` text: comments dropped,
    continuations (trailing \\) joined."""
    logical: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.lstrip(" \t\f")
        if not logical and (not line or line[0] in "#!"):
            continue
        if not logical:
            start = n
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            logical.append(line[:-1])
            continue
        logical.append(line)
        yield start, "".join(logical)
        logical = []
    if logical:
        yield start, "".join(logical)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java `.properties` text: comments (#, !), continuations (trailing \\), escapes."""
    return dict(_split_key_value(line) for _, line in _logical_lines(text))


def property_lines(text: str) -> dict[str, int]:
    """The line each key of `parse_properties(text)` is set on (its last setting wins)."""
    return {_split_key_value(line)[0]: n for n, line in _logical_lines(text)}


def env_overrides(environ: Mapping[str, str]) -> dict[str, str]:
    """Map `KAFKAPY_*` variables to config keys (see the module doc)."""
    out: dict[str, str] = {}
    for var, value in environ.items():
        if not var.startswith("KAFKAPY_") or len(var) == len("KAFKAPY_"):
            continue
        rest = var[len("KAFKAPY_") :].lower()
        key = ".".join(part.replace("\0", "_") for part in rest.replace("__", "\0").split("_"))
        if key.startswith("test.fault.") or (
            key not in BROKER_CONFIGS and "kafkapy." + key in BROKER_CONFIGS
        ):
            key = "kafkapy." + key  # KAFKAPY_SASL_USERS is kafkapy.sasl.users
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
        protocol = protocol_map.get(
            name, name if name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL") else ""
        )
        if not protocol:
            raise ConfigError(f"listener {name} has no entry in listener.security.protocol.map")
        if any(existing.name == name for existing in listeners):
            raise ConfigError(f"listener name {name} used twice")
        listeners.append(Listener(name, host, port, protocol))
    return listeners


_VOTER_RE = re.compile(r"^(\d+)@(\[[^\]]*\]|[^:@/\[\]]+):(\d+)$")
_SERVER_RE = re.compile(r"^(\[[^\]]*\]|[^:@/\[\]]+):(\d+)$")
_ROLES = ("broker", "controller")


def parse_voters(value: str) -> dict[int, tuple[str, int]]:
    """Parse `controller.quorum.voters` (`id@host:port,...`) into {id: (host, port)}."""
    voters: dict[int, tuple[str, int]] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        m = _VOTER_RE.match(item)
        if m is None:
            raise ConfigError(
                f"invalid controller.quorum.voters entry {item!r} (expected ID@HOST:PORT)"
            )
        node_id, host, port = int(m.group(1)), m.group(2).strip("[]"), int(m.group(3))
        if port > 65535 or node_id > 2**31 - 1:
            raise ConfigError(f"invalid controller.quorum.voters entry {item!r}")
        if node_id in voters:
            raise ConfigError(f"controller.quorum.voters names node {node_id} twice")
        voters[node_id] = (host, port)
    return voters


def _parse_servers(value: str) -> list[tuple[str, int]]:
    servers: list[tuple[str, int]] = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        m = _SERVER_RE.match(item)
        if m is None or int(m.group(2)) > 65535:
            raise ConfigError(
                f"invalid controller.quorum.bootstrap.servers entry {item!r} (expected HOST:PORT)"
            )
        servers.append((m.group(1).strip("[]"), int(m.group(2))))
    return servers


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """What cluster mode needs from the configuration, checked once at load (see docs/cluster.md).

    Why a value of its own: the Raft, controller and replication drivers read these on every
    tick; one checked, typed value is both faster and harder to misread than string lookups, and
    every inconsistency (node not in the voters, controller listener missing) fails at start-up
    with one clear message instead of as a mysterious election loop later.
    """

    node_id: int
    roles: frozenset[str]
    #: voter id -> its controller listener; None for a quorum of one with no controller
    #: listener (nobody else can reach it, and it reaches itself in-process)
    voters: Mapping[int, tuple[str, int] | None]
    controller_listener_names: tuple[str, ...]
    inter_broker_listener_name: str
    election_timeout_ms: int
    fetch_timeout_ms: int
    request_timeout_ms: int
    session_timeout_ms: int
    heartbeat_interval_ms: int
    replica_lag_time_max_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_response_max_bytes: int
    replica_fetch_wait_max_ms: int
    replica_fetch_min_bytes: int
    replica_fetch_backoff_ms: int
    default_replication_factor: int
    min_insync_replicas: int
    unclean_leader_election: bool

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def is_voter(self) -> bool:
        return self.node_id in self.voters

    @property
    def quorum_of_one(self) -> bool:
        """This node is the only voter: its Raft replica leads at once and everything it
        needs to serve is in this process (`kafkapy serve` with no voters configured)."""
        return set(self.voters) == {self.node_id}

    @property
    def voters_configured(self) -> bool:
        """False for the implicit quorum of one (no `controller.quorum.voters`)."""
        return any(address is not None for address in self.voters.values())

    @property
    def controller_listener_name(self) -> str:
        """The listener the quorum speaks on (the first of `controller.listener.names`)."""
        return self.controller_listener_names[0]


class BrokerConfig:
    """The effective broker configuration with per-key sources (see the module doc).

    Static after load, except for the dynamic broker configs (`set_dynamic`, kept by
    `kafkapy.server.dynamic_config`): a value set for this broker (DYNAMIC_BROKER_CONFIG) wins over
    the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG), which wins over server.properties /
    flags (STATIC_BROKER_CONFIG), then the built-in default (DEFAULT_CONFIG), as in Kafka. Every
    reader sees the layers through `get`; the event loop alone replaces them.
    """

    def __init__(
        self, explicit: Mapping[str, str] | None = None, origins: Mapping[str, str] | None = None
    ) -> None:
        """`origins` names where a key was set (`FILE:LINE`), for the messages about it."""
        explicit = dict(explicit or {})
        origins = origins or {}
        self._explicit: dict[str, str] = {}
        self._dynamic_broker: dict[str, str] = {}
        self._dynamic_default: dict[str, str] = {}
        # group id -> its group configs (KIP-848); updated in place, so the group coordinators'
        # view of it (GroupConfig.group_overrides) follows every change
        self.group_configs: dict[str, dict[str, str]] = {}
        self._listener_explicit: dict[str, str] = {}  # listener.name.<name>.<security key>
        self._inter_node: dict[str, str] = {}  # security_settings.INTER_NODE_KEYS
        for key, value in explicit.items():
            known = BROKER_CONFIGS.get(key)
            if known is None and _is_listener_security_key(key):
                self._listener_explicit[key.lower() if not key.endswith("jaas.config") else key] = (
                    value
                )
                continue
            if known is None:
                refused = unsupported_security_setting(key, value)
                if refused is not None:
                    raise ConfigError(refused)
                if key in INTER_NODE_KEYS:
                    self._inter_node[key] = value
                    continue
                if key not in _warned_unknown:
                    _warned_unknown.add(key)
                    where = f"{origins[key]}: " if key in origins else ""
                    log.warning("%s%s", where, unknown_key_message(key))
                continue
            try:
                _check_value(key, known.type, value)
                _check_range(key, value)
            except ConfigError as e:
                raise ConfigError(f"{origins[key]}: {e}" if key in origins else str(e)) from None
            self._explicit[key] = value.strip() if known.type != ConfigType.STRING else value
        ts = self.get_str("log.message.timestamp.type")
        types = TOPIC_CONFIGS["message.timestamp.type"].choices
        if ts not in types:
            raise ConfigError(f"log.message.timestamp.type must be one of {', '.join(types)}")
        self.listeners = self._broker_listeners(self.get_str("listeners"))
        advertised = self.get("advertised.listeners")
        self.advertised_listeners = (
            self._broker_listeners(advertised) if advertised else list(self.listeners)
        )
        self.controller_listener_names = frozenset(
            n.upper() for n in self.get_list("controller.listener.names")
        )
        self.controller_listeners = self._controller_listeners(self.get_str("listeners"))
        if not self.listeners and "broker" in self._roles():
            raise ConfigError("no broker listener configured (see 'listeners')")
        self._check_authorizer()
        self.cluster = self._cluster_config()
        if not self.cluster.voters_configured and self._inter_node:
            log.info("%s: no inter-node traffic on a single node", ", ".join(self._inter_node))

    def _check_authorizer(self) -> None:
        """Fail closed: an authorizer kafkapy does not have, or what only an authorizer reads
        without one, refuses to start (a user must not believe a setting protects them)."""
        name = self.get_str("authorizer.class.name").strip()
        if name and name != STANDARD_AUTHORIZER:
            raise ConfigError(
                f"authorizer.class.name={name!r} is a security setting kafkapy cannot honour: "
                f"its one authorizer is {STANDARD_AUTHORIZER} (ACLs in the metadata log)"
            )
        if name:
            return
        for key in ("super.users", "allow.everyone.if.no.acl.found"):
            if key in self._explicit:
                raise ConfigError(
                    f"{key}={self._explicit[key]!r} is read only by an authorizer, and none is "
                    f"configured: set authorizer.class.name={STANDARD_AUTHORIZER}"
                )

    @property
    def authorizer_enabled(self) -> bool:
        """`authorizer.class.name` names StandardAuthorizer (the only one accepted)."""
        return bool(self.get_str("authorizer.class.name").strip())

    def _roles(self) -> frozenset[str]:
        roles_list = [r.lower() for r in self.get_list("process.roles")]
        bad = [r for r in roles_list if r not in _ROLES]
        if bad or not roles_list:
            raise ConfigError(
                f"process.roles must be broker, controller or both, got {self.get('process.roles')!r}"
            )
        return frozenset(roles_list)

    def _cluster_config(self) -> ClusterConfig:
        """Every node is a member of a KRaft-style cluster (docs/cluster.md); a node with the
        controller role and no `controller.quorum.voters` is a quorum of one - the single node
        of `kafkapy serve` - whose voter set is just itself, with or without a controller
        listener."""
        roles = self._roles()
        configured = parse_voters(self.get_str("controller.quorum.voters"))
        servers = _parse_servers(self.get_str("controller.quorum.bootstrap.servers"))
        node_id = self.node_id
        controller_names = tuple(n.upper() for n in self.get_list("controller.listener.names"))
        own = next(
            (lst for lst in self.controller_listeners if controller_names and lst.name == controller_names[0]),
            None,
        )
        voters: dict[int, tuple[str, int] | None] = dict(configured)
        if not configured and len(servers) <= 1 and "controller" in roles:
            voters = {node_id: (own.host or "127.0.0.1", own.port) if own is not None else None}
        if not voters:
            raise ConfigError(
                "cluster mode needs controller.quorum.voters (ID@HOST:PORT,...): kafkapy does not "
                "discover voter ids from controller.quorum.bootstrap.servers"
            )
        if "controller" in roles and node_id not in voters:
            raise ConfigError(
                f"node.id {node_id} has the controller role but is not in controller.quorum.voters"
            )
        if "controller" not in roles and node_id in voters:
            raise ConfigError(
                f"node.id {node_id} is in controller.quorum.voters but process.roles lacks controller"
            )
        alone = set(voters) == {node_id}
        if not controller_names and not alone:
            raise ConfigError("cluster mode needs controller.listener.names")
        if "controller" in roles and own is None and not alone:
            raise ConfigError(
                f"the controller listener {controller_names[0]} (controller.listener.names) is missing from listeners"
            )
        inter_broker = self._inter_broker_listener(alone) if "broker" in roles else ""
        return ClusterConfig(
            node_id=node_id,
            roles=roles,
            voters=voters,
            controller_listener_names=controller_names,
            inter_broker_listener_name=inter_broker,
            election_timeout_ms=self.get_int("controller.quorum.election.timeout.ms"),
            fetch_timeout_ms=self.get_int("controller.quorum.fetch.timeout.ms"),
            request_timeout_ms=self.get_int("controller.quorum.request.timeout.ms"),
            session_timeout_ms=self.get_int("broker.session.timeout.ms"),
            heartbeat_interval_ms=self.get_int("broker.heartbeat.interval.ms"),
            replica_lag_time_max_ms=self.get_int("replica.lag.time.max.ms"),
            replica_fetch_max_bytes=self.get_int("replica.fetch.max.bytes"),
            replica_fetch_response_max_bytes=self.get_int("replica.fetch.response.max.bytes"),
            replica_fetch_wait_max_ms=self.get_int("replica.fetch.wait.max.ms"),
            replica_fetch_min_bytes=self.get_int("replica.fetch.min.bytes"),
            replica_fetch_backoff_ms=self.get_int("replica.fetch.backoff.ms"),
            default_replication_factor=self.get_int("default.replication.factor"),
            min_insync_replicas=self.get_int("min.insync.replicas"),
            unclean_leader_election=self.get_bool("unclean.leader.election.enable"),
        )

    def _inter_broker_listener(self, alone: bool = False) -> str:
        """Kafka's choice: `inter.broker.listener.name`, else the broker listener whose protocol
        is `security.inter.broker.protocol` (PLAINTEXT by default); not both. A quorum of one
        with no listener of that protocol takes its first broker listener: no broker ever
        connects to it, so the setting is inert there (a SASL_SSL-only node starts)."""
        named = (self.get("inter.broker.listener.name") or "").strip().upper()
        protocol = self.inter_node("security.inter.broker.protocol")
        if named and protocol:
            raise ConfigError(
                "set inter.broker.listener.name or security.inter.broker.protocol, not both"
            )
        if named:
            if named not in [lst.name for lst in self.listeners]:
                raise ConfigError(f"inter.broker.listener.name {named} is not a broker listener")
            return named
        wanted = (protocol or "PLAINTEXT").strip().upper()
        for lst in self.listeners:
            if lst.security_protocol == wanted:
                return lst.name
        if alone and self.listeners:
            return self.listeners[0].name
        raise ConfigError(
            f"no broker listener speaks security.inter.broker.protocol {wanted} "
            "(set inter.broker.listener.name)"
        )

    def inter_node(self, key: str) -> str | None:
        """An inter-node security setting (`security_settings.INTER_NODE_KEYS`), if set."""
        value = self._inter_node.get(key)
        return value if value and value.strip() else None

    def protocol_of(self, listener_name: str) -> str:
        """A listener's security protocol by name (the protocol map, else the name itself)."""
        return self._protocol_map().get(listener_name.upper(), listener_name.upper())

    def _controller_listeners(self, value: str) -> list[Listener]:
        """The listeners named in `controller.listener.names` (bound in cluster mode only)."""
        return [
            lst
            for lst in parse_listeners(value, self._protocol_map())
            if lst.name in self.controller_listener_names
        ]

    @classmethod
    def load(
        cls,
        config_file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> BrokerConfig:
        """Defaults < config file < `KAFKAPY_*` environment < command-line overrides."""
        merged: dict[str, str] = {}
        origins: dict[str, str] = {}
        if config_file is not None:
            try:
                text = config_file.read_text(encoding="utf-8")
            except OSError as e:
                raise ConfigError(f"cannot read config file {config_file}: {e.strerror or e}") from None
            except UnicodeDecodeError as e:
                raise ConfigError(f"config file {config_file} is not UTF-8 text (byte {e.start})") from None
            merged.update(parse_properties(text))
            origins = {k: f"{config_file}:{n}" for k, n in property_lines(text).items()}
        later = {**env_overrides(environ or {}), **(overrides or {})}
        merged.update(later)
        return cls(merged, {k: v for k, v in origins.items() if k not in later})

    def _protocol_map(self) -> dict[str, str]:
        protocol_map: dict[str, str] = {}
        for entry in self.get_list("listener.security.protocol.map"):
            name, _, proto = entry.partition(":")
            protocol_map[name.strip().upper()] = proto.strip().upper()
        return protocol_map

    def _broker_listeners(self, value: str) -> list[Listener]:
        controller_names = {n.upper() for n in self.get_list("controller.listener.names")}
        result: list[Listener] = []
        for listener in parse_listeners(value, self._protocol_map()):
            if listener.name in controller_names:
                continue
            if listener.security_protocol not in SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"listener {listener.name} has security protocol {listener.security_protocol!r}; "
                    f"expected one of {', '.join(SECURITY_PROTOCOLS)}"
                )
            result.append(listener)
        return result

    # -- raw access -------------------------------------------------------------------------------
    def get(self, name: str) -> str | None:
        if name in self._dynamic_broker:
            return self._dynamic_broker[name]
        if name in self._dynamic_default:
            return self._dynamic_default[name]
        if name in self._explicit:
            return self._explicit[name]
        key = BROKER_CONFIGS.get(name)
        return key.default if key is not None else None

    def set_dynamic(self, per_broker: Mapping[str, str], cluster_default: Mapping[str, str]) -> None:
        """Replace the dynamic layers (validated by the caller)."""
        self._dynamic_broker = dict(per_broker)
        self._dynamic_default = dict(cluster_default)

    def set_group_configs(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        """Replace every group's configs (validated by the caller), in place."""
        self.group_configs.clear()
        self.group_configs.update({g: dict(v) for g, v in configs.items() if v})

    def dynamic_layers(self) -> tuple[dict[str, str], dict[str, str]]:
        """(per broker, cluster default): what `set_dynamic` was last given."""
        return dict(self._dynamic_broker), dict(self._dynamic_default)

    def layers(self, name: str) -> list[tuple[str, ConfigSource]]:
        """Every value `name` has, highest precedence first (DescribeConfigs' synonyms)."""
        out: list[tuple[str, ConfigSource]] = []
        if name in self._dynamic_broker:
            out.append((self._dynamic_broker[name], ConfigSource.DYNAMIC_BROKER_CONFIG))
        if name in self._dynamic_default:
            out.append((self._dynamic_default[name], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
        if name in self._explicit:
            out.append((self._explicit[name], ConfigSource.STATIC_BROKER_CONFIG))
        key = BROKER_CONFIGS.get(name)
        if key is not None and key.default is not None:
            out.append((key.default, ConfigSource.DEFAULT_CONFIG))
        return out

    def listener_get(self, listener_name: str, name: str) -> str | None:
        """A security key for one listener: `listener.name.<listener>.<key>` if set (Kafka's
        per-listener override), else the broker-wide value."""
        value = self._listener_explicit.get(f"listener.name.{listener_name.lower()}.{name}")
        return value if value is not None else self.get(name)

    def jaas_configs(self) -> list[str]:
        """Every JAAS line set: `sasl.jaas.config` and the per-listener/mechanism ones."""
        lines = [v for k, v in self._listener_explicit.items() if k.endswith(".sasl.jaas.config")]
        jaas = self.get("sasl.jaas.config")
        return [jaas, *lines] if jaas else lines

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
        if name in self._dynamic_broker:
            return ConfigSource.DYNAMIC_BROKER_CONFIG
        if name in self._dynamic_default:
            return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        return (
            ConfigSource.STATIC_BROKER_CONFIG
            if name in self._explicit
            else ConfigSource.DEFAULT_CONFIG
        )

    def is_set(self, name: str) -> bool:
        """Set anywhere but the built-in default (static or dynamic)."""
        return name in self._explicit or name in self._dynamic_broker or name in self._dynamic_default

    def items(self) -> Iterable[tuple[str, str | None, ConfigSource]]:
        """Every known broker key with its effective value and source (for DescribeConfigs)."""
        for name, key in BROKER_CONFIGS.items():
            # passwords (and user lists) are never handed out, as Kafka hides sensitive values
            value = None if key.type == ConfigType.PASSWORD else self.get(name)
            yield name, value, self.source(name)

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
        """Broker-supplied default of a topic key: (value, broker key it came from, source); a
        key without a broker synonym names itself and has Kafka's default."""
        key = TOPIC_CONFIGS[topic_key]
        for layer, source in (
            (self._dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (self._dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (self._explicit, ConfigSource.STATIC_BROKER_CONFIG),
        ):
            for syn in key.broker_synonyms:
                if syn in layer:
                    value = layer[syn]
                    if syn in _MS_PER_UNIT:
                        value = str(int(value) * _MS_PER_UNIT[syn])
                    return value, syn, source
        for syn in key.broker_synonyms:
            value_or_none = self.get(syn)
            if value_or_none is not None:
                value = value_or_none
                if syn in _MS_PER_UNIT:
                    value = str(int(value) * _MS_PER_UNIT[syn])
                return value, syn, ConfigSource.DEFAULT_CONFIG
        return key.default, (key.broker_synonyms or (topic_key,))[0], ConfigSource.DEFAULT_CONFIG

    def topic_defaults(self) -> dict[str, str]:
        """Every topic key's broker-level default (the base under per-topic overrides)."""
        return {name: self.topic_default(name)[0] for name, key in TOPIC_CONFIGS.items() if key.listed}
