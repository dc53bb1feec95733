"""Where SASL users come from (config, JAAS lines, per-listener keys) and that passwords stay hidden."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.broker.config import BrokerConfig
from kafkapy.protocol.sasl import ScramServer
from kafkapy.server.security.credentials import CredentialStore, jaas_users, parse_users
from kafkapy.server.security.listener import listener_security

JAAS = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
    'password="admin-secret" user_admin="admin-secret" user_carol="c\\"q";'
)


def test_users_from_kafkapy_users_and_jaas_lines() -> None:
    config = BrokerConfig(
        {
            "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
            "kafkapy.sasl.users": "alice:a:b, bob:",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        }
    )
    store = CredentialStore.from_config(config)
    assert store.check_plain("alice", "a:b")  # the first ':' separates
    assert store.check_plain("admin", "admin-secret")
    assert store.check_plain("carol", 'c"q')
    assert not store.check_plain("alice", "a")
    assert not store.check_plain("nobody", "")
    assert set(store.scram_users()) == {"alice", "bob", "admin", "carol"}
    assert [m for m, _ in store.scram_users()["alice"]] == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert (
        ScramServer("SCRAM-SHA-512", lambda u: store.scram("SCRAM-SHA-512", u))
        .evaluate(b"n,,n=admin,r=abc")
        .startswith(b"r=abc")
    )


def test_passwords_are_hidden_from_describe_configs_but_used() -> None:
    config = BrokerConfig({"kafkapy.sasl.users": "alice:secret", "ssl.key.password": "pw"})
    values = {name: value for name, value, _ in config.items()}
    assert values["kafkapy.sasl.users"] is None
    assert values["ssl.key.password"] is None
    assert values["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
    assert config.get("kafkapy.sasl.users") == "alice:secret"


def test_listener_prefixed_keys_override_the_broker_wide_ones() -> None:
    config = BrokerConfig(
        {
            "listeners": "A://127.0.0.1:0,B://127.0.0.1:0",
            "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.b.sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        }
    )
    security = listener_security(config)
    assert security["A"].mechanisms == ("PLAIN",)
    assert security["B"].mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    assert security["A"].ssl_context is None


@given(st.text(max_size=60))
def test_parse_users_accepts_or_raises_value_error(text: str) -> None:
    try:
        users = parse_users(text)
    except ValueError:
        return
    assert all(name and name == name.strip() for name in users)


@given(st.text(max_size=80))
def test_jaas_users_never_crashes(text: str) -> None:
    assert all(isinstance(k, str) for k in jaas_users(text))


def test_the_inter_broker_listener_is_chosen_as_kafka_does() -> None:
    """inter.broker.listener.name, else the listener of security.inter.broker.protocol
    (PLAINTEXT by default); not both; an unknown name refuses to start."""
    from kafkapy.broker.config import ConfigError

    cluster = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": "1@127.0.0.1:19091,2@127.0.0.1:19092",
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:19091",
    }

    def chosen(**settings: str) -> str:
        config = BrokerConfig({**cluster, **settings}).cluster
        assert config is not None
        return config.inter_broker_listener_name

    assert chosen() == "PLAINTEXT"
    assert chosen(**{"inter.broker.listener.name": "SASL_PLAINTEXT"}) == "SASL_PLAINTEXT"
    assert chosen(**{"security.inter.broker.protocol": "SASL_PLAINTEXT"}) == "SASL_PLAINTEXT"
    with pytest.raises(ConfigError, match="not both"):
        chosen(**{"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "SASL_PLAINTEXT"})
    with pytest.raises(ConfigError, match="INTERNAL is not a broker listener"):
        chosen(**{"inter.broker.listener.name": "INTERNAL"})
    with pytest.raises(ConfigError, match=r"security\.inter\.broker\.protocol SSL"):
        chosen(**{"security.inter.broker.protocol": "SSL"})
