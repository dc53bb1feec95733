"""The server's maintenance loop paces the kernel's writeback of produced bytes, so a heavy
produce does not leave a gigabyte of dirty pages to stall the event loop's file work later, and
compacts on the cleaner's own schedule (`log.cleaner.backoff.ms`, as Kafka's cleaner threads),
not only at the minutes-apart retention check."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.messages import ProduceRequest
from kafkapy.protocol.records import Record, build_batch
from kafkapy.server.broker import Broker
from kafkapy.storage.writeback import PAGE_SIZE, WRITEBACK_SUPPORTED

from .helpers import Client, create_topic, running_broker, wait_until


def _produce(topic: str, value: bytes, count: int, key: bytes | None = None) -> ProduceRequest:
    batch = build_batch([Record(i, 0, key, value, []) for i in range(count)], base_timestamp=1)
    return ProduceRequest(acks=1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])


@pytest.mark.skipif(not WRITEBACK_SUPPORTED, reason="no sync_file_range here")
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


COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}


async def _overwrite_one_key(port: int, topic: str) -> None:
    """Eight batches rewriting one key: every batch fills a 4 KiB segment, so all but the
    active segment are cleanable and compaction keeps one record of the first seven."""
    await create_topic(port, topic, 1, COMPACTED)
    c = await Client.connect(port)
    for _ in range(8):
        resp = await c.request(ApiKey.PRODUCE, 9, _produce(topic, b"v" * 600, 8, key=b"k"))
        assert resp.responses[0].partition_responses[0].error_code == E.NONE
    await c.aclose()


def _records_before_active(broker: Broker, topic: str) -> int:
    plog = broker.partition_log(topic, 0)
    assert plog is not None
    return sum(h.records_count for seg in plog.segments[:-1] for _, h, _ in seg.batches())


async def test_compaction_runs_on_the_cleaner_backoff_not_the_retention_check(tmp_path: Path) -> None:
    # running_broker checks retention every 10 minutes; the cleaner must not wait for that
    with trio.fail_after(60):
        async with running_broker(tmp_path, **{"log.cleaner.backoff.ms": "100"}) as (broker, _, port):
            await _overwrite_one_key(port, "compacted")  # 7 x 8 records before the active segment
            await wait_until(lambda: _records_before_active(broker, "compacted") <= 8, "compaction")


async def test_a_disabled_cleaner_compacts_nothing(tmp_path: Path) -> None:
    overrides = {"log.cleaner.backoff.ms": "20", "log.cleaner.enable": "false"}
    with trio.fail_after(60):
        async with running_broker(tmp_path, **overrides) as (broker, _, port):
            await _overwrite_one_key(port, "kept")
            before = _records_before_active(broker, "kept")
            await trio.sleep(0.5)  # 25 backoffs of an enabled cleaner
            assert _records_before_active(broker, "kept") == before >= 7 * 8
