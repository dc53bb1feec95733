"""Fail closed: every Kafka security setting kafkapy cannot honour refuses to start, naming the key.

The table below walks Kafka 4.0's security-related broker configs (the "Broker Configs" section
of Kafka's documentation, plus what its StandardAuthorizer reads) one by one; each is either
implemented (a key of `BROKER_CONFIGS`), refused when set to what kafkapy would not do, or inert
with the reason said in `kafkapy.broker.security_settings`. A key missing from all three fails
`test_every_kafka_security_key_is_classified`.
"""

from __future__ import annotations

import logging
import re

import pytest

from kafkapy.broker.config import BROKER_CONFIGS, BrokerConfig, ConfigError
from kafkapy.broker.security_settings import unsupported_security_setting
from kafkapy.server.security import listener_security
from kafkapy.testing.certs import CertFiles, make_certs

SASL_LISTENER = {
    "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
    "kafkapy.sasl.users": "admin:secret",
}


@pytest.fixture(scope="module")
def sasl_ssl(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A SASL_SSL listener, so that every TLS and SASL key is one the listener would use."""
    certs: CertFiles = make_certs(tmp_path_factory.mktemp("certs"))
    return {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "kafkapy.sasl.users": "admin:secret",
        "ssl.keystore.location": str(certs.server_pem),
        "ssl.truststore.location": str(certs.ca),
    }


def start_checks(settings: dict[str, str]) -> None:
    """What `kafkapy serve` checks before it binds anything: the config, then each listener's
    TLS context and SASL mechanisms."""
    listener_security(BrokerConfig(settings))

#: (key, a value kafkapy must refuse): each alone on an otherwise good SASL config
REFUSED = [
    ("authorizer.class.name", "kafka.security.authorizer.AclAuthorizer"),
    ("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizerX"),
    # read only by an authorizer, and none is configured
    ("super.users", "User:admin"),
    ("allow.everyone.if.no.acl.found", "false"),
    ("allow.everyone.if.no.acl.found", "true"),
    ("principal.builder.class", "com.example.LdapPrincipalBuilder"),
    ("sasl.server.callback.handler.class", "com.example.LdapCallbackHandler"),
    ("sasl.client.callback.handler.class", "com.example.Handler"),
    ("sasl.login.class", "com.example.Login"),
    ("sasl.login.callback.handler.class", "com.example.LoginHandler"),
    ("sasl.oauthbearer.jwks.endpoint.url", "https://idp.example/jwks"),
    ("sasl.oauthbearer.expected.audience", "kafka"),
    ("ssl.engine.factory.class", "com.example.Engine"),
    ("ssl.cipher.suites", "TLS_AES_256_GCM_SHA384"),
    ("ssl.enabled.protocols", "TLSv1.3"),
    ("ssl.protocol", "SSLv3"),
    ("ssl.provider", "SunJSSE"),
    ("ssl.secure.random.implementation", "SHA1PRNG"),
    ("ssl.keymanager.algorithm", "PKIX"),
    ("ssl.trustmanager.algorithm", "SunX509"),
    ("ssl.principal.mapping.rules", "RULE:^CN=(.*?),.*$/$1/"),
    ("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
    ("ssl.keystore.certificate.chain", "-----BEGIN CERTIFICATE-----"),
    ("ssl.truststore.certificates", "-----BEGIN CERTIFICATE-----"),
    ("ssl.keystore.type", "JKS"),
    ("ssl.keystore.type", "PKCS12"),
    ("ssl.truststore.type", "JKS"),
    ("ssl.client.auth", "sometimes"),
    ("sasl.enabled.mechanisms", "GSSAPI"),
    ("sasl.enabled.mechanisms", "PLAIN,OAUTHBEARER"),
    ("delegation.token.secret.key", "s3cret"),
    ("delegation.token.master.key", "s3cret"),
    ("connections.max.reauth.ms", "3600000"),
    ("create.topic.policy.class.name", "com.example.Policy"),
    ("alter.config.policy.class.name", "com.example.Policy"),
    ("client.quota.callback.class", "com.example.Quota"),
    ("security.providers", "com.example.Provider"),
    # per listener, as Kafka allows
    ("listener.name.sasl_ssl.plain.sasl.server.callback.handler.class", "com.example.H"),
    ("listener.name.sasl_ssl.ssl.cipher.suites", "TLS_AES_128_GCM_SHA256"),
    ("listener.name.sasl_ssl.sasl.enabled.mechanisms", "GSSAPI"),
    ("listener.name.sasl_ssl.oauthbearer.sasl.oauthbearer.expected.issuer", "x"),
    ("listener.name.sasl_ssl.max.connections", "10"),
    ("listener.name.sasl_ssl.max.connection.creation.rate", "10"),
]

#: Kafka's defaults (what kafkapy does anyway) and empty values are accepted
ACCEPTED = [
    ("authorizer.class.name", ""),
    ("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
    ("principal.builder.class",
     "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    ("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"),
    ("ssl.enabled.protocols", "TLSv1.3, TLSv1.2"),
    ("ssl.protocol", "TLSv1.3"),
    ("ssl.keymanager.algorithm", "SunX509"),
    ("ssl.trustmanager.algorithm", "PKIX"),
    ("ssl.principal.mapping.rules", "DEFAULT"),
    ("sasl.kerberos.principal.to.local.rules", ""),
    # Kerberos keys are inert: GSSAPI, which alone reads them, is refused (see REFUSED)
    ("sasl.kerberos.service.name", "kafka"),
    ("sasl.kerberos.principal.to.local.rules", "RULE:[1:$1]"),
    ("sasl.kerberos.kinit.cmd", "/usr/bin/kinit"),
    ("sasl.kerberos.min.time.before.relogin", "58000"),
    ("listener.name.sasl_ssl.sasl.kerberos.service.name", "kafka"),
    ("connections.max.reauth.ms", "0"),
    ("ssl.endpoint.identification.algorithm", "https"),
    ("ssl.truststore.password", "changeit"),
    ("delegation.token.max.lifetime.ms", "604800000"),
    ("sasl.login.refresh.window.factor", "0.8"),
    # a single node has no inter-node traffic: Kafka's single-node SASL configs carry these
    ("security.inter.broker.protocol", "SASL_PLAINTEXT"),
    ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
    ("sasl.mechanism.controller.protocol", "PLAIN"),
]

#: Kafka 4.0's security-related broker configs (see the module doc)
KAFKA_SECURITY_KEYS = [
    "allow.everyone.if.no.acl.found", "alter.config.policy.class.name", "authorizer.class.name",
    "client.quota.callback.class", "connections.max.reauth.ms", "create.topic.policy.class.name",
    "delegation.token.expiry.check.interval.ms", "delegation.token.expiry.time.ms",
    "delegation.token.max.lifetime.ms", "delegation.token.secret.key",
    "inter.broker.listener.name", "listener.security.protocol.map", "principal.builder.class",
    "sasl.client.callback.handler.class", "sasl.enabled.mechanisms", "sasl.jaas.config",
    "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.callback.handler.class", "sasl.login.class", "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.retry.backoff.max.ms",
    "sasl.login.retry.backoff.ms", "sasl.mechanism.controller.protocol",
    "sasl.mechanism.inter.broker.protocol", "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience", "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.token.endpoint.url", "sasl.server.callback.handler.class",
    "security.inter.broker.protocol", "security.providers", "ssl.allow.dn.changes",
    "ssl.allow.san.changes", "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class", "ssl.key.password",
    "ssl.keymanager.algorithm", "ssl.keystore.certificate.chain", "ssl.keystore.key",
    "ssl.keystore.location", "ssl.keystore.password", "ssl.keystore.type",
    "ssl.principal.mapping.rules", "ssl.protocol", "ssl.provider",
    "ssl.secure.random.implementation", "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.type", "super.users",
]

#: inert keys, and why (mirrors the module doc of kafkapy.broker.security_settings)
INERT = {
    "delegation.token.expiry.check.interval.ms": "no token key: no tokens",
    "delegation.token.expiry.time.ms": "no token key: no tokens",
    "delegation.token.max.lifetime.ms": "no token key: no tokens",
    "sasl.login.connect.timeout.ms": "client side of inter-node SASL (no Java login modules)",
    "sasl.login.read.timeout.ms": "client side of inter-node SASL",
    "sasl.login.refresh.buffer.seconds": "client side of inter-node SASL",
    "sasl.login.refresh.min.period.seconds": "client side of inter-node SASL",
    "sasl.login.refresh.window.factor": "client side of inter-node SASL",
    "sasl.login.refresh.window.jitter": "client side of inter-node SASL",
    "sasl.login.retry.backoff.max.ms": "client side of inter-node SASL",
    "sasl.login.retry.backoff.ms": "client side of inter-node SASL",
    "ssl.allow.dn.changes": "kafkapy does not reload keystores",
    "ssl.allow.san.changes": "kafkapy does not reload keystores",
    "ssl.truststore.password": "PEM truststores have no password",
    "security.inter.broker.protocol": "honoured in a cluster (inter_node), no traffic on one node",
    "sasl.mechanism.inter.broker.protocol": "honoured in a cluster, no traffic on one node",
    "sasl.mechanism.controller.protocol": "honoured in a cluster, no traffic on one node",
}


@pytest.mark.parametrize(("key", "value"), REFUSED, ids=[f"{k}={v[:20]}" for k, v in REFUSED])
def test_unhonourable_security_setting_refuses_to_start(
    sasl_ssl: dict[str, str], key: str, value: str
) -> None:
    start_checks(sasl_ssl)  # the control: the same listener without the key starts
    with pytest.raises(ConfigError) as refused:
        start_checks({**sasl_ssl, key: value})
    base = re.sub(r"^listener\.name\.\w+\.(?:[\w-]+\.(?=sasl\.))?", "", key)
    assert base in str(refused.value), "the refusal must name the key"


@pytest.mark.parametrize(("key", "value"), ACCEPTED, ids=[f"{k}={v[:20]}" for k, v in ACCEPTED])
def test_defaults_and_inert_security_settings_start(
    sasl_ssl: dict[str, str], key: str, value: str
) -> None:
    start_checks({**sasl_ssl, key: value})


def test_the_issue_16_config_starts_with_its_authorizer() -> None:
    """A SASL listener with Kafka's StandardAuthorizer, super users and deny-by-default: the
    authorizer kafkapy has, so it starts with it."""
    config = BrokerConfig({
        **SASL_LISTENER,
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
    })
    assert config.authorizer_enabled
    assert not BrokerConfig(SASL_LISTENER).authorizer_enabled


def test_every_kafka_security_key_is_classified() -> None:
    """Each Kafka security key is implemented, refused for values kafkapy cannot honour, or
    inert with a reason - none is silently ignored."""
    refused_keys = {k for k, _ in REFUSED}
    unclassified = [
        k
        for k in KAFKA_SECURITY_KEYS
        if k not in BROKER_CONFIGS and k not in refused_keys and k not in INERT
        and not k.startswith(("sasl.kerberos.", "sasl.oauthbearer."))
    ]
    assert unclassified == []
    for key in INERT:
        assert key in KAFKA_SECURITY_KEYS
        assert unsupported_security_setting(key, "x") is None


def test_oauthbearer_keys_are_refused_by_prefix() -> None:
    for key in KAFKA_SECURITY_KEYS:
        if key.startswith("sasl.oauthbearer."):
            assert unsupported_security_setting(key, "x") is not None, key


def test_kerberos_keys_are_known_and_gssapi_is_still_refused(sasl_ssl: dict[str, str]) -> None:
    """Every Kafka `sasl.kerberos.*` key is a broker key (type-checked, described) and never
    makes GSSAPI usable: with all of them set, GSSAPI on the listener still refuses to start."""
    kerberos = [k for k in KAFKA_SECURITY_KEYS if k.startswith("sasl.kerberos.")]
    assert len(kerberos) == 6
    assert all(k in BROKER_CONFIGS for k in kerberos)
    values = {
        "sasl.kerberos.service.name": "kafka", "sasl.kerberos.kinit.cmd": "/usr/bin/kinit",
        "sasl.kerberos.min.time.before.relogin": "58000",
        "sasl.kerberos.principal.to.local.rules": "DEFAULT",
        "sasl.kerberos.ticket.renew.jitter": "0.05", "sasl.kerberos.ticket.renew.window.factor": "0.8",
    }
    assert sorted(values) == sorted(kerberos)
    start_checks({**sasl_ssl, **values})
    with pytest.raises(ConfigError, match="GSSAPI"):
        start_checks({**sasl_ssl, **values, "sasl.enabled.mechanisms": "PLAIN,GSSAPI"})
    with pytest.raises(ConfigError, match=re.escape("sasl.kerberos.min.time.before.relogin")):
        BrokerConfig({**sasl_ssl, "sasl.kerberos.min.time.before.relogin": "soon"})


def test_inter_node_settings_on_a_single_node_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kafkapy.broker.config"):
        BrokerConfig({**SASL_LISTENER, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    assert "no inter-node traffic on a single node" in caplog.text
