"""A partition whose log fails is offline alone; one whose log loads answers as loading
(in-process node, real sockets; `kafkapy.broker.log_state`).

What users rely on: a log that cannot be opened at start, created (a full disk) or deleted
answers KAFKA_STORAGE_ERROR for its own partition, Metadata lists the replica as offline, every
other partition and the rest of the metadata change are served, and the node says it is ready
(offline partitions are reported, never waited for). CreateTopics whose log creation fails
answers success: the controller committed the topic, so an error answer would send the client
into a retry that meets TOPIC_ALREADY_EXISTS. While a partition's log is being created or
deleted, data requests answer NOT_LEADER_OR_FOLLOWER and its coordinators
COORDINATOR_LOAD_IN_PROGRESS, both retriable.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pytest
import trio

from kafkapy.broker.log_state import LogState
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeGroupsRequest,
    DescribeTopicPartitionsRequest,
    DescribeTransactionsRequest,
    ListOffsetsRequest,
    MetadataRequest,
)
from kafkapy.server.cluster.peer import PeerError
from kafkapy.server.http.metrics import BrokerCollector
from kafkapy.storage.errors import PartitionStorageError
from kafkapy.storage.manager import LogManager

from .helpers import (
    TRANSACTION_KEY,
    Client,
    batch,
    create_topic,
    find_coordinator,
    running_broker,
    wait_until,
)
from .test_produce_fetch import FETCH_V, PRODUCE_V, fetch_req, produce_req, values

pytestmark = pytest.mark.timeout(90)


def _no_space(topic: str, partition: int, path: Path) -> PartitionStorageError:
    return PartitionStorageError(topic, partition, path, OSError(errno.ENOSPC, "No space left on device"))


async def _produce_error(client: Client, topic: str, partition: int = 0) -> ErrorCode:
    response = await client.request(ApiKey.PRODUCE, PRODUCE_V, produce_req(topic, batch(b"v"), partition=partition))
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


async def _fetch_error(client: Client, topic: str) -> ErrorCode:
    response = await client.request(ApiKey.FETCH, FETCH_V, fetch_req(topic, 0))
    return ErrorCode(response.responses[0].partitions[0].error_code)


async def _list_offsets_error(client: Client, topic: str) -> ErrorCode:
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    response = await client.request(ApiKey.LIST_OFFSETS, 7, request)
    return ErrorCode(response.topics[0].partitions[0].error_code)


async def _offline_replicas(client: Client, topic: str) -> dict[int, list[int]]:
    md = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=None))
    (found,) = [t for t in md.topics if t.name == topic]
    return {p.partition_index: list(p.offline_replicas) for p in found.partitions}


async def test_a_log_that_fails_to_open_at_start_is_offline_and_the_others_are_served(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _, port):
        await create_topic(port, "damaged", 1)
        await create_topic(port, "healthy", 1)
        client = await Client.connect(port)
        for name in ("damaged", "healthy"):
            assert await _produce_error(client, name) == ErrorCode.NONE
    segment = tmp_path / "damaged-0" / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()  # opening the log fails with "Is a directory"

    async with running_broker(tmp_path) as (broker, server, port):
        client = await Client.connect(port)
        assert await _produce_error(client, "damaged") == ErrorCode.KAFKA_STORAGE_ERROR
        assert await _fetch_error(client, "damaged") == ErrorCode.KAFKA_STORAGE_ERROR
        assert await _list_offsets_error(client, "damaged") == ErrorCode.KAFKA_STORAGE_ERROR
        assert await _produce_error(client, "healthy") == ErrorCode.NONE
        fetched = await client.request(ApiKey.FETCH, FETCH_V, fetch_req("healthy", 0))
        assert [v for _, v in values(fetched.responses[0].partitions[0].records)] == [b"v", b"v"]
        assert await _offline_replicas(client, "damaged") == {0: [broker.node_id]}
        assert await _offline_replicas(client, "healthy") == {0: []}
        assert "Is a directory" in broker.log_states.reason("damaged", 0)
        assert server.readiness() == (True, "1 partitions offline")
        families = {m.name: m for m in BrokerCollector(server).collect()}
        (offline,) = families["kafka_server_replicamanager_offlinereplicacount"].samples
        assert offline.value == 1
        by_state = {s.labels["state"]: s.value for s in families["kafkapy_partition_log_state"].samples}
        assert by_state["offline"] == 1
        assert by_state["loading"] == 0


async def test_a_delete_that_fails_leaves_the_rest_of_the_delta_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_broker(tmp_path) as (broker, _, port):
        await create_topic(port, "stuck", 2)
        await create_topic(port, "gone", 1)
        replace = os.replace
        disk_full = [True]

        def failing(source: Any, target: Any) -> None:  # the delete's rename of stuck-0 fails
            if disk_full[0] and Path(source).name == "stuck-0":
                raise OSError(errno.ENOSPC, "No space left on device")
            replace(source, target)

        monkeypatch.setattr(os, "replace", failing)
        client = await Client.connect(port)
        request = DeleteTopicsRequest(topic_names=["stuck", "gone"], timeout_ms=10_000)
        response = await client.request(ApiKey.DELETE_TOPICS, 4, request)
        assert [ErrorCode(r.error_code) for r in response.responses] == [ErrorCode.NONE] * 2
        await wait_until(lambda: broker.topics.get("gone") is None, "the deletes applied")
        # the partition after the failed one, and the other topic, are deleted all the same
        assert broker.logs.get("stuck", 1) is None
        assert not (tmp_path / "stuck-1").exists()
        assert broker.logs.get("gone", 0) is None
        assert not (tmp_path / "gone-0").exists()
        assert broker.log_states.state("stuck", 0) is LogState.OFFLINE
        assert broker.log_states.state("stuck", 1) is LogState.READY
        # the next delta is applied too
        await create_topic(port, "after", 1)
        assert await _produce_error(client, "after") == ErrorCode.NONE
        # once the disk has room, the name can be created again: the old log goes first
        disk_full[0] = False
        await create_topic(port, "stuck", 1)
        assert await _produce_error(client, "stuck") == ErrorCode.NONE
        fetched = await client.request(ApiKey.FETCH, FETCH_V, fetch_req("stuck", 0))
        assert [v for _, v in values(fetched.responses[0].partitions[0].records)] == [b"v"]
        assert broker.log_states.state("stuck", 0) is LogState.READY


async def test_create_topics_whose_log_cannot_be_created_answers_success_with_the_replica_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running_broker(tmp_path) as (broker, _, port):
        get_or_create = LogManager.get_or_create

        def full_disk(self: LogManager, topic: str, partition: int, *args: Any, **kwargs: Any) -> Any:
            if topic == "full" and partition == 1:
                raise _no_space(topic, partition, tmp_path / f"{topic}-{partition}")
            return get_or_create(self, topic, partition, *args, **kwargs)

        monkeypatch.setattr(LogManager, "get_or_create", full_disk)
        client = await Client.connect(port)
        create = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="full", num_partitions=2, replication_factor=-1)], timeout_ms=10_000)
        response = await client.request(ApiKey.CREATE_TOPICS, 7, create)
        (result,) = response.topics
        assert (ErrorCode(result.error_code), result.num_partitions) == (ErrorCode.NONE, 2)
        assert await _offline_replicas(client, "full") == {0: [], 1: [broker.node_id]}
        described = await client.request(ApiKey.DESCRIBE_TOPIC_PARTITIONS, 0, DescribeTopicPartitionsRequest(
            topics=[DescribeTopicPartitionsRequest.TopicRequest(name="full")]))
        assert [list(p.offline_replicas) for p in described.topics[0].partitions] == [[], [broker.node_id]]
        assert await _produce_error(client, "full", 1) == ErrorCode.KAFKA_STORAGE_ERROR
        assert await _produce_error(client, "full", 0) == ErrorCode.NONE
        again = await client.request(ApiKey.CREATE_TOPICS, 7, create)
        assert ErrorCode(again.topics[0].error_code) == ErrorCode.TOPIC_ALREADY_EXISTS


async def test_loading_partitions_answer_retriable_errors_and_hold_readiness(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (broker, server, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        await find_coordinator(client, "g")
        await find_coordinator(client, "tx", TRANSACTION_KEY)
        states = broker.log_states
        loading = [("t", 0), ("__consumer_offsets", broker.group_coordinator.partition_for("g")),
                   ("__transaction_state", broker.txn_coordinator.partition_for("tx"))]
        for topic, partition in loading:
            states.set_loading(topic, partition)
        assert await _produce_error(client, "t") == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert await _fetch_error(client, "t") == ErrorCode.NOT_LEADER_OR_FOLLOWER
        groups = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"]))
        assert ErrorCode(groups.groups[0].error_code) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        txns = await client.request(
            ApiKey.DESCRIBE_TRANSACTIONS, 0, DescribeTransactionsRequest(transactional_ids=["tx"])
        )
        assert ErrorCode(txns.transaction_states[0].error_code) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        assert server.readiness() == (False, "3 partitions loading")

        for topic, partition in loading:
            states.set_ready(topic, partition)
        assert server.readiness() == (True, "")
        assert await _produce_error(client, "t") == ErrorCode.NONE
        with trio.fail_after(10):
            groups = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=["g"]))
        assert ErrorCode(groups.groups[0].error_code) == ErrorCode.NONE


async def test_create_topics_whose_commit_outlived_the_answer_is_answered_success(tmp_path: Path) -> None:
    """The controller committed the topic but its answer was lost (a commit slowed by a full
    disk past the wait): the topic exists, so the answer is success, not NOT_CONTROLLER."""
    async with running_broker(tmp_path) as (broker, _, port):
        channel: Any = broker.cluster.channel
        create_topics = channel.create_topics

        async def answer_lost(request: CreateTopicsRequest) -> Any:
            await create_topics(request)
            raise PeerError("no answer from the controller within the request timeout")

        channel.create_topics = answer_lost
        client = await Client.connect(port)
        create = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="late", num_partitions=3, replication_factor=-1)], timeout_ms=10_000)
        (result,) = (await client.request(ApiKey.CREATE_TOPICS, 7, create)).topics
        assert (ErrorCode(result.error_code), result.error_message) == (ErrorCode.NONE, None)
        assert (result.topic_id, result.num_partitions, result.replication_factor) == (
            broker.topics.get("late").topic_id, 3, 1)  # type: ignore[union-attr]
        assert result.configs, "a v5+ answer carries the new topic's configs"
        # a topic that existed before the request was not created by it
        (again,) = (await client.request(ApiKey.CREATE_TOPICS, 7, create)).topics
        assert ErrorCode(again.error_code) != ErrorCode.NONE
