"""Fetch handler: what a leader answers a consumer in another rack (KIP-392) inside a fetch
session (KIP-227).

What users rely on: a consumer that asks the leader again - kafka-python 3.0 forgets its
preferred read replica whenever a follower answers without naming one, so it comes back to the
leader after every read from the follower - is told the follower again on every fetch, even
when nothing else about the partition changed since the session last reported it. Left out of
the incremental answer, the consumer kept asking the leader (which answers such a fetch at once)
and never read the rest of the partition.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.broker.context import ConnectionState, RequestContext
from kafkapy.broker.handlers.fetch import handle_fetch
from kafkapy.broker.partitions import LeaderPartition
from kafkapy.broker.replica_selector import RACK_AWARE_SELECTOR
from kafkapy.protocol import ApiKey, RequestHeader, decode_response
from kafkapy.protocol.messages import FetchRequest
from kafkapy.protocol.raw_response import FileRegion
from kafkapy.server.zerocopy import close_fds, read_region
from tests.broker.test_partitions import _racked_image, publish
from tests.server.cluster.replication_helpers import node_settings
from tests.server.helpers import batch, build_node

pytestmark = pytest.mark.timeout(60)

FETCH_V = 12  # kafka-python 3.0's newest Fetch


def _consumer_fetch(offset: int, session_id: int, epoch: int, *, send_partition: bool) -> FetchRequest:
    """A rack-b consumer's fetch of t-0; an incremental one names the partition only when its
    fetch offset changed, as clients send them."""
    parts = [FetchRequest.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)]
    return FetchRequest(
        max_wait_ms=500, min_bytes=1, max_bytes=1 << 20, session_id=session_id, session_epoch=epoch,
        topics=[FetchRequest.FetchTopic(topic="t", partitions=parts)] if send_partition else [],
        rack_id="b",
    )


async def _answer(ports: Any, req: FetchRequest) -> Any:
    ctx = RequestContext(ports, RequestHeader(ApiKey.FETCH, FETCH_V, 1, "kafka-python"),
                         ConnectionState("PLAINTEXT", "test"), 0)
    raw = await handle_fetch(ctx, req)
    try:
        body = b"".join(read_region(s) if isinstance(s, FileRegion) else bytes(s) for s in raw.segments)
    finally:
        close_fds(raw.fds())
    return decode_response(ApiKey.FETCH, FETCH_V, struct.pack(">i", 1) + b"\x00" + body)[1]


def test_the_leader_names_the_preferred_replica_in_every_incremental_answer(tmp_path: Path) -> None:
    async def check() -> None:
        settings = node_settings(1, tmp_path, **{"replica.selector.class": RACK_AWARE_SELECTOR})
        broker = build_node(tmp_path, settings).broker
        try:
            publish(broker, _racked_image((1, 2)))  # node 1 (rack a) leads t-0, node 2 is rack b
            lp = broker.partitions.leader("t", 0)
            assert isinstance(lp, LeaderPartition)
            lp.log.append(batch(b"a", b"b"), now_ms=int(time.time() * 1000))
            broker.partitions.follower_fetch(lp, 2, 2, -1, 0, report=True)  # node 2 has both
            assert lp.high_watermark == 2

            full = await _answer(broker.ports, _consumer_fetch(0, 0, 0, send_partition=True))
            [part] = full.responses[0].partitions
            assert (part.preferred_read_replica, bytes(part.records or b"")) == (2, b"")
            session = full.session_id
            assert session > 0

            # the consumer read offset 0 from node 2, forgot node 2 and asks here at offset 1
            moved = await _answer(broker.ports, _consumer_fetch(1, session, 1, send_partition=True))
            assert [p.preferred_read_replica for t in moved.responses for p in t.partitions] == [2]
            # and again at the same offset: nothing else changed, the answer is the same
            again = await _answer(broker.ports, _consumer_fetch(1, session, 2, send_partition=False))
            assert [p.preferred_read_replica for t in again.responses for p in t.partitions] == [2]
        finally:
            broker.close()

    trio.run(check)
