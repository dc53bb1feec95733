"""Coordinators in a real three-node cluster (in-process nodes, kafkapy.testing.local).

What users rely on: any broker answers FindCoordinator with the same coordinator - the leader of
the key's `__consumer_offsets` partition, which the first lookup has the controller create
(replicated, compacted); the other brokers answer NOT_COORDINATOR for the group; commits are
replicated, so when the coordinator's broker stops, the new leader of the partition answers
with the committed offsets. Producer ids handed out by different brokers never collide.
Skips only while a part of cluster mode is not in the tree.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from kafkapy.coordinator.group import CONSUMER_OFFSETS_TOPIC, offsets_partition_for
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import (
    CreateTopicsRequest,
    FindCoordinatorRequest,
    InitProducerIdRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
)
from kafkapy.testing.local import LocalNode, open_cluster
from tests.server.helpers import Client

E = ErrorCode
PARTITIONS = 3  # TEST_OVERRIDES: offsets.topic.num.partitions

async def find(c: Client, group: str) -> Any:
    r = await c.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
        key_type=0, coordinator_keys=[group]))
    return r.coordinators[0]


async def commit(c: Client, group: str, offset: int) -> int:
    r = await c.request(ApiKey.OFFSET_COMMIT, 8, OffsetCommitRequest(
        group_id=group, generation_id_or_member_epoch=-1, topics=[
            OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=[
                OffsetCommitRequest.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset)])]))
    return int(r.topics[0].partitions[0].error_code)


async def fetched(c: Client, group: str) -> tuple[int, int]:
    r = await c.request(ApiKey.OFFSET_FETCH, 7, OffsetFetchRequest(group_id=group, topics=[
        OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]))
    offset = r.topics[0].partitions[0].committed_offset if r.topics else -1
    return int(r.error_code), int(offset)


async def until(what: str, check: Any, timeout_s: float = 30) -> Any:
    """Poll the async `check` until it returns something truthy (bounded)."""
    with trio.fail_after(timeout_s):
        for _ in range(10_000):
            got = await check()
            if got:
                return got
            await trio.sleep(0.1)
    raise AssertionError(f"never: {what}")


async def test_group_coordinator_is_the_partition_leader_and_survives_its_broker(
    tmp_path: Path,
) -> None:
    with trio.fail_after(150):
        async with open_cluster(tmp_path, 3) as nodes:
            clients = {n.node_id: await Client.connect(n.broker_port) for n in nodes}
            by_id: dict[int, LocalNode] = {n.node_id: n for n in nodes}
            r = await clients[1].request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(
                topics=[CreateTopicsRequest.CreatableTopic(
                    name="t", num_partitions=1, replication_factor=3)], timeout_ms=20_000))
            assert r.topics[0].error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS)

            group = "cluster-group"
            first = await find(clients[1], group)  # creates __consumer_offsets
            assert first.error_code in (E.NONE, E.COORDINATOR_NOT_AVAILABLE)

            async def found() -> Any:
                answer = await find(clients[2], group)
                return answer if answer.error_code == E.NONE else None

            coordinator = await until("a coordinator", found)
            image = by_id[2].broker.cluster.image  # type: ignore[union-attr]
            topic = image.topics[CONSUMER_OFFSETS_TOPIC]
            assert topic.configs.get("cleanup.policy") == "compact"
            part = topic.partitions[offsets_partition_for(group, PARTITIONS)]
            assert len(part.replicas) == 3
            assert coordinator.node_id == part.leader
            for c in clients.values():  # every broker names the same coordinator
                assert (await find(c, group)).node_id == coordinator.node_id

            leader = coordinator.node_id
            others = [i for i in clients if i != leader]
            assert await commit(clients[others[0]], group, 5) == E.NOT_COORDINATOR

            async def committed() -> bool:
                return await commit(clients[leader], group, 42) == E.NONE

            await until("a commit at the coordinator", committed)
            assert await fetched(clients[leader], group) == (E.NONE, 42)

            # producer ids from different brokers come from distinct controller blocks
            pids = []
            for c in clients.values():
                ip = await c.request(ApiKey.INIT_PRODUCER_ID, 4, InitProducerIdRequest(
                    transactional_id=None, transaction_timeout_ms=60_000))
                assert ip.error_code == E.NONE
                pids.append(ip.producer_id)
            assert len(set(pids)) == 3

            # the coordinator's broker stops: the partition's new leader has the commit
            await clients[leader].aclose()
            by_id[leader].server.request_shutdown()
            with trio.fail_after(30):
                await by_id[leader].server.stopped.wait()

            async def moved() -> Any:
                answer = await find(clients[others[0]], group)
                ok = answer.error_code == E.NONE and answer.node_id != leader
                return answer if ok else None

            new = await until("the new coordinator", moved)
            assert new.node_id in others

            async def reloaded() -> tuple[int, int] | None:
                got = await fetched(clients[new.node_id], group)
                return got if got[0] == E.NONE else None

            assert await until("the offsets at the new coordinator", reloaded) == (E.NONE, 42)
            for i in others:
                await clients[i].aclose()


async def test_a_commit_that_cannot_be_replicated_is_reverted(tmp_path: Path) -> None:
    """min.insync.replicas=3 and a follower of the group's partition stopped: the commit is in
    the coordinator's log but not acknowledged by enough replicas, so the client is told it
    failed and OffsetFetch keeps answering the last replicated commit."""
    with trio.fail_after(150):
        async with open_cluster(tmp_path, 3, overrides={"min.insync.replicas": "3"}) as nodes:
            by_id = {n.node_id: n for n in nodes}
            c = await Client.connect(nodes[0].broker_port)
            r = await c.request(ApiKey.CREATE_TOPICS, 5, CreateTopicsRequest(
                topics=[CreateTopicsRequest.CreatableTopic(
                    name="t", num_partitions=1, replication_factor=3)], timeout_ms=20_000))
            assert r.topics[0].error_code in (E.NONE, E.TOPIC_ALREADY_EXISTS)
            group = "unreplicated"

            async def found() -> Any:
                answer = await find(c, group)
                return answer if answer.error_code == E.NONE else None

            leader = (await until("a coordinator", found)).node_id
            coordinator = await Client.connect(by_id[leader].broker_port)

            async def committed() -> bool:
                return await commit(coordinator, group, 10) == E.NONE

            await until("a replicated commit", committed)
            follower = next(i for i in by_id if i != leader)
            by_id[follower].server.request_shutdown()
            with trio.fail_after(30):
                await by_id[follower].server.stopped.wait()
            code = await commit(coordinator, group, 20)
            assert code in (E.COORDINATOR_NOT_AVAILABLE, E.REQUEST_TIMED_OUT)
            assert await fetched(coordinator, group) == (E.NONE, 10)
            await coordinator.aclose()
            await c.aclose()


async def test_find_coordinator_sends_no_client_to_a_leader_whose_connection_just_failed(
    tmp_path: Path,
) -> None:
    """A node whose request to the coordinator partition's leader just failed with a refused,
    reset or closed connection (a SIGKILLed process, in the milliseconds before the controller
    fences it) answers COORDINATOR_NOT_AVAILABLE instead of naming that leader: librdkafka's
    admin client caches the coordinator it is told and then waits for that broker to come back
    (compat_tests/test_cluster_groups.py shows it). A live leader's next answer to this node ends
    the doubt; nodes that saw nothing fail keep naming it."""
    from kafkapy.broker.internal_topics import coordinator_node

    with trio.fail_after(150):
        async with open_cluster(tmp_path, 3) as nodes:
            by_id = {n.node_id: n for n in nodes}
            c = await Client.connect(nodes[0].broker_port)
            group = "doubted"
            await find(c, group)  # creates __consumer_offsets

            async def found() -> Any:
                answer = await find(c, group)
                return answer if answer.error_code == E.NONE else None

            leader = (await until("a coordinator", found)).node_id
            witness, bystander = (by_id[i] for i in sorted(by_id) if i != leader)
            partition = offsets_partition_for(group, PARTITIONS)
            listener = "PLAINTEXT"

            def answer(node: LocalNode) -> tuple[int, int]:
                error, node_id, _host, _port = coordinator_node(
                    node.broker, CONSUMER_OFFSETS_TOPIC, partition, listener)
                return int(error), node_id

            async def witness_names_it() -> bool:
                return answer(witness) == (E.NONE, leader)

            await until("the witness naming the leader", witness_names_it)
            # from here to the asserts nothing awaits, so no node's state changes meanwhile
            others_before = answer(bystander), answer(by_id[leader])
            cluster = witness.broker.cluster
            assert cluster is not None
            cluster.peer_gone(leader)  # what its replica fetcher reports on a refused connection
            assert answer(witness) == (E.COORDINATOR_NOT_AVAILABLE, -1)
            assert (answer(bystander), answer(by_id[leader])) == others_before

            # the leader is alive: the witness's next fetch from it is answered, and the
            # controller's probe finds it listening, so it is not fenced
            w = await Client.connect(witness.broker_port)

            async def named_again() -> Any:
                got = await find(w, group)
                return got if got.error_code == E.NONE else None

            assert (await until("the leader named again", named_again)).node_id == leader
            await w.aclose()
            await c.aclose()
