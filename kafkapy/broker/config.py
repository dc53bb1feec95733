"""Broker configuration: Kafka's own key names, from defaults < server.properties < env < flags.

Why Kafka's names: users bring a `server.properties` written for a single-node KRaft Kafka and
expect it to work unchanged, and admin clients describe configs by those names. Values are kept
as strings (as Kafka's DescribeConfigs reports them) with typed accessors, and every value keeps
its *source* so DescribeConfigs can say whether it is a default or was set statically.

Keys kafkapy does not know are logged once as ignored - never fatal - so a full Kafka config file
(thread counts, socket buffers, controller quorum settings) starts without edits. The exception
is a security setting kafkapy cannot honour (an authorizer other than StandardAuthorizer, a Java
SASL plugin, ...): that refuses to start, naming the key (`kafkapy.broker.security_settings`).

Environment overrides: `KAFKAPY_LOG_RETENTION_MS=1000` sets `log.retention.ms` (upper case,
`_` for `.`, `__` for a literal `_`); `KAFKAPY_TEST_FAULT_...` maps to `kafkapy.test.fault....`,
and a name only known with the `kafkapy.` prefix gets it (`KAFKAPY_SASL_USERS`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kafkapy.broker.broker_config_keys import (
    BROKER_CONFIGS,
    STANDARD_AUTHORIZER,
    BrokerConfigKey,
)
from kafkapy.broker.replica_selector import RACK_AWARE_SELECTOR, selector_enabled
from kafkapy.broker.security_settings import INTER_NODE_KEYS, unsupported_security_setting
from kafkapy.protocol.config_types import ConfigSource, ConfigType
from kafkapy.storage.topic_config import TOPIC_CONFIGS, TopicConfigKey, topic_config_problem

__all__ = [
    "BROKER_CONFIGS",
    "RSM_CONFIG_PREFIX",
    "SECURITY_PROTOCOLS",
    "STANDARD_AUTHORIZER",
    "TOPIC_CONFIGS",
    "BrokerConfig",
    "BrokerConfigKey",
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


class ConfigError(ValueError):
    """A configuration value that cannot be used (bad type, bad listener, unknown topic key)."""


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
#: Kafka's prefix of the remote storage manager's settings (`RemoteLogManagerConfig`)
RSM_CONFIG_PREFIX = "rsm.config."


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
    "leader.imbalance.check.interval.seconds": 1,
    "max.broker.partitions": 1,
    "max.partitions": 1,
}


def _check_range(name: str, value: str) -> None:
    low = _AT_LEAST.get(name)
    if low is not None and int(value.strip()) < low:
        raise ConfigError(f"invalid value {value.strip()} for {name}: must be at least {low}")


def unknown_key_message(key: str) -> str:
    """The start-up warning for a key kafkapy does not know, with the known key it is close to
    (difflib is imported here: only a config with an unknown key needs it)."""
    import difflib

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
        #: Kafka's remote storage plugin settings (`rsm.config.*`, KIP-405): handed to the
        #: object store as they are; never listed by `items` (DescribeConfigs, the status page)
        #: nor logged, as they may name credentials
        self.remote_storage_properties = {
            k: explicit.pop(k) for k in list(explicit) if k.startswith(RSM_CONFIG_PREFIX)}
        for key, value in explicit.items():
            self._take(key, value, origins)
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
        selector = (self.get("replica.selector.class") or "").strip()
        if selector and not selector_enabled(selector):
            raise ConfigError(
                f"replica.selector.class={selector!r}: kafkapy has one replica selector, "
                f"{RACK_AWARE_SELECTOR} (empty: consumers read from leaders only)"
            )
        self.cluster = self._cluster_config()
        if not self.cluster.voters_configured and self._inter_node:
            log.info("%s: no inter-node traffic on a single node", ", ".join(self._inter_node))

    def _take(self, key: str, value: str, origins: Mapping[str, str]) -> None:
        """One key set in server.properties, the environment or a flag: kept by its kind."""
        known = BROKER_CONFIGS.get(key)
        if known is None and _is_listener_security_key(key):
            self._listener_explicit[key.lower() if not key.endswith("jaas.config") else key] = (
                value
            )
            return
        if known is None:
            refused = unsupported_security_setting(key, value)
            if refused is not None:
                raise ConfigError(refused)
            if key in INTER_NODE_KEYS:
                self._inter_node[key] = value
                return
            if key not in _warned_unknown:
                _warned_unknown.add(key)
                where = f"{origins[key]}: " if key in origins else ""
                log.warning("%s%s", where, unknown_key_message(key))
            return
        try:
            _check_value(key, known.type, value)
            _check_range(key, value)
        except ConfigError as e:
            raise ConfigError(f"{origins[key]}: {e}" if key in origins else str(e)) from None
        self._explicit[key] = value.strip() if known.type != ConfigType.STRING else value

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
