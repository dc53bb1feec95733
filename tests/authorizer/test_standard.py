"""StandardAuthorizer: Kafka's decision rules, checked against a direct transcription of them.

The model below scans every binding for each question (no index, no cache); the authorizer
indexes by resource and caches decisions. Random ACL sets, removals and questions over a small
alphabet make prefixes, wildcards and collisions common.
"""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.authorizer import (
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    StandardAuthorizer,
    parse_super_users,
)
from kafkapy.protocol.acl_operations import operations_bits

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
CONCRETE_OPS = [op for op in AclOperation if op not in (Op.UNKNOWN, Op.ANY)]

names = st.text(alphabet="ab*", min_size=1, max_size=4)
principals = st.sampled_from(["User:alice", "User:bob", "User:*"])
hosts = st.sampled_from(["10.0.0.1", "10.0.0.2", "*"])
bindings = st.builds(
    lambda rt, name, pt, principal, host, op, perm: AclBinding(
        ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm)
    ),
    st.sampled_from([TOPIC, GROUP]),
    names,
    st.sampled_from([LITERAL, PREFIXED]),
    principals,
    hosts,
    st.sampled_from(CONCRETE_OPS),
    st.sampled_from([ALLOW, DENY]),
)
questions = st.tuples(
    st.sampled_from(["User:alice", "User:bob", "User:carol"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from(CONCRETE_OPS),
    st.sampled_from([TOPIC, GROUP]),
    names,
)

IMPLIES = {
    Op.DESCRIBE: {Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER},
    Op.DESCRIBE_CONFIGS: {Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS},
}


def applies_to(binding: AclBinding, resource_type: ResourceType, name: str) -> bool:
    pattern = binding.pattern
    if pattern.resource_type != resource_type:
        return False
    if pattern.pattern_type == LITERAL:
        return pattern.name in (name, "*")
    return name.startswith(pattern.name)


def model(
    acls: list[AclBinding], super_users: set[str], allow_everyone: bool,
    principal: str, host: str, op: AclOperation, rt: ResourceType, name: str,
) -> bool:
    """Kafka's rules, read off the StandardAuthorizer documentation, one binding at a time."""
    if principal in super_users:
        return True
    on_resource = [b for b in acls if applies_to(b, rt, name)]
    mine = [
        b.entry for b in on_resource
        if b.entry.principal in (principal, "User:*") and b.entry.host in (host, "*")
    ]
    if any(e.permission_type == DENY and e.operation in (op, Op.ALL) for e in mine):
        return False
    if any(
        e.permission_type == ALLOW and (e.operation in (op, Op.ALL) or e.operation in IMPLIES.get(op, ()))
        for e in mine
    ):
        return True
    return not on_resource and allow_everyone


def authorizer_with(acls: list[AclBinding], **kw: object) -> StandardAuthorizer:
    authz = StandardAuthorizer(**kw)  # type: ignore[arg-type]
    for binding in acls:
        authz.add_acl(uuid.uuid4(), binding)
    return authz


@settings(max_examples=300)
@given(
    acls=st.lists(bindings, max_size=12),
    removed=st.sets(st.integers(0, 11)),
    allow_everyone=st.booleans(),
    super_alice=st.booleans(),
    asked=st.lists(questions, min_size=1, max_size=10),
)
def test_decisions_match_the_rules_for_any_acl_set(
    acls: list[AclBinding], removed: set[int], allow_everyone: bool, super_alice: bool,
    asked: list[tuple[str, str, AclOperation, ResourceType, str]],
) -> None:
    super_users = {"User:alice"} if super_alice else set()
    authz = StandardAuthorizer(super_users=super_users, allow_everyone_if_no_acl_found=allow_everyone)
    ids = [uuid.uuid4() for _ in acls]
    for acl_id, binding in zip(ids, acls, strict=True):
        authz.add_acl(acl_id, binding)
    # ask once before removing, so stale cached decisions would show
    for q in asked:
        assert authz.authorize(*q) == model(acls, super_users, allow_everyone, *q), q
    kept = [b for i, b in enumerate(acls) if i not in removed]
    for i in removed:
        if i < len(ids):
            assert authz.remove_acl(ids[i]) == acls[i]
    assert len(authz) == len(kept)
    for q in asked:
        assert authz.authorize(*q) == model(kept, super_users, allow_everyone, *q), q


@given(acls=st.lists(bindings, max_size=10), q=questions, deny_principal=st.booleans(), deny_host=st.booleans())
def test_an_applicable_deny_wins_over_any_allow(
    acls: list[AclBinding], q: tuple[str, str, AclOperation, ResourceType, str],
    deny_principal: bool, deny_host: bool,
) -> None:
    principal, host, op, rt, name = q
    authz = authorizer_with(acls, allow_everyone_if_no_acl_found=True)
    authz.add_acl(uuid.uuid4(), AclBinding(ResourcePattern(rt, name, LITERAL), AccessControlEntry(principal, host, op, ALLOW)))
    assert authz.authorize(*q) == (not any(
        b.entry.permission_type == DENY and applies_to(b, rt, name)
        and b.entry.principal in (principal, "User:*") and b.entry.host in (host, "*")
        and b.entry.operation in (op, Op.ALL)
        for b in acls
    ))
    deny = AccessControlEntry("User:*" if deny_principal else principal, "*" if deny_host else host, op, DENY)
    authz.add_acl(uuid.uuid4(), AclBinding(ResourcePattern(rt, name[:1], PREFIXED), deny))
    assert not authz.authorize(*q)


def test_prefixed_patterns_cover_names_that_start_with_them_literal_only_the_name() -> None:
    authz = authorizer_with([
        AclBinding(ResourcePattern(TOPIC, "orders", PREFIXED), AccessControlEntry("User:alice", "*", Op.WRITE, ALLOW)),
        AclBinding(ResourcePattern(TOPIC, "audit", LITERAL), AccessControlEntry("User:alice", "*", Op.WRITE, ALLOW)),
    ])
    ask = lambda name: authz.authorize("User:alice", "10.0.0.1", Op.WRITE, TOPIC, name)  # noqa: E731
    assert ask("orders")
    assert ask("orders-eu")
    assert ask("orders.")
    assert not ask("order")
    assert not ask("xorders")
    assert ask("audit")
    assert not ask("audit-2")
    assert not ask("audi")
    # the wildcard is only a wildcard as a LITERAL name
    authz.add_acl(uuid.uuid4(), AclBinding(ResourcePattern(TOPIC, "*", PREFIXED), AccessControlEntry("User:bob", "*", Op.READ, ALLOW)))
    assert not authz.authorize("User:bob", "10.0.0.1", Op.READ, TOPIC, "orders")
    assert authz.authorize("User:bob", "10.0.0.1", Op.READ, TOPIC, "*star")
    authz.add_acl(uuid.uuid4(), AclBinding(ResourcePattern(TOPIC, "*", LITERAL), AccessControlEntry("User:bob", "*", Op.READ, ALLOW)))
    assert authz.authorize("User:bob", "10.0.0.1", Op.READ, TOPIC, "orders")


def test_implied_operations_come_only_from_allow() -> None:
    topic = ResourcePattern(TOPIC, "t")
    authz = authorizer_with([
        AclBinding(topic, AccessControlEntry("User:alice", "*", Op.READ, ALLOW)),
        AclBinding(topic, AccessControlEntry("User:alice", "*", Op.ALTER_CONFIGS, ALLOW)),
        AclBinding(topic, AccessControlEntry("User:bob", "*", Op.WRITE, DENY)),
        AclBinding(topic, AccessControlEntry("User:bob", "*", Op.DESCRIBE, ALLOW)),
    ])
    ask = lambda who, op: authz.authorize(who, "10.0.0.1", op, TOPIC, "t")  # noqa: E731
    assert ask("User:alice", Op.READ)
    assert ask("User:alice", Op.DESCRIBE)
    assert ask("User:alice", Op.DESCRIBE_CONFIGS)
    assert ask("User:alice", Op.ALTER_CONFIGS)
    assert not ask("User:alice", Op.WRITE)
    assert not ask("User:alice", Op.ALTER)
    # DENY WRITE does not deny the DESCRIBE an explicit ALLOW grants
    assert ask("User:bob", Op.DESCRIBE)
    assert not ask("User:bob", Op.WRITE)
    assert authz.authorized_operations("User:alice", "10.0.0.1", TOPIC, "t") == {
        Op.READ, Op.DESCRIBE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS
    }


def test_all_allows_and_denies_every_operation() -> None:
    authz = authorizer_with([
        AclBinding(ResourcePattern(GROUP, "g"), AccessControlEntry("User:alice", "*", Op.ALL, ALLOW)),
        AclBinding(ResourcePattern(GROUP, "g"), AccessControlEntry("User:bob", "*", Op.ALL, ALLOW)),
        AclBinding(ResourcePattern(GROUP, "g", PREFIXED), AccessControlEntry("User:bob", "*", Op.ALL, DENY)),
    ])
    for op in SUPPORTED_OPERATIONS[GROUP]:
        assert authz.authorize("User:alice", "h", op, GROUP, "g")
        assert not authz.authorize("User:bob", "h", op, GROUP, "g")


def test_hosts_match_exactly_or_by_wildcard() -> None:
    authz = authorizer_with([
        AclBinding(ResourcePattern(TOPIC, "t"), AccessControlEntry("User:alice", "10.0.0.1", Op.READ, ALLOW)),
    ])
    assert authz.authorize("User:alice", "10.0.0.1", Op.READ, TOPIC, "t")
    assert not authz.authorize("User:alice", "10.0.0.2", Op.READ, TOPIC, "t")


def test_no_acl_on_the_resource_follows_allow_everyone_any_acl_denies_others() -> None:
    acl = AclBinding(ResourcePattern(TOPIC, "owned"), AccessControlEntry("User:alice", "*", Op.READ, ALLOW))
    open_authz = authorizer_with([acl], allow_everyone_if_no_acl_found=True)
    closed_authz = authorizer_with([acl], allow_everyone_if_no_acl_found=False)
    assert open_authz.authorize("User:bob", "h", Op.WRITE, TOPIC, "free")
    assert not closed_authz.authorize("User:bob", "h", Op.WRITE, TOPIC, "free")
    # once the resource has an ACL for anyone, everyone else needs one too
    assert not open_authz.authorize("User:bob", "h", Op.READ, TOPIC, "owned")
    assert not open_authz.authorize("User:alice", "h", Op.WRITE, TOPIC, "owned")


def test_super_users_bypass_even_a_wildcard_deny() -> None:
    authz = authorizer_with(
        [AclBinding(ResourcePattern(CLUSTER, "*"), AccessControlEntry("User:*", "*", Op.ALL, DENY))],
        super_users=parse_super_users(" User:admin ;User:ops;"),
    )
    assert authz.super_users == {"User:admin", "User:ops"}
    for op in SUPPORTED_OPERATIONS[CLUSTER]:
        assert authz.authorize("User:admin", "h", op, CLUSTER, "kafka-cluster")
        assert not authz.authorize("User:bob", "h", op, CLUSTER, "kafka-cluster")
    assert authz.authorized_operations_bits("User:ops", "h", CLUSTER, "kafka-cluster") == operations_bits(
        SUPPORTED_OPERATIONS[CLUSTER]
    )
    assert authz.authorized_operations_bits("User:bob", "h", CLUSTER, "kafka-cluster") == 0


def test_a_cached_decision_follows_acl_changes() -> None:
    authz = StandardAuthorizer()
    assert not authz.authorize("User:alice", "h", Op.WRITE, TOPIC, "t")
    allow = uuid.uuid4()
    authz.add_acl(allow, AclBinding(ResourcePattern(TOPIC, "t"), AccessControlEntry("User:alice", "*", Op.WRITE, ALLOW)))
    assert authz.authorize("User:alice", "h", Op.WRITE, TOPIC, "t")
    assert authz.remove_acl(allow) is not None
    assert authz.remove_acl(allow) is None
    assert not authz.authorize("User:alice", "h", Op.WRITE, TOPIC, "t")
    # re-adding under the same id replaces, never duplicates
    binding = AclBinding(ResourcePattern(TOPIC, "t", PREFIXED), AccessControlEntry("User:alice", "*", Op.WRITE, ALLOW))
    authz.add_acl(allow, binding)
    authz.add_acl(allow, binding)
    assert len(authz) == 1
    assert authz.acls() == {allow: binding}
    authz.remove_acl(allow)
    assert not authz.authorize("User:alice", "h", Op.WRITE, TOPIC, "t")
    authz.add_acl(allow, binding)
    authz.clear()
    assert len(authz) == 0
    assert not authz.authorize("User:alice", "h", Op.WRITE, TOPIC, "t")


def _write(name: str, pt: PatternType, perm: AclPermissionType, principal: str = "User:alice") -> AclBinding:
    return AclBinding(ResourcePattern(TOPIC, name, pt), AccessControlEntry(principal, "*", Op.WRITE, perm))


def test_authorize_by_resource_type_is_kip_679s_any_topic_check() -> None:
    by_type = lambda acls: authorizer_with(acls).authorize_by_resource_type(  # noqa: E731
        "User:alice", "10.0.0.1", Op.WRITE, TOPIC
    )
    assert not by_type([])
    assert by_type([_write("abc", LITERAL, ALLOW)])
    assert by_type([_write("abc", PREFIXED, ALLOW)])
    assert by_type([_write("*", LITERAL, ALLOW, "User:*")])
    assert not by_type([_write("abc", LITERAL, ALLOW), _write("abc", LITERAL, DENY)])
    assert not by_type([_write("abc", LITERAL, ALLOW), _write("ab", PREFIXED, DENY)])
    assert not by_type([_write("abc", PREFIXED, ALLOW), _write("a", PREFIXED, DENY)])
    assert not by_type([_write("abc", LITERAL, ALLOW), _write("*", LITERAL, DENY)])
    assert by_type([_write("abc", LITERAL, ALLOW), _write("abd", LITERAL, DENY)])
    assert by_type([_write("abc", LITERAL, ALLOW), _write("abcd", PREFIXED, DENY)])
    # someone else's grant does not count, nor does a READ grant
    assert not by_type([_write("abc", LITERAL, ALLOW, "User:bob")])
    read = AclBinding(ResourcePattern(TOPIC, "abc"), AccessControlEntry("User:alice", "*", Op.READ, ALLOW))
    assert not by_type([read])
    # a super user needs no ACL at all
    assert StandardAuthorizer(super_users=["User:alice"]).authorize_by_resource_type("User:alice", "h", Op.WRITE, TOPIC)


def test_supported_operations_are_the_bit_fields_kafka_reports_without_an_authorizer() -> None:
    from kafkapy.protocol.acl_operations import (
        CLUSTER_OPERATIONS,
        GROUP_OPERATIONS,
        TOPIC_OPERATIONS,
    )

    assert operations_bits(SUPPORTED_OPERATIONS[TOPIC]) == TOPIC_OPERATIONS
    assert operations_bits(SUPPORTED_OPERATIONS[GROUP]) == GROUP_OPERATIONS
    assert operations_bits(SUPPORTED_OPERATIONS[CLUSTER]) == CLUSTER_OPERATIONS
