"""Per-partition coordinators (cluster mode's design) on one real node: the group and
transaction drivers in partitioned mode, where leadership of each internal-topic partition
arrives and leaves through the role-listener calls the data plane makes in a cluster.

What users rely on: a group or transactional id whose partition this broker does not lead is
answered NOT_COORDINATOR (so clients look the coordinator up again); a partition whose
leadership arrives is loaded from its log, so committed offsets, group generations and
transaction states survive a move; a rebalance waiting on a partition that moves away is
answered NOT_COORDINATOR instead of hanging. Real broker, real sockets on 127.0.0.1, real logs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.broker.group_driver import GroupDriver
from kafkapy.broker.txn_driver import TRANSACTION_STATE_TOPIC, TxnDriver
from kafkapy.coordinator.group import CONSUMER_OFFSETS_TOPIC, offsets_partition_for
from kafkapy.coordinator.txn import partition_for
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    DescribeGroupsRequest,
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    ListGroupsRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kafkapy.server.broker import Broker, now_ms
from tests.broker.test_transactions import Txn, fetch
from tests.server.helpers import IO_TIMEOUT_S, Client, build_node, create_topic

E = ErrorCode
PARTITIONS = 3


@asynccontextmanager
async def partitioned_broker(
    data_dir: Path, **overrides: str
) -> AsyncIterator[tuple[Broker, GroupDriver, TxnDriver, int]]:
    """A one-node broker whose coordinators run per partition, leading nothing at first."""
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "log.retention.check.interval.ms": "600000",
        "offsets.topic.num.partitions": str(PARTITIONS),
        "transaction.state.log.num.partitions": str(PARTITIONS),
        "group.initial.rebalance.delay.ms": "0",
    }
    settings.update(overrides)
    server = build_node(data_dir, settings)
    broker = server.broker
    groups, txns = broker.group_coordinator, broker.txn_coordinator
    # the node leads every partition of the internal topics it makes: the test, not the data
    # plane, decides what these coordinators lead
    broker.role_listeners.clear()
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(server.run)
        try:
            yield broker, groups, txns, bound[0].port
        finally:
            server.request_shutdown()
            with trio.fail_after(IO_TIMEOUT_S):
                await server.stopped.wait()


async def offsets_topic_made(c: Client, group: str) -> None:
    """FindCoordinator until it names a node: the node has made `__consumer_offsets` (what a
    client's first look-up does), whose partitions the test then hands out with `lead`."""
    with trio.fail_after(IO_TIMEOUT_S):
        for _ in range(IO_TIMEOUT_S * 50):
            found = await c.request(ApiKey.FIND_COORDINATOR, 3, FindCoordinatorRequest(key=group))
            if found.error_code == ErrorCode.NONE:
                return
            await trio.sleep(0.02)
    raise AssertionError(f"FindCoordinator never named a node for {group!r}")


async def lead(driver: GroupDriver | TxnDriver, topic: str, partition: int, epoch: int) -> None:
    driver.on_become_leader(topic, partition, epoch)
    with trio.fail_after(IO_TIMEOUT_S):
        await driver.owned.wait_loaded(partition)


def group_in(partition: int, prefix: str = "g") -> str:
    """A group id whose `__consumer_offsets` partition is `partition`."""
    return next(f"{prefix}{i}" for i in range(1000)
                if offsets_partition_for(f"{prefix}{i}", PARTITIONS) == partition)


def tid_in(partition: int) -> str:
    return next(f"tx{i}" for i in range(1000) if partition_for(f"tx{i}", PARTITIONS) == partition)


async def commit(c: Client, group: str, offset: int) -> int:
    r = await c.request(ApiKey.OFFSET_COMMIT, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset)])]))
    return int(r.topics[0].partitions[0].error_code)


async def fetched(c: Client, group: str) -> tuple[int, int]:
    """(group-level error, committed offset of t-0)."""
    r = await c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))
    offset = r.topics[0].partitions[0].committed_offset if r.topics else -1
    return int(r.error_code), int(offset)


async def join(c: Client, group: str, member_id: str = "") -> Any:
    return await c.request(ApiKey.JOIN_GROUP, 5, JoinGroupRequest(
        group_id=group, member_id=member_id, session_timeout_ms=10_000,
        rebalance_timeout_ms=10_000, protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"m")]))


async def test_groups_answer_only_for_partitions_led_and_reload_from_the_log(
    tmp_path: Path,
) -> None:
    with trio.fail_after(60):
        async with partitioned_broker(tmp_path) as (_, groups, _, port):
            await create_topic(port, "t", 1)
            c = await Client.connect(port)
            g = group_in(1)
            await offsets_topic_made(c, g)
            assert await commit(c, g, 5) == E.NOT_COORDINATOR  # nothing led yet
            assert (await fetched(c, g))[0] == E.NOT_COORDINATOR
            for p in range(PARTITIONS):
                await lead(groups, CONSUMER_OFFSETS_TOPIC, p, 1)
            assert await commit(c, g, 42) == E.NONE
            assert await fetched(c, g) == (E.NONE, 42)
            other = group_in(2, "h")
            assert await commit(c, other, 7) == E.NONE

            groups.on_become_follower(CONSUMER_OFFSETS_TOPIC, 1, 1)
            assert await commit(c, g, 43) == E.NOT_COORDINATOR
            assert (await fetched(c, g))[0] == E.NOT_COORDINATOR
            assert (await join(c, g)).error_code == E.NOT_COORDINATOR
            assert await fetched(c, other) == (E.NONE, 7)  # other partitions unaffected
            listed = await c.request(ApiKey.LIST_GROUPS, 4, ListGroupsRequest())
            assert {x.group_id for x in listed.groups} == {other}

            # leadership back at a newer epoch: the commit comes back from the log
            await lead(groups, CONSUMER_OFFSETS_TOPIC, 1, 2)
            assert await fetched(c, g) == (E.NONE, 42)
            await c.aclose()


@pytest.mark.parametrize("change", ["follower", "newer-epoch"])
async def test_a_rebalance_waiting_on_a_partition_that_moves_is_answered_not_coordinator(
    tmp_path: Path, change: str
) -> None:
    """The partition moves away, or this broker leads it again in a newer epoch (a reload):
    either way the waiting JoinGroup is answered, so the client looks the coordinator up."""
    with trio.fail_after(60):
        async with partitioned_broker(
            tmp_path, **{"group.initial.rebalance.delay.ms": "30000"}
        ) as (_, groups, _, port):
            g = group_in(0)
            await lead(groups, CONSUMER_OFFSETS_TOPIC, 0, 1)
            c = await Client.connect(port)
            first = await join(c, g)
            assert first.error_code == E.MEMBER_ID_REQUIRED
            answer: list[Any] = []

            async def waiting_join() -> None:
                answer.append(await join(c, g, first.member_id))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiting_join)
                d = await Client.connect(port)
                for _ in range(200):  # the join is parked in the initial rebalance delay
                    desc = await d.request(ApiKey.DESCRIBE_GROUPS, 5,
                                           DescribeGroupsRequest(groups=[g]))
                    if desc.groups[0].group_state == "PreparingRebalance":
                        break
                    await trio.sleep(0.01)
                assert desc.groups[0].group_state == "PreparingRebalance"
                if change == "follower":
                    groups.on_become_follower(CONSUMER_OFFSETS_TOPIC, 0, 1)
                else:
                    await lead(groups, CONSUMER_OFFSETS_TOPIC, 0, 2)
            assert answer[0].error_code == E.NOT_COORDINATOR
            if change == "newer-epoch":  # reloaded from the log: the unformed group is gone
                desc = await d.request(ApiKey.DESCRIBE_GROUPS, 5,
                                       DescribeGroupsRequest(groups=[g]))
                assert (desc.groups[0].error_code, desc.groups[0].group_state) == (E.NONE, "Dead")
                await c.aclose()
                await d.aclose()
                return
            hb = await d.request(ApiKey.HEARTBEAT, 3, HeartbeatRequest(
                group_id=g, generation_id=0, member_id=first.member_id))
            assert hb.error_code == E.NOT_COORDINATOR
            desc = await d.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[g]))
            assert desc.groups[0].error_code == E.NOT_COORDINATOR
            await c.aclose()
            await d.aclose()


async def test_a_stale_load_is_not_installed(tmp_path: Path) -> None:
    """Leadership that is lost (or overtaken) while its load runs leaves no coordinator."""
    with trio.fail_after(60):
        async with partitioned_broker(tmp_path) as (_, groups, _, port):
            groups.on_become_leader(CONSUMER_OFFSETS_TOPIC, 0, 3)
            groups.on_become_follower(CONSUMER_OFFSETS_TOPIC, 0, 3)
            groups.on_become_leader(CONSUMER_OFFSETS_TOPIC, 0, 2)  # older epoch than lost: new
            with trio.fail_after(IO_TIMEOUT_S):
                await groups.owned.wait_loaded(0)
            assert groups.owned.leader_epoch(0) == 2
            assert not isinstance(groups.owned.lookup(0), ErrorCode)
            groups.on_become_leader(CONSUMER_OFFSETS_TOPIC, 0, 1)  # stale: ignored
            assert groups.owned.leader_epoch(0) == 2
            c = await Client.connect(port)
            r = await c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=0, coordinator_keys=[group_in(0)]))
            assert r.coordinators[0].error_code == E.NONE  # one node: itself
            await c.aclose()


async def test_transactions_follow_their_partition(tmp_path: Path) -> None:
    with trio.fail_after(60):
        async with partitioned_broker(tmp_path) as (_, _, txns, port):
            await create_topic(port, "t", 1)
            c = await Client.connect(port)
            p = partition_for("tx-a", PARTITIONS)
            tx = Txn(c, "tx-a")
            assert await tx.init(look_up=False) == E.NOT_COORDINATOR
            await lead(txns, TRANSACTION_STATE_TOPIC, p, 4)
            assert await tx.init() == E.NONE
            assert await tx.add("t") == E.NONE
            assert (await tx.send("t", b"one", b"two"))[0] == E.NONE
            assert (await tx.end(True)).error_code == E.NONE
            assert (await fetch(c, "t", committed=True))[0] == [b"one", b"two"]

            txns.on_become_follower(TRANSACTION_STATE_TOPIC, p, 4)
            d = await c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                DescribeTransactionsRequest(transactional_ids=["tx-a"]))
            assert d.transaction_states[0].error_code == E.NOT_COORDINATOR
            assert (await tx.end(True)).error_code == E.NOT_COORDINATOR

            await lead(txns, TRANSACTION_STATE_TOPIC, p, 5)
            d = await c.request(ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                DescribeTransactionsRequest(transactional_ids=["tx-a"]))
            state = d.transaction_states[0]
            assert (state.error_code, state.transaction_state) == (E.NONE, "CompleteCommit")
            assert state.producer_id == tx.pid
            coordinator = txns.coordinator_for("tx-a")
            assert not isinstance(coordinator, ErrorCode)
            assert coordinator.coordinator_epoch == 5  # markers carry the new leader epoch
            # the producer carries on with the new coordinator
            assert await tx.init() == E.NONE
            assert await tx.add("t") == E.NONE
            assert (await tx.send("t", b"three"))[0] == E.NONE
            assert (await tx.end(False)).error_code == E.NONE
            assert (await fetch(c, "t", committed=True))[0] == [b"one", b"two"]
            await c.aclose()


async def test_a_prepared_commit_is_finished_by_the_next_leader(tmp_path: Path) -> None:
    """The coordinator moved after PrepareCommit but before the markers: the partition's next
    leader loads the Prepare state and writes the markers itself."""
    with trio.fail_after(60):
        async with partitioned_broker(tmp_path) as (_, _, txns, port):
            await create_topic(port, "t", 1)
            c = await Client.connect(port)
            p = partition_for("tx-b", PARTITIONS)
            await lead(txns, TRANSACTION_STATE_TOPIC, p, 1)
            tx = Txn(c, "tx-b")
            assert await tx.init() == E.NONE
            assert await tx.add("t") == E.NONE
            assert (await tx.send("t", b"decided"))[0] == E.NONE
            coordinator = txns.coordinator_for("tx-b")
            assert not isinstance(coordinator, ErrorCode)
            prepared = txns.commit(
                coordinator.end_txn("tx-b", tx.pid, tx.epoch, True, now_ms()), coordinator
            )
            assert prepared.written  # PrepareCommit logged, no marker written
            assert (await fetch(c, "t", committed=True))[0] == []
            txns.on_become_follower(TRANSACTION_STATE_TOPIC, p, 1)
            await lead(txns, TRANSACTION_STATE_TOPIC, p, 2)
            for _ in range(200):
                if (await fetch(c, "t", committed=True))[0] == [b"decided"]:
                    break
                await trio.sleep(0.02)
            assert (await fetch(c, "t", committed=True))[0] == [b"decided"]
            await c.aclose()


async def test_a_failing_marker_send_is_logged_and_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    """An unexpected error while sending a transaction's markers (a bug) is logged; the
    transaction's marker task retries instead of ending, and the commit completes."""
    from kafkapy.broker import txn_driver as txn_driver_module

    real = txn_driver_module.send_markers
    failures = [RuntimeError("boom")]

    async def flaky(*args: Any) -> Any:
        if failures:
            raise failures.pop()
        return await real(*args)

    monkeypatch.setattr(txn_driver_module, "send_markers", flaky)
    with trio.fail_after(60):
        async with partitioned_broker(tmp_path) as (_, _, txns, port):
            await create_topic(port, "t", 1)
            c = await Client.connect(port)
            tid = tid_in(0)
            await lead(txns, TRANSACTION_STATE_TOPIC, 0, 1)
            tx = Txn(c, tid)
            assert await tx.init() == E.NONE
            assert await tx.add("t") == E.NONE
            assert (await tx.send("t", b"kept"))[0] == E.NONE
            assert (await tx.end(True)).error_code == E.NONE
            for _ in range(500):
                if (await fetch(c, "t", committed=True))[0] == [b"kept"]:
                    break
                await trio.sleep(0.02)
            assert (await fetch(c, "t", committed=True))[0] == [b"kept"]
            assert failures == []
            assert any("writing the markers of" in r.getMessage() for r in caplog.records)
            await c.aclose()


async def test_an_unreplicated_prepare_commit_sends_no_markers(tmp_path: Path) -> None:
    """While a PrepareCommit waits for the ISR, the coordinator's in-memory state already says
    PrepareCommit; the timers must not send its COMMIT markers. A chaos run (seed 7) had a
    coordinator whose follower was paused send COMMIT to `__consumer_offsets` for a
    PrepareCommit that never replicated; the next leader, which never saw it, aborted the
    transaction on its timeout: offsets committed, output aborted, 95 values lost."""
    with trio.fail_after(60):
        async with partitioned_broker(tmp_path) as (_, _, txns, port):
            await create_topic(port, "t", 1)
            c = await Client.connect(port)
            tid = tid_in(0)
            await lead(txns, TRANSACTION_STATE_TOPIC, 0, 1)
            tx = Txn(c, tid)
            assert await tx.init() == E.NONE
            assert await tx.add("t") == E.NONE
            assert (await tx.send("t", b"undecided"))[0] == E.NONE
            release = trio.Event()

            async def isr_stuck(partition: int, end: int) -> ErrorCode:
                await release.wait()
                return E.NOT_LEADER_OR_FOLLOWER  # the leadership moved meanwhile

            txns.wait_replicated = isr_stuck  # type: ignore[method-assign]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tx.end, True)
                coordinator = txns.coordinator_for(tid)
                assert not isinstance(coordinator, ErrorCode)
                for _ in range(200):
                    if str(coordinator.transactions[tid].state.name) == "PREPARE_COMMIT":
                        break
                    await trio.sleep(0.01)
                assert coordinator.transactions[tid].state.name == "PREPARE_COMMIT"
                await txns.fire_timers()
                await trio.sleep(0.3)  # a marker task would have written by now
                reader = await Client.connect(port)
                assert (await fetch(reader, "t", committed=True))[0] == [], "COMMIT sent undecided"
                await reader.aclose()
                release.set()
            assert coordinator.transactions[tid].state.name == "ONGOING"  # reverted to the log
            await c.aclose()
