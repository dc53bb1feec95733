"""Partition budgets (KIP-578 names): creations, growth and reassignments over
`max.broker.partitions` / `max.partitions` are refused with POLICY_VIOLATION and say which
broker and by how much; internal topics never are."""

from __future__ import annotations

from kafkapy.controller.budgets import (
    DEFAULT_MAX_BROKER_PARTITIONS,
    DEFAULT_MAX_PARTITIONS,
    replicas_per_broker,
)
from kafkapy.controller.controller import (
    ControllerConfig,
    NewPartitions,
    NewTopic,
    Reassignment,
)
from kafkapy.protocol.errors import ErrorCode
from tests.controller.helpers import CLUSTER_ID, Cluster


def budgeted(
    per_broker: int = DEFAULT_MAX_BROKER_PARTITIONS, max_partitions: int = DEFAULT_MAX_PARTITIONS
) -> Cluster:
    config = ControllerConfig(
        cluster_id=CLUSTER_ID, max_broker_partitions=per_broker, max_partitions=max_partitions
    )
    c = Cluster(config)
    c.start(1, 2, 3)
    return c


def test_default_is_unlimited() -> None:
    c = Cluster()
    c.start(1)
    [res] = c.run(c.ctl.create_topics([NewTopic("t", 5000, 1)]))
    assert res.error is ErrorCode.NONE


def test_create_topics_over_the_broker_budget_is_refused_with_broker_and_excess() -> None:
    c = budgeted(10)
    [ok] = c.run(c.ctl.create_topics([NewTopic("a", 12, 2)]))  # 24 replicas: 8 per broker
    assert ok.error is ErrorCode.NONE
    result = c.ctl.create_topics([NewTopic("b", 3, 3)])  # 3 more each: 11 > 10
    [res] = c.run(result)
    assert result.records == []
    assert res.error is ErrorCode.POLICY_VIOLATION
    assert res.message == (
        "broker 1 would hold 11 partition replicas, 1 more than max.broker.partitions=10"
    )
    assert "b" not in c.ctl.image.topics
    # validate_only is refused the same way
    [res] = c.run(c.ctl.create_topics([NewTopic("b", 3, 3)], validate_only=True))
    assert res.error is ErrorCode.POLICY_VIOLATION
    [res] = c.run(c.ctl.create_topics([NewTopic("b", 3, 2)]))  # 6 replicas: 2 per broker
    assert res.error is ErrorCode.NONE


def test_topics_of_one_request_are_charged_in_order() -> None:
    c = budgeted(3)
    results = c.run(c.ctl.create_topics([NewTopic("a", 3, 3), NewTopic("b", 3, 1)]))
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.POLICY_VIOLATION]
    assert "b" not in c.ctl.image.topics


def test_internal_topics_are_counted_but_never_refused() -> None:
    c = budgeted(2)
    results = c.run(
        c.ctl.create_topics([NewTopic("__consumer_offsets", 6, 3), NewTopic("t", 1, 1)])
    )
    assert [r.error for r in results] == [ErrorCode.NONE, ErrorCode.POLICY_VIOLATION]
    assert replicas_per_broker(c.ctl.image) == {1: 6, 2: 6, 3: 6}


def test_create_partitions_over_the_budget_is_refused() -> None:
    c = budgeted(3)
    c.run(c.ctl.create_topics([NewTopic("t", 3, 1)]))
    [res] = c.run(c.ctl.create_partitions([NewPartitions("t", 9)]))
    assert res.error is ErrorCode.NONE
    result = c.ctl.create_partitions([NewPartitions("t", 10, [[2]])])
    [res] = c.run(result)
    assert res.error is ErrorCode.POLICY_VIOLATION
    assert res.message == (
        "broker 2 would hold 4 partition replicas, 1 more than max.broker.partitions=3"
    )
    assert result.records == []


def test_reassignment_is_charged_for_the_replicas_it_adds() -> None:
    c = budgeted(2)
    c.run(c.ctl.create_topics([NewTopic("t", 3, 1, assignments=None)]))
    placed = {p: part.replicas for p, part in c.ctl.image.topics["t"].partitions.items()}
    full = placed[0][0]
    other = next(p for p in placed if placed[p][0] != full)
    [res] = c.run(c.ctl.alter_partition_reassignments([Reassignment("t", other, [full])]))
    assert res.error is ErrorCode.NONE  # 2 on `full` now (one of them moving there)
    third = next(p for p in placed if p not in (0, other))
    [res] = c.run(c.ctl.alter_partition_reassignments([Reassignment("t", third, [full])]))
    assert res.error is ErrorCode.POLICY_VIOLATION
    assert res.message == (
        f"broker {full} would hold 3 partition replicas, 1 more than max.broker.partitions=2"
    )


def test_cluster_wide_max_partitions() -> None:
    c = budgeted(max_partitions=5)
    c.run(c.ctl.create_topics([NewTopic("t", 4, 1)]))
    [res] = c.run(c.ctl.create_topics([NewTopic("u", 2, 1)]))
    assert res.error is ErrorCode.POLICY_VIOLATION
    assert res.message == "the cluster would hold 6 partitions, 1 more than max.partitions=5"
