"""Striped, rack-aware replica placement (Kafka's StripedReplicaPlacer goals): replicas of a
partition on distinct racks, leaders spread evenly over brokers, active brokers only."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.controller.controller import ControllerConfig, NewPartitions, NewTopic, Reassignment
from kafkapy.controller.placement import Rack, propose_reassignment, striped_placement
from kafkapy.protocol.errors import ErrorCode
from tests.controller.helpers import CLUSTER_ID, Cluster


def racked(racks: Mapping[int, str | None]) -> Cluster:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=1000))
    c.start_racks(racks)
    return c


def test_two_racks_rf2_every_partition_in_both_racks_and_leaders_even() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    c = racked(racks)
    [res] = c.run(c.ctl.create_topics([NewTopic("t", 40, 2)]))
    assert res.error is ErrorCode.NONE
    parts = c.ctl.image.topics["t"].partitions.values()
    for part in parts:
        assert {racks[r] for r in part.replicas} == {"a", "b"}
    assert Counter(p.leader for p in parts) == {1: 10, 2: 10, 3: 10, 4: 10}
    # followers spread too: each broker holds the same number of replicas, and broker pairs
    # are not fixed (a failure of one broker moves its leaderships to both of the other rack)
    assert Counter(r for p in parts for r in p.replicas) == {1: 20, 2: 20, 3: 20, 4: 20}
    assert len({frozenset(p.replicas) for p in parts}) == 4


def test_create_partitions_keeps_the_rack_spread() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    c = racked(racks)
    c.run(c.ctl.create_topics([NewTopic("t", 2, 2)]))
    [res] = c.run(c.ctl.create_partitions([NewPartitions("t", 10)]))
    assert res.error is ErrorCode.NONE
    for part in c.ctl.image.topics["t"].partitions.values():
        assert {racks[r] for r in part.replicas} == {"a", "b"}


def test_three_uneven_racks() -> None:
    racks = {1: "a", 2: "a", 3: "a", 4: "b", 5: "c", 6: "c"}
    c = racked(racks)
    c.run(c.ctl.create_topics([NewTopic("t3", 60, 3), NewTopic("t2", 60, 2)]))
    t3 = c.ctl.image.topics["t3"].partitions.values()
    for part in t3:
        assert {racks[r] for r in part.replicas} == {"a", "b", "c"}
    # the lone broker of rack b holds a replica of every RF-3 partition (as in Kafka)
    assert all(4 in p.replicas for p in t3)
    for topic in ("t2", "t3"):
        leaders = Counter(p.leader for p in c.ctl.image.topics[topic].partitions.values())
        assert leaders == {b: 10 for b in racks}
    for part in c.ctl.image.topics["t2"].partitions.values():
        assert len({racks[r] for r in part.replicas}) == 2


def test_fenced_brokers_of_a_rack_are_skipped() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    c = racked(racks)
    c.heartbeat(2, want_fence=True)
    c.run(c.ctl.create_topics([NewTopic("t", 12, 2)]))
    parts = c.ctl.image.topics["t"].partitions.values()
    assert all(2 not in p.replicas for p in parts)
    assert all({racks[r] for r in p.replicas} == {"a", "b"} for p in parts)


def test_without_racks_placement_is_round_robin_from_the_start() -> None:
    brokers: dict[int, Rack] = {3: None, 1: None, 2: None}
    assert striped_placement(brokers, 4, 2, start=1) == [(2, 3), (3, 1), (1, 2), (2, 3)]


def test_rf_above_the_racks_wraps_onto_distinct_brokers() -> None:
    placed = striped_placement({1: "a", 2: "a", 3: "b", 4: "b"}, 8, 3, start=0)
    for replicas in placed:
        assert len(set(replicas)) == 3


layouts = st.dictionaries(
    st.integers(0, 40), st.sampled_from([None, "a", "b", "c", "d"]), min_size=1, max_size=12
)


@settings(max_examples=300, deadline=None)
@given(layouts, st.data())
def test_property_distinct_replicas_rack_span_and_even_leaders(
    brokers: dict[int, Rack], data: st.DataObject
) -> None:
    rf = data.draw(st.integers(1, len(brokers)))
    count = data.draw(st.integers(1, 60))
    start = data.draw(st.integers(0, 1 << 16))
    placed = striped_placement(brokers, count, rf, start)
    racks = set(brokers.values())
    assert len(placed) == count
    for replicas in placed:
        assert len(replicas) == rf
        assert len(set(replicas)) == rf
        assert set(replicas) <= set(brokers)
        assert len({brokers[r] for r in replicas}) == min(rf, len(racks))
    leaders = Counter(r[0] for r in placed)
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


def test_proposal_moves_topics_onto_the_target_brokers_across_racks() -> None:
    current = {"t": {p: (1, 2) for p in range(8)}, "u": {0: (1,), 1: (2,)}}
    targets: dict[int, Rack] = {3: "a", 4: "a", 5: "b", 6: "b"}
    proposal = propose_reassignment(current, targets, start=3)
    assert sorted(proposal) == ["t", "u"]
    assert sorted(proposal["t"]) == list(range(8))
    for replicas in proposal["t"].values():
        assert {targets[r] for r in replicas} == {"a", "b"}
    assert Counter(r[0] for r in proposal["t"].values()) == {3: 2, 4: 2, 5: 2, 6: 2}
    assert all(len(r) == 1 and r[0] in targets for r in proposal["u"].values())


def test_proposal_without_rack_awareness_is_round_robin() -> None:
    targets: dict[int, Rack] = {1: "a", 2: "a", 3: "b", 4: "b"}
    proposal = propose_reassignment({"t": {0: (9, 8), 1: (8, 9)}}, targets, rack_aware=False)
    assert proposal == {"t": {0: (1, 2), 1: (2, 3)}}


def test_proposal_refuses_a_factor_above_the_targets() -> None:
    with pytest.raises(ValueError, match="replication factor 3 is larger than the 2 target"):
        propose_reassignment({"t": {0: (1, 2, 3)}}, {1: None, 2: None})


def test_a_reassignment_target_is_applied_as_given_racks_or_not() -> None:
    racks = {1: "a", 2: "a", 3: "b", 4: "b"}
    c = racked(racks)
    c.run(c.ctl.create_topics([NewTopic("t", 1, 2)]))
    [res] = c.run(c.ctl.alter_partition_reassignments([Reassignment("t", 0, [2, 1])]))
    assert res.error is ErrorCode.NONE
    part = c.ctl.image.topics["t"].partitions[0]
    target = tuple(r for r in part.replicas if r not in part.removing_replicas)
    assert target == (2, 1)  # one rack only, in the order given
