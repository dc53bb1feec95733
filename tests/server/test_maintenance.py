"""The server's maintenance loop paces the kernel's writeback of produced bytes, so a heavy
produce does not leave a gigabyte of dirty pages to stall the event loop's file work later."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.messages import ProduceRequest
from kafkapy.protocol.records import Record, build_batch
from kafkapy.storage.writeback import PAGE_SIZE, WRITEBACK_SUPPORTED

from .helpers import Client, create_topic, running_broker

pytestmark = pytest.mark.skipif(not WRITEBACK_SUPPORTED, reason="no sync_file_range here")


def _produce(topic: str, value: bytes, count: int) -> ProduceRequest:
    batch = build_batch([Record(i, 0, None, value, []) for i in range(count)], base_timestamp=1)
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])


async def test_produced_bytes_are_handed_to_writeback_soon(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path) as (broker, _, port):
            await create_topic(port, "wb", 1)
            c = await Client.connect(port)
            for _ in range(3):  # 3 x ~1 MiB through the real produce path
                resp = await c.request(ApiKey.PRODUCE, 9, _produce("wb", b"w" * 1024, 1000))
                assert resp.responses[0].partition_responses[0].error_code == E.NONE
            await c.aclose()
            plog = broker.partition_log("wb", 0)
            assert plog is not None
            active = plog.segments[-1]
            assert active.size > 3_000_000
            for _ in range(200):  # the loop runs every 0.25 s; bounded wait
                if active.written_back == active.size - active.size % PAGE_SIZE:
                    break
                await trio.sleep(0.05)
            assert active.written_back == active.size - active.size % PAGE_SIZE
            # and the data reads back as written
            assert plog.log_end_offset == 3000
