"""A cluster node whose data dir fails (a full disk) halts, as Kafka does when its last log dir
goes offline (3 in-process nodes, real sockets).

What users rely on: a leader left running on a full disk answered the batch that failed
KAFKA_STORAGE_ERROR and the producer's next batch, in flight behind it, with
OUT_OF_ORDER_SEQUENCE_NUMBER; librdkafka then bumps the producer epoch and resends everything it
has in flight with new sequence numbers, so batches that other leaders had appended were written
twice (15 duplicated values in a seed 8 chaos run). A node whose write fails with an I/O error
must stop serving at once, before that request is answered; its replicas take over. Here the
halt is recorded instead of ending the test process.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import trio

import kafkapy.storage.segment as segment
from kafkapy.protocol import ApiKey
from kafkapy.protocol.messages import ProduceRequest
from kafkapy.testing.local import open_cluster
from tests.server.cluster.controller_helpers import call, create_replicated, image_of, wait_until
from tests.server.helpers import batch

pytestmark = pytest.mark.timeout(150)


def _produce() -> ProduceRequest:
    return ProduceRequest(
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="full",
                partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"v"))],
            )
        ],
    )


async def test_a_write_failing_on_a_full_disk_halts_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with trio.fail_after(140):
        async with open_cluster(tmp_path, 3) as nodes:
            await create_replicated(nodes[0].broker_port, "full", 1)
            await wait_until("a leader", lambda: image_of(nodes[0]).topics["full"].partitions[0].leader >= 0)
            leader_id = image_of(nodes[0]).topics["full"].partitions[0].leader
            leader = next(n for n in nodes if n.node_id == leader_id)
            cluster: Any = leader.broker.cluster
            await wait_until(
                "the leader knows it leads",
                lambda: leader.broker.replicas is not None
                and leader.broker.replicas.leader_role("full", 0) is not None,
            )
            halted: list[str] = []
            cluster.halt = lambda: halted.append("halt")
            leader_dir = str(tmp_path / f"node{leader_id}")
            write_all = segment._write_all

            def full_disk(fd: int, data: Any, position: int) -> None:
                if os.readlink(f"/proc/self/fd/{fd}").startswith(leader_dir):
                    raise OSError(errno.ENOSPC, "No space left on device")
                write_all(fd, data, position)

            monkeypatch.setattr(segment, "_write_all", full_disk)
            await call(leader.broker_port, ApiKey.PRODUCE, 9, _produce())
            assert halted == ["halt"], "the node kept serving on a failed data dir"
