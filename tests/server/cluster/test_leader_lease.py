"""The leader lease (`kafkapy.leader.lease.enable`) on 3 in-process nodes (real sockets).

What users rely on: a leader whose last heartbeat answer from the controller is older than
`broker.session.timeout.ms` - it may have been fenced and replaced meanwhile - answers writes
NOT_LEADER_OR_FOLLOWER (so its acks=1 writes are not truncated later); with the lease off it
behaves as Kafka does and takes them. Its next answered heartbeat renews the lease.
(compat_tests/test_cluster_membership.py pauses a real leader process for the end-to-end case.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import BrokerHeartbeatRequest, ProduceRequest
from kafkapy.testing.local import LocalNode, open_cluster
from tests.server.cluster.controller_helpers import (
    active_controller,
    call,
    create_replicated,
    image_of,
    wait_until,
)
from tests.server.helpers import batch

pytestmark = pytest.mark.timeout(150)


def _produce(acks: int) -> ProduceRequest:
    return ProduceRequest(
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="leased",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"v"))],
            )
        ],
    )


def _code(answer: Any) -> ErrorCode:
    return ErrorCode(answer.responses[0].partition_responses[0].error_code)


async def _leader(nodes: list[LocalNode]) -> LocalNode:
    await create_replicated(nodes[0].broker_port, "leased", 1)
    await wait_until("a leader", lambda: image_of(nodes[0]).topics["leased"].partitions[0].leader >= 0)
    leader_id = image_of(nodes[0]).topics["leased"].partitions[0].leader
    leader = next(n for n in nodes if n.node_id == leader_id)
    await wait_until(
        "the leader knows it leads",
        lambda: leader.broker.replicas is not None and leader.broker.replicas.leader_role("leased", 0) is not None,
    )
    return leader


@pytest.mark.parametrize("lease", ["true", "false"])
async def test_a_leader_without_a_lease_refuses_writes_unless_the_lease_is_off(
    tmp_path: Path, lease: str
) -> None:
    with trio.fail_after(140):
        async with open_cluster(tmp_path, 3, overrides={"kafkapy.leader.lease.enable": lease}) as nodes:
            leader = await _leader(nodes)
            lifecycle = leader.broker.cluster.lifecycle  # type: ignore[union-attr]
            assert _code(await call(leader.broker_port, ApiKey.PRODUCE, 9, _produce(1))) is ErrorCode.NONE
            # no heartbeat reaches the controller any more (one in flight may still land) ...
            async def silent() -> None:
                return None

            lifecycle.heartbeat = silent
            await trio.sleep(2 * lifecycle.heartbeat_interval_s + 0.5)
            # ... and its last unfenced answer is older than a session
            lifecycle.lease_from -= 2 * lifecycle.session_timeout_s
            expected = ErrorCode.NOT_LEADER_OR_FOLLOWER if lease == "true" else ErrorCode.NONE
            for acks in (1, -1):
                assert _code(await call(leader.broker_port, ApiKey.PRODUCE, 9, _produce(acks))) is expected
            # the next answered heartbeat renews it
            del lifecycle.heartbeat
            lifecycle.wake()
            await wait_until("the lease renewed", lifecycle.holds_lease)
            assert _code(await call(leader.broker_port, ApiKey.PRODUCE, 9, _produce(1))) is ErrorCode.NONE


async def test_a_controller_out_of_touch_with_its_quorum_renews_no_lease(tmp_path: Path) -> None:
    """The active controller whose voters last confirmed hearing from it a while ago (resumed
    after a pause, or cut off) answers heartbeats NOT_CONTROLLER - before its check-quorum
    step-down runs, which is held back here by holding its Raft lock as a paused process's late
    timer would. Its answer would renew a broker's lease from a state a successor may have
    replaced."""
    with trio.fail_after(140):
        async with open_cluster(tmp_path, 3) as nodes:
            controller = active_controller(nodes)
            cluster: Any = controller.broker.cluster
            raft = cluster.raft
            request = BrokerHeartbeatRequest(
                broker_id=controller.node_id,
                broker_epoch=cluster.lifecycle.broker_epoch,
                current_metadata_offset=2**31 - 1,
            )
            answer = await call(controller.controller_port, ApiKey.BROKER_HEARTBEAT, 1, request)
            assert (ErrorCode(answer.error_code), answer.is_fenced) == (ErrorCode.NONE, False)
            async with raft._lock:  # no fetch, no tick gets in
                stale = int(trio.current_time() * 1000) - 10 * cluster.config.fetch_timeout_ms
                for progress in raft.core._role_state.progress.values():
                    progress.confirmed_ms = stale
                assert raft.is_leader
                answer = await call(controller.controller_port, ApiKey.BROKER_HEARTBEAT, 1, request)
                assert ErrorCode(answer.error_code) is ErrorCode.NOT_CONTROLLER
