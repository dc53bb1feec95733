"""Kafka security settings kafkapy does not honour: refused at start-up, never ignored.

Why: a user who configured an authorizer, a SASL callback handler or TLS protocol limits believes
the broker enforces them. kafkapy logs other unknown keys as ignored so a full Kafka
`server.properties` starts unchanged, but a security key it would ignore must stop `kafkapy
serve` with a message naming the key (fail closed), as Kafka itself refuses a setting it cannot
load.

The rules (`unsupported_security_setting`), for each key as given broker-wide or per listener
(`listener.name.<listener>.<key>`, `listener.name.<listener>.<mechanism>.<key>`):
- refused whatever the value: Java plugin classes (SASL callback handlers and login
  classes, principal builders other than Kafka's default, SSL engine factories, topic/config
  policies, quota callbacks, security providers), OAUTHBEARER settings, delegation token keys,
  inline PEM keys/certificates, Java cipher suite names;
- refused unless Kafka's default (what kafkapy does anyway): `ssl.enabled.protocols`
  (TLSv1.2,TLSv1.3), `ssl.protocol`, key/trust manager algorithms, principal mapping rules,
  `connections.max.reauth.ms` (0: no re-authentication);
- per-listener connection limits (`listener.name.<listener>.max.connections`,
  `...max.connection.creation.rate`): kafkapy enforces them broker-wide only;
- inter-node settings (`security.inter.broker.protocol`, `sasl.mechanism.inter.broker.protocol`,
  `sasl.mechanism.controller.protocol`) are kept aside for a cluster, which honours them
  (`kafkapy.server.security.inter_node`); a single node has no inter-node traffic and only
  logs them (Kafka's single-node configs carry them).
Keys kafkapy implements (SASL PLAIN/SCRAM, PEM TLS, `ssl.client.auth`) are checked where they
are used (`kafkapy.server.security.listener`); the authorizer keys (`authorizer.class.name`: only
StandardAuthorizer; `super.users` and `allow.everyone.if.no.acl.found` only with it) by
`BrokerConfig`. Kafka's `sasl.kerberos.*` keys are broker keys of their own (stored, described and,
as in Kafka, changed per broker at run time): inert, because GSSAPI itself - the one thing that
reads them - is refused in a SASL listener's `sasl.enabled.mechanisms` and as an inter-node
mechanism. Left alone as inert: what only the client side of
inter-node SASL/TLS reads (`sasl.login.*` timings, `ssl.endpoint.identification.algorithm`),
delegation token lifetimes without a token key, `ssl.truststore.password` (PEM has none) and
`ssl.allow.dn.changes` / `ssl.allow.san.changes` (kafkapy does not reload keystores).
"""

from __future__ import annotations

import re

__all__ = [
    "INTER_NODE_KEYS",
    "unsupported_security_setting",
]

_JAVA_PLUGIN = "names a Java plugin class, which kafkapy cannot load"

#: refused whatever the value (an empty value means "not set" and is accepted)
_ALWAYS: dict[str, str] = {
    "sasl.server.callback.handler.class": _JAVA_PLUGIN,
    "sasl.client.callback.handler.class": _JAVA_PLUGIN,
    "sasl.login.class": _JAVA_PLUGIN,
    "sasl.login.callback.handler.class": _JAVA_PLUGIN,
    "ssl.engine.factory.class": _JAVA_PLUGIN,
    "create.topic.policy.class.name": _JAVA_PLUGIN + " (topics would be created unchecked)",
    "alter.config.policy.class.name": _JAVA_PLUGIN + " (configs would be altered unchecked)",
    "client.quota.callback.class": _JAVA_PLUGIN,
    "security.providers": _JAVA_PLUGIN,
    "ssl.provider": "names a Java security provider, which kafkapy cannot load",
    "ssl.secure.random.implementation": "names a Java random generator, which kafkapy cannot load",
    "ssl.cipher.suites": (
        "kafkapy cannot restrict TLS cipher suites by their Java names (it uses OpenSSL's "
        "defaults for TLSv1.2 and TLSv1.3)"
    ),
    "ssl.keystore.key": "inline PEM is not supported: put it in the file ssl.keystore.location",
    "ssl.keystore.certificate.chain": (
        "inline PEM is not supported: put it in the file ssl.keystore.location"
    ),
    "ssl.truststore.certificates": (
        "inline PEM is not supported: put it in the file ssl.truststore.location"
    ),
    "delegation.token.secret.key": "kafkapy does not support delegation tokens",
    "delegation.token.master.key": "kafkapy does not support delegation tokens",
}

#: refused whatever the value, by prefix
_ALWAYS_PREFIXES: dict[str, str] = {
    "sasl.oauthbearer.": "kafkapy does not support OAUTHBEARER",
}

#: refused unless one of these values (case-insensitive; Kafka's defaults, which kafkapy matches)
_DEFAULT_ONLY: dict[str, tuple[frozenset[str], str]] = {
    "principal.builder.class": (
        frozenset(
            {"org.apache.kafka.common.security.authenticator.defaultkafkaprincipalbuilder"}
        ),
        _JAVA_PLUGIN,
    ),
    "ssl.enabled.protocols": (
        frozenset({"tlsv1.2,tlsv1.3", "tlsv1.3,tlsv1.2"}),
        "kafkapy's TLS listeners accept TLSv1.2 and TLSv1.3, no other set",
    ),
    "ssl.protocol": (
        frozenset({"tls", "tlsv1.2", "tlsv1.3"}),
        "kafkapy's TLS listeners negotiate TLSv1.2 or TLSv1.3",
    ),
    "ssl.keymanager.algorithm": (frozenset({"sunx509"}), "a Java key manager"),
    "ssl.trustmanager.algorithm": (frozenset({"pkix"}), "a Java trust manager"),
    "ssl.principal.mapping.rules": (
        frozenset({"default"}),
        "kafkapy does not map certificate names to principals",
    ),
    "connections.max.reauth.ms": (
        frozenset({"0"}),
        "kafkapy does not re-authenticate connections (KIP-368): sessions would never expire",
    ),
}

#: connection limits Kafka also takes per listener; kafkapy only broker-wide
_BROKER_WIDE_ONLY = frozenset({"max.connections", "max.connection.creation.rate"})

#: settings of the traffic between nodes (see the module doc; read with BrokerConfig.inter_node)
INTER_NODE_KEYS = (
    "security.inter.broker.protocol",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.mechanism.controller.protocol",
)

_LISTENER_PREFIX = re.compile(r"^listener\.name\.[A-Za-z0-9_]+\.(?:[A-Za-z0-9-]+\.(?=sasl\.))?")


def unsupported_security_setting(key: str, value: str) -> str | None:
    """Why kafkapy must refuse to start with `key=value`, or None when it is not a security
    setting kafkapy would ignore. `key` may carry a `listener.name.<listener>.` prefix."""
    if not value.strip():
        return None
    base = _LISTENER_PREFIX.sub("", key)
    reason = _ALWAYS.get(base)
    if base != key and base in _BROKER_WIDE_ONLY:
        reason = "kafkapy enforces this limit broker-wide only: set it without the listener prefix"
    if reason is None:
        reason = next((r for p, r in _ALWAYS_PREFIXES.items() if base.startswith(p)), None)
    if reason is None and base in _DEFAULT_ONLY:
        allowed, why = _DEFAULT_ONLY[base]
        normalized = ",".join(v.strip() for v in value.split(",")).lower()
        if normalized not in allowed:
            reason = why
    if reason is None:
        return None
    return f"{key}={value.strip()!r} is a security setting kafkapy cannot honour: {reason}"
