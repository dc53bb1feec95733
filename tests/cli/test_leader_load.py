"""Hot partitions and the leadership balancer (`kafkapy.cli.leader_load`): pure rules."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.cli.leader_load import (
    PartitionLoad,
    balance_leaders,
    broker_loads,
    hot_brokers,
    hot_partitions,
    max_over_mean,
)

BROKERS = [1, 2, 3]


def part(p: int, leader: int, rate: float, topic: str = "t") -> PartitionLoad:
    replicas = tuple(BROKERS[(leader - 1 + i) % 3] for i in range(3))
    return PartitionLoad(topic, p, leader, replicas, replicas, rate, rate / 100)


def test_one_hot_key_puts_its_partition_on_top_and_the_balancer_evens_the_brokers() -> None:
    # 9 partitions led 3 per broker; partition 0 (on broker 1) takes 4x the others
    parts = [part(p, BROKERS[p % 3], 400.0 if p == 0 else 100.0) for p in range(9)]
    assert [p.partition for p in hot_partitions(parts)] == [0]
    loads = broker_loads(parts, BROKERS)
    assert hot_brokers(loads) == [1]
    assert round(max_over_mean(loads), 2) == 1.5
    moves = balance_leaders(parts, BROKERS)
    after = broker_loads(parts, BROKERS, {(m.topic, m.partition): m.to_leader for m in moves})
    assert max_over_mean(after) <= 1.25
    assert all(m.partition != 0 for m in moves)  # the hot partition stays; the others move
    assert all(m.replicas[0] == m.to_leader and sorted(m.replicas) == BROKERS for m in moves)


def test_an_even_cluster_gets_no_moves() -> None:
    parts = [part(p, BROKERS[p % 3], 100.0) for p in range(6)]
    assert balance_leaders(parts, BROKERS) == []
    assert hot_partitions(parts) == []
    assert hot_brokers(broker_loads(parts, BROKERS)) == []


rates = st.lists(st.tuples(st.sampled_from(BROKERS), st.floats(0, 1e6)), min_size=1, max_size=12)


@given(rates)
def test_a_plan_never_raises_the_highest_broker_load(layout: list[tuple[int, float]]) -> None:
    parts = [part(p, leader, rate) for p, (leader, rate) in enumerate(layout)]
    moves = balance_leaders(parts, BROKERS)
    before = max(broker_loads(parts, BROKERS).values())
    after = max(broker_loads(parts, BROKERS, {(m.topic, m.partition): m.to_leader for m in moves}).values())
    assert after <= before
    if moves:
        assert after < before
