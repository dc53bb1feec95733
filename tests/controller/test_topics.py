"""Topic rules: creation and placement, deletion, partitions, AlterPartition checks, elections
and config changes."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from kafkapy.controller.controller import (
    AlterPartitionItem,
    ConfigChange,
    ConfigOp,
    ControllerConfig,
    NewPartitions,
    NewTopic,
    Reassignment,
)
from kafkapy.controller.records import ConfigResourceType
from kafkapy.protocol.errors import ErrorCode
from tests.controller.helpers import CLUSTER_ID, Cluster


def cluster3() -> Cluster:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, session_timeout_ms=1000))
    c.start(1, 2, 3)
    return c


def test_create_topic_assigns_replicas_and_leaders_evenly() -> None:
    c = cluster3()
    [res] = c.run(c.ctl.create_topics([NewTopic("t", 6, 2, configs={"retention.ms": "1000"})]))
    assert res.error is ErrorCode.NONE
    assert (res.num_partitions, res.replication_factor) == (6, 2)
    topic = c.ctl.image.topics["t"]
    assert topic.topic_id == res.topic_id
    assert topic.configs == {"retention.ms": "1000"}
    assert c.ctl.image.topics_by_id[res.topic_id] == "t"
    for part in topic.partitions.values():
        assert len(set(part.replicas)) == 2
        assert part.isr == part.replicas
        assert part.leader == part.replicas[0]
        assert (part.leader_epoch, part.partition_epoch) == (0, 0)
    leaders = Counter(p.leader for p in topic.partitions.values())
    assert leaders == {1: 2, 2: 2, 3: 2}
    assert c.last_delta.changed_partitions["t"] == set(range(6))


def test_create_uses_defaults_for_minus_one() -> None:
    c = Cluster(
        ControllerConfig(cluster_id=CLUSTER_ID, default_partitions=3, default_replication_factor=2)
    )
    c.start(1, 2)
    [res] = c.run(c.ctl.create_topics([NewTopic("t")]))
    assert (res.num_partitions, res.replication_factor) == (3, 2)


@pytest.mark.parametrize(
    ("topic", "error"),
    [
        (NewTopic("t", 1, 4), ErrorCode.INVALID_REPLICATION_FACTOR),
        (NewTopic("t", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR),
        (NewTopic("t", 0, 1), ErrorCode.INVALID_PARTITIONS),
        (NewTopic("bad name", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("..", 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("x" * 250, 1, 1), ErrorCode.INVALID_TOPIC_EXCEPTION),
        (NewTopic("t", 1, 1, configs={"no.such": "1"}), ErrorCode.INVALID_CONFIG),
        (NewTopic("t", 1, 1, configs={"retention.ms": "abc"}), ErrorCode.INVALID_CONFIG),
        (NewTopic("t", 2, -1, assignments={0: [1]}), ErrorCode.INVALID_REQUEST),
        (NewTopic("t", assignments={1: [1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("t", assignments={0: [1, 1]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("t", assignments={0: [9]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (NewTopic("t", assignments={0: []}), ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ],
)
def test_invalid_creations_emit_nothing(topic: NewTopic, error: ErrorCode) -> None:
    c = cluster3()
    before = c.ctl.next_offset
    result = c.ctl.create_topics([topic])
    assert result.response[0].error is error
    assert result.records == []
    assert c.ctl.next_offset == before


def test_existing_colliding_and_repeated_names() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("a.b", 1, 1)]))
    res = c.run(
        c.ctl.create_topics(
            [NewTopic("a.b", 1, 1), NewTopic("a_b", 1, 1), NewTopic("x"), NewTopic("x")]
        )
    )
    assert [r.error for r in res] == [
        ErrorCode.TOPIC_ALREADY_EXISTS,
        ErrorCode.INVALID_TOPIC_EXCEPTION,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]


def test_names_colliding_within_one_request() -> None:
    c = cluster3()
    res = c.run(c.ctl.create_topics([NewTopic("c.d", 1, 1), NewTopic("c_d", 1, 1), NewTopic("e", 1, 1)]))
    assert [r.error for r in res] == [ErrorCode.NONE, ErrorCode.INVALID_TOPIC_EXCEPTION, ErrorCode.NONE]
    assert res[1].message == "'c_d' collides with 'c.d'"


def test_validate_only_checks_but_creates_nothing() -> None:
    c = cluster3()
    result = c.ctl.create_topics([NewTopic("t", 2, 3)], validate_only=True)
    assert result.records == []
    assert result.response[0].error is ErrorCode.NONE
    assert result.response[0].num_partitions == 2
    assert "t" not in c.ctl.image.topics


def test_fenced_brokers_are_not_used_for_placement() -> None:
    c = cluster3()
    c.heartbeat(3, want_fence=True)
    assert c.run(c.ctl.create_topics([NewTopic("t", 1, 3)]))[0].error is (
        ErrorCode.INVALID_REPLICATION_FACTOR
    )
    c.run(c.ctl.create_topics([NewTopic("u", 8, 2)]))
    assert all(3 not in p.replicas for p in c.ctl.image.topics["u"].partitions.values())


def test_delete_by_name_and_id() -> None:
    c = cluster3()
    a, b = c.run(c.ctl.create_topics([NewTopic("a", 1, 1), NewTopic("b", 2, 1)]))
    missing = uuid.uuid4()
    res = c.run(c.ctl.delete_topics(["a", "nope"], [b.topic_id, missing]))
    assert [(r.name, r.error) for r in res] == [
        ("a", ErrorCode.NONE),
        ("nope", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        ("b", ErrorCode.NONE),
        (None, ErrorCode.UNKNOWN_TOPIC_ID),
    ]
    assert c.ctl.image.topics == {}
    assert c.ctl.image.topics_by_id == {}
    assert set(c.last_delta.deleted_topics) == {a.topic_id, b.topic_id}


def test_internal_topics_and_disabled_deletion() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("__consumer_offsets", 1, 1)]))
    [r] = c.run(c.ctl.delete_topics(["__consumer_offsets"]))
    assert r.error is ErrorCode.INVALID_TOPIC_EXCEPTION
    c2 = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, delete_topic_enable=False))
    c2.start(1)
    c2.run(c2.ctl.create_topics([NewTopic("t", 1, 1)]))
    assert c2.run(c2.ctl.delete_topics(["t"]))[0].error is ErrorCode.TOPIC_DELETION_DISABLED


def test_recreated_topic_gets_a_new_id() -> None:
    c = cluster3()
    [a] = c.run(c.ctl.create_topics([NewTopic("t", 1, 1)]))
    c.run(c.ctl.delete_topics(["t"]))
    [b] = c.run(c.ctl.create_topics([NewTopic("t", 1, 1)]))
    assert a.topic_id != b.topic_id


def test_create_partitions() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", 2, 2)]))
    res = c.run(
        c.ctl.create_partitions(
            [
                NewPartitions("t", 4),
                NewPartitions("nope", 3),
            ]
        )
    )
    assert [r.error for r in res] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    parts = c.ctl.image.topics["t"].partitions
    assert sorted(parts) == [0, 1, 2, 3]
    assert all(len(p.replicas) == 2 for p in parts.values())
    bad = c.run(c.ctl.create_partitions([NewPartitions("t", 4), NewPartitions("t", 5)]))
    assert [r.error for r in bad] == [ErrorCode.INVALID_REQUEST] * 2
    [shrink] = c.run(c.ctl.create_partitions([NewPartitions("t", 3)]))
    assert shrink.error is ErrorCode.INVALID_PARTITIONS
    [wrong] = c.run(c.ctl.create_partitions([NewPartitions("t", 6, [[1]])]))
    assert wrong.error is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    [ok] = c.run(c.ctl.create_partitions([NewPartitions("t", 5, [[3, 1]])]))
    assert ok.error is ErrorCode.NONE
    assert c.ctl.image.topics["t"].partitions[4].replicas == (3, 1)
    assert c.ctl.image.topics["t"].partitions[4].leader == 3


def test_create_topics_over_the_partition_limit_is_refused_as_a_whole() -> None:
    """Kafka's validateTotalNumberOfPartitions: more than 10,000 partitions in one CreateTopics
    (counted over every topic; -1 as the default, assignments by length) refuses every topic
    with POLICY_VIOLATION and writes nothing - 2**20 + 1 is a flipped bit in a count of 1."""
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID, default_partitions=2))
    c.start(1)
    before = c.ctl.next_offset
    for topics in (
        [NewTopic("huge", 2**20 + 1, 1)],
        [NewTopic("a", 5_000, 1), NewTopic("b", 4_999, 1), NewTopic("c")],  # 10,001
        [NewTopic("a", 9_999, 1), NewTopic("b", assignments={0: [1], 1: [1]})],
    ):
        result = c.ctl.create_topics(topics)
        assert [(r.name, r.error) for r in result.response] == [
            (t.name, ErrorCode.POLICY_VIOLATION) for t in topics
        ]
        assert result.response[0].message == "Excessively large number of partitions per request."
        assert result.records == []
    assert c.ctl.next_offset == before
    # exactly 10,000 is allowed (9,998 + the default 2)
    ok = c.run(c.ctl.create_topics([NewTopic("a", 9_998, 1), NewTopic("c")]))
    assert [r.error for r in ok] == [ErrorCode.NONE, ErrorCode.NONE]
    assert len(c.ctl.image.topics["a"].partitions) == 9_998


def test_create_partitions_over_the_partition_limit_is_refused() -> None:
    c = Cluster(ControllerConfig(cluster_id=CLUSTER_ID))
    c.start(1)
    c.run(c.ctl.create_topics([NewTopic("a", 1, 1), NewTopic("b", 1, 1)]))
    before = c.ctl.next_offset
    [huge] = c.ctl.create_partitions([NewPartitions("a", 2**20 + 1)]).response
    assert huge.error is ErrorCode.INVALID_PARTITIONS
    assert huge.message is not None
    assert "10000" in huge.message
    # the limit is per request: 6,000 + 5,000 new partitions - the second topic goes over
    result = c.ctl.create_partitions([NewPartitions("a", 6_001), NewPartitions("b", 5_001)])
    assert [r.error for r in result.response] == [ErrorCode.NONE, ErrorCode.INVALID_PARTITIONS]
    assert len(result.records) == 6_000
    assert c.ctl.next_offset == before + 6_000  # nothing of the refused ones


def _alter(c: Cluster, broker: int, isr: list[int], **overrides: int) -> ErrorCode:
    part = c.ctl.image.topics["t"].partitions[0]
    item = AlterPartitionItem(
        "t",
        None,
        overrides.get("partition", 0),
        overrides.get("leader_epoch", part.leader_epoch),
        [(r, -1) for r in isr],
        overrides.get("partition_epoch", part.partition_epoch),
    )
    reply = c.run(c.ctl.alter_partition(broker, c.epochs[broker], [item]))
    assert reply.error is ErrorCode.NONE
    return reply.partitions[0].error


def test_alter_partition_shrink_and_expand_bump_partition_epoch_only() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})]))
    assert _alter(c, 1, [1, 2]) is ErrorCode.NONE
    part = c.ctl.image.topics["t"].partitions[0]
    assert (part.isr, part.leader, part.leader_epoch, part.partition_epoch) == ((1, 2), 1, 0, 1)
    assert _alter(c, 1, [1, 2, 3]) is ErrorCode.NONE
    part = c.ctl.image.topics["t"].partitions[0]
    assert (part.isr, part.partition_epoch) == ((1, 2, 3), 2)


def test_alter_partition_with_the_same_isr_changes_nothing() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})]))
    result = c.ctl.alter_partition(
        1, c.epochs[1], [AlterPartitionItem("t", None, 0, 0, [(1, -1), (2, -1), (3, -1)], 0)]
    )
    assert result.records == []
    assert result.response.partitions[0].partition_epoch == 0


def test_alter_partition_errors() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})]))
    assert _alter(c, 2, [1, 2]) is ErrorCode.INVALID_REQUEST  # not the leader
    assert _alter(c, 1, [1, 2], leader_epoch=-1) is ErrorCode.FENCED_LEADER_EPOCH
    assert _alter(c, 1, [1, 2], leader_epoch=5) is ErrorCode.NOT_CONTROLLER
    assert _alter(c, 1, [1, 2], partition_epoch=7) is ErrorCode.INVALID_UPDATE_VERSION
    assert _alter(c, 1, [1, 4]) is ErrorCode.INVALID_REQUEST  # not a replica
    assert _alter(c, 1, [2, 3]) is ErrorCode.INVALID_REQUEST  # leader missing
    assert _alter(c, 1, [1, 1]) is ErrorCode.INVALID_REQUEST
    assert _alter(c, 1, [1], partition=9) is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    stale = c.run(c.ctl.alter_partition(1, 999, []))
    assert stale.error is ErrorCode.STALE_BROKER_EPOCH
    unknown = c.run(
        c.ctl.alter_partition(1, c.epochs[1], [AlterPartitionItem(None, uuid.uuid4(), 0, 0, [], 0)])
    )
    assert unknown.partitions[0].error is ErrorCode.UNKNOWN_TOPIC_ID


def test_alter_partition_rejects_fenced_or_stale_new_members() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})]))
    assert _alter(c, 1, [1]) is ErrorCode.NONE
    c.heartbeat(3, want_fence=True)
    assert _alter(c, 1, [1, 3]) is ErrorCode.INELIGIBLE_REPLICA
    part = c.ctl.image.topics["t"].partitions[0]
    item = AlterPartitionItem(
        "t", None, 0, part.leader_epoch, [(1, -1), (2, 12345)], part.partition_epoch
    )
    reply = c.run(c.ctl.alter_partition(1, c.epochs[1], [item]))
    assert reply.partitions[0].error is ErrorCode.INELIGIBLE_REPLICA
    item = AlterPartitionItem(
        "t", None, 0, part.leader_epoch, [(1, c.epochs[1]), (2, c.epochs[2])], part.partition_epoch
    )
    assert (
        c.run(c.ctl.alter_partition(1, c.epochs[1], [item])).partitions[0].error is ErrorCode.NONE
    )


def test_preferred_leader_election() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2], 1: [2, 3]})]))
    c.heartbeat(1, want_fence=True)
    assert c.ctl.image.topics["t"].partitions[0].leader == 2
    res = c.run(c.ctl.elect_leaders(0, [("t", 0), ("t", 1), ("t", 7)]))
    assert [r.error for r in res] == [
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
        ErrorCode.ELECTION_NOT_NEEDED,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    # Broker 1 comes back; it rejoins the ISR through the leader, then preferred election.
    c.heartbeat(1)
    part = c.ctl.image.topics["t"].partitions[0]
    item = AlterPartitionItem(
        "t", None, 0, part.leader_epoch, [(2, -1), (1, -1)], part.partition_epoch
    )
    assert (
        c.run(c.ctl.alter_partition(2, c.epochs[2], [item])).partitions[0].error is ErrorCode.NONE
    )
    res = c.run(c.ctl.elect_leaders(0, None))
    assert [(r.topic, r.partition, r.error) for r in res] == [("t", 0, ErrorCode.NONE)]
    assert c.ctl.image.topics["t"].partitions[0].leader == 1


def test_unclean_election_request_picks_a_live_replica() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2]})]))
    assert _alter(c, 1, [1]) is ErrorCode.NONE
    c.heartbeat(1, want_fence=True)
    assert c.ctl.image.topics["t"].partitions[0].leader == -1
    [r] = c.run(c.ctl.elect_leaders(1, [("t", 0)]))
    assert r.error is ErrorCode.NONE
    part = c.ctl.image.topics["t"].partitions[0]
    assert (part.leader, part.isr) == (2, (2,))


def test_unclean_election_waits_for_a_live_replica_and_says_why() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2]})]))
    assert _alter(c, 1, [1]) is ErrorCode.NONE  # 2 fell behind
    c.heartbeat(2, want_fence=True)
    c.heartbeat(1, want_fence=True)
    part = c.ctl.image.topics["t"].partitions[0]
    assert (part.leader, part.isr) == (-1, (1,))
    [r] = c.run(c.ctl.elect_leaders(1, [("t", 0)]))
    assert r.error is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
    assert r.message
    # A preferred election never goes outside the ISR.
    [r] = c.run(c.ctl.elect_leaders(0, [("t", 0)]))
    assert r.error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert c.ctl.image.topics["t"].partitions[0] == part
    c.heartbeat(2)  # back, but not in the ISR: no clean leader
    assert c.ctl.image.topics["t"].partitions[0].leader == -1
    [r] = c.run(c.ctl.elect_leaders(1, [("t", 0)]))
    assert r.error is ErrorCode.NONE
    now = c.ctl.image.topics["t"].partitions[0]
    assert (now.leader, now.isr) == (2, (2,))
    assert now.leader_epoch > part.leader_epoch
    [r] = c.run(c.ctl.elect_leaders(1, [("t", 0)]))
    assert r.error is ErrorCode.ELECTION_NOT_NEEDED


def test_election_for_all_partitions_reports_failures_but_not_the_unneeded() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2], 1: [2, 3], 2: [3, 1]})]))
    c.heartbeat(1, want_fence=True)
    res = c.run(c.ctl.elect_leaders(0, None))
    assert [(r.topic, r.partition, r.error) for r in res] == [
        ("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
    ]
    [r] = c.run(c.ctl.elect_leaders(7, [("t", 0)]))
    assert r.error is ErrorCode.INVALID_REQUEST
    [r] = c.run(c.ctl.elect_leaders(0, [("t", 3)]))
    assert r.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _isr_add(c: Cluster, leader: int, isr: list[int]) -> ErrorCode:
    part = c.ctl.image.topics["t"].partitions[0]
    item = AlterPartitionItem(
        "t", None, 0, part.leader_epoch, [(r, -1) for r in isr], part.partition_epoch
    )
    return c.run(c.ctl.alter_partition(leader, c.epochs[leader], [item])).partitions[0].error


def test_reassignment_adds_then_completes_when_the_target_is_in_sync() -> None:
    c = cluster3()
    c.register(4)
    c.heartbeat(4)
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})]))
    [r] = c.run(c.ctl.alter_partition_reassignments([Reassignment("t", 0, [4, 2, 3])]))
    assert r.error is ErrorCode.NONE
    part = c.ctl.image.topics["t"].partitions[0]
    assert (part.replicas, part.isr, part.leader) == ((4, 2, 3, 1), (1, 2, 3), 1)
    assert (part.adding_replicas, part.removing_replicas) == ((4,), (1,))
    # 4 caught up: the leader's ISR expansion completes the move in the same change; 1 leaves
    # and the first target replica in the ISR leads.
    assert _isr_add(c, 1, [1, 2, 3, 4]) is ErrorCode.NONE
    part = c.ctl.image.topics["t"].partitions[0]
    assert (part.replicas, part.isr, part.leader) == ((4, 2, 3), (2, 3, 4), 4)
    assert (part.adding_replicas, part.removing_replicas) == ((), ())
    [r] = c.run(c.ctl.alter_partition_reassignments([Reassignment("t", 0, None)]))
    assert r.error is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS


def test_reassignment_within_the_isr_completes_at_once_and_cancel_reverts() -> None:
    c = cluster3()
    c.register(4)
    c.heartbeat(4)
    c.run(c.ctl.create_topics([NewTopic("t", assignments={0: [1, 2, 3]})]))
    [r] = c.run(c.ctl.alter_partition_reassignments([Reassignment("t", 0, [2, 3])]))
    assert r.error is ErrorCode.NONE
    part = c.ctl.image.topics["t"].partitions[0]
    assert (part.replicas, part.isr, part.leader) == ((2, 3), (2, 3), 2)
    res = c.run(
        c.ctl.alter_partition_reassignments(
            [
                Reassignment("t", 0, [2, 3, 4]),
                Reassignment("t", 5, [1]),
                Reassignment("nope", 0, [1]),
            ]
        )
    )
    assert [x.error for x in res] == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ]
    assert c.ctl.image.topics["t"].partitions[0].adding_replicas == (4,)
    [r] = c.run(c.ctl.alter_partition_reassignments([Reassignment("t", 0, None)]))
    assert r.error is ErrorCode.NONE
    part = c.ctl.image.topics["t"].partitions[0]
    assert (part.replicas, part.isr, part.leader) == ((2, 3), (2, 3), 2)
    assert (part.adding_replicas, part.removing_replicas) == ((), ())
    for bad in ([], [2, 2], [2, 9]):
        [r] = c.run(c.ctl.alter_partition_reassignments([Reassignment("t", 0, bad)]))
        assert r.error is ErrorCode.INVALID_REPLICA_ASSIGNMENT
        assert r.message
    [r] = c.run(c.ctl.alter_partition_reassignments([Reassignment("t", 0, [2, 3])]))
    assert r.error is ErrorCode.NONE  # already there: nothing to do


def test_incremental_alter_configs_topic_and_broker() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", 1, 1, configs={"retention.ms": "5"})]))
    T, B = ConfigResourceType.TOPIC, ConfigResourceType.BROKER
    res = c.run(
        c.ctl.incremental_alter_configs(
            [
                ConfigChange(
                    T,
                    "t",
                    [ConfigOp("retention.ms", 1, None), ConfigOp("cleanup.policy", 2, "compact")],
                ),
                ConfigChange(T, "nope", [ConfigOp("retention.ms", 0, "1")]),
                ConfigChange(T, "t", [ConfigOp("segment.bytes", 0, "x")]),
                ConfigChange(T, "t", [ConfigOp("retention.ms", 2, "1")]),
                ConfigChange(B, "", [ConfigOp("unclean.leader.election.enable", 0, "true")]),
                ConfigChange(B, "2", [ConfigOp("log.dirs", 0, "/x")]),
                ConfigChange(B, "42", [ConfigOp("min.insync.replicas", 0, "2")]),
                ConfigChange(99, "x", []),
            ]
        )
    )
    assert [r.error for r in res] == [
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.INVALID_CONFIG,
        ErrorCode.NONE,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.INVALID_REQUEST,
    ]
    assert c.ctl.image.topics["t"].configs == {"cleanup.policy": "delete,compact"}
    assert c.ctl.image.broker_config(3, "unclean.leader.election.enable") == "true"


def test_validate_only_config_change_emits_nothing() -> None:
    c = cluster3()
    c.run(c.ctl.create_topics([NewTopic("t", 1, 1)]))
    result = c.ctl.incremental_alter_configs(
        [ConfigChange(ConfigResourceType.TOPIC, "t", [ConfigOp("retention.ms", 0, "9")])],
        validate_only=True,
    )
    assert result.records == []
    assert result.response[0].error is ErrorCode.NONE
