"""ACL enforcement with unmodified clients: confluent-kafka (librdkafka) and kafka-python,
and the Java client (kafka-clients' producer, consumer and Admin ACL API), against `kafkapy serve`
configured the Kafka way - a SASL_PLAINTEXT listener,
`authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`,
`super.users=User:admin`, `allow.everyone.if.no.acl.found=false` - with ACLs created by the super
user through confluent-kafka's AdminClient.

What users rely on: a user without ACLs cannot produce, consume, see a topic or join a group
(each client reports Kafka's authorization error); WRITE lets them produce; a PREFIXED grant
covers every topic and group under the prefix and a DENY rule wins over it; the super user needs
no ACL at all.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import kafka
import kafka.errors as errors
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from compat_tests.conftest import BrokerFactory, BrokerProcess, unique_topic
from compat_tests.java.harness import JavaClient, java_build

TIMEOUT_S = 30.0
ADMIN, ALICE, BOB = ("admin", "admin-secret"), ("alice", "alice-secret"), ("bob", "bob-secret")
CAROL = ("carol", "carol-secret")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("authz"))
    try:
        yield factory.start(
            memory=True,
            extra_args=[
                "--listeners", "SASL_PLAINTEXT://127.0.0.1:0",
                *(a for u in (ADMIN, ALICE, BOB, CAROL) for a in ("--sasl-user", f"{u[0]}:{u[1]}")),
                "--override", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "--override", "super.users=User:admin",
                "--override", "allow.everyone.if.no.acl.found=false",
            ],
        )  # fmt: skip
    finally:
        factory.close()


def _conf(broker: BrokerProcess, user: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user[0],
        "sasl.password": user[1],
        **extra,
    }


def _admin(broker: BrokerProcess) -> AdminClient:
    return AdminClient(_conf(broker, ADMIN))


def _create_topics(broker: BrokerProcess, *names: str) -> None:
    admin = _admin(broker)  # (referenced until the answers come: a dropped client fails them)
    for f in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        f.result(TIMEOUT_S)


def _grant(broker: BrokerProcess, *bindings: AclBinding) -> None:
    admin = _admin(broker)
    for f in admin.create_acls(list(bindings)).values():
        f.result(TIMEOUT_S)


def _acl(
    rtype: ResourceType, name: str, op: AclOperation, *, user: str = ALICE[0],
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
    permission: AclPermissionType = AclPermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(rtype, name, pattern, f"User:{user}", "*", op, permission)


def _produce(broker: BrokerProcess, user: tuple[str, str], topic: str) -> KafkaError | None:
    """The delivery report's error of one message (None = written)."""
    reports: list[KafkaError | None] = []
    p = Producer(_conf(broker, user, **{"message.timeout.ms": 10000}))
    p.produce(topic, b"v", on_delivery=lambda err, _msg: reports.append(err))
    p.flush(TIMEOUT_S)
    assert reports, "no delivery report"
    return reports[0]


def _consume(broker: BrokerProcess, user: tuple[str, str], topic: str, group: str) -> KafkaError | bytes:
    """The first value read, or the first error the consumer reports."""
    c = Consumer(_conf(broker, user, **{"group.id": group, "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return msg.error()
            return msg.value()
        raise AssertionError("the consumer saw neither a record nor an error")
    finally:
        c.close()


def _visible_topics(broker: BrokerProcess, user: tuple[str, str]) -> set[str]:
    return set(AdminClient(_conf(broker, user)).list_topics(timeout=TIMEOUT_S).topics)


def test_a_user_without_acls_can_do_nothing(broker: BrokerProcess) -> None:
    topic, group = unique_topic("closed"), f"g-{uuid.uuid4().hex[:6]}"
    _create_topics(broker, topic)
    assert _produce(broker, ADMIN, topic) is None  # the super user needs no ACL
    assert topic not in _visible_topics(broker, ALICE)
    assert topic in _visible_topics(broker, ADMIN)
    err = _produce(broker, ALICE, topic)
    assert err is not None
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    got = _consume(broker, ALICE, topic, group)
    assert isinstance(got, KafkaError)
    assert got.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
    # with READ on the topic but not on the group, joining the group is what fails
    _grant(broker, _acl(ResourceType.TOPIC, topic, AclOperation.READ))
    got = _consume(broker, ALICE, topic, group)
    assert isinstance(got, KafkaError)
    assert got.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _consume(broker, ADMIN, topic, group) == b"v"


def test_write_lets_a_user_produce_and_read_plus_group_read_consume(broker: BrokerProcess) -> None:
    topic, group = unique_topic("granted"), f"g-{uuid.uuid4().hex[:6]}"
    _create_topics(broker, topic)
    _grant(broker, _acl(ResourceType.TOPIC, topic, AclOperation.WRITE))
    assert _produce(broker, ALICE, topic) is None
    assert topic in _visible_topics(broker, ALICE)  # WRITE implies DESCRIBE
    assert topic not in _visible_topics(broker, BOB)
    _grant(
        broker,
        _acl(ResourceType.TOPIC, topic, AclOperation.READ),
        _acl(ResourceType.GROUP, group, AclOperation.READ),
    )
    assert _consume(broker, ALICE, topic, group) == b"v"


def test_prefixed_grants_and_deny_rules(broker: BrokerProcess) -> None:
    prefix = f"team-{uuid.uuid4().hex[:6]}-"
    allowed, denied = prefix + "orders", prefix + "payroll"
    _create_topics(broker, allowed, denied)
    _grant(
        broker,
        _acl(ResourceType.TOPIC, prefix, AclOperation.ALL, pattern=ResourcePatternType.PREFIXED),
        _acl(ResourceType.GROUP, prefix, AclOperation.READ, pattern=ResourcePatternType.PREFIXED),
        _acl(ResourceType.TOPIC, denied, AclOperation.ALL, user="*", permission=AclPermissionType.DENY),
    )
    assert _produce(broker, ALICE, allowed) is None
    assert _consume(broker, ALICE, allowed, prefix + "readers") == b"v"
    err = _produce(broker, ALICE, denied)
    assert err is not None
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    visible = _visible_topics(broker, ALICE)
    assert allowed in visible
    assert denied not in visible
    # the super user is above every DENY
    assert _produce(broker, ADMIN, denied) is None


def test_kafka_python_reports_the_authorization_errors(broker: BrokerProcess) -> None:
    topic, group = unique_topic("kpy"), f"g-{uuid.uuid4().hex[:6]}"
    _create_topics(broker, topic)
    sasl = {
        "bootstrap_servers": broker.bootstrap, "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN", "sasl_plain_username": BOB[0], "sasl_plain_password": BOB[1],
    }
    producer = kafka.KafkaProducer(**sasl, max_block_ms=10000)
    try:
        with pytest.raises(errors.TopicAuthorizationFailedError):
            producer.send(topic, b"v").get(TIMEOUT_S)
    finally:
        producer.close(5)
    _grant(broker, _acl(ResourceType.TOPIC, topic, AclOperation.WRITE, user=BOB[0]),
           _acl(ResourceType.TOPIC, topic, AclOperation.READ, user=BOB[0]))
    producer = kafka.KafkaProducer(**sasl, max_block_ms=10000)
    try:
        assert producer.send(topic, b"v").get(TIMEOUT_S).offset >= 0
    finally:
        producer.close(5)
    consumer = kafka.KafkaConsumer(topic, **sasl, group_id=group, auto_offset_reset="earliest",
                                   consumer_timeout_ms=int(TIMEOUT_S * 1000))
    try:
        with pytest.raises(errors.GroupAuthorizationFailedError):
            next(iter(consumer))
    finally:
        consumer.close()


def test_admin_client_is_refused_what_its_user_may_not_do(broker: BrokerProcess) -> None:
    topic = unique_topic("adm")
    admin = AdminClient(_conf(broker, ALICE))
    futures = admin.create_topics([NewTopic(topic, 1, 1)])
    with pytest.raises(KafkaException) as refused:
        futures[topic].result(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


@pytest.mark.timeout(240)
def test_java_client_is_refused_until_its_user_is_granted(
    broker: BrokerProcess, tmp_path_factory: pytest.TempPathFactory
) -> None:
    prefix = unique_topic("java-authz")
    events = JavaClient(java_build(tmp_path_factory), broker.bootstrap).run("authz", prefix, *ADMIN, *CAROL)
    # kafka-clients' idempotent producer meets the refusal at InitProducerId (KIP-679: no WRITE
    # anywhere) or at the topic, depending on the version's order
    refused = set(events.one("refused", step="no-acl")["classes"])
    assert refused & {"TopicAuthorizationException", "ClusterAuthorizationException"}, refused
    assert events.one("produced", step="write")["offset"] == 0
    assert "GroupAuthorizationException" in events.one("refused", step="no-group-acl")["classes"]
    assert events.one("consumed", step="read")["values"] == ["v"]
