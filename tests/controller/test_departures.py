"""Failover at scale: a fenced or shutting-down broker's partitions move in bounded operations
(at most MAX_PARTITION_CHANGES_PER_OPERATION partition changes each), those it leads first."""

from __future__ import annotations

from kafkapy.controller.brokers import MAX_PARTITION_CHANGES_PER_OPERATION as BOUND
from kafkapy.controller.controller import ControllerConfig, NewTopic, QuorumController
from kafkapy.controller.records import PartitionChangeRecord
from tests.controller.helpers import CLUSTER_ID, Cluster

PARTITIONS = 5000


def big_cluster() -> Cluster:
    """Brokers 1 and 2, 5,000 RF-2 partitions: broker 1 leads half and follows half."""
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID))
    c.start(1, 2)
    c.run(c.ctl.create_topics([NewTopic("t", PARTITIONS, 2)]))
    return c


def changes(records: object) -> int:
    assert isinstance(records, list)
    return sum(isinstance(r, PartitionChangeRecord) for r in records)


def held_by_1(c: Cluster) -> tuple[int, int]:
    """(partitions led by broker 1, partitions whose ISR holds it with another member)."""
    parts = c.ctl.image.topics["t"].partitions.values()
    return (
        sum(p.leader == 1 for p in parts),
        sum(1 in p.isr and len(p.isr) > 1 for p in parts),
    )


def test_fencing_moves_5000_partitions_in_bounded_operations_leaders_first() -> None:
    c = big_cluster()
    assert held_by_1(c) == (PARTITIONS // 2, PARTITIONS)
    result = c.ctl.broker_heartbeat(
        1, c.epochs[1], current_metadata_offset=c.replica.offset, want_fence=True, now_ms=0
    )
    c.run(result)
    assert changes(result.records) == BOUND
    assert held_by_1(c) == (PARTITIONS // 2 - BOUND, PARTITIONS - BOUND)
    assert c.ctl.departing() == [1]
    batches = [BOUND]
    while c.ctl.departing():
        more = c.ctl.continue_departures()
        c.run(more)
        batches.append(changes(more.records))
    assert batches == [BOUND] * (PARTITIONS // BOUND)
    assert held_by_1(c) == (0, 0)
    parts = c.ctl.image.topics["t"].partitions.values()
    assert all(p.leader == 2 and p.isr == (2,) for p in parts)


def test_leaderships_move_before_followerships() -> None:
    c = big_cluster()
    c.heartbeat(1, want_fence=True)
    c.run(c.ctl.continue_departures())
    assert held_by_1(c) == (PARTITIONS // 2 - 2 * BOUND, PARTITIONS - 2 * BOUND)
    c.run(c.ctl.continue_departures())
    assert held_by_1(c) == (0, PARTITIONS - 3 * BOUND)


def test_controlled_shutdown_waits_for_every_partition_to_move() -> None:
    c = big_cluster()
    first = c.heartbeat(1, want_shutdown=True)
    assert not first.should_shut_down
    assert not c.heartbeat(1, want_shutdown=True).should_shut_down  # caught up, not all moved
    while c.ctl.departing():
        c.run(c.ctl.continue_departures())
    assert not c.heartbeat(1, want_shutdown=True, offset=c.replica.offset - 1).should_shut_down
    assert c.heartbeat(1, want_shutdown=True).should_shut_down
    assert held_by_1(c) == (0, 0)


def test_a_new_controller_continues_the_departure_from_the_image() -> None:
    c = big_cluster()
    c.heartbeat(1, want_fence=True)
    fresh = QuorumController(c.ctl.config, c.replica, now_ms=0)
    assert fresh.departing() == [1]
    rounds = 0
    while fresh.departing():
        assert changes(fresh.continue_departures().records) <= BOUND
        rounds += 1
    assert rounds == PARTITIONS // BOUND - 1
    parts = fresh.image.topics["t"].partitions.values()
    assert all(p.leader == 2 and p.isr == (2,) for p in parts)


def test_a_broker_back_before_its_departure_finished_stops_departing() -> None:
    c = big_cluster()
    c.heartbeat(1, want_fence=True)
    assert not c.heartbeat(1).is_fenced
    assert c.ctl.departing() == []
    assert changes(c.ctl.continue_departures().records) == 0


def test_a_driver_that_ticks_at_each_deadline_finishes_the_departure() -> None:
    """Today's server only ticks when `next_deadline_ms` passes: that alone must finish it."""
    c = big_cluster()
    c.heartbeat(1, want_fence=True)
    assert c.ctl.next_deadline_ms() == 0
    ticks = 0
    while (deadline := c.ctl.next_deadline_ms()) is not None and deadline <= c.now_ms:
        result = c.ctl.tick(c.now_ms)
        assert changes(result.records) <= BOUND
        c.run(result)
        ticks += 1
    assert ticks == PARTITIONS // BOUND - 1
    assert held_by_1(c) == (0, 0)
    assert c.ctl.next_deadline_ms() != 0
