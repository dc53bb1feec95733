"""ACL admin APIs with unmodified clients: confluent-kafka's AdminClient, kafka-python's
KafkaAdminClient and the Java client's Admin (kafka-clients 4.3.0), against `kafkapy serve` configured the Kafka way - a SASL_PLAINTEXT listener,
`authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`,
`super.users=User:admin`, `allow.everyone.if.no.acl.found=false`.

What users rely on: the super user creates, lists (with Kafka's filters, MATCH included) and
deletes ACLs with either client; a user without a cluster ACL is refused
CLUSTER_AUTHORIZATION_FAILED; the ACLs are in the metadata log, so they survive a restart and
every node of a three-node cluster answers DescribeAcls with them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from compat_tests.conftest import BrokerFactory, BrokerProcess, unique_topic
from compat_tests.java.harness import JavaClient, java_build
from kafkapy.broker.config import STANDARD_AUTHORIZER
from kafkapy.cli.common import ClientSettings
from kafkapy.cli.wire import KafkaWireClient
from kafkapy.protocol import ApiKey
from kafkapy.protocol.messages import DescribeAclsRequest, DescribeAclsResponse
from kafkapy.testing.cluster import ClusterProcesses

TIMEOUT_S = 30.0
ADMIN, ALICE = ("admin", "admin-secret"), ("alice", "alice-secret")
AUTHORIZER_ARGS = [
    "--override", f"authorizer.class.name={STANDARD_AUTHORIZER}",
    "--override", "super.users=User:admin",
    "--override", "allow.everyone.if.no.acl.found=false",
]  # fmt: skip


def _start(factory: BrokerFactory, data_dir: Path) -> BrokerProcess:
    return factory.start(
        data_dir=data_dir,
        extra_args=[
            "--listeners", "SASL_PLAINTEXT://127.0.0.1:0",
            "--sasl-user", f"{ADMIN[0]}:{ADMIN[1]}", "--sasl-user", f"{ALICE[0]}:{ALICE[1]}",
            *AUTHORIZER_ARGS,
        ],
    )  # fmt: skip


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    factory = BrokerFactory(tmp_path_factory.mktemp("acls"))
    try:
        yield _start(factory, factory.base / "data")
    finally:
        factory.close()


def _conf(bootstrap: str, user: tuple[str, str]) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "PLAIN",
        "sasl.username": user[0],
        "sasl.password": user[1],
    }


def _binding(name: str, principal: str, operation: AclOperation, *,
             pattern: ResourcePatternType = ResourcePatternType.LITERAL,
             permission: AclPermissionType = AclPermissionType.ALLOW,
             restype: ResourceType = ResourceType.TOPIC) -> AclBinding:
    return AclBinding(restype, name, pattern, principal, "*", operation, permission)


def _any_filter(**kw: Any) -> AclBindingFilter:
    args: dict[str, Any] = {
        "restype": ResourceType.ANY, "name": None, "resource_pattern_type": ResourcePatternType.ANY,
        "principal": None, "host": None, "operation": AclOperation.ANY,
        "permission_type": AclPermissionType.ANY,
    }
    args.update(kw)
    return AclBindingFilter(**args)


def _create(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for future in admin.create_acls(bindings, request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)


def _describe(admin: AdminClient, acl_filter: AclBindingFilter) -> set[AclBinding]:
    return set(admin.describe_acls(acl_filter, request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S))


@pytest.mark.timeout(120)
def test_confluent_admin_creates_lists_and_deletes_acls(secured: BrokerProcess) -> None:
    admin = AdminClient(_conf(secured.bootstrap, ADMIN))
    read = _binding("orders", "User:alice", AclOperation.READ)
    prefixed = _binding("orders-", "User:alice", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED)
    deny = _binding("*", "User:mallory", AclOperation.ALL, permission=AclPermissionType.DENY)
    group = _binding("app", "User:alice", AclOperation.READ, restype=ResourceType.GROUP)
    _create(admin, [read, prefixed, deny, group])
    assert {read, prefixed, deny, group} <= _describe(admin, _any_filter())
    match = _any_filter(restype=ResourceType.TOPIC, name="orders-eu",
                        resource_pattern_type=ResourcePatternType.MATCH)
    assert _describe(admin, match) == {prefixed, deny}
    alice_topics = _any_filter(restype=ResourceType.TOPIC, principal="User:alice")
    assert _describe(admin, alice_topics) == {read, prefixed}
    deleted = admin.delete_acls([_any_filter(principal="User:alice")], request_timeout=TIMEOUT_S)
    (removed,) = [f.result(timeout=TIMEOUT_S) for f in deleted.values()]
    assert set(removed) == {read, prefixed, group}
    assert _describe(admin, _any_filter(principal="User:alice")) == set()
    assert deny in _describe(admin, _any_filter())


@pytest.mark.timeout(120)
def test_a_bad_binding_is_refused_by_the_broker(secured: BrokerProcess) -> None:
    """The client checks little: the broker answers INVALID_REQUEST (a CLUSTER resource is
    named kafka-cluster; a principal is TYPE:NAME)."""
    admin = AdminClient(_conf(secured.bootstrap, ADMIN))
    bad = [
        _binding("my-cluster", "User:alice", AclOperation.ALTER, restype=ResourceType.BROKER),
        _binding("t", "alice", AclOperation.READ),
    ]
    for future in admin.create_acls(bad, request_timeout=TIMEOUT_S).values():
        with pytest.raises(KafkaException) as refused:
            future.result(timeout=TIMEOUT_S)
        assert refused.value.args[0].name() == "INVALID_REQUEST"


@pytest.mark.timeout(120)
def test_a_user_without_a_cluster_acl_may_not_administer_acls(secured: BrokerProcess) -> None:
    """CreateAcls is refused per binding. DescribeAcls is refused too, but librdkafka drops a
    DescribeAcls error code (rd_kafka_DescribeAclsResponse_parse): confluent-kafka shows an empty
    list, never the ACLs; kafka-python reports the code."""
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType
    from kafka.errors import ClusterAuthorizationFailedError

    admin = AdminClient(_conf(secured.bootstrap, ADMIN))
    _create(admin, [_binding("visible", "User:carol", AclOperation.READ)])
    alice = AdminClient(_conf(secured.bootstrap, ALICE))
    for future in alice.create_acls(
        [_binding("mine", "User:alice", AclOperation.ALL)], request_timeout=TIMEOUT_S
    ).values():
        with pytest.raises(KafkaException) as refused:
            future.result(timeout=TIMEOUT_S)
        assert refused.value.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED"
    assert _describe(alice, _any_filter()) == set()
    kp = _kafka_python_admin(secured, ALICE)
    try:
        every = ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                          ResourcePatternFilter(KResourceType.ANY, None, ACLResourcePatternType.ANY))
        with pytest.raises(ClusterAuthorizationFailedError):
            kp.describe_acls(every)
    finally:
        kp.close()


def _kafka_python_admin(broker: BrokerProcess, user: tuple[str, str]) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(
        bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN", sasl_plain_username=user[0], sasl_plain_password=user[1],
        request_timeout_ms=int(TIMEOUT_S * 1000),
    )  # fmt: skip


@pytest.mark.timeout(120)
def test_kafka_python_admin_creates_lists_and_deletes_acls(secured: BrokerProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType

    admin = _kafka_python_admin(secured, ADMIN)
    try:
        acl = ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                  ResourcePattern(KResourceType.TOPIC, "kp-", ACLResourcePatternType.PREFIXED))
        result = admin.create_acls([acl])
        assert result["failed"] == []
        assert len(result["succeeded"]) == 1
        bob = ACLFilter("User:bob", None, ACLOperation.ANY, ACLPermissionType.ANY,
                        ResourcePatternFilter(KResourceType.ANY, None, ACLResourcePatternType.ANY))
        found, error = admin.describe_acls(bob)
        assert error.errno == 0
        assert [(a.principal, a.operation, a.resource_pattern.resource_name) for a in found] == [
            ("User:bob", ACLOperation.WRITE, "kp-")
        ]
        ((_, removed, error),) = admin.delete_acls([bob])
        assert error.errno == 0
        assert [(a.principal, a.resource_pattern.pattern_type) for a in removed] == [
            ("User:bob", ACLResourcePatternType.PREFIXED)
        ]
        assert admin.describe_acls(bob)[0] == []
    finally:
        admin.close()


@pytest.mark.timeout(180)
def test_acls_survive_a_restart(broker_factory: BrokerFactory, tmp_path: Path) -> None:
    data = tmp_path / "restart-data"
    first = _start(broker_factory, data)
    admin = AdminClient(_conf(first.bootstrap, ADMIN))
    wanted = {
        _binding("ledger", "User:alice", AclOperation.READ),
        _binding("tmp-", "User:*", AclOperation.ALL, pattern=ResourcePatternType.PREFIXED,
                 permission=AclPermissionType.DENY),
    }
    _create(admin, list(wanted))
    assert first.stop() is not None, "the broker ignored SIGTERM"
    second = _start(broker_factory, data)
    assert _describe(AdminClient(_conf(second.bootstrap, ADMIN)), _any_filter()) == wanted


def _node_acls(address: str) -> set[tuple[Any, ...]]:
    """DescribeAcls (any ACL) sent to this one node, as alice."""
    settings = ClientSettings(bootstrap=address, properties={
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": "alice-secret",
    })  # fmt: skip
    client = KafkaWireClient(address, client_id="acl-test", timeout_s=TIMEOUT_S, properties=settings.properties)
    try:
        response: DescribeAclsResponse = client.call(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1,
        ))  # fmt: skip
    finally:
        client.close()
    assert response.error_code == 0, response
    return {(r.resource_type, r.resource_name, a.principal, a.operation) for r in response.resources for a in r.acls}


def _eventually(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {TIMEOUT_S:.0f} s: {what}")
        time.sleep(0.2)


@pytest.mark.timeout(300)
def test_every_node_of_a_cluster_answers_with_the_same_acls(tmp_path: Path) -> None:
    """Created through node 1, deleted through node 3: every node's DescribeAcls follows. With a
    tiny snapshot interval the ACLs end up in node 2's metadata snapshot, and after node 2
    restarts (snapshot plus log tail) it still has every one."""
    overrides = {
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:kafkapy-node;User:alice",
        "allow.everyone.if.no.acl.found": "false",
        "metadata.log.max.record.bytes.between.snapshots": "1500",
    }
    with ClusterProcesses(tmp_path, 3, overrides=overrides, security="SASL_PLAINTEXT") as cluster:
        one = AdminClient({**cluster.client_config, "bootstrap.servers": cluster.bootstrap_of(1)})
        wanted = [_binding(f"t{i}", "User:bob", AclOperation.READ) for i in range(40)]
        wanted.append(_binding("pay", "User:bob", AclOperation.WRITE))
        _create(one, wanted)
        expected = {(2, b.name, "User:bob", int(b.operation.value)) for b in wanted}
        for node in cluster.nodes.values():
            _eventually(lambda n=node: _node_acls(n.bootstrap) == expected, f"node {node.node_id} has the ACLs")
        metadata = next(cluster.nodes[2].data_dir.rglob("__cluster_metadata-0"))
        _eventually(lambda: any(metadata.glob("*.checkpoint")), "node 2 wrote a metadata snapshot")
        cluster.restart(2)
        assert _node_acls(cluster.nodes[2].bootstrap) == expected
        three = AdminClient({**cluster.client_config, "bootstrap.servers": cluster.bootstrap_of(3)})
        removed = three.delete_acls([_any_filter(name="pay")], request_timeout=TIMEOUT_S)
        assert [len(f.result(timeout=TIMEOUT_S)) for f in removed.values()] == [1]
        left = expected - {(2, "pay", "User:bob", 4)}
        for node in cluster.nodes.values():
            _eventually(lambda n=node: _node_acls(n.bootstrap) == left,
                        f"node {node.node_id} dropped the deleted ACL")


@pytest.mark.timeout(240)
def test_java_admin_acl_api(tmp_path_factory: pytest.TempPathFactory, broker_factory: BrokerFactory) -> None:
    """kafka-clients' createAcls / describeAcls (ANY, MATCH) / deleteAcls, as a super user over
    plaintext (`User:ANONYMOUS`); a CLUSTER binding not named kafka-cluster is refused with
    InvalidRequestException."""
    broker = broker_factory.start(memory=True, extra_args=[
        "--override", f"authorizer.class.name={STANDARD_AUTHORIZER}",
        "--override", "super.users=User:ANONYMOUS",
    ])  # fmt: skip
    prefix = unique_topic("java-acl")
    events = JavaClient(java_build(tmp_path_factory), broker.bootstrap).run("acls", prefix)
    created = {tuple(b) for b in events.one("created")["bindings"]}
    assert len(created) == 4
    assert {tuple(b) for b in events.one("described", filter="any")["bindings"]} == created
    matched = {tuple(b) for b in events.one("described", filter="match")["bindings"]}
    assert matched == {
        ("TOPIC", f"{prefix}-orders", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        ("TOPIC", f"{prefix}-", "PREFIXED", "User:alice", "*", "WRITE", "ALLOW"),
    }
    assert events.one("refused")["class"] == "InvalidRequestException"
    assert {tuple(b) for b in events.one("deleted")["bindings"]} == matched
    assert {tuple(b) for b in events.one("described", filter="after")["bindings"]} == created - matched
