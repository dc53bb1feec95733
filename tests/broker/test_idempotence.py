"""Idempotent producers: producer ids, duplicate suppression, sequence errors, restarts."""

from __future__ import annotations

import time
from pathlib import Path

import trio

from kafkapy.broker.idempotence import ProducerStates
from kafkapy.coordinator.idempotence.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    DescribeProducersRequest,
    InitProducerIdRequest,
    ProduceRequest,
)
from kafkapy.protocol.records import Record, build_batch, build_control_batch
from kafkapy.storage import PartitionLog
from tests.server.helpers import Client, create_topic, running_broker


def pid_batch(pid: int, epoch: int, seq: int, *values: bytes) -> bytes:
    records = [Record(i, 0, None, v, []) for i, v in enumerate(values)]
    return build_batch(records, base_timestamp=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def produce(topic: str, records: bytes) -> ProduceRequest:
    return ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])


async def test_producer_ids_are_unique_across_restarts(tmp_path: Path) -> None:
    """The ids come from the node's controller (ProducerIdsRecord blocks in its metadata log):
    a restart never hands out an id of a block handed out before."""
    init = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000)
    seen: list[int] = []
    for _ in range(3):
        async with running_broker(tmp_path) as (_, _, port):
            client = await Client.connect(port)
            for _ in range(3):
                answer = await client.request(ApiKey.INIT_PRODUCER_ID, 4, init)
                assert answer.error_code == 0
                seen.append(answer.producer_id)
            await client.aclose()
    assert len(set(seen)) == len(seen) == 9
    assert seen == sorted(seen)


async def test_init_producer_id_and_sequence_rules(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, _, port):
        await create_topic(port, "idem", 1)
        client = await Client.connect(port)
        init = await client.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000))
        assert (init.error_code, init.producer_epoch) == (0, 0)
        pid = init.producer_id
        other = await client.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(transactional_id=None))
        assert other.producer_id != pid

        async def send(records: bytes) -> tuple[int, int]:
            p = (await client.request(ApiKey.PRODUCE, 9, produce("idem", records))).responses[0].partition_responses[0]
            return int(p.error_code), p.base_offset

        assert await send(pid_batch(pid, 0, 0, b"a", b"b")) == (0, 0)
        assert await send(pid_batch(pid, 0, 2, b"c")) == (0, 2)
        # a retry of the first batch: answered with its offset, not written again
        assert await send(pid_batch(pid, 0, 0, b"a", b"b")) == (0, 0)
        plog = broker.partition_log("idem", 0)
        assert plog is not None
        assert plog.log_end_offset == 3
        # a gap in the sequence
        code, _ = await send(pid_batch(pid, 0, 7, b"x"))
        assert code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        # a producer id that never wrote must start at sequence 0
        code, _ = await send(pid_batch(other.producer_id, 0, 5, b"y"))
        assert code == ErrorCode.UNKNOWN_PRODUCER_ID
        assert plog.log_end_offset == 3
        # transactional ids are served by the transaction coordinator: tests/broker/test_transactions*.py
    # after a clean restart (snapshot) the retry is still recognised and the sequence continues
    async with running_broker(tmp_path) as (_, _, port):
        client = await Client.connect(port)
        p = (await client.request(ApiKey.PRODUCE, 9, produce("idem", pid_batch(pid, 0, 2, b"c")))).responses[0].partition_responses[0]
        assert (p.error_code, p.base_offset) == (0, 2)
        p = (await client.request(ApiKey.PRODUCE, 9, produce("idem", pid_batch(pid, 0, 3, b"d")))).responses[0].partition_responses[0]
        assert (p.error_code, p.base_offset) == (0, 3)


async def test_state_is_rebuilt_from_the_log_without_a_snapshot(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, _, port):
        await create_topic(port, "replay", 1)
        client = await Client.connect(port)
        pid = (await client.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest())).producer_id
        await client.request(ApiKey.PRODUCE, 9, produce("replay", pid_batch(pid, 0, 0, b"a")))
        plog = broker.partition_log("replay", 0)
        assert plog is not None
        plog.delete_producer_snapshots()
        broker.producer_states.forget_topic("replay")  # as after a crash: only the log is left
        p = (await client.request(ApiKey.PRODUCE, 9, produce("replay", pid_batch(pid, 0, 0, b"a")))).responses[0].partition_responses[0]
        assert (p.error_code, p.base_offset) == (0, 0)
        assert plog.log_end_offset == 1


async def test_idle_producers_expire() -> None:
    async with running_broker(None, **{"producer.id.expiration.ms": "1"}) as (broker, _, port):
        await create_topic(port, "exp", 1)
        client = await Client.connect(port)
        pid = (await client.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest())).producer_id
        await client.request(ApiKey.PRODUCE, 9, produce("exp", pid_batch(pid, 0, 0, b"a")))
        assert broker.producer_states.expire(int(time.time() * 1000) + 10_000) == 1
        # forgotten: the next batch must start over at sequence 0
        p = (await client.request(ApiKey.PRODUCE, 9, produce("exp", pid_batch(pid, 0, 1, b"b")))).responses[0].partition_responses[0]
        assert p.error_code == ErrorCode.UNKNOWN_PRODUCER_ID


async def test_only_the_periodic_sweep_expires_producer_state() -> None:
    """`producer.id.expiration.check.interval.ms` drives the sweep: state idle past
    `producer.id.expiration.ms` survives until the sweep runs (no expiry inside an append),
    and is gone after it."""
    settings = {"producer.id.expiration.ms": "50", "producer.id.expiration.check.interval.ms": "3600000"}
    async with running_broker(None, **settings) as (_, _, port):
        await create_topic(port, "sweep", 1)
        client = await Client.connect(port)
        pid = (await client.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest())).producer_id
        await client.request(ApiKey.PRODUCE, 9, produce("sweep", pid_batch(pid, 0, 0, b"a")))
        await trio.sleep(0.2)  # idle longer than the expiration; no sweep for an hour
        p = (await client.request(ApiKey.PRODUCE, 9, produce("sweep", pid_batch(pid, 0, 1, b"b")))).responses[0].partition_responses[0]
        assert p.error_code == ErrorCode.NONE
    settings["producer.id.expiration.check.interval.ms"] = "20"
    async with running_broker(None, **settings) as (broker, _, port):
        await create_topic(port, "sweep", 1)
        client = await Client.connect(port)
        pid = (await client.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest())).producer_id
        await client.request(ApiKey.PRODUCE, 9, produce("sweep", pid_batch(pid, 0, 0, b"a")))
        state = broker.producer_states.loaded(("sweep", 0), broker.partition_log("sweep", 0))  # type: ignore[arg-type]
        assert state is not None
        with trio.fail_after(20):  # the sweep runs every 20 ms: poll for its effect
            while state.producers:  # noqa: ASYNC110
                await trio.sleep(0.02)
        p = (await client.request(ApiKey.PRODUCE, 9, produce("sweep", pid_batch(pid, 0, 1, b"b")))).responses[0].partition_responses[0]
        assert p.error_code == ErrorCode.UNKNOWN_PRODUCER_ID


async def test_describe_producers_lists_active_producers() -> None:
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "desc", 1)
        client = await Client.connect(port)
        pid = (await client.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest())).producer_id
        await client.request(ApiKey.PRODUCE, 9, produce("desc", pid_batch(pid, 0, 0, b"a", b"b", b"c")))
        req = DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(name="desc", partition_indexes=[0, 9])])
        resp = await client.request(ApiKey.DESCRIBE_PRODUCERS, 0, req)
        ok, missing = resp.topics[0].partitions
        assert [(p.producer_id, p.producer_epoch, p.last_sequence) for p in ok.active_producers] == [(pid, 0, 2)]
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def _replicated(base_offset: int, seq: int, count: int, *, pid: int = 9, transactional: bool = False) -> bytes:
    records = [Record(i, 0, None, b"r", []) for i in range(count)]
    return build_batch(records, base_offset=base_offset, base_timestamp=int(time.time() * 1000),
                       producer_id=pid, producer_epoch=0, base_sequence=seq,
                       is_transactional=transactional, partition_leader_epoch=0)


async def test_a_follower_state_follows_replicated_appends_and_reloads_after_truncation(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    states = ProducerStates(DEFAULT_PRODUCER_ID_EXPIRATION_MS)
    key = ("t", 0)
    first = _replicated(0, 0, 2)
    plog.append_as_follower(first)
    assert states.on_replicated(key, plog, first)  # not loaded yet: the caller loads it
    mgr = await states.get(key, plog)
    assert mgr.entry(9).last_seq == 1  # type: ignore[union-attr]
    second = _replicated(2, 2, 3)
    plog.append_as_follower(second)
    assert not states.on_replicated(key, plog, second)  # loaded: replayed at once
    assert mgr.entry(9).last_seq == 4  # type: ignore[union-attr]
    assert mgr.last_map_offset == plog.log_end_offset == 5
    plog.truncate_to(2)  # a diverged follower cuts the leader's uncommitted tail
    assert states.loaded(key, plog) is None
    reloaded = await states.get(key, plog)
    assert reloaded.entry(9).last_seq == 1  # type: ignore[union-attr]


async def test_a_follower_indexes_replicated_aborts_and_tracks_open_transactions(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    states = ProducerStates(DEFAULT_PRODUCER_ID_EXPIRATION_MS)
    key = ("t", 0)
    plog.append_as_follower(_replicated(0, 0, 1, pid=3))
    mgr = await states.get(key, plog)
    opened = _replicated(1, 0, 2, transactional=True)
    plog.append_as_follower(opened)
    states.on_replicated(key, plog, opened)
    assert mgr.ongoing_transactions() == {9: 1}
    marker = bytearray(build_control_batch(False, producer_id=9, producer_epoch=0, coordinator_epoch=0,
                                           timestamp_ms=int(time.time() * 1000)))
    marker[:8] = (3).to_bytes(8, "big")  # base offset 3 (outside the CRC)
    plog.append_as_follower(bytes(marker))
    states.on_replicated(key, plog, bytes(marker))
    assert mgr.ongoing_transactions() == {}
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in plog.aborted_transactions(0, 4)] == [(9, 1, 3)]


async def test_one_replicated_append_may_open_abort_and_reopen_a_transaction(tmp_path: Path) -> None:
    plog = PartitionLog(tmp_path / "t-0")
    states = ProducerStates(DEFAULT_PRODUCER_ID_EXPIRATION_MS)
    key = ("t", 0)
    plog.append_as_follower(_replicated(0, 0, 1, pid=3))
    mgr = await states.get(key, plog)
    marker = bytearray(build_control_batch(False, producer_id=9, producer_epoch=0, coordinator_epoch=0,
                                           timestamp_ms=int(time.time() * 1000)))
    marker[:8] = (3).to_bytes(8, "big")
    data = (_replicated(1, 0, 2, transactional=True) + bytes(marker)
            + _replicated(4, 2, 1, transactional=True))
    plog.append_as_follower(data)
    assert not states.on_replicated(key, plog, data)
    assert mgr.ongoing_transactions() == {9: 4}
    assert [(a.producer_id, a.first_offset, a.last_offset) for a in plog.aborted_transactions(0, 5)] == [(9, 1, 3)]
    assert mgr.entry(9).last_seq == 2  # type: ignore[union-attr]
    assert mgr.last_map_offset == 5
