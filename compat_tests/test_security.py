"""SASL and TLS listeners with unmodified clients: confluent-kafka (librdkafka), kafka-python,
aiokafka, kcat.

One broker subprocess serves four listeners at once - PLAINTEXT, SASL_PLAINTEXT, SSL, SASL_SSL -
configured as a user would (`--sasl-user`, `ssl.keystore.location` with a PEM file); certificates
are made at test time with the openssl CLI (kafkapy.testing.certs). What users rely on: produce,
consume and consumer groups work with every mechanism and protocol; a wrong password is reported
by the client as an authentication error; the plaintext listener beside them keeps working.
(kafka-python 3 is not asked about a wrong password: it retries the bootstrap for 30 s and then
raises KafkaTimeoutError, not an authentication error - the broker's answer is the same one
confluent-kafka reports.)
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from compat_tests.conftest import BrokerFactory, BrokerProcess, in_ci, unique_topic
from kafkapy.testing.certs import CertFiles, make_certs

TIMEOUT_S = 20.0
USER, PASSWORD = "alice", "alice-secret"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secure_broker(
    tmp_path_factory: pytest.TempPathFactory, certs: CertFiles
) -> Iterator[tuple[BrokerProcess, dict[str, str]]]:
    """The broker and {listener name: bootstrap address}."""
    factory = BrokerFactory(tmp_path_factory.mktemp("secure"))
    names = ["PLAINTEXT", "SASL_PLAINTEXT", "SSL", "SASL_SSL"]
    try:
        broker = factory.start(
            memory=True,
            extra_args=[
                "--listeners", ",".join(f"{n}://127.0.0.1:0" for n in names),
                "--sasl-user", f"{USER}:{PASSWORD}",
                "--override", f"ssl.keystore.location={certs.server_pem}",
            ],
        )  # fmt: skip
        line = re.search(r"listening on (.*?) \(", broker.log_text())
        assert line is not None
        yield broker, dict(zip(names, line.group(1).split(", "), strict=True))
    finally:
        factory.close()


def _conf(
    addresses: dict[str, str],
    certs: CertFiles,
    protocol: str,
    mechanism: str | None = None,
    password: str = PASSWORD,
) -> dict[str, Any]:
    conf: dict[str, Any] = {"bootstrap.servers": addresses[protocol], "security.protocol": protocol}
    if protocol in ("SSL", "SASL_SSL"):
        conf["ssl.ca.location"] = str(certs.ca)
    if mechanism is not None:
        conf.update(
            {"sasl.mechanisms": mechanism, "sasl.username": USER, "sasl.password": password}
        )
    return conf


def _round_trip(conf: dict[str, Any], topic: str) -> None:
    """Produce three records, then consume them back through a consumer group."""
    producer = Producer({**conf, "message.timeout.ms": int(TIMEOUT_S * 1000)})
    delivered: list[Any] = []
    for i in range(3):
        producer.produce(
            topic, f"v{i}".encode(), on_delivery=lambda err, _msg: delivered.append(err)
        )
    assert producer.flush(TIMEOUT_S) == 0
    assert delivered == [None, None, None]
    consumer = Consumer(
        {
            **conf,
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
        }
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while len(got) < 3 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        consumer.commit(asynchronous=False)
        committed = consumer.committed(consumer.assignment(), timeout=TIMEOUT_S)
    finally:
        consumer.close()
    assert got == [b"v0", b"v1", b"v2"]
    assert [tp.offset for tp in committed] == [3]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-256"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
     ("SSL", None), ("SASL_SSL", "SCRAM-SHA-512"), ("PLAINTEXT", None)],
)  # fmt: skip
def test_confluent_kafka_produce_consume_group(
    secure_broker: tuple[BrokerProcess, dict[str, str]],
    certs: CertFiles,
    protocol: str,
    mechanism: str | None,
) -> None:
    _, addresses = secure_broker
    _round_trip(_conf(addresses, certs, protocol, mechanism), unique_topic("sec"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_confluent_kafka_wrong_password_is_an_authentication_error(
    secure_broker: tuple[BrokerProcess, dict[str, str]], certs: CertFiles, mechanism: str
) -> None:
    broker, addresses = secure_broker
    errors: list[KafkaError] = []
    conf = _conf(addresses, certs, "SASL_SSL", mechanism, password="wrong")
    producer = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 3000})
    producer.produce(unique_topic("denied"), b"x")
    deadline = time.monotonic() + TIMEOUT_S
    while (
        not any(e.code() == KafkaError._AUTHENTICATION for e in errors)
        and time.monotonic() < deadline
    ):
        producer.poll(0.2)
    producer.purge()
    producer.flush(1)
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, errors
    assert "Authentication failed" in auth[0].str()
    assert broker.is_running()


def test_kafka_python_sasl_and_ssl(
    secure_broker: tuple[BrokerProcess, dict[str, str]], certs: CertFiles
) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    _, addresses = secure_broker
    cases = [
        ("SASL_PLAINTEXT", {"sasl_mechanism": "PLAIN"}),
        ("SASL_PLAINTEXT", {"sasl_mechanism": "SCRAM-SHA-256"}),
        ("SASL_SSL", {"sasl_mechanism": "SCRAM-SHA-512", "ssl_cafile": str(certs.ca)}),
        ("SSL", {"ssl_cafile": str(certs.ca)}),
    ]
    for protocol, extra in cases:
        conf: dict[str, Any] = {
            "bootstrap_servers": addresses[protocol],
            "security_protocol": protocol,
            **extra,
        }
        if "sasl_mechanism" in extra:
            conf.update(sasl_plain_username=USER, sasl_plain_password=PASSWORD)
        topic = unique_topic("kp")
        producer = KafkaProducer(**conf, request_timeout_ms=10000)
        producer.send(topic, b"hello").get(timeout=TIMEOUT_S)
        producer.close(timeout=5)
        consumer = KafkaConsumer(
            topic, **conf, auto_offset_reset="earliest", consumer_timeout_ms=10000
        )
        try:
            values = [
                m.value for _, m in zip(range(1), consumer, strict=False)
            ]  # no wait for a 2nd
        finally:
            consumer.close()
        assert values == [b"hello"], protocol


def test_kcat_over_sasl_ssl(
    secure_broker: tuple[BrokerProcess, dict[str, str]], certs: CertFiles
) -> None:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        if in_ci():
            pytest.fail("kcat is not installed, but CI=true: .ci/run must install it")
        pytest.skip("kcat not installed (apt-get install kcat); required in CI")
    _, addresses = secure_broker
    topic = unique_topic("kcat")
    common = [
        "-b", addresses["SASL_SSL"], "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-256",
        "-X", f"sasl.username={USER}", "-X", f"sasl.password={PASSWORD}", "-X", f"ssl.ca.location={certs.ca}",
    ]  # fmt: skip
    subprocess.run(
        [kcat, *common, "-P", "-t", topic],
        input=b"one\ntwo\n",
        check=True,
        timeout=30,
        capture_output=True,
    )
    out = subprocess.run(
        [kcat, *common, "-C", "-t", topic, "-o", "beginning", "-e", "-q"],
        check=True,
        timeout=30,
        capture_output=True,
    )
    assert out.stdout.split() == [b"one", b"two"]


@pytest.mark.timeout(60)
def test_confluent_admin_alters_scram_credentials_then_the_user_logs_in(
    secure_broker: tuple[BrokerProcess, dict[str, str]], certs: CertFiles
) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    _, addresses = secure_broker
    admin = AdminClient(_conf(addresses, certs, "SASL_PLAINTEXT", "SCRAM-SHA-256"))
    upsert = UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"dave-secret"
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=TIMEOUT_S)
    described = admin.describe_user_scram_credentials(["dave"])["dave"].result(timeout=TIMEOUT_S)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    conf = _conf(addresses, certs, "SASL_PLAINTEXT", "SCRAM-SHA-512")
    conf.update({"sasl.username": "dave", "sasl.password": "dave-secret"})
    producer = Producer(conf)
    producer.produce(unique_topic("dave"), b"hi")
    assert producer.flush(TIMEOUT_S) == 0


@pytest.mark.timeout(90)
def test_kafka_python_admin_manages_scram_users_that_then_log_in(
    secure_broker: tuple[BrokerProcess, dict[str, str]],
) -> None:
    from kafka import KafkaProducer
    from kafka.admin import (
        KafkaAdminClient,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    _, addresses = secure_broker
    sasl = {"bootstrap_servers": addresses["SASL_PLAINTEXT"], "security_protocol": "SASL_PLAINTEXT"}
    admin = KafkaAdminClient(**sasl, sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=USER,
                             sasl_plain_password=PASSWORD)  # fmt: skip
    try:
        upsert = UserScramCredentialUpsertion("erik", ScramMechanism.SCRAM_SHA_256, "erik-pw", 8192)
        assert admin.alter_user_scram_credentials([upsert]) == {"erik": None}
        described = admin.describe_user_scram_credentials(["erik"])["erik"]
        assert described["error"] is None
        assert [(i["mechanism"], i["iterations"]) for i in described["credential_infos"]] == [
            (ScramMechanism.SCRAM_SHA_256, 8192)
        ]
        producer = KafkaProducer(**sasl, sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="erik",
                                 sasl_plain_password="erik-pw", request_timeout_ms=10000)  # fmt: skip
        producer.send(unique_topic("erik"), b"hi").get(timeout=TIMEOUT_S)
        producer.close(timeout=5)
        deletion = UserScramCredentialDeletion("erik", ScramMechanism.SCRAM_SHA_256)
        assert admin.alter_user_scram_credentials([deletion]) == {"erik": None}
        # Kafka's RESOURCE_NOT_FOUND message, which kafka-python hands back
        again = admin.alter_user_scram_credentials([deletion])["erik"]
        assert again == "Attempt to delete a user credential that does not exist"
        gone = admin.describe_user_scram_credentials(["erik"])["erik"]["error"]
        assert gone is not None
    finally:
        admin.close()


def test_aiokafka_scram_and_ssl(
    secure_broker: tuple[BrokerProcess, dict[str, str]], certs: CertFiles
) -> None:
    import asyncio
    import ssl

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer  # type: ignore[import-untyped]

    _, addresses = secure_broker
    context = ssl.create_default_context(cafile=str(certs.ca))
    cases: list[dict[str, Any]] = [
        {"bootstrap_servers": addresses["SASL_PLAINTEXT"], "security_protocol": "SASL_PLAINTEXT",
         "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": USER, "sasl_plain_password": PASSWORD},
        {"bootstrap_servers": addresses["SASL_SSL"], "security_protocol": "SASL_SSL", "ssl_context": context,
         "sasl_mechanism": "PLAIN", "sasl_plain_username": USER, "sasl_plain_password": PASSWORD},
    ]  # fmt: skip

    async def round_trip(conf: dict[str, Any]) -> list[bytes]:
        topic = unique_topic("aio")
        producer = AIOKafkaProducer(**conf)
        await producer.start()
        try:
            await producer.send_and_wait(topic, b"hi")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, **conf, auto_offset_reset="earliest")
        await consumer.start()
        try:
            message = await asyncio.wait_for(consumer.getone(), TIMEOUT_S)
        finally:
            await consumer.stop()
        return [message.value]

    for conf in cases:
        assert asyncio.run(asyncio.wait_for(round_trip(conf), 2 * TIMEOUT_S)) == [b"hi"]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("setting", "named"),
    [
        ("authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "authorizer.class.name"),
        ("super.users=User:admin", "super.users"),  # read only by an authorizer, none configured
    ],
)
def test_an_authorizer_kafkapy_does_not_have_refuses_to_start(
    tmp_path: Path, setting: str, named: str
) -> None:
    """Fail closed: kafkapy's one authorizer is StandardAuthorizer (compat_tests/test_acls.py);
    any other class, or what only an authorizer reads without one, makes `kafkapy serve` exit
    with a message naming the key rather than start unprotected."""
    properties = tmp_path / "server.properties"
    properties.write_text(
        "listeners=SASL_PLAINTEXT://127.0.0.1:0\n"
        "sasl.enabled.mechanisms=PLAIN\n"
        f"kafkapy.sasl.users={USER}:{PASSWORD}\n"
        f"{setting}\n"
        "allow.everyone.if.no.acl.found=false\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "kafkapy", "serve", "--memory", "--config", str(properties)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert named in done.stderr
    assert "kafkapy ready" not in done.stdout + done.stderr


@pytest.mark.timeout(60)
def test_confluent_admin_describes_every_user_when_none_is_named(
    secure_broker: tuple[BrokerProcess, dict[str, str]], certs: CertFiles
) -> None:
    """describe_user_scram_credentials() without users: every user with credentials (librdkafka
    sends an empty list, which Kafka treats as "all", like null)."""
    from confluent_kafka.admin import AdminClient

    _, addresses = secure_broker
    admin = AdminClient(_conf(addresses, certs, "SASL_PLAINTEXT", "SCRAM-SHA-256"))
    described = admin.describe_user_scram_credentials().result(timeout=TIMEOUT_S)
    assert USER in described
    assert described[USER].scram_credential_infos  # the configured user's mechanisms
