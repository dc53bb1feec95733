"""What each broker listener asks of a connection: TLS (an `ssl.SSLContext`) and/or SASL.

Why built once at start-up: certificate files and mechanism names are checked before the broker
says it is ready, so a typo in a path fails `kafkapy serve` with one clear message (exit 2)
instead of failing every client's handshake later.

TLS settings (PEM only; JKS/PKCS12 keystores are refused with a hint): either
`ssl.keystore.location` (one PEM file with the certificate chain and the private key) or
`ssl.certificate.location` + `ssl.key.location`; `ssl.key.password` / `ssl.keystore.password`
for an encrypted key; `ssl.client.auth` none / requested / required with
`ssl.truststore.location` (or `ssl.ca.location`) holding the CAs client certificates must chain
to. Each key may be given per listener as `listener.name.<listener>.<key>`, as in Kafka.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass

from kafkapy.broker.config import BrokerConfig, ConfigError, Listener
from kafkapy.protocol.sasl import (
    SUPPORTED_MECHANISMS,
    PlainServer,
    SaslMechanism,
    SaslSession,
    ScramServer,
)
from kafkapy.server.security.credentials import CredentialStore

__all__ = ["ListenerSecurity", "listener_security", "ssl_context"]


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    """One listener's requirements; `ssl_context` None = plain TCP, `mechanisms` () = no SASL."""

    listener: Listener
    ssl_context: ssl.SSLContext | None
    mechanisms: tuple[str, ...]
    credentials: CredentialStore | None
    #: the largest frame taken before SASL completes (`sasl.server.max.receive.size`)
    max_receive_bytes: int = 524_288
    #: how long a connection that failed to authenticate stays open after the answer
    #: (`connection.failed.authentication.delay.ms`)
    failed_auth_delay_s: float = 0.1

    @property
    def sasl(self) -> bool:
        return bool(self.mechanisms)

    def new_session(self) -> SaslSession:
        """A fresh SASL state machine for one connection of this listener."""
        store = self.credentials
        assert store is not None

        def factory(name: str) -> SaslMechanism:
            if name == "PLAIN":
                return PlainServer(store.check_plain)
            return ScramServer(name, lambda user: store.scram(name, user))

        return SaslSession({name: functools.partial(factory, name) for name in self.mechanisms})


def ssl_context(config: BrokerConfig, listener_name: str) -> ssl.SSLContext:
    """The server-side TLS context of a listener (ConfigError on a missing or bad file)."""

    def get(key: str) -> str | None:
        value = config.listener_get(listener_name, key)
        return value if value else None

    for kind in ("ssl.keystore.type", "ssl.truststore.type"):
        if (get(kind) or "PEM").upper() != "PEM":
            raise ConfigError(f"{kind} {get(kind)} is not supported: kafkapy reads PEM files only")
    cert = get("ssl.certificate.location") or get("ssl.keystore.location")
    key = get("ssl.key.location") or (None if get("ssl.certificate.location") else cert)
    if cert is None:
        raise ConfigError(
            f"listener {listener_name} uses TLS but neither ssl.keystore.location nor "
            "ssl.certificate.location (PEM) is set"
        )
    password = get("ssl.key.password") or get("ssl.keystore.password")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(cert, key, password)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(
            f"listener {listener_name}: cannot load certificate {cert} / key {key}: {e}"
        ) from None
    client_auth = (get("ssl.client.auth") or "none").lower()
    if client_auth not in ("none", "requested", "required"):
        raise ConfigError(
            f"ssl.client.auth must be none, requested or required, got {client_auth!r}"
        )
    if client_auth != "none":
        ca = get("ssl.truststore.location") or get("ssl.ca.location")
        if ca is None:
            raise ConfigError(
                f"ssl.client.auth={client_auth} needs ssl.truststore.location (PEM CAs)"
            )
        try:
            context.load_verify_locations(cafile=ca)
        except (OSError, ssl.SSLError) as e:
            raise ConfigError(f"listener {listener_name}: cannot load CA file {ca}: {e}") from None
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return context


def listener_security(
    config: BrokerConfig, credentials: CredentialStore | None = None
) -> dict[str, ListenerSecurity]:
    """Every listener's requirements by listener name - the broker listeners, and in cluster
    mode on a voter the controller listener - (ConfigError when unusable). In cluster mode the
    client side of inter-node traffic is checked too (`inter_node`), so a missing truststore or
    inter-node password stops the start like a bad server certificate does."""
    from kafkapy.server.security.inter_node import (
        controller_peer_security,
        inter_broker_peer_security,
    )

    result: dict[str, ListenerSecurity] = {}
    cluster = config.cluster
    served = list(config.listeners)
    if cluster.is_controller:
        served += config.controller_listeners
    controller_peer_security(config)
    if cluster.is_broker:
        inter_broker_peer_security(config)
    for listener in served:
        protocol = listener.security_protocol
        context = ssl_context(config, listener.name) if protocol in ("SSL", "SASL_SSL") else None
        mechanisms: tuple[str, ...] = ()
        if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
            wanted = [
                m.strip().upper()
                for m in (
                    config.listener_get(listener.name, "sasl.enabled.mechanisms") or ""
                ).split(",")
                if m.strip()
            ]
            unknown = [m for m in wanted if m not in SUPPORTED_MECHANISMS]
            if unknown:
                raise ConfigError(
                    f"sasl.enabled.mechanisms of listener {listener.name}: {', '.join(unknown)} not "
                    f"supported (kafkapy has {', '.join(SUPPORTED_MECHANISMS)})"
                )
            if not wanted:
                raise ConfigError(
                    f"listener {listener.name} is {protocol} but sasl.enabled.mechanisms is empty"
                )
            mechanisms = tuple(wanted)
            if credentials is None:
                credentials = CredentialStore.from_config(config)
        max_receive = int(config.listener_get(listener.name, "sasl.server.max.receive.size") or 0)
        if max_receive <= 0:
            raise ConfigError(f"sasl.server.max.receive.size must be positive, got {max_receive}")
        delay_ms = config.get_int("connection.failed.authentication.delay.ms")
        if delay_ms < 0:
            raise ConfigError(f"connection.failed.authentication.delay.ms must be at least 0, got {delay_ms}")
        result[listener.name] = ListenerSecurity(
            listener, context, mechanisms, credentials, max_receive, delay_ms / 1000
        )
    return result
