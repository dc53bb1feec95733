"""A metadata delta's partitions are applied in slices (`ReplicaManager.run_slice`), with
requests answered between slices and the partitions still waiting answering as loading:
NOT_LEADER_OR_FOLLOWER for data, COORDINATOR_LOAD_IN_PROGRESS for a coordinator, `/readyz`
not ready until none is left.

Deterministic: the slices are bounded by partitions only (`DeltaSlices.unbounded_time`), and a
gate holds the slices at a chosen point while the test asks its questions.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from kafkapy.broker.log_state import LogState
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import DescribeGroupsRequest, FindCoordinatorRequest
from kafkapy.server.broker import Broker
from tests.server.cluster.replication_helpers import produce, wait_for
from tests.server.helpers import (
    Client,
    alter_topic_configs,
    batch,
    create_topic,
    find_coordinator,
    running_broker,
)

WIDE = 300  # partitions of one CreateTopics (each log a directory and files: 1-15 ms)
SLICE = 30  # partitions per slice: the CreateTopics takes ten


def _gate(broker: Broker, open_after: int, limit: list[int] | None = None) -> tuple[trio.Event, list[int]]:
    """Hold the slices once `open_after` (or `limit[0]`, which the test may raise) have run,
    until the returned event is set (a held slice applies nothing and says work is left, so
    the slice task checks back). Also returns the loading count seen at each applied slice's
    start."""
    replicas = broker.replicas
    slices = replicas._slices
    slices.partitions = SLICE
    slices.unbounded_time()
    gate = trio.Event()
    seen: list[int] = []
    real: Callable[[], bool] = replicas.run_slice
    held = limit if limit is not None else [open_after]

    def gated() -> bool:
        if slices.slices >= held[0] and not gate.is_set() and slices:
            slices.wakeup.set()
            return True
        seen.append(broker.log_states.loading_count())
        return real()

    replicas.run_slice = gated  # type: ignore[method-assign]
    return gate, seen


async def test_a_300_partition_delta_is_applied_in_slices_with_requests_answered_between() -> None:
    async with running_broker(None) as (broker, server, port):
        gate, seen = _gate(broker, open_after=3)
        await create_topic(port, "wide", WIDE)  # answered while most partitions are still loading
        await wait_for(lambda: broker.replicas._slices.slices >= 3, what="three slices")
        loading = broker.log_states.loading_count()
        assert loading == WIDE - 3 * SLICE
        assert server.readiness() == (False, f"{loading} partitions loading")
        client = await Client.connect(port)
        try:
            assert (await produce(client, "wide", batch(b"v"), acks=1, partition=0)).error_code == ErrorCode.NONE
            refused = await produce(client, "wide", batch(b"v"), acks=1, partition=WIDE - 1)
            assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert broker.log_states.state("wide", WIDE - 1) is LogState.LOADING
            gate.set()
            await wait_for(lambda: broker.log_states.loading_count() == 0, what="every slice applied")
            assert broker.replicas._slices.slices >= WIDE // SLICE
            assert seen[:3] == [WIDE, WIDE - SLICE, WIDE - 2 * SLICE]  # one slice at a time, not all at once
            assert server.readiness() == (True, "")
            done = await produce(client, "wide", batch(b"v"), acks=1, partition=WIDE - 1)
            assert done.error_code == ErrorCode.NONE
        finally:
            await client.aclose()


async def test_coordinator_partitions_are_applied_at_once_while_data_partitions_wait() -> None:
    """A fresh broker's first FindCoordinator creates `__consumer_offsets`; its partitions skip
    the queue, so the coordinator the client is then sent to is loaded, not "loading" -
    librdkafka's admin client does not retry COORDINATOR_LOAD_IN_PROGRESS on every API."""
    async with running_broker(None) as (broker, server, port):
        gate, _ = _gate(broker, open_after=0)  # no slice runs until the gate opens
        await create_topic(port, "held", 3)
        client = await Client.connect(port)
        try:
            found = await client.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key="g"))
            assert found.error_code == ErrorCode.NONE
            described = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"]))
            assert described.groups[0].error_code == ErrorCode.NONE
            refused = await produce(client, "held", batch(b"v"), acks=1, partition=2)
            assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
            assert server.readiness() == (False, "3 partitions loading")
            gate.set()
            await wait_for(lambda: server.readiness()[0], what="ready")
            assert (await produce(client, "held", batch(b"v"), acks=1, partition=2)).error_code == ErrorCode.NONE
        finally:
            await client.aclose()


async def test_a_coordinator_whose_partition_is_loading_answers_load_in_progress() -> None:
    async with running_broker(None) as (broker, server, port):
        client = await Client.connect(port)
        try:
            assert await find_coordinator(client, "g") == broker.node_id
            broker.log_states.set_loading("__consumer_offsets", 0)  # its log being created again
            described = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"]))
            assert described.groups[0].error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            assert server.readiness() == (False, "1 partitions loading")
            broker.log_states.set_ready("__consumer_offsets", 0)
            described = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"]))
            assert described.groups[0].error_code == ErrorCode.NONE
            assert server.readiness() == (True, "")
        finally:
            await client.aclose()


async def test_a_change_to_an_open_log_is_applied_before_queued_log_creations() -> None:
    """What a failover is made of (a change to partitions whose log is open here) does not
    wait behind the log creations of a large CreateTopics."""
    async with running_broker(None) as (broker, _server, port):
        await create_topic(port, "small", 2)
        limit = [1]
        gate, _ = _gate(broker, 1, limit)
        await create_topic(port, "wide", WIDE)  # one slice applied, the rest held
        await alter_topic_configs(port, "small", {"retention.ms": "1234"})
        work = broker.replicas._slices
        assert work.changes
        limit[0] = work.slices + 1
        await wait_for(lambda: work.slices >= limit[0], what="one more slice")
        small = broker.logs.get("small", 1)
        assert small is not None
        assert small.config.retention_ms == 1234
        assert not work.changes
        assert broker.log_states.loading_count() >= WIDE - 2 * SLICE  # the creations still wait
        gate.set()
        await wait_for(lambda: broker.log_states.loading_count() == 0, what="every slice applied")
