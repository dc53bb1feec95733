"""ACL filters (Describe/DeleteAcls) and the validation CreateAcls applies, with Kafka's semantics."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.authorizer import (
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
    StandardAuthorizer,
    binding_problem,
    filter_problem,
)

Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
TOPIC, GROUP = ResourceType.TOPIC, ResourceType.GROUP
LITERAL, PREFIXED, MATCH, ANY = PatternType.LITERAL, PatternType.PREFIXED, PatternType.MATCH, PatternType.ANY


def _b(name: str, pt: PatternType = LITERAL, rt: ResourceType = TOPIC, principal: str = "User:alice",
       op: AclOperation = Op.READ, perm: AclPermissionType = ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(ResourcePattern(rt, name, pt), AccessControlEntry(principal, host, op, perm))


STORED = [
    _b("orders"), _b("orders", PREFIXED), _b("ord", PREFIXED), _b("*"), _b("orders-eu"),
    _b("orders", rt=GROUP), _b("other", PREFIXED, principal="User:bob", op=Op.WRITE, perm=DENY, host="10.0.0.1"),
]


def _selected(f: AclBindingFilter) -> set[int]:
    return {i for i, b in enumerate(STORED) if f.matches(b)}


def test_pattern_filters_any_match_and_exact_types() -> None:
    pattern = lambda **kw: AclBindingFilter(ResourcePatternFilter(**kw))  # noqa: E731
    assert _selected(AclBindingFilter()) == set(range(len(STORED)))
    assert _selected(pattern(resource_type=TOPIC, name="orders", pattern_type=ANY)) == {0, 1}
    assert _selected(pattern(resource_type=TOPIC, name="orders", pattern_type=LITERAL)) == {0}
    assert _selected(pattern(resource_type=TOPIC, name="orders", pattern_type=PREFIXED)) == {1}
    # MATCH: every binding that applies to a topic named orders-eu
    assert _selected(pattern(resource_type=TOPIC, name="orders-eu", pattern_type=MATCH)) == {1, 2, 3, 4}
    assert _selected(pattern(resource_type=ResourceType.ANY, name="orders", pattern_type=MATCH)) == {0, 1, 2, 3, 5}
    assert _selected(pattern(pattern_type=PREFIXED)) == {1, 2, 6}
    assert _selected(pattern(resource_type=GROUP)) == {5}


def test_entry_filters() -> None:
    entry = lambda **kw: AclBindingFilter(entry=AccessControlEntryFilter(**kw))  # noqa: E731
    assert _selected(entry(principal="User:bob")) == {6}
    assert _selected(entry(host="10.0.0.1")) == {6}
    assert _selected(entry(operation=Op.WRITE)) == {6}
    assert _selected(entry(permission_type=DENY)) == {6}
    assert _selected(entry(permission_type=ALLOW, operation=Op.READ)) == {0, 1, 2, 3, 4, 5}
    # a filter of ALL matches bindings of ALL only (not every operation)
    assert _selected(entry(operation=Op.ALL)) == set()


def test_matches_at_most_one() -> None:
    assert ResourcePatternFilter(TOPIC, "t", LITERAL).matches_at_most_one()
    assert not ResourcePatternFilter(TOPIC, "t", MATCH).matches_at_most_one()
    assert not ResourcePatternFilter(TOPIC, None, LITERAL).matches_at_most_one()
    assert not ResourcePatternFilter(ResourceType.ANY, "t", LITERAL).matches_at_most_one()


@given(name=st.text(alphabet="ab*", min_size=1, max_size=4), op=st.sampled_from([Op.READ, Op.WRITE]))
def test_a_match_filter_selects_exactly_the_acls_the_authorizer_applies(name: str, op: AclOperation) -> None:
    """Dropping what a MATCH filter selects for a name leaves the resource with no ACL at all."""
    authz = StandardAuthorizer(allow_everyone_if_no_acl_found=True)
    for b in STORED:
        authz.add_acl(uuid.uuid4(), b)
    selected = authz.acls_matching(AclBindingFilter(ResourcePatternFilter(TOPIC, name, MATCH)))
    for acl_id, _ in selected:
        authz.remove_acl(acl_id)
    assert authz.authorize("User:carol", "h", op, TOPIC, name)
    assert len(authz) == len(STORED) - len(selected)


def test_binding_problems_are_kafkas_create_acls_refusals() -> None:
    assert binding_problem(_b("t")) is None
    assert binding_problem(_b("t", PREFIXED, principal="User:")) is None
    assert binding_problem(_b("t", MATCH)) is not None
    assert binding_problem(_b("t", ANY)) is not None
    assert binding_problem(_b("t", rt=ResourceType.ANY)) is not None
    assert binding_problem(_b("t", op=Op.ANY)) is not None
    assert binding_problem(_b("t", op=Op.UNKNOWN)) is not None
    assert binding_problem(_b("t", perm=AclPermissionType.ANY)) is not None
    assert binding_problem(_b("")) is not None
    problem = binding_problem(_b("t", principal="alice"))
    assert problem is not None
    assert "principalType:principalName" in problem


def test_filter_problems_refuse_unknown_fields() -> None:
    assert filter_problem(AclBindingFilter()) is None
    assert filter_problem(AclBindingFilter(ResourcePatternFilter(ResourceType.UNKNOWN))) is not None
    assert filter_problem(AclBindingFilter(ResourcePatternFilter(pattern_type=PatternType.UNKNOWN))) is not None
    assert filter_problem(AclBindingFilter(entry=AccessControlEntryFilter(operation=Op.UNKNOWN))) is not None
    assert filter_problem(
        AclBindingFilter(entry=AccessControlEntryFilter(permission_type=AclPermissionType.UNKNOWN))
    ) is not None
