"""Rack-aware assignment (KIP-881) in the KIP-848 server-side assignors, and the classic
protocol passing a member's rack (Subscription v3 `rack_id`) through to the group leader.

What users rely on: racks never make an assignment less balanced (each member gets exactly
the count it gets without racks), every subscribed partition is assigned once, and a member
is given partitions with a replica in its rack whenever the counts allow it - so a consumer
with `client.rack` reads from its own rack's follower (KIP-392).
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.coordinator.group.assignors import ASSIGNORS, Racks, range_assign, uniform_assign

from .helpers import Harness

RACKS = ("a", "b", "c")


@st.composite
def groups(draw: st.DrawFn) -> tuple[dict[str, frozenset[str]], dict[str, int], Racks]:
    """Members (some with racks) subscribed to some of three topics, and partitions whose
    replicas sit in one to three racks (or none known)."""
    topics = {t: draw(st.integers(0, 9)) for t in ("t", "u", "v")}
    n = draw(st.integers(1, 6))
    members = [f"m{i}" for i in range(n)]
    subs = {m: frozenset(draw(st.sets(st.sampled_from(sorted(topics)), min_size=1))) for m in members}
    member_racks = {m: draw(st.none() | st.sampled_from(RACKS)) for m in members}
    replica_racks = {
        t: [frozenset(draw(st.sets(st.sampled_from(RACKS), max_size=3))) for _ in range(count)]
        for t, count in topics.items()
    }
    return subs, topics, Racks(member_racks, replica_racks)


def counts(assignment: dict[str, dict[str, set[int]]]) -> dict[str, int]:
    return {m: sum(len(ps) for ps in tps.values()) for m, tps in assignment.items()}


def covered(assignment: dict[str, dict[str, set[int]]]) -> Counter[tuple[str, int]]:
    return Counter((t, p) for tps in assignment.values() for t, ps in tps.items() for p in ps)


@given(groups(), st.sampled_from(sorted(ASSIGNORS)))
def test_racks_never_change_balance_and_assign_each_partition_once(
    group: tuple[dict[str, frozenset[str]], dict[str, int], Racks], name: str
) -> None:
    subs, topics, racks = group
    assignor = ASSIGNORS[name]
    blind = assignor(subs, topics, {})
    aware = assignor(subs, topics, {}, racks)
    assert counts(aware) == counts(blind)
    assert covered(aware) == covered(blind)
    assert all(n == 1 for n in covered(aware).values())
    for m, tps in aware.items():
        assert set(tps) <= subs[m]
    matched = sum(racks.matches(m, (t, p)) for m, tps in aware.items() for t, ps in tps.items() for p in ps)
    matched_blind = sum(
        racks.matches(m, (t, p)) for m, tps in blind.items() for t, ps in tps.items() for p in ps
    )
    if len({frozenset(s) for s in subs.values()}) == 1 and all(
        len(r) <= 1 for rs in racks.partitions.values() for r in rs
    ):
        # one subscription, one rack per partition: the rack pass is a maximum matching
        assert matched >= matched_blind


@given(
    st.integers(1, 3),
    st.integers(1, 3),
    st.integers(1, 4),
    st.sampled_from(sorted(ASSIGNORS)),
)
def test_every_partition_goes_to_its_rack_when_the_counts_allow(
    racks_n: int, per_rack: int, per_member: int, name: str
) -> None:
    """Members spread evenly over racks, each partition replicated in one rack, as many
    partitions per rack as its members take: every member reads from its own rack."""
    racks = RACKS[:racks_n]
    members = {f"m{r}{i}": r for r in racks for i in range(per_rack)}
    count = racks_n * per_rack * per_member
    replica_racks = [frozenset({racks[p % racks_n]}) for p in range(count)]
    info = Racks(dict(members), {"t": replica_racks})
    subs = dict.fromkeys(members, frozenset({"t"}))
    out = ASSIGNORS[name](subs, {"t": count}, {}, info)
    for m, tps in out.items():
        assert len(tps["t"]) == per_member
        assert all(members[m] in replica_racks[p] for p in tps["t"])


def test_range_without_racks_keeps_contiguous_ranges() -> None:
    subs = {"a": frozenset({"t"}), "b": frozenset({"t"})}
    racks_everywhere = Racks({"a": "x", "b": "y"}, {"t": [frozenset({"x", "y"})] * 4})
    for racks in (Racks(), Racks({"a": "x"}), racks_everywhere):
        assert range_assign(subs, {"t": 4}, {}, racks) == {"a": {"t": {0, 1}}, "b": {"t": {2, 3}}}


def test_uniform_keeps_only_rack_matching_partitions_and_places_the_rest_by_rack() -> None:
    """A member gives up a partition it had when another member's rack holds a replica (the
    consumer would otherwise read across racks for good); one no member's rack holds stays."""
    subs = dict.fromkeys(("a", "b", "c"), frozenset({"t"}))
    racks = Racks({"a": "x", "b": "y", "c": "z"}, {"t": [frozenset({r}) for r in "xyzxyw"]})
    out = uniform_assign(subs, {"t": 6}, {"a": {"t": frozenset({0, 1, 5})}}, racks)
    assert out == {"a": {"t": {0, 5}}, "b": {"t": {1, 4}}, "c": {"t": {2, 3}}}
    assert uniform_assign(subs, {"t": 6}, {"a": {"t": frozenset({0, 1, 5})}}) == {
        "a": {"t": {0, 1}},
        "b": {"t": {2, 4}},
        "c": {"t": {3, 5}},
    }


def subscription_v3(topics: list[str], rack: str) -> bytes:
    """A consumer-protocol Subscription v3 (KIP-881): topics, no user data, no owned
    partitions, generation -1, then `rack_id`."""
    out = (3).to_bytes(2, "big") + len(topics).to_bytes(4, "big")
    for t in topics:
        out += len(t).to_bytes(2, "big") + t.encode()
    out += (-1).to_bytes(4, "big", signed=True)  # user_data: null
    out += (0).to_bytes(4, "big")  # owned_partitions: none
    out += (-1).to_bytes(4, "big", signed=True)  # generation_id
    return out + len(rack).to_bytes(2, "big") + rack.encode()


def test_classic_group_hands_the_leader_each_members_rack_untouched() -> None:
    """The classic protocol's assignors run in the group leader's client; the coordinator must
    pass each member's Subscription (with its rack) through byte for byte."""
    h = Harness()
    metadata = subscription_v3(["t"], "rack-b")
    rid = h.join_new(protocols=[("range", metadata)])
    answer = h.answers.get(rid)
    if answer is None:
        h.advance(10_000)
        answer = h.answers[rid]
    assert [m.metadata for m in answer.members] == [metadata]  # type: ignore[union-attr]


@given(groups(), st.data())
def test_uniform_with_a_previous_assignment_stays_balanced_with_racks(
    group: tuple[dict[str, frozenset[str]], dict[str, int], Racks], data: st.DataObject
) -> None:
    """Whatever members had before (each partition once), one shared subscription ends balanced (counts at most one
    apart) with every partition assigned once, racks or not."""
    _, topics, racks = group
    members = sorted(racks.members)
    subs = dict.fromkeys(members, frozenset(topics))
    owners = {(t, p): data.draw(st.none() | st.sampled_from(members)) for t, n in topics.items() for p in range(n)}
    previous = {
        m: {t: frozenset(p for (tt, p), o in owners.items() if o == m and tt == t) for t in topics}
        for m in members
    }
    out = uniform_assign(subs, topics, previous, racks)
    per_member = counts(out)
    assert max(per_member.values()) - min(per_member.values()) <= 1
    assert sorted(covered(out)) == sorted((t, p) for t, n in topics.items() for p in range(n))
    assert all(n == 1 for n in covered(out).values())
