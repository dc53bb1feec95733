"""The controller's ACLs (Kafka's AclControlManager): CreateAcls / DeleteAcls as records.

Every operation goes through `helpers.Cluster`, whose replica replays the records through the
wire codec and must equal the controller's image; the stateful test holds the ACLs against a
plain set of bindings across creates, deletes, snapshots and controller failovers.
"""

from __future__ import annotations

import random
import uuid
from typing import TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.authorizer.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafkapy.controller.acls import MAX_RECORDS_PER_USER_OP, acl_binding, image_acls
from kafkapy.controller.controller import ControllerConfig, ControllerResult, QuorumController
from kafkapy.controller.image import MetadataImage
from kafkapy.controller.records import AccessControlEntryRecord, decode_record, encode_record
from kafkapy.controller.snapshot import decode_snapshot, encode_snapshot
from kafkapy.protocol.errors import ErrorCode

from .helpers import Cluster

T = TypeVar("T")
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
READ, WRITE, ALL = AclOperation.READ, AclOperation.WRITE, AclOperation.ALL
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(
    name: str = "orders",
    principal: str = "User:alice",
    operation: AclOperation = READ,
    *,
    resource_type: ResourceType = TOPIC,
    pattern_type: PatternType = LITERAL,
    permission: AclPermissionType = ALLOW,
    host: str = "*",
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name, pattern_type),
        AccessControlEntry(principal, host, operation, permission),
    )


def acls_of(image: MetadataImage) -> set[AclBinding]:
    return set(image_acls(image).values())


def test_created_acls_are_records_every_replica_replays() -> None:
    c = Cluster()
    wanted = [acl(), acl("pay", pattern_type=PREFIXED, operation=WRITE), acl("*", permission=DENY)]
    result = c.ctl.create_acls(wanted)
    assert [type(r) for r in result.records] == [AccessControlEntryRecord] * 3
    assert [r.error for r in c.run(result)] == [ErrorCode.NONE] * 3
    assert acls_of(c.replica) == set(wanted)
    ids = {r.id for r in result.records if isinstance(r, AccessControlEntryRecord)}
    assert len(ids) == 3
    assert set(c.replica.acls) == ids


def test_a_binding_that_exists_is_created_again_without_a_record() -> None:
    """Kafka dedupes: the same binding twice in one request, or one that exists, succeeds and
    writes nothing."""
    c = Cluster()
    first = c.ctl.create_acls([acl(), acl()])
    assert len(first.records) == 1
    c.run(first)
    again = c.ctl.create_acls([acl(), acl(host="10.0.0.1")])
    assert [r.error for r in again.response] == [ErrorCode.NONE, ErrorCode.NONE]
    assert len(again.records) == 1
    c.run(again)
    assert acls_of(c.replica) == {acl(), acl(host="10.0.0.1")}


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl(resource_type=ResourceType.ANY), "Invalid resourceType"),
        (acl(resource_type=ResourceType.UNKNOWN), "Invalid resourceType"),
        (acl(pattern_type=PatternType.MATCH), "Invalid patternType"),
        (acl(pattern_type=PatternType.ANY), "Invalid patternType"),
        (acl(pattern_type=PatternType.UNKNOWN), "Invalid patternType"),
        (acl(operation=AclOperation.ANY), "Invalid operation"),
        (acl(operation=AclOperation.UNKNOWN), "Invalid operation"),
        (acl(permission=AclPermissionType.ANY), "Invalid permissionType"),
        (acl(permission=AclPermissionType.UNKNOWN), "Invalid permissionType"),
        (acl(""), "empty"),
        (acl(principal="alice"), "principalType:principalName"),
        (acl("my-cluster", resource_type=CLUSTER), "kafka-cluster"),
    ],
)
def test_a_bad_binding_is_invalid_request_and_the_others_are_created(
    binding: AclBinding, message: str
) -> None:
    c = Cluster()
    result = c.ctl.create_acls([acl("before"), binding, acl("after")])
    errors = [r.error for r in result.response]
    assert errors == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST, ErrorCode.NONE]
    assert message in (result.response[1].message or "")
    c.run(result)
    assert acls_of(c.replica) == {acl("before"), acl("after")}


def test_the_cluster_resource_takes_its_one_name() -> None:
    c = Cluster()
    result = c.ctl.create_acls([acl("kafka-cluster", resource_type=CLUSTER, operation=AclOperation.ALTER)])
    assert result.response[0].error is ErrorCode.NONE
    c.run(result)
    assert len(c.replica.acls) == 1


def test_delete_reports_every_match_per_filter_and_removes_each_acl_once() -> None:
    c = Cluster()
    keep = acl("orders", "User:bob")
    c.run(c.ctl.create_acls([acl("orders"), acl("pay", pattern_type=PREFIXED), keep]))
    alice = AclBindingFilter(entry=AccessControlEntryFilter(principal="User:alice"))
    orders = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders", LITERAL))
    bad = AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN, None, LITERAL))
    result = c.ctl.delete_acls([alice, orders, bad])
    assert result.response[0].error is ErrorCode.NONE
    assert set(result.response[0].deleted) == {acl("orders"), acl("pay", pattern_type=PREFIXED)}
    assert set(result.response[1].deleted) == {acl("orders"), keep}
    assert result.response[2].error is ErrorCode.INVALID_REQUEST
    assert result.response[2].deleted == ()
    assert sorted(type(r).__name__ for r in result.records) == ["RemoveAccessControlEntryRecord"] * 3
    c.run(result)
    assert c.replica.acls == {}
    nothing = c.ctl.delete_acls([alice])
    assert nothing.records == []
    assert nothing.response[0].deleted == ()


def test_delete_with_match_removes_what_applies_to_a_resource() -> None:
    """A MATCH filter deletes the literal binding, the wildcard and the prefixes of a name."""
    c = Cluster()
    applies = [acl("orders-eu"), acl("*"), acl("orders", pattern_type=PREFIXED)]
    other = [acl("orders"), acl("pay", pattern_type=PREFIXED), acl("orders-eu", resource_type=GROUP)]
    c.run(c.ctl.create_acls(applies + other))
    match = AclBindingFilter(ResourcePatternFilter(TOPIC, "orders-eu", PatternType.MATCH))
    result = c.ctl.delete_acls([match])
    assert set(result.response[0].deleted) == set(applies)
    c.run(result)
    assert acls_of(c.replica) == set(other)


def test_one_request_writes_at_most_kafkas_records_per_operation() -> None:
    c = Cluster()
    too_many = [acl(f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP + 1)]
    result = c.ctl.create_acls(too_many)
    assert result.records == []
    assert {r.error for r in result.response} == {ErrorCode.INVALID_REQUEST}
    assert "Cannot create more than 10000 acls" in (result.response[0].message or "")
    assert c.ctl.image.acls == {}
    c.run(c.ctl.create_acls(too_many[:MAX_RECORDS_PER_USER_OP]))
    c.run(c.ctl.create_acls(too_many[MAX_RECORDS_PER_USER_OP:]))
    every = AclBindingFilter()
    refused = c.ctl.delete_acls([every])
    assert refused.records == []
    assert refused.response[0].error is ErrorCode.INVALID_REQUEST
    assert "Cannot remove more than 10000 acls" in (refused.response[0].message or "")
    assert len(c.ctl.image.acls) == MAX_RECORDS_PER_USER_OP + 1


def test_a_record_with_codes_kafkapy_does_not_know_reads_as_unknown() -> None:
    record = AccessControlEntryRecord(uuid.UUID(int=1), 99, "t", 77, "User:a", "*", 55, 44)
    binding = acl_binding(record)
    assert binding.pattern.resource_type is ResourceType.UNKNOWN
    assert binding.pattern.pattern_type is PatternType.UNKNOWN
    assert binding.entry.operation is AclOperation.UNKNOWN
    assert binding.entry.permission_type is AclPermissionType.UNKNOWN


# -- stateful: the controller's ACLs follow a model through creates, deletes and failovers -------

NAMES = st.sampled_from(["a", "ab", "b", "*"])
BINDINGS = st.builds(
    acl,
    NAMES,
    st.sampled_from(["User:alice", "User:bob", "User:*", "bad"]),
    st.sampled_from([READ, WRITE, ALL, AclOperation.ANY]),
    resource_type=st.sampled_from([TOPIC, GROUP]),
    pattern_type=st.sampled_from([LITERAL, PREFIXED, PatternType.MATCH]),
    permission=st.sampled_from([ALLOW, DENY]),
    host=st.sampled_from(["*", "10.0.0.1"]),
)
FILTERS = st.builds(
    AclBindingFilter,
    st.builds(
        ResourcePatternFilter,
        st.sampled_from([ResourceType.ANY, TOPIC, GROUP]),
        st.none() | NAMES,
        st.sampled_from([PatternType.ANY, PatternType.MATCH, LITERAL, PREFIXED]),
    ),
    st.builds(
        AccessControlEntryFilter,
        st.none() | st.sampled_from(["User:alice", "User:*"]),
        st.none() | st.just("*"),
        st.sampled_from([AclOperation.ANY, READ, ALL]),
        st.sampled_from([AclPermissionType.ANY, ALLOW, DENY]),
    ),
)


def _valid(binding: AclBinding) -> bool:
    return (
        ":" in binding.entry.principal
        and binding.entry.operation is not AclOperation.ANY
        and binding.pattern.pattern_type in (LITERAL, PREFIXED)
    )


class AclMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.config = ControllerConfig(cluster_id="c")
        self.ctl = QuorumController(self.config, MetadataImage(), rng=random.Random(0))
        self.replica = MetadataImage()
        self.model: set[AclBinding] = set()

    def commit(self, result: ControllerResult[T]) -> T:
        for record in result.records:
            self.replica.apply(decode_record(encode_record(record)), self.replica.offset + 1)
        return result.response

    @rule(bindings=st.lists(BINDINGS, max_size=4))
    def create(self, bindings: list[AclBinding]) -> None:
        results = self.commit(self.ctl.create_acls(bindings))
        for binding, result in zip(bindings, results, strict=True):
            assert (result.error is ErrorCode.NONE) == _valid(binding), (binding, result)
            if result.error is ErrorCode.NONE:
                self.model.add(binding)

    @rule(filters=st.lists(FILTERS, max_size=3))
    def delete(self, filters: list[AclBindingFilter]) -> None:
        before = set(self.model)
        results = self.commit(self.ctl.delete_acls(filters))
        for f, result in zip(filters, results, strict=True):
            assert result.error is ErrorCode.NONE
            assert set(result.deleted) == {b for b in before if f.matches(b)}
            assert len(result.deleted) == len(set(result.deleted))
            self.model -= set(result.deleted)

    @rule()
    def fail_over(self) -> None:
        """A new active controller starts from the committed image (as after an election)."""
        self.ctl = QuorumController(self.config, self.replica, rng=random.Random(1))

    @rule()
    def restart_from_snapshot(self) -> None:
        """A node restarts from a snapshot of its image and goes on replaying."""
        raw = encode_snapshot(
            self.replica, end_offset=self.replica.offset + 1, epoch=1, timestamp_ms=0
        )
        _, self.replica = decode_snapshot(raw)

    @invariant()
    def images_agree_with_the_model(self) -> None:
        assert self.replica.acls == self.ctl.image.acls
        assert acls_of(self.replica) == self.model
        assert len(self.replica.acl_ids) == len(self.replica.acls)


TestAclMachine = AclMachine.TestCase
TestAclMachine.settings = settings(max_examples=60, stateful_step_count=20, deadline=None)


def test_every_filter_deletes_exactly_what_it_matches() -> None:
    """Each filter (every resource type, name and pattern type combination over names that are
    prefixes of one another, and the wildcard) removes exactly the ACLs Kafka's filter rules
    match among LITERAL and PREFIXED bindings of those names - whatever shortcut finds them."""
    names = ["a", "ab", "abc", "b", "*"]
    every = [
        acl(name, resource_type=rtype, pattern_type=pattern)
        for name in names
        for rtype in (TOPIC, GROUP)
        for pattern in (LITERAL, PREFIXED)
    ]
    base = Cluster()
    base.run(base.ctl.create_acls(every))
    for rtype in (ResourceType.ANY, TOPIC, GROUP):
        for name in [None, *names, "abd", "x", ""]:
            for pattern in (PatternType.ANY, PatternType.MATCH, LITERAL, PREFIXED):
                acl_filter = AclBindingFilter(ResourcePatternFilter(rtype, name, pattern))
                c = QuorumController(base.ctl.config, base.replica, rng=random.Random(2))
                (result,) = c.delete_acls([acl_filter]).response
                assert set(result.deleted) == {b for b in every if acl_filter.matches(b)}, acl_filter
