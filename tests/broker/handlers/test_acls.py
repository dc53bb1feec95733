"""CreateAcls / DescribeAcls / DeleteAcls over the wire, with a StandardAuthorizer.

A plaintext connection is `User:ANONYMOUS`; the node is a quorum of one, so CreateAcls and
DeleteAcls go through its controller channel and the ACL records of its metadata log, and
DescribeAcls reads its authorizer, fed from the published image. The node gets its authorizer
before it starts, as `authorizer.class.name` gives it one.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.authorizer import StandardAuthorizer
from kafkapy.authorizer.acl import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kafkapy.broker.config import STANDARD_AUTHORIZER
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafkapy.server.broker import Broker
from tests.server.helpers import IO_TIMEOUT_S, Client, NodeThread, build_node

pytestmark = pytest.mark.timeout(60)

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
ANY_TYPE = ResourceType.ANY
LITERAL, PREFIXED, MATCH, ANY_PATTERN = (
    PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH, PatternType.ANY,
)
READ, WRITE, ALTER = AclOperation.READ, AclOperation.WRITE, AclOperation.ALTER
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


@asynccontextmanager
async def authorized_node(
    data_dir: Path | None, *, super_users: tuple[str, ...] = ("User:ANONYMOUS",),
    allow_everyone: bool = False,
) -> AsyncIterator[tuple[Broker, int]]:
    """A running node with a StandardAuthorizer from the start; (broker, port)."""
    server = build_node(data_dir, {"listeners": "PLAINTEXT://127.0.0.1:0", "offsets.topic.num.partitions": "1"})
    server.broker.authorizer = StandardAuthorizer(
        super_users=super_users, allow_everyone_if_no_acl_found=allow_everyone
    )
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(server.run)
        try:
            with trio.fail_after(IO_TIMEOUT_S):
                assert await server.wait_ready()
            yield server.broker, bound[0].port
        finally:
            server.request_shutdown()
            with trio.fail_after(IO_TIMEOUT_S):
                await server.stopped.wait()


def creation(
    name: str,
    operation: int = READ,
    *,
    resource_type: int = TOPIC,
    pattern: int = LITERAL,
    principal: str = "User:alice",
    permission: int = ALLOW,
    host: str = "*",
) -> CreateAclsRequest.AclCreation:
    return CreateAclsRequest.AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=pattern,
        principal=principal, host=host, operation=operation, permission_type=permission,
    )


def describe_request(
    resource_type: int = ANY_TYPE, name: str | None = None, pattern: int = ANY_PATTERN,
    principal: str | None = None,
) -> DescribeAclsRequest:
    return DescribeAclsRequest(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=None, operation=AclOperation.ANY,
        permission_type=AclPermissionType.ANY,
    )


def delete_filter(
    resource_type: int = ANY_TYPE, name: str | None = None, pattern: int = ANY_PATTERN,
    principal: str | None = None,
) -> DeleteAclsRequest.DeleteAclsFilter:
    return DeleteAclsRequest.DeleteAclsFilter(
        resource_type_filter=resource_type, resource_name_filter=name, pattern_type_filter=pattern,
        principal_filter=principal, host_filter=None, operation=AclOperation.ANY,
        permission_type=AclPermissionType.ANY,
    )


def listed(resp: DescribeAclsResponse) -> set[tuple[Any, ...]]:
    assert resp.error_code == ErrorCode.NONE, resp
    return {
        (r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
         a.permission_type)
        for r in resp.resources
        for a in r.acls
    }


def row(c: CreateAclsRequest.AclCreation) -> tuple[Any, ...]:
    return (c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
            c.operation, c.permission_type)


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_create_describe_delete_with_kafkas_filters(version: int) -> None:
    wanted = [
        creation("orders"),
        creation("orders-", WRITE, pattern=PREFIXED),
        creation("*", READ, permission=DENY, principal="User:mallory"),
        creation("app", READ, resource_type=GROUP),
    ]
    async with authorized_node(None) as (broker, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            created = await c.request(ApiKey.CREATE_ACLS, version, CreateAclsRequest(creations=wanted))
            everything = await c.request(ApiKey.DESCRIBE_ACLS, version, describe_request())
            match = await c.request(ApiKey.DESCRIBE_ACLS, version, describe_request(TOPIC, "orders-eu", MATCH))
            exact = await c.request(ApiKey.DESCRIBE_ACLS, version, describe_request(TOPIC, "orders", LITERAL))
            groups = await c.request(ApiKey.DESCRIBE_ACLS, version, describe_request(GROUP))
            deleted = await c.request(ApiKey.DELETE_ACLS, version, DeleteAclsRequest(filters=[
                delete_filter(principal="User:alice"), delete_filter(TOPIC, "orders", LITERAL),
            ]))
            after = await c.request(ApiKey.DESCRIBE_ACLS, version, describe_request())
        await c.aclose()
        assert len(broker.authorizer or ()) == 1
    assert [r.error_code for r in created.results] == [ErrorCode.NONE] * 4
    assert listed(everything) == {row(w) for w in wanted}
    # MATCH: what applies to topic orders-eu - the prefix and the wildcard, not "orders"
    assert listed(match) == {row(wanted[1]), row(wanted[2])}
    assert listed(exact) == {row(wanted[0])}
    assert listed(groups) == {row(wanted[3])}
    alice, orders = deleted.filter_results
    assert alice.error_code == orders.error_code == ErrorCode.NONE
    assert {(m.resource_name, m.operation) for m in alice.matching_acls} == {
        ("orders", READ), ("orders-", WRITE), ("app", READ)
    }
    assert [(m.resource_name, m.principal) for m in orders.matching_acls] == [("orders", "User:alice")]
    assert listed(after) == {row(wanted[2])}


async def test_bad_bindings_and_filters_are_invalid_request_each() -> None:
    async with authorized_node(None) as (_, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            created = await c.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[
                creation("ok"),
                creation("t", pattern=MATCH),
                creation("t", resource_type=99),  # a code kafkapy does not know: UNKNOWN
                creation("t", AclOperation.ANY),
                creation("my-cluster", ALTER, resource_type=CLUSTER),
                creation("t", principal="alice"),
                creation(""),
            ]))
            bad_describe = await c.request(ApiKey.DESCRIBE_ACLS, 3, describe_request(pattern=0))
            deleted = await c.request(ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=[
                delete_filter(resource_type=0), delete_filter(TOPIC, "ok", LITERAL),
            ]))
        await c.aclose()
    errors = [r.error_code for r in created.results]
    assert errors == [ErrorCode.NONE] + [ErrorCode.INVALID_REQUEST] * 6
    assert "kafka-cluster" in (created.results[4].error_message or "")
    assert bad_describe.error_code == ErrorCode.INVALID_REQUEST
    unknown, ok = deleted.filter_results
    assert unknown.error_code == ErrorCode.INVALID_REQUEST
    assert [m.resource_name for m in ok.matching_acls] == ["ok"]


async def test_the_acl_apis_need_cluster_permissions() -> None:
    """No super user, everyone allowed where no ACL speaks: the first CreateAcls may deny the
    caller ALTER on the cluster; from then on it may neither create, delete nor describe (the
    cluster has ACLs, none allows it DESCRIBE)."""
    deny = creation("kafka-cluster", ALTER, resource_type=CLUSTER, principal="User:ANONYMOUS", permission=DENY)
    async with authorized_node(None, super_users=(), allow_everyone=True) as (_, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            first = await c.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[deny]))
            second = await c.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[creation("t")]))
            deleted = await c.request(ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=[delete_filter()]))
            described = await c.request(ApiKey.DESCRIBE_ACLS, 3, describe_request())
        await c.aclose()
    assert [r.error_code for r in first.results] == [ErrorCode.NONE]
    assert [r.error_code for r in second.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    assert [r.error_code for r in deleted.filter_results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # Kafka's ClusterAuthorizationException message, not just the code
    assert second.results[0].error_message == "Request CREATE_ACLS from User:ANONYMOUS is not authorized."
    assert deleted.filter_results[0].error_message == "Request DELETE_ACLS from User:ANONYMOUS is not authorized."
    assert described.error_message == "Request DESCRIBE_ACLS from User:ANONYMOUS is not authorized."


async def test_acls_survive_a_restart(tmp_path: Path) -> None:
    """The ACL records are replayed from the metadata log when the node starts again."""
    wanted = [creation("orders"), creation("pay", WRITE, pattern=PREFIXED, permission=DENY)]
    async with authorized_node(tmp_path) as (_, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            created = await c.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=wanted))
        await c.aclose()
    assert [r.error_code for r in created.results] == [ErrorCode.NONE] * 2
    async with authorized_node(tmp_path) as (broker, port):
        c = await Client.connect(port)
        with trio.fail_after(30):
            described = await c.request(ApiKey.DESCRIBE_ACLS, 3, describe_request())
        await c.aclose()
        assert broker.authorizer is not None
        assert len(broker.authorizer) == 2
    assert listed(described) == {row(w) for w in wanted}


def test_authorizer_class_name_gives_the_broker_its_authorizer() -> None:
    """`authorizer.class.name` (StandardAuthorizer) with `super.users` and
    `allow.everyone.if.no.acl.found`, as Kafka reads them; without it there is none."""
    from kafkapy.broker.config import STANDARD_AUTHORIZER, BrokerConfig

    broker = Broker(BrokerConfig({
        "listeners": "PLAINTEXT://127.0.0.1:0", "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:admin; User:ops", "allow.everyone.if.no.acl.found": "true",
    }), memory=True)
    try:
        assert broker.authorizer is not None
        assert broker.authorizer.super_users == {"User:admin", "User:ops"}
        assert broker.authorizer.allow_everyone_if_no_acl_found
    finally:
        broker.close()
    plain = Broker(BrokerConfig({"listeners": "PLAINTEXT://127.0.0.1:0"}), memory=True)
    try:
        assert plain.authorizer is None
    finally:
        plain.close()


def test_the_authorizer_follows_the_ids_a_delta_names() -> None:
    """A whole image (delta None) replaces the authorizer's ACLs; a delta's ids add what the
    image has and drop what it no longer has."""
    import uuid

    from kafkapy.controller.image import MetadataImage
    from kafkapy.controller.records import AccessControlEntryRecord, RemoveAccessControlEntryRecord
    from kafkapy.server.broker import _follow_acls

    def acl(i: int) -> AccessControlEntryRecord:
        return AccessControlEntryRecord(uuid.UUID(int=i), 2, f"t{i}", 3 + i % 2, "User:a", "*", 3, 3)

    stale = StandardAuthorizer()
    stale.add_acl(uuid.UUID(int=99), next(iter(_bindings([acl(99)]))))
    image = MetadataImage()
    for offset, record in enumerate([acl(1), acl(2)]):
        image.apply(record, offset)
    _follow_acls(stale, image, None)
    assert set(stale.acls()) == {uuid.UUID(int=1), uuid.UUID(int=2)}
    image.apply(RemoveAccessControlEntryRecord(uuid.UUID(int=1)), 2)
    image.apply(acl(3), 3)
    _follow_acls(stale, image, [uuid.UUID(int=1), uuid.UUID(int=3)])
    assert set(stale.acls()) == {uuid.UUID(int=2), uuid.UUID(int=3)}
    assert stale.authorize("User:a", "10.0.0.1", AclOperation.READ, ResourceType.TOPIC, "t3-and-more")


def _bindings(records: Any) -> Any:
    from kafkapy.controller.acls import acl_binding

    return [acl_binding(r) for r in records]


# -- over the wire against a model: random creates and deletes, then DescribeAcls ------------

_NAMES = st.sampled_from(["a", "ab", "b", "*", ""])
_CREATIONS = st.builds(
    creation,
    _NAMES,
    st.sampled_from([AclOperation.READ, AclOperation.WRITE, AclOperation.ALL, AclOperation.ANY, 77]),
    resource_type=st.sampled_from([TOPIC, GROUP, ResourceType.ANY, 99]),
    pattern=st.sampled_from([LITERAL, PREFIXED, MATCH, 0]),
    principal=st.sampled_from(["User:alice", "User:*", "bob"]),
    permission=st.sampled_from([ALLOW, DENY, AclPermissionType.ANY]),
)
_FILTERS = st.builds(
    delete_filter,
    st.sampled_from([ANY_TYPE, TOPIC, GROUP, 0]),
    st.none() | _NAMES,
    st.sampled_from([ANY_PATTERN, MATCH, LITERAL, PREFIXED]),
    st.none() | st.sampled_from(["User:alice", "User:*"]),
)


def _model_binding(c: CreateAclsRequest.AclCreation) -> AclBinding | None:
    """The binding a valid creation stores, None for one the broker must refuse."""
    from kafkapy.broker.handlers.shared.acl_wire import creation_binding
    from kafkapy.controller.acls import acl_binding, acl_record, create_problem

    binding = creation_binding(c)
    return None if create_problem(binding) is not None else acl_binding(acl_record(uuid.UUID(int=0), binding))


@pytest.fixture(scope="module")
def node() -> Iterator[NodeThread]:
    thread = NodeThread(None, **{"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"})
    try:
        yield thread
    finally:
        thread.stop()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(st.one_of(st.lists(_CREATIONS, max_size=4), st.lists(_FILTERS, min_size=1, max_size=2)), max_size=5))
def test_random_creates_and_deletes_match_a_model(node: NodeThread, steps: list[list[Any]]) -> None:
    """Every answer has one result per item (NONE or INVALID_REQUEST as the rules say), each
    delete reports what its filter matched, and DescribeAcls then lists exactly the model."""
    from kafkapy.broker.handlers.shared.acl_wire import delete_filter as to_filter

    async def run() -> None:
        c = await Client.connect(node.port)
        try:
            cleared = await c.request(ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=[delete_filter()]))
            assert cleared.filter_results[0].error_code == ErrorCode.NONE
            model: set[AclBinding] = set()
            for step in steps:
                if step and isinstance(step[0], CreateAclsRequest.AclCreation):
                    resp = await c.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=step))
                    for item, result in zip(step, resp.results, strict=True):
                        binding = _model_binding(item)
                        assert result.error_code == (ErrorCode.NONE if binding else ErrorCode.INVALID_REQUEST)
                        if binding is not None:
                            model.add(binding)
                    continue
                resp = await c.request(ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=step))
                for f, result in zip(step, resp.filter_results, strict=True):
                    acl_filter = to_filter(f)
                    matched = {b for b in model if acl_filter.matches(b)}
                    if f.resource_type_filter == 0:
                        assert result.error_code == ErrorCode.INVALID_REQUEST
                        continue
                    assert result.error_code == ErrorCode.NONE
                    assert len(result.matching_acls) == len(matched)
                for f in step:
                    if f.resource_type_filter != 0:
                        model -= {b for b in model if to_filter(f).matches(b)}
            described = await c.request(ApiKey.DESCRIBE_ACLS, 3, describe_request())
        finally:
            await c.aclose()
        assert listed(described) == {
            (int(b.pattern.resource_type), b.pattern.name, int(b.pattern.pattern_type), b.entry.principal,
             b.entry.host, int(b.entry.operation), int(b.entry.permission_type))
            for b in model
        }

    node.call(run)
