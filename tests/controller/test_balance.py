"""Leader balance (auto.leader.rebalance.enable, leader.imbalance.check.interval.seconds): at
each due check, leadership returns to every preferred replica that is in its ISR and active."""

from __future__ import annotations

from collections import Counter

from kafkapy.controller.balance import MAX_ELECTIONS_PER_IMBALANCE, LeaderMove
from kafkapy.controller.controller import AlterPartitionItem, ControllerConfig, NewTopic
from kafkapy.controller.image import PartitionImage
from tests.controller.helpers import CLUSTER_ID, Cluster

INTERVAL = 10_000


def restarted_cluster(partitions: int = 30, *, enable: bool = True) -> Cluster:
    """Three brokers, a topic whose leaders were spread, broker 1 fenced and back (its
    leaderships moved to the others and stay there)."""
    config = ControllerConfig(
        cluster_id=CLUSTER_ID,
        leader_imbalance_check_interval_ms=INTERVAL,
        auto_leader_rebalance_enable=enable,
    )
    c = Cluster(config)
    c.start(1, 2, 3)
    c.run(c.ctl.create_topics([NewTopic("t", partitions, 3)]))
    c.heartbeat(1, want_fence=True)
    while c.ctl.departing():
        c.run(c.ctl.continue_departures())
    c.register(1)
    c.heartbeat(1)
    for pid, part in c.ctl.image.topics["t"].partitions.items():
        if part.replicas[0] == 1:
            # broker 1 caught up and its leaders took it back into the ISR
            c.run(c.ctl.alter_partition(part.leader, c.epochs[part.leader], [_expand(pid, part)]))
    return c


def _expand(pid: int, part: PartitionImage) -> AlterPartitionItem:
    new_isr = [(r, -1) for r in part.replicas]
    return AlterPartitionItem("t", None, pid, part.leader_epoch, new_isr, part.partition_epoch)


def leaders(c: Cluster) -> Counter[int]:
    return Counter(p.leader for p in c.ctl.image.topics["t"].partitions.values())


def test_check_moves_leadership_back_once_due() -> None:
    c = restarted_cluster()
    assert leaders(c)[1] == 0
    assert c.ctl.next_rebalance_ms() == INTERVAL
    reply = c.run(c.ctl.rebalance_leaders(INTERVAL - 1))
    assert reply.moved == []
    reply = c.run(c.ctl.rebalance_leaders(INTERVAL))
    assert len(reply.moved) == 10
    assert not reply.more
    assert all(isinstance(m, LeaderMove) and m.to_leader == 1 for m in reply.moved)
    assert leaders(c) == {1: 10, 2: 10, 3: 10}
    assert c.ctl.next_rebalance_ms() == 2 * INTERVAL


def test_preferred_replica_out_of_the_isr_is_not_elected() -> None:
    config = ControllerConfig(cluster_id=CLUSTER_ID, leader_imbalance_check_interval_ms=INTERVAL)
    c = Cluster(config)
    c.start(1, 2, 3)
    c.run(c.ctl.create_topics([NewTopic("t", 6, 3)]))
    c.heartbeat(1, want_fence=True)
    c.register(1)
    c.heartbeat(1)  # active again, but not back in any ISR yet
    reply = c.run(c.ctl.rebalance_leaders(INTERVAL))
    assert reply.moved == []
    assert leaders(c)[1] == 0


def test_disabled_never_checks() -> None:
    c = restarted_cluster(enable=False)
    assert c.ctl.next_rebalance_ms() is None
    assert c.run(c.ctl.rebalance_leaders(10 * INTERVAL)).moved == []
    assert leaders(c)[1] == 0


def test_a_large_imbalance_is_moved_in_bounded_operations() -> None:
    c = restarted_cluster(partitions=3 * MAX_ELECTIONS_PER_IMBALANCE + 30)
    result = c.ctl.rebalance_leaders(INTERVAL)
    reply = c.run(result)
    assert len(reply.moved) == MAX_ELECTIONS_PER_IMBALANCE
    assert len(result.records) == MAX_ELECTIONS_PER_IMBALANCE
    assert reply.more
    assert c.ctl.next_rebalance_ms() == INTERVAL  # due again at once
    reply = c.run(c.ctl.rebalance_leaders(INTERVAL))
    assert len(reply.moved) == 10
    assert not reply.more
    assert leaders(c)[1] == MAX_ELECTIONS_PER_IMBALANCE + 10
