"""Broker lifecycle rules: registration, fencing, heartbeats, session expiry, controlled
shutdown and producer id blocks."""

from __future__ import annotations

import uuid

from kafkapy.controller.controller import ControllerConfig, NewTopic
from kafkapy.controller.records import Endpoint
from kafkapy.protocol.errors import ErrorCode
from tests.controller.helpers import CLUSTER_ID, Cluster


def test_registration_starts_fenced_with_epoch_equal_to_record_offset() -> None:
    c = Cluster()
    epoch = c.register(1)
    assert epoch == 0  # the RegisterBrokerRecord is the first entry of the log
    reg = c.ctl.image.brokers[1]
    assert reg.fenced
    assert reg.epoch == 0
    assert c.register(2) == 1


def test_heartbeat_unfences_only_once_caught_up_to_the_registration() -> None:
    c = Cluster()
    c.register(1)
    c.register(2)
    behind = c.heartbeat(2, offset=0)  # broker 2 registered at offset 1
    assert behind.is_fenced
    assert not behind.is_caught_up
    assert c.ctl.image.brokers[2].fenced
    caught_up = c.heartbeat(2, offset=1)
    assert not caught_up.is_fenced
    assert caught_up.is_caught_up
    assert not c.ctl.image.brokers[2].fenced


def test_want_fence_keeps_or_makes_a_broker_fenced() -> None:
    c = Cluster()
    c.register(1)
    assert c.heartbeat(1, want_fence=True).is_fenced
    assert c.ctl.image.brokers[1].fenced
    c.heartbeat(1)
    assert c.heartbeat(1, want_fence=True).is_fenced
    assert c.ctl.image.brokers[1].fenced


def test_unknown_broker_and_stale_epoch() -> None:
    c = Cluster()
    c.register(1)
    r = c.run(c.ctl.broker_heartbeat(7, 0, current_metadata_offset=0, now_ms=0))
    assert r.error is ErrorCode.BROKER_ID_NOT_REGISTERED
    r = c.run(c.ctl.broker_heartbeat(1, 99, current_metadata_offset=0, now_ms=0))
    assert r.error is ErrorCode.STALE_BROKER_EPOCH


def test_wrong_cluster_id_is_inconsistent() -> None:
    c = Cluster()
    r = c.run(
        c.ctl.register_broker(
            1, cluster_id="other", incarnation_id=uuid.uuid4(), endpoints=[], now_ms=0
        )
    )
    assert r.error is ErrorCode.INCONSISTENT_CLUSTER_ID
    assert 1 not in c.ctl.image.brokers


def test_new_incarnation_with_live_session_is_a_duplicate() -> None:
    c = Cluster()
    c.start(1)
    r = c.run(
        c.ctl.register_broker(
            1, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(), endpoints=[], now_ms=c.now_ms
        )
    )
    assert r.error is ErrorCode.DUPLICATE_BROKER_REGISTRATION


def test_new_incarnation_naming_the_previous_epoch_replaces_the_old_one() -> None:
    c = Cluster()
    c.start(1, 2)
    c.run(c.ctl.create_topics([NewTopic("t", 1, 2)]))
    old = c.epochs[1]
    r = c.run(
        c.ctl.register_broker(
            1,
            cluster_id=CLUSTER_ID,
            incarnation_id=uuid.uuid4(),
            endpoints=[Endpoint("PLAINTEXT", "h", 1)],
            now_ms=c.now_ms,
            previous_broker_epoch=old,
        )
    )
    assert r.error is ErrorCode.NONE
    assert r.broker_epoch > old
    assert c.ctl.image.brokers[1].fenced
    part = c.ctl.image.topics["t"].partitions[0]
    assert 1 not in part.isr
    assert part.leader == 2


def test_new_incarnation_replaces_a_fenced_one_with_a_recent_heartbeat() -> None:
    """A fenced registration has no session to protect (Kafka's hasValidSession): a restarted
    broker whose old incarnation was fenced (it had heartbeated, fenced, moments before it
    died) registers at once instead of waiting out the old heartbeat."""
    c = Cluster()
    c.register(1)
    c.heartbeat(1, want_fence=True)  # heartbeats while fenced touch the session
    r = c.run(
        c.ctl.register_broker(
            1, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(), endpoints=[], now_ms=c.now_ms
        )
    )
    assert r.error is ErrorCode.NONE
    assert c.ctl.image.brokers[1].epoch == r.broker_epoch


def test_fence_gone_fences_only_the_active_registration_it_names() -> None:
    c = Cluster()
    c.start(1, 2, 3)
    c.run(c.ctl.create_topics([NewTopic("t", 1, 3)]))
    leader = c.ctl.image.topics["t"].partitions[0].leader
    assert c.run(c.ctl.fence_gone(leader, c.epochs[leader] + 1)) is False  # another incarnation
    assert c.run(c.ctl.fence_gone(leader, c.epochs[leader])) is True
    part = c.ctl.image.topics["t"].partitions[0]
    assert c.ctl.image.brokers[leader].fenced
    assert part.leader not in (leader, -1)
    assert leader not in part.isr
    assert c.run(c.ctl.fence_gone(leader, c.epochs[leader])) is False  # already fenced


def test_heartbeat_counted_on_arrival_and_controller_stall_keep_sessions() -> None:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=1000))
    c.start(1, 2)
    c.ctl.touch_session(1, c.epochs[1], 900)  # arrived; its operation not run yet
    c.ctl.touch_session(2, c.epochs[2] + 5, 900)  # not the current registration: ignored
    assert c.run(c.ctl.tick(1500)) == [2]
    c.ctl.extend_sessions(2000)  # the controller did not run for 2 s
    assert c.run(c.ctl.tick(3500)) == []
    assert c.run(c.ctl.tick(3901)) == [1]


def test_same_incarnation_may_register_again_and_gets_a_new_epoch() -> None:
    c = Cluster()
    c.start(1)
    inc = c.incarnations[1]
    old = c.epochs[1]
    assert c.register(1, incarnation=inc) > old


def test_session_expiry_fences_and_moves_leadership() -> None:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=1000))
    c.start(1, 2, 3)
    c.run(c.ctl.create_topics([NewTopic("t", 3, 3)]))
    led_by_1 = [p for p, part in c.ctl.image.topics["t"].partitions.items() if part.leader == 1]
    assert led_by_1
    before = {p: part.leader_epoch for p, part in c.ctl.image.topics["t"].partitions.items()}
    c.now_ms += 600
    c.keep_alive(2, 3)
    assert c.advance(600) == [1]
    assert c.ctl.image.brokers[1].fenced
    for p, part in c.ctl.image.topics["t"].partitions.items():
        assert 1 not in part.isr
        assert part.leader in (2, 3)
        if p in led_by_1:
            assert part.leader_epoch == before[p] + 1
        else:
            assert part.leader_epoch == before[p]
    assert c.advance(400) == []
    assert c.advance(1) == [2, 3]


def test_tick_before_expiry_does_nothing() -> None:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=1000))
    c.start(1)
    assert c.advance(1000) == []
    assert c.ctl.next_deadline_ms() == 1001


def test_last_isr_member_fenced_leaves_partition_leaderless_keeping_isr() -> None:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=1000))
    c.start(1)
    c.run(c.ctl.create_topics([NewTopic("t", 1, 1)]))
    c.advance(2000)
    part = c.ctl.image.topics["t"].partitions[0]
    assert part.leader == -1
    assert part.isr == (1,)
    # It comes back: unfencing re-elects it.
    c.register(1)
    c.heartbeat(1)
    part = c.ctl.image.topics["t"].partitions[0]
    assert part.leader == 1
    assert part.leader_epoch == 2


def test_unclean_election_config_lets_a_live_non_isr_replica_lead() -> None:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=1000))
    c.start(1, 2)
    c.run(
        c.ctl.create_topics(
            [
                NewTopic(
                    "t", assignments={0: [1, 2]}, configs={"unclean.leader.election.enable": "true"}
                )
            ]
        )
    )
    # Leader 1 shrinks the ISR to itself, then dies.
    part = c.ctl.image.topics["t"].partitions[0]
    from kafkapy.controller.controller import AlterPartitionItem

    r = c.run(
        c.ctl.alter_partition(
            1,
            c.epochs[1],
            [AlterPartitionItem("t", None, 0, part.leader_epoch, [(1, -1)], part.partition_epoch)],
        )
    )
    assert r.partitions[0].error is ErrorCode.NONE
    c.now_ms += 600
    c.keep_alive(2)
    c.advance(600)
    part = c.ctl.image.topics["t"].partitions[0]
    assert part.leader == 2
    assert part.isr == (2,)


def test_unclean_election_stays_off_by_default() -> None:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=1000))
    c.start(1, 2)
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2]})]))
    from kafkapy.controller.controller import AlterPartitionItem

    part = c.ctl.image.topics["t"].partitions[0]
    c.run(
        c.ctl.alter_partition(
            1,
            c.epochs[1],
            [AlterPartitionItem("t", None, 0, part.leader_epoch, [(1, -1)], part.partition_epoch)],
        )
    )
    c.now_ms += 600
    c.keep_alive(2)
    c.advance(600)
    part = c.ctl.image.topics["t"].partitions[0]
    assert part.leader == -1
    assert part.isr == (1,)


def test_controlled_shutdown_moves_leadership_before_the_broker_stops() -> None:
    c = Cluster()
    c.start(1, 2)
    c.run(c.ctl.create_topics([NewTopic("t", 4, 2)]))
    first = c.heartbeat(1, want_shutdown=True, offset=c.replica.offset - 1)
    assert not first.should_shut_down
    assert c.ctl.image.brokers[1].in_controlled_shutdown
    for part in c.ctl.image.topics["t"].partitions.values():
        assert part.leader == 2
        assert part.isr == (2,)
    # Not yet caught up with the leadership moves: keep waiting.
    behind = c.heartbeat(1, want_shutdown=True, offset=c.replica.offset - 1)
    assert not behind.should_shut_down
    done = c.heartbeat(1, want_shutdown=True)
    assert done.should_shut_down
    reg = c.ctl.image.brokers[1]
    assert reg.fenced
    assert not reg.in_controlled_shutdown


def test_fenced_broker_may_shut_down_at_once() -> None:
    c = Cluster()
    c.register(1)
    assert c.heartbeat(1, want_shutdown=True, offset=-1).should_shut_down


def test_controlled_shutdown_of_sole_replica_leaves_partition_offline() -> None:
    c = Cluster()
    c.start(1, 2)
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1]})]))
    c.heartbeat(1, want_shutdown=True)
    part = c.ctl.image.topics["t"].partitions[0]
    assert part.leader == -1
    assert part.isr == (1,)


def test_producer_id_blocks_are_disjoint_and_checked() -> None:
    c = Cluster()
    c.start(1, 2)
    a = c.run(c.ctl.allocate_producer_ids(1, c.epochs[1]))
    b = c.run(c.ctl.allocate_producer_ids(2, c.epochs[2]))
    assert (a.error, a.start, a.length) == (ErrorCode.NONE, 0, 1000)
    assert (b.start, b.length) == (1000, 1000)
    assert c.ctl.image.next_producer_id == 2000
    assert c.run(c.ctl.allocate_producer_ids(1, 12345)).error is ErrorCode.STALE_BROKER_EPOCH
    assert c.run(c.ctl.allocate_producer_ids(9, 0)).error is ErrorCode.BROKER_ID_NOT_REGISTERED


def test_new_controller_from_committed_image_restarts_sessions() -> None:
    from kafkapy.controller.controller import QuorumController

    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=1000))
    c.start(1)
    fresh = QuorumController(c.ctl.config, c.replica, now_ms=5000)
    assert fresh.tick(5900).response == []
    assert fresh.tick(6001).response == [1]
    assert fresh.next_offset == c.replica.offset + 2
