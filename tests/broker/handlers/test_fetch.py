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
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.broker.context import ConnectionState, RequestContext
from kafkapy.broker.handlers.fetch import handle_fetch
from kafkapy.broker.partitions import LeaderPartition
from kafkapy.broker.replica_selector import RACK_AWARE_SELECTOR
from kafkapy.protocol import ApiKey, RequestHeader, decode_response
from kafkapy.protocol.messages import FetchRequest
from kafkapy.protocol.raw_response import SENDFILE_MIN_BYTES, FileRegion
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


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(1, 2 * SENDFILE_MIN_BYTES), min_size=1, max_size=6),
    offset_at=st.floats(0, 1),
    partition_max_bytes=st.integers(0, 3 * SENDFILE_MIN_BYTES),
)
def test_a_consumer_is_answered_the_log_bytes_whatever_their_size(
    tmp_path: Path, sizes: list[int], offset_at: float, partition_max_bytes: int
) -> None:
    """A consumer's Fetch carries exactly the whole batches the log holds from its offset
    (at least one: KIP-74), whether the answer copies them (below SENDFILE_MIN_BYTES) or
    sends them from the segment file; nothing at all when its partition max bytes is 0."""

    async def check(data_dir: Path) -> None:
        broker = build_node(data_dir, node_settings(1, data_dir)).broker
        try:
            publish(broker, _racked_image((1, 2)))
            lp = broker.partitions.leader("t", 0)
            assert isinstance(lp, LeaderPartition)
            for size in sizes:
                lp.log.append(batch(b"v" * size), now_ms=int(time.time() * 1000))
            end = lp.log.log_end_offset
            broker.partitions.follower_fetch(lp, 2, end, -1, 0, report=True)
            offset = int(offset_at * (end - 1))
            req = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_epoch=-1, topics=[
                FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchPartition(
                    partition=0, fetch_offset=offset, partition_max_bytes=partition_max_bytes)])])
            [part] = (await _answer(broker.ports, req)).responses[0].partitions
            expected = lp.log.read_bytes(offset, partition_max_bytes, max_offset=end) if partition_max_bytes else b""
            assert (part.error_code, part.high_watermark, bytes(part.records or b"")) == (0, end, expected)
        finally:
            broker.close()

    with tempfile.TemporaryDirectory(dir=tmp_path) as d:
        trio.run(check, Path(d))
