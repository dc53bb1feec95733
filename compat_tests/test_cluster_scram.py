"""SCRAM credentials in a cluster, with unmodified confluent-kafka clients: a SCRAM-SHA-512 user
created with the AdminClient through node 1 of a three-node SASL_PLAINTEXT cluster (every
listener - clients', inter-broker, controller - on SASL) authenticates a producer against node 3,
after nodes 1 and 3 were both killed and restarted. What users rely on: a user created once
exists on every node and survives restarts (Kafka keeps it in the metadata log), and a wrong
password or a deleted user is refused everywhere. A lone node (a quorum of one) keeps its users
across a SIGKILL."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from compat_tests.conftest import BrokerFactory
from compat_tests.test_cluster_basics import start_cluster
from kafkapy.testing.cluster import ClusterProcesses

pytestmark = pytest.mark.timeout(300)
TIMEOUT_S = 30.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcesses]:
    c = start_cluster(tmp_path, 3, security="SASL_PLAINTEXT")
    try:
        yield c
    finally:
        c.stop()


def _conf(cluster: ClusterProcesses, node: int, **user: str) -> dict[str, str]:
    conf = {**cluster.client_config, "bootstrap.servers": cluster.bootstrap_of(node)}
    conf.update({k.replace("_", "."): v for k, v in user.items()})
    return conf


def _auth_error(conf: dict[str, str]) -> KafkaError | None:
    """The authentication error a producer with `conf` meets within 10 s (None: none)."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce("scram-probe", b"x")
    deadline = time.monotonic() + 10
    auth: list[KafkaError] = []
    while not auth and time.monotonic() < deadline:
        producer.poll(0.2)
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    producer.purge()
    producer.flush(1)
    return auth[0] if auth else None


def test_a_scram_user_created_on_node_1_logs_in_on_node_3_after_both_restart(
    cluster: ClusterProcesses,
) -> None:
    admin = AdminClient(_conf(cluster, 1))
    upsert = UserScramCredentialUpsertion(
        "zoe", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"zoe-secret", b"zoe-salt"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=TIMEOUT_S)
    topic = "scram-cluster"
    for future in admin.create_topics([NewTopic(topic, 3, 3)]).values():
        future.result(timeout=TIMEOUT_S)

    cluster.restart(1, wait=False)
    cluster.restart(3, wait=False)
    cluster.wait_ready(1, 3)
    cluster.wait_settled()

    zoe = {"sasl_username": "zoe", "sasl_password": "zoe-secret"}
    zoes_admin = AdminClient(_conf(cluster, 3, **zoe))  # kept: a dropped client fails its futures
    described = zoes_admin.describe_user_scram_credentials(["zoe"])
    infos = described["zoe"].result(timeout=TIMEOUT_S).scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    producer = Producer(_conf(cluster, 3, **zoe))
    delivered: list[str | None] = []
    for i in range(30):
        producer.produce(topic, f"zoe-{i}".encode(), on_delivery=lambda err, _: delivered.append(
            None if err is None else str(err)))  # fmt: skip
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == [None] * 30

    wrong = _auth_error(_conf(cluster, 3, sasl_username="zoe", sasl_password="not-it"))
    assert wrong is not None
    assert "Authentication failed" in wrong.str()

    # deleted through node 3: node 1 refuses the user from then on
    deletion = UserScramCredentialDeletion("zoe", ScramMechanism.SCRAM_SHA_512)
    admin3 = AdminClient(_conf(cluster, 3))
    for future in admin3.alter_user_scram_credentials([deletion]).values():
        future.result(timeout=TIMEOUT_S)
    # node 1 applies the deletion a moment after node 3 answered: a few tries
    refused = next((e for _ in range(3) if (e := _auth_error(_conf(cluster, 1, **zoe)))), None)
    assert refused is not None
    assert "Authentication failed" in refused.str()


def test_a_scram_user_survives_a_kill_of_a_quorum_of_one(broker_factory: BrokerFactory) -> None:
    """A lone `kafkapy serve` (a quorum of one) SIGKILLed right after the AdminClient's alter
    was answered keeps the user: the answer came once the metadata log had committed it."""
    data_dir = broker_factory.base / "single"
    args = ["--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--sasl-user", "alice:alice-secret"]
    broker = broker_factory.start(data_dir=data_dir, extra_args=args)
    alice = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-256",
             "sasl.username": "alice", "sasl.password": "alice-secret"}  # fmt: skip
    admin = AdminClient({**alice, "bootstrap.servers": broker.bootstrap})
    upsert = UserScramCredentialUpsertion(
        "nora", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"nora-secret"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=TIMEOUT_S)
    broker.kill()
    broker = broker_factory.start(data_dir=data_dir, extra_args=args)
    nora = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": "nora", "sasl.password": "nora-secret",
            "bootstrap.servers": broker.bootstrap}  # fmt: skip
    noras_admin = AdminClient(nora)
    infos = noras_admin.describe_user_scram_credentials(["nora"])["nora"].result(timeout=TIMEOUT_S)
    assert [(i.mechanism, i.iterations) for i in infos.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_512, 8192)
    ]
    producer = Producer(nora)
    errors: list[object] = []
    producer.produce("nora-topic", b"after the kill", on_delivery=lambda err, _: errors.append(err))
    assert producer.flush(TIMEOUT_S) == 0
    assert errors == [None]
