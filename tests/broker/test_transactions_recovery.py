"""Producer state across segment rolls and damaged snapshots: a roll writes a snapshot (so a
crash replays about one segment), and a damaged newest snapshot falls back to an older one plus
replay - the producer's retries and open transaction are still known after the restart."""

from __future__ import annotations

from pathlib import Path

import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.messages import InitProducerIdRequest
from kafkapy.protocol.records import Record, build_batch
from tests.broker.test_idempotence import pid_batch, produce
from tests.broker.test_transactions import TXN_SETTINGS, Txn, fetch, latest
from tests.server.helpers import Client, create_topic, running_broker


async def test_roll_snapshots_and_damaged_snapshot_fallback(tmp_path: Path) -> None:
    with trio.fail_after(90):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (broker, _, port):
            await create_topic(port, "s", 1, {"segment.bytes": "1024"})
            c = await Client.connect(port)
            tx = Txn(c, "tx-s")
            assert await tx.init() == E.NONE
            for i in range(6):  # committed transactions across several segments
                assert await tx.add("s") == E.NONE
                assert (await tx.send("s", b"v%d" % i + b"x" * 300))[0] == E.NONE
                assert (await tx.end(True)).error_code == E.NONE
            assert await tx.add("s") == E.NONE
            assert (await tx.send("s", b"open"))[0] == E.NONE
            plog = broker.partition_log("s", 0)
            assert plog is not None
            assert len(plog.segments) > 2
            rolled = sorted((tmp_path / "s-0").glob("*.snapshot"))
            assert rolled, "no snapshot at segment roll"
            await c.aclose()
        snapshots = sorted((tmp_path / "s-0").glob("*.snapshot"))
        assert len(snapshots) >= 2
        snapshots[-1].write_bytes(b"KPPS garbage")  # the newest is damaged
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            c = await Client.connect(port)
            open_at = 12  # 6 x (data + marker)
            assert await latest(c, "s", committed=True) == open_at
            values, _ = await fetch(c, "s", committed=True)
            assert values[:1] == [b"v0" + b"x" * 300]
            # the sequence and the open transaction continue where they were: the state survived
            tx.c = c
            tx.seq -= 1  # a retry of the open transaction's batch: answered with its offset
            assert await tx.send("s", b"open") == (E.NONE, open_at)
            assert (await tx.send("s", b"more"))[0] == E.NONE
            assert (await tx.end(True)).error_code == E.NONE
            assert await latest(c, "s", committed=True) == open_at + 3
            await c.aclose()


async def test_producer_state_survives_retention_past_its_batches(tmp_path: Path) -> None:
    """An idempotent producer wrote, the broker restarted, later retention removed every segment
    holding its batches (and would drop snapshots below the log start) while its state was not
    loaded: after another restart the producer's retry is still recognised and its sequence
    continues (the issue's "survives retention")."""
    with trio.fail_after(90):
        async with running_broker(tmp_path) as (_, _, port):
            await create_topic(port, "ret", 1, {"segment.bytes": "1024"})
            c = await Client.connect(port)
            init = await c.request(ApiKey.INIT_PRODUCER_ID, 4,
                                   InitProducerIdRequest(transactional_id=None))
            pid = init.producer_id
            p = (await c.request(ApiKey.PRODUCE, 9, produce("ret", pid_batch(pid, 0, 0, b"once")))).responses[0]
            assert p.partition_responses[0].error_code == E.NONE
            await c.aclose()
        async with running_broker(tmp_path) as (broker, _, port):
            plog = broker.partition_log("ret", 0)
            assert plog is not None
            for i in range(12):  # plain data, several segments
                plog.append(build_batch([Record(0, 0, None, b"p" * 300, [])], base_timestamp=i),
                            now_ms=i + 1)
                broker.after_append("ret", 0, plog)
            assert len(plog.segments) > 3
            plog.delete_records_before(plog.segments[-2].base_offset)
            await broker.run_maintenance("retention")
            assert plog.log_start_offset > 1
        async with running_broker(tmp_path) as (_, _, port):
            c = await Client.connect(port)
            retry = (await c.request(ApiKey.PRODUCE, 9, produce("ret", pid_batch(pid, 0, 0, b"once")))).responses[0]
            assert (retry.partition_responses[0].error_code, retry.partition_responses[0].base_offset) == (E.NONE, 0)
            nxt = (await c.request(ApiKey.PRODUCE, 9, produce("ret", pid_batch(pid, 0, 1, b"next")))).responses[0]
            assert nxt.partition_responses[0].error_code == E.NONE
            await c.aclose()
