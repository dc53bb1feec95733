"""The replica fetcher: only whole batches reach append_as_follower; applying a response wakes
the consumers' long polls on the follower replica."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import FetchRequest
from kafkapy.protocol.records import Record, build_batch, iter_batches
from kafkapy.server.cluster.replica_fetcher import whole_batches
from tests.server.cluster.replication_helpers import produce, running_cluster, wait_for
from tests.server.helpers import batch


def _batches(sizes: list[int]) -> tuple[bytes, list[int]]:
    """Concatenated batches with consecutive offsets, and the end position of each."""
    out = bytearray()
    ends = []
    offset = 0
    for n in sizes:
        records = [Record(offset_delta=i, timestamp_delta=0, key=None, value=b"v" * (i + 1), headers=[])
                   for i in range(n)]
        out += build_batch(records, base_offset=offset, base_timestamp=1_700_000_000_000)
        offset += n
        ends.append(len(out))
    return bytes(out), ends


@settings(max_examples=60)
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=6), cut=st.integers(0, 10_000))
def test_a_cut_response_keeps_exactly_the_complete_batches(sizes: list[int], cut: int) -> None:
    data, ends = _batches(sizes)
    cut = min(cut, len(data))
    kept = bytes(whole_batches(data[:cut]))
    complete = [e for e in ends if e <= cut]
    assert len(kept) == (complete[-1] if complete else 0)
    assert kept == data[: len(kept)]
    assert len(list(iter_batches(kept))) == len(complete)


def test_whole_input_is_returned_as_it_is() -> None:
    data, _ = _batches([2, 3])
    assert whole_batches(data) is data


@given(garbage=st.binary(max_size=200))
def test_garbage_never_raises(garbage: bytes) -> None:
    kept = whole_batches(garbage)
    assert len(kept) <= len(garbage)


@pytest.mark.timeout(120)
async def test_a_consumers_long_poll_on_a_follower_wakes_when_its_high_watermark_moves(tmp_path: Path) -> None:
    """KIP-392: a consumer reading a follower replica waits (max_wait_ms) for records below the
    follower's high watermark; replication moving that high watermark answers it at once. The
    fetch waits up to 10 minutes, so only the wake-up answers it inside the test's minute."""
    with trio.fail_after(60):
        async with running_cluster(tmp_path, count=2) as (controller, nodes):
            controller.create_topic("t", rf=2)
            leader_id = controller.image.topics["t"].partitions[0].leader
            follower = nodes[3 - leader_id]
            producer = await nodes[leader_id].client()
            assert (await produce(producer, "t", batch(b"first"))).error_code == ErrorCode.NONE
            copy = follower.broker.logs.get("t", 0)
            assert copy is not None
            await wait_for(lambda: copy.high_watermark == 1, what="the follower's high watermark")
            consumer = await follower.client()
            request = FetchRequest(max_wait_ms=600_000, min_bytes=1, max_bytes=1 << 20, session_epoch=-1, topics=[
                FetchRequest.FetchTopic(topic="t", partitions=[FetchRequest.FetchPartition(
                    partition=0, fetch_offset=1, partition_max_bytes=1 << 20,
                )])
            ])
            answers: list[Any] = []

            async def long_poll() -> None:
                answers.append(await consumer.request(ApiKey.FETCH, 12, request))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(long_poll)
                await wait_for(lambda: follower.broker.waiters.waiting_count() > 0, what="the long poll")
                assert (await produce(producer, "t", batch(b"second"))).error_code == ErrorCode.NONE
            part = answers[0].responses[0].partitions[0]
            assert part.error_code == ErrorCode.NONE
            assert part.high_watermark == 2
            records = bytes(part.records)
            assert b"second" in records
            assert b"first" not in records
            await consumer.aclose()
            await producer.aclose()
