"""Transactions through the real server (raw protocol client, in-process broker, real sockets):
the coordinator runtime, markers, last stable offset, read_committed reads, verification,
fencing, timeouts and restarts."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.broker import txn_markers
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode as E
from kafkapy.protocol.messages import (
    AddPartitionsToTxnRequest,
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    EndTxnRequest,
    FetchRequest,
    InitProducerIdRequest,
    ListOffsetsRequest,
    ListTransactionsRequest,
    ProduceRequest,
    WriteTxnMarkersRequest,
)
from kafkapy.protocol.records import Record, build_batch, decode_records, iter_batches
from tests.server.helpers import (
    IO_TIMEOUT_S,
    TRANSACTION_KEY,
    Client,
    create_topic,
    find_coordinator,
    running_broker,
)

TXN_SETTINGS = {"transaction.state.log.num.partitions": "2"}
RETRIED_BY_CLIENTS = {
    E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR,
}


def txn_batch(pid: int, epoch: int, seq: int, *values: bytes, transactional: bool = True) -> bytes:
    records = [Record(i, 0, None, v, []) for i, v in enumerate(values)]
    return build_batch(records, base_timestamp=int(time.time() * 1000), producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, is_transactional=transactional)


class Txn:
    """A transactional producer speaking the v1 protocol by hand."""

    def __init__(self, client: Client, tid: str, timeout_ms: int = 60_000) -> None:
        self.c, self.tid, self.timeout_ms = client, tid, timeout_ms
        self.pid, self.epoch, self.seq = -1, -1, 0

    async def init(self, version: int = 4, *, look_up: bool = True) -> int:
        """FindCoordinator, then InitProducerId, retrying what a client retries (the coordinator
        still loading, a previous transaction still completing); the error code it ends with.
        `look_up=False`: InitProducerId alone, retried only while a transaction completes (to see
        what this broker answers when it does not coordinate the id)."""
        retried = RETRIED_BY_CLIENTS if look_up else {E.CONCURRENT_TRANSACTIONS}
        code = int(E.REQUEST_TIMED_OUT)
        with trio.move_on_after(IO_TIMEOUT_S):
            while True:
                if look_up:
                    await find_coordinator(self.c, self.tid, TRANSACTION_KEY)
                r = await self.c.request(ApiKey.INIT_PRODUCER_ID, version, InitProducerIdRequest(
                    transactional_id=self.tid, transaction_timeout_ms=self.timeout_ms))
                code = int(r.error_code)
                if code not in retried:
                    break
                await trio.sleep(0.02)
        if code == E.NONE:
            self.pid, self.epoch, self.seq = r.producer_id, r.producer_epoch, 0
        return code

    async def add(self, topic: str, partition: int = 0) -> int:
        r = await self.c.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.pid,
            v3_and_below_producer_epoch=self.epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                name=topic, partitions=[partition])]))
        return int(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)

    async def send(self, topic: str, *values: bytes, epoch: int | None = None) -> tuple[int, int]:
        req = ProduceRequest(transactional_id=self.tid, acks=-1, timeout_ms=1000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=0, records=txn_batch(
                    self.pid, self.epoch if epoch is None else epoch, self.seq, *values))])])
        p = (await self.c.request(ApiKey.PRODUCE, 9, req)).responses[0].partition_responses[0]
        if p.error_code == E.NONE:
            self.seq += len(values)
        return int(p.error_code), p.base_offset

    async def end(self, commit: bool, version: int = 3, epoch: int | None = None) -> Any:
        return await self.c.request(ApiKey.END_TXN, version, EndTxnRequest(
            transactional_id=self.tid, producer_id=self.pid,
            producer_epoch=self.epoch if epoch is None else epoch, committed=commit))


async def fetch(c: Client, topic: str, committed: bool) -> tuple[list[bytes], Any]:
    """Values of data records (control batches skipped, as clients do) and the partition."""
    r = await c.request(ApiKey.FETCH, 11, FetchRequest(
        max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=1 if committed else 0,
        session_epoch=-1, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    part = r.responses[0].partitions[0]
    data = bytes(part.records or b"")
    aborted = {(a.producer_id, a.first_offset) for a in (part.aborted_transactions or [])}
    values: list[bytes] = []
    skipping: set[int] = set()
    for pos, h in iter_batches(data):
        if h.is_control:
            skipping.discard(h.producer_id)
            continue
        if committed and h.is_transactional and (h.producer_id, h.base_offset) in aborted:
            skipping.add(h.producer_id)
        if h.producer_id in skipping:
            continue
        values += [r.value or b"" for r in decode_records(data, pos, h)]
    return values, part


async def latest(c: Client, topic: str, committed: bool) -> int:
    r = await c.request(ApiKey.LIST_OFFSETS, 5, ListOffsetsRequest(
        replica_id=-1, isolation_level=1 if committed else 0, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]))
    return int(r.topics[0].partitions[0].offset)


async def test_commit_and_abort_visible_only_as_decided(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            await create_topic(port, "t", 1)
            c = await Client.connect(port)
            tx = Txn(c, "tx-a")
            assert await tx.init() == E.NONE
            # not added to the transaction: refused by verification, nothing written
            assert (await tx.send("t", b"early"))[0] == E.INVALID_TXN_STATE
            assert await tx.add("t") == E.NONE
            assert await tx.send("t", b"c1", b"c2") == (E.NONE, 0)
            # open transaction: committed readers stop at its first offset
            assert await latest(c, "t", committed=True) == 0
            assert await latest(c, "t", committed=False) == 2
            assert (await fetch(c, "t", committed=True))[0] == []
            assert (await tx.end(True)).error_code == E.NONE
            assert await tx.add("t") == E.NONE
            assert (await tx.send("t", b"a1"))[0] == E.NONE
            assert (await tx.end(False)).error_code == E.NONE
            assert await tx.add("t") == E.NONE
            assert (await tx.send("t", b"c3"))[0] == E.NONE
            assert (await tx.end(True)).error_code == E.NONE
            values, part = await fetch(c, "t", committed=True)
            assert values == [b"c1", b"c2", b"c3"]
            assert [(a.producer_id, a.first_offset) for a in part.aborted_transactions] == [(tx.pid, 3)]
            assert part.last_stable_offset == part.high_watermark == 7  # 4 data + 3 markers
            assert (await fetch(c, "t", committed=False))[0] == [b"c1", b"c2", b"a1", b"c3"]
            # a retried v1 commit after completion is answered again; the other outcome is not
            assert (await tx.end(True)).error_code == E.NONE
            assert (await tx.end(False)).error_code == E.INVALID_TXN_STATE
            assert (await fetch(c, "t", committed=True))[0] == [b"c1", b"c2", b"c3"]
            d = await c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                DescribeTransactionsRequest(transactional_ids=["tx-a", "nope"]))
            states = {s.transactional_id: (s.error_code, s.transaction_state) for s in d.transaction_states}
            assert states == {"tx-a": (E.NONE, "CompleteCommit"),
                              "nope": (E.TRANSACTIONAL_ID_NOT_FOUND, "")}
            lt = await c.request(ApiKey.LIST_TRANSACTIONS, 1, ListTransactionsRequest(
                state_filters=["CompleteCommit", "Bogus"]))
            assert [t.transactional_id for t in lt.transaction_states] == ["tx-a"]
            assert lt.unknown_state_filters == ["Bogus"]
            await c.aclose()


async def test_zombie_is_fenced_and_its_open_transaction_aborted(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            await create_topic(port, "z", 1)
            c = await Client.connect(port)
            old = Txn(c, "tx-z")
            assert await old.init() == E.NONE
            assert await old.add("z") == E.NONE
            assert (await old.send("z", b"zombie"))[0] == E.NONE
            new = Txn(c, "tx-z")
            assert await new.init() == E.NONE  # aborts the open transaction first
            assert (new.pid, new.epoch) == (old.pid, old.epoch + 2)  # fence bump + new incarnation
            assert (await old.end(True)).error_code == E.PRODUCER_FENCED
            assert await old.add("z") == E.PRODUCER_FENCED
            # the abort marker carried the bumped epoch: the partition refuses the zombie too
            assert (await old.send("z", b"late"))[0] == E.INVALID_PRODUCER_EPOCH
            assert (await fetch(c, "z", committed=True))[0] == []
            values, part = await fetch(c, "z", committed=False)
            assert values == [b"zombie"]
            assert part.last_stable_offset == part.high_watermark
            await c.aclose()


async def test_transaction_past_its_timeout_is_aborted(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            await create_topic(port, "slow", 1)
            c = await Client.connect(port)
            tx = Txn(c, "tx-slow", timeout_ms=300)
            assert await tx.init() == E.NONE
            assert await tx.add("slow") == E.NONE
            assert (await tx.send("slow", b"never"))[0] == E.NONE
            assert await latest(c, "slow", committed=True) == 0
            for _ in range(100):  # the server's timer task aborts it
                if await latest(c, "slow", committed=True) == 2:
                    break
                await trio.sleep(0.05)
            assert await latest(c, "slow", committed=True) == 2  # data + abort marker
            assert (await fetch(c, "slow", committed=True))[0] == []
            assert (await tx.end(True)).error_code == E.PRODUCER_FENCED
            d = await c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                DescribeTransactionsRequest(transactional_ids=["tx-slow"]))
            assert d.transaction_states[0].transaction_state == "CompleteAbort"
            await c.aclose()


async def test_restart_mid_transaction_keeps_lso_then_completes(tmp_path: Path) -> None:
    """An open transaction survives a restart (coordinator state and the partition's LSO); the
    restarted producer's InitProducerId aborts it. A commit whose markers were written survives
    too, with the .txnindex rebuilt from the log when it was lost."""
    with trio.fail_after(90):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            await create_topic(port, "r", 1)
            c = await Client.connect(port)
            tx = Txn(c, "tx-r")
            assert await tx.init() == E.NONE
            assert await tx.add("r") == E.NONE
            assert (await tx.send("r", b"gone"))[0] == E.NONE
            assert (await tx.end(False)).error_code == E.NONE
            assert await tx.add("r") == E.NONE
            assert (await tx.send("r", b"kept"))[0] == E.NONE
            assert (await tx.end(True)).error_code == E.NONE
            assert await tx.add("r") == E.NONE
            assert (await tx.send("r", b"open"))[0] == E.NONE
            await c.aclose()
        # a crash that lost the index (and before any producer snapshot): both rebuilt from the log
        lost = [*(tmp_path / "r-0").glob("*.txnindex"), *(tmp_path / "r-0").glob("*.snapshot")]
        assert any(f.suffix == ".txnindex" for f in lost)
        for f in lost:
            f.unlink()
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            c = await Client.connect(port)
            assert await latest(c, "r", committed=True) == 4  # the open transaction's start
            values, part = await fetch(c, "r", committed=True)
            assert values == [b"kept"]
            assert [a.first_offset for a in part.aborted_transactions] == [0]
            assert list((tmp_path / "r-0").glob("*.txnindex"))
            d = await c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                DescribeTransactionsRequest(transactional_ids=["tx-r"]))
            assert d.transaction_states[0].transaction_state == "Ongoing"
            dp = await c.request(ApiKey.DESCRIBE_PRODUCERS, 0, DescribeProducersRequest(topics=[
                DescribeProducersRequest.TopicRequest(name="r", partition_indexes=[0])]))
            active = dp.topics[0].partitions[0].active_producers
            assert [(p.producer_id, p.current_txn_start_offset) for p in active] == [(tx.pid, 4)]
            again = Txn(c, "tx-r")
            assert await again.init() == E.NONE
            assert await latest(c, "r", committed=True) == 6
            assert (await fetch(c, "r", committed=True))[0] == [b"kept"]
            await c.aclose()


async def test_end_txn_v5_bumps_epoch_and_fences_a_late_end_txn(tmp_path: Path) -> None:
    """Transactions v2 (KIP-890 part 2): every EndTxn bumps the epoch, so a delayed EndTxn of
    the previous transaction cannot commit the next one (torn transaction)."""
    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            await create_topic(port, "v2", 1)
            c = await Client.connect(port)
            tx = Txn(c, "tx-v2")
            assert await tx.init(version=5) == E.NONE
            assert await tx.add("v2") == E.NONE
            assert (await tx.send("v2", b"one"))[0] == E.NONE
            first_epoch = tx.epoch
            r = await tx.end(True, version=5)
            assert (r.error_code, r.producer_id, r.producer_epoch) == (E.NONE, tx.pid, first_epoch + 1)
            # a retry of that EndTxn is recognised and answered again
            again = await tx.end(True, version=5)
            assert (again.error_code, again.producer_epoch) == (E.NONE, first_epoch + 1)
            tx.epoch, tx.seq = r.producer_epoch, 0
            assert await tx.add("v2") == E.NONE
            assert (await tx.send("v2", b"two"))[0] == E.NONE
            # the late EndTxn(abort) of transaction 1 (old epoch) cannot touch transaction 2
            late = await tx.end(False, version=5, epoch=first_epoch)
            assert late.error_code == E.PRODUCER_FENCED
            # nor can a late write of transaction 1: the marker carried the bumped epoch
            assert (await tx.send("v2", b"late", epoch=first_epoch))[0] == E.INVALID_PRODUCER_EPOCH
            assert (await tx.end(True, version=5)).error_code == E.NONE
            assert (await fetch(c, "v2", committed=True))[0] == [b"one", b"two"]
            await c.aclose()


async def test_write_txn_markers_from_the_wire(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            await create_topic(port, "m", 1)
            c = await Client.connect(port)
            tx = Txn(c, "tx-m")
            assert await tx.init() == E.NONE
            assert await tx.add("m") == E.NONE
            assert (await tx.send("m", b"x"))[0] == E.NONE
            W = WriteTxnMarkersRequest
            r = await c.request(ApiKey.WRITE_TXN_MARKERS, 1, W(markers=[W.WritableTxnMarker(
                producer_id=tx.pid, producer_epoch=tx.epoch, transaction_result=False,
                coordinator_epoch=0, topics=[W.WritableTxnMarkerTopic(name="m", partition_indexes=[0]),
                                             W.WritableTxnMarkerTopic(name="gone", partition_indexes=[0])])]))
            codes = [(t.name, p.error_code) for t in r.markers[0].topics for p in t.partitions]
            assert codes == [("m", E.NONE), ("gone", E.UNKNOWN_TOPIC_OR_PARTITION)]
            values, part = await fetch(c, "m", committed=True)
            assert values == []
            assert part.last_stable_offset == 2
            await c.aclose()


async def test_markers_interrupted_by_a_restart_are_resent_at_load(tmp_path: Path) -> None:
    """The coordinator wrote PrepareCommit but stopped before any marker (a crash between the
    two): the restarted broker loads `__transaction_state` at start-up, resends the markers and
    completes the commit without any client asking."""
    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (broker, _, port):
            await create_topic(port, "p", 1)
            c = await Client.connect(port)
            tx = Txn(c, "tx-p")
            assert await tx.init() == E.NONE
            assert await tx.add("p") == E.NONE
            assert (await tx.send("p", b"decided"))[0] == E.NONE
            driver = await broker.txn_coordinator.ready()
            coordinator = driver.coordinator_for("tx-p")  # of the partition of tx-p
            assert not isinstance(coordinator, E)
            prepared = driver.commit(coordinator.end_txn(
                "tx-p", tx.pid, tx.epoch, True, int(time.time() * 1000)), coordinator)
            assert prepared.written
            assert prepared.response.error == E.NONE
            assert await latest(c, "p", committed=True) == 0  # no marker yet
            await c.aclose()
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            c = await Client.connect(port)
            for _ in range(100):
                if await latest(c, "p", committed=True) == 2:
                    break
                await trio.sleep(0.05)
            assert (await fetch(c, "p", committed=True))[0] == [b"decided"]
            d = await c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                DescribeTransactionsRequest(transactional_ids=["tx-p"]))
            assert d.transaction_states[0].transaction_state == "CompleteCommit"
            await c.aclose()


async def test_txn_offset_commit_needs_add_offsets_and_lands_with_the_marker(tmp_path: Path) -> None:
    from kafkapy.protocol.messages import (
        AddOffsetsToTxnRequest,
        OffsetFetchRequest,
        TxnOffsetCommitRequest,
    )

    async def commit_offset(tx: Txn, offset: int) -> int:
        T = TxnOffsetCommitRequest
        r = await tx.c.request(ApiKey.TXN_OFFSET_COMMIT, 3, T(
            transactional_id=tx.tid, group_id="g", producer_id=tx.pid, producer_epoch=tx.epoch,
            generation_id=-1, member_id="", topics=[T.TxnOffsetCommitRequestTopic(
                name="in", partitions=[T.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset)])]))
        return int(r.topics[0].partitions[0].error_code)

    async def committed(c: Client) -> int:
        r = await c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(
            group_id="g", require_stable=True, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
                name="in", partition_indexes=[0])]))
        p = r.topics[0].partitions[0]
        return -2 if p.error_code else int(p.committed_offset)

    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            await create_topic(port, "in", 1)
            await create_topic(port, "out", 1)
            c = await Client.connect(port)
            tx = Txn(c, "tx-o")
            assert await tx.init() == E.NONE
            assert await tx.add("out") == E.NONE
            assert (await tx.send("out", b"derived"))[0] == E.NONE
            await find_coordinator(c, "g")
            # the group was never added to the transaction: refused, nothing pending
            assert await commit_offset(tx, 7) == E.INVALID_TXN_STATE
            assert await committed(c) == -1
            r = await c.request(ApiKey.ADD_OFFSETS_TO_TXN, 3, AddOffsetsToTxnRequest(
                transactional_id=tx.tid, producer_id=tx.pid, producer_epoch=tx.epoch, group_id="g"))
            assert r.error_code == E.NONE
            assert await commit_offset(tx, 7) == E.NONE
            assert await committed(c) == -2  # UNSTABLE_OFFSET_COMMIT until the marker
            assert (await tx.end(True)).error_code == E.NONE
            assert await committed(c) == 7  # the marker reached __consumer_offsets
            assert (await fetch(c, "out", committed=True))[0] == [b"derived"]
            await c.aclose()


async def test_idle_transactional_id_expires(tmp_path: Path) -> None:
    """`transactional.id.expiration.ms`: an id idle that long with no transaction running is
    forgotten by the timer task (a tombstone in __transaction_state); a new InitProducerId then
    starts it afresh with a new producer id."""
    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS,
                                  **{"transactional.id.expiration.ms": "300"}) as (_, _, port):
            c = await Client.connect(port)
            tx = Txn(c, "tx-idle")
            assert await tx.init() == E.NONE
            first_pid = tx.pid
            for _ in range(100):
                d = await c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                    DescribeTransactionsRequest(transactional_ids=["tx-idle"]))
                if d.transaction_states[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND:
                    break
                await trio.sleep(0.05)
            assert d.transaction_states[0].error_code == E.TRANSACTIONAL_ID_NOT_FOUND
            assert await tx.init() == E.NONE
            assert (tx.pid, tx.epoch) != (first_pid, 1)
            assert tx.epoch == 0
            await c.aclose()


async def test_a_marker_whose_write_failed_is_retried_by_the_timer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The partition's storage refuses the commit marker twice (e.g. a full disk); the marker
    channel sends it again (backing off from 50 ms) with no other request to wake it, and the
    transaction completes: the committed data becomes readable."""
    real = txn_markers.write_marker
    refusals = [E.KAFKA_STORAGE_ERROR, E.KAFKA_STORAGE_ERROR]

    async def failing(*args: Any) -> E:
        return refusals.pop() if refusals else await real(*args)

    monkeypatch.setattr(txn_markers, "write_marker", failing)
    with trio.fail_after(60):
        async with running_broker(tmp_path, **TXN_SETTINGS) as (_, _, port):
            await create_topic(port, "t", 1)
            c = await Client.connect(port)
            tx = Txn(c, "tx-retry")
            assert await tx.init() == E.NONE
            assert await tx.add("t") == E.NONE
            assert (await tx.send("t", b"kept"))[0] == E.NONE
            assert (await tx.end(True)).error_code == E.NONE  # decided
            for _ in range(1500):  # bounded: 30 s
                if (await fetch(c, "t", committed=True))[0] == [b"kept"]:
                    break
                await trio.sleep(0.02)
            assert (await fetch(c, "t", committed=True))[0] == [b"kept"]
            assert refusals == []
            await c.aclose()
