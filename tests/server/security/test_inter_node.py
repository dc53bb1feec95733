"""Inter-node TLS and SASL settings (kafkapy.server.security.inter_node): what a node uses to
connect to the other nodes' inter-broker and controller listeners, and the clear refusals at
start-up when that cannot work. The traffic itself is exercised by a 3-node SASL_SSL cluster in
compat_tests/test_cluster_failover.py."""

from __future__ import annotations

import ssl

import pytest

from kafkapy.broker.config import BrokerConfig, ConfigError
from kafkapy.server.security import listener_security
from kafkapy.server.security.inter_node import controller_peer_security, inter_broker_peer_security
from kafkapy.testing.certs import CertFiles, make_certs

JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    'username="node" password="node-secret" user_node="node-secret";'
)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A voter whose broker listener (inter-broker too) and controller listener are SASL_SSL."""
    certs: CertFiles = make_certs(tmp_path_factory.mktemp("certs"))
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:19091,2@127.0.0.1:19092",
        "listeners": "SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:19091",
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "ssl.keystore.location": str(certs.server_pem),
        "ssl.truststore.location": str(certs.ca),
        "ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "sasl.jaas.config": JAAS,
    }


def test_secured_inter_node_settings_are_used(secure: dict[str, str]) -> None:
    config = BrokerConfig(secure)
    served = listener_security(config)
    assert set(served) == {"SASL_SSL", "CONTROLLER"}  # the controller listener is secured too
    assert served["CONTROLLER"].mechanisms == ("SCRAM-SHA-512", "PLAIN")
    broker = inter_broker_peer_security(config)
    controller = controller_peer_security(config)
    assert broker is not None
    assert controller is not None
    assert (broker.mechanism, broker.user, broker.password) == ("SCRAM-SHA-512", "node", "node-secret")
    assert controller.mechanism == "PLAIN"
    context = broker.ssl_context
    assert context is not None
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname  # Kafka's default ssl.endpoint.identification.algorithm=https
    assert "node-secret" not in repr(broker)
    relaxed = inter_broker_peer_security(
        BrokerConfig({**secure, "ssl.endpoint.identification.algorithm": ""})
    )
    assert relaxed is not None
    assert relaxed.ssl_context is not None
    assert not relaxed.ssl_context.check_hostname


def test_plaintext_inter_node_traffic_needs_nothing() -> None:
    config = BrokerConfig({
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:19091,2@127.0.0.1:19092",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19091",
    })
    assert inter_broker_peer_security(config) is None
    assert controller_peer_security(config) is None


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"sasl.mechanism.inter.broker.protocol": None}, "sasl.mechanism.inter.broker.protocol"),
        ({"sasl.mechanism.inter.broker.protocol": "GSSAPI"}, "sasl.mechanism.inter.broker.protocol"),
        ({"sasl.mechanism.controller.protocol": None}, "sasl.mechanism.controller.protocol"),
        ({"sasl.enabled.mechanisms": "PLAIN"}, "not in sasl.enabled.mechanisms"),
        ({"sasl.jaas.config": 'x required user_node="node-secret";'}, "sasl.jaas.config"),
        ({"ssl.truststore.location": None}, "ssl.truststore.location"),
    ],
)
def test_unworkable_inter_node_settings_refuse_to_start(
    secure: dict[str, str], change: dict[str, str | None], named: str
) -> None:
    settings = {k: v for k, v in {**secure, **change}.items() if v is not None}
    if "ssl.truststore.location" in change:
        settings["ssl.client.auth"] = "none"  # the server side alone needs no truststore
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        listener_security(BrokerConfig(settings))


def test_a_broker_only_node_learns_the_controller_protocol_from_the_map(
    secure: dict[str, str],
) -> None:
    """A broker-only node has no controller listener of its own: the protocol map says how to
    reach the voters' one."""
    config = BrokerConfig({
        **secure,
        "node.id": "3",
        "process.roles": "broker",
        "listeners": "SASL_SSL://127.0.0.1:0",
    })
    controller = controller_peer_security(config)
    assert controller is not None
    assert controller.mechanism == "PLAIN"
