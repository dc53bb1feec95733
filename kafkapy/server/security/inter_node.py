"""How this node connects to the other nodes' listeners: TLS and SASL for inter-node traffic.

Kafka's settings, read the way Kafka reads them:
- the inter-broker listener (`inter.broker.listener.name`, or the listener whose protocol is
  `security.inter.broker.protocol`) and the controller listener (the first of
  `controller.listener.names`) may be PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL;
- TLS: the other nodes' certificates must chain to `ssl.truststore.location` (PEM) of that
  listener; this node presents its own certificate (`ssl.keystore.location`, or
  `ssl.certificate.location` + `ssl.key.location`) when it has one, so `ssl.client.auth=required`
  works between nodes (mTLS); host names are checked unless
  `ssl.endpoint.identification.algorithm` is empty (Kafka's default: https);
- SASL: `sasl.mechanism.inter.broker.protocol` / `sasl.mechanism.controller.protocol` (no
  default: Kafka's GSSAPI is not supported) must be enabled on that listener; the node logs in
  with the `username` / `password` options of the listener's JAAS line
  (`listener.name.<listener>.<mechanism>.sasl.jaas.config`, else `sasl.jaas.config`), as Kafka.
A setting that cannot work is a ConfigError at start-up, naming the key.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass, field

from kafkapy.broker.config import BrokerConfig, ConfigError
from kafkapy.protocol.sasl import SUPPORTED_MECHANISMS

__all__ = ["PeerSecurity", "controller_peer_security", "inter_broker_peer_security"]

@dataclass(frozen=True, slots=True)
class PeerSecurity:
    """How to connect to one kind of listener of the other nodes (see the module doc); the
    cluster's peer connections (`kafkapy.server.cluster.peer`) apply it."""

    ssl_context: ssl.SSLContext | None = None
    #: SASL mechanism (PLAIN, SCRAM-SHA-256/512), None: no SASL
    mechanism: str | None = None
    user: str = ""
    password: str = field(default="", repr=False)


_JAAS_OPTION = re.compile(r'\b(username|password)\s*=\s*"((?:[^"\\]|\\.)*)"')


def _client_context(config: BrokerConfig, name: str) -> ssl.SSLContext:
    def get(key: str) -> str | None:
        value = config.listener_get(name, key)
        return value if value else None

    ca = get("ssl.truststore.location") or get("ssl.ca.location")
    if ca is None:
        raise ConfigError(
            f"listener {name} carries inter-node traffic over TLS: set ssl.truststore.location "
            "(PEM CAs the other nodes' certificates chain to)"
        )
    try:
        context = ssl.create_default_context(cafile=ca)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"listener {name}: cannot load CA file {ca}: {e}") from None
    identification = config.listener_get(name, "ssl.endpoint.identification.algorithm")
    if identification is not None and not identification.strip():
        context.check_hostname = False
    cert = get("ssl.certificate.location") or get("ssl.keystore.location")
    if cert is not None:
        key = get("ssl.key.location") or (None if get("ssl.certificate.location") else cert)
        password = get("ssl.key.password") or get("ssl.keystore.password")
        try:
            context.load_cert_chain(cert, key, password)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"listener {name}: cannot load certificate {cert}: {e}") from None
    return context


def _credentials(config: BrokerConfig, name: str, mechanism: str) -> tuple[str, str]:
    jaas = config.listener_get(name, f"{mechanism.lower()}.sasl.jaas.config") or config.get(
        "sasl.jaas.config"
    )
    options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(jaas or "")}
    if "username" not in options or "password" not in options:
        raise ConfigError(
            f"listener {name} authenticates nodes with SASL {mechanism}: set username=\"...\" "
            f"password=\"...\" in listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config "
            "(or sasl.jaas.config)"
        )
    return options["username"], options["password"]


def _peer_security(config: BrokerConfig, name: str, mechanism_key: str) -> PeerSecurity | None:
    protocol = config.protocol_of(name)  # a broker-only node has no controller listener itself
    if protocol == "PLAINTEXT":
        return None
    context = _client_context(config, name) if protocol in ("SSL", "SASL_SSL") else None
    if protocol not in ("SASL_PLAINTEXT", "SASL_SSL"):
        return PeerSecurity(ssl_context=context)
    mechanism = (config.inter_node(mechanism_key) or "").strip().upper()
    enabled = [
        m.strip().upper()
        for m in (config.listener_get(name, "sasl.enabled.mechanisms") or "").split(",")
    ]
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(
            f"listener {name} is {protocol}: set {mechanism_key} to one of "
            f"{', '.join(SUPPORTED_MECHANISMS)} (got {mechanism or 'nothing'}; Kafka's default "
            "GSSAPI is not supported)"
        )
    if mechanism not in enabled:
        raise ConfigError(
            f"{mechanism_key}={mechanism} is not in sasl.enabled.mechanisms of listener {name}"
        )
    user, password = _credentials(config, name, mechanism)
    return PeerSecurity(ssl_context=context, mechanism=mechanism, user=user, password=password)


def inter_broker_peer_security(config: BrokerConfig) -> PeerSecurity | None:
    """How brokers connect to each other's inter-broker listener (None: PLAINTEXT)."""
    cluster = config.cluster
    if not cluster.voters_configured:
        return None  # a quorum of one: no broker ever connects to another
    return _peer_security(
        config, cluster.inter_broker_listener_name, "sasl.mechanism.inter.broker.protocol"
    )


def controller_peer_security(config: BrokerConfig) -> PeerSecurity | None:
    """How nodes connect to the voters' controller listener (None: PLAINTEXT)."""
    cluster = config.cluster
    if not cluster.voters_configured:
        return None  # a quorum of one reaches its controller in-process
    return _peer_security(
        config, cluster.controller_listener_name, "sasl.mechanism.controller.protocol"
    )
