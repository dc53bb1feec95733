"""The coordinator runtime on its own, with a toy coordinator (a register per key), against a
real node's logs: load by replay when a partition's leadership arrives and after a restart,
ownership changes (load, drop, reload in a newer epoch, a stale leadership ignored), a failed
append that leaves the log as it was and is reverted to it, timers firing at their
deadline, the cluster topic asked of the controller one request at a time, and loads that
are overtaken by a leadership change or fail.

The storage failure is real: the active segment's descriptor is swapped for a read-only one of
the same file, so the log's own append gets the OS error (as in test_group_write_failures).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import uuid
import zlib
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
import trio

from kafkapy.broker.clock import now_ms
from kafkapy.broker.coordinator_runtime import CoordinatorRuntime, MissingPartition, NotOwned
from kafkapy.broker.internal_topics import log_batches
from kafkapy.controller.image import MetadataImage
from kafkapy.controller.records import (
    Endpoint,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnfenceBrokerRecord,
)
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
from kafkapy.protocol.records import Record, decode_records
from kafkapy.server.broker import Broker
from kafkapy.storage import PartitionLog
from kafkapy.storage.errors import StorageError
from tests.server.helpers import build_node

TOPIC = "__registers"
PARTITIONS = 2
TIMEOUT_S = 30


def partition_of(key: str, count: int) -> int:
    return zlib.crc32(key.encode()) % count


def key_in(partition: int) -> str:
    return next(f"k{i}" for i in range(100) if partition_of(f"k{i}", PARTITIONS) == partition)


class Registers:
    """The toy state machine: changed only by replaying what the log holds."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.values: dict[str, str] = {}
        self.loaded = False

    def replay(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self.values.pop(key.decode(), None)
        else:
            self.values[key.decode()] = value.decode()


class RegisterRuntime(CoordinatorRuntime[Registers]):
    def __init__(self, broker: Broker) -> None:
        self.deactivated: list[Registers] = []
        self.deadline: int | None = None
        self.fired = trio.Event()
        super().__init__(broker, topic=TOPIC, num_partitions=PARTITIONS,
                         partitioner=partition_of, replication_factor_key="unused")

    def new_coordinator(self, leader_epoch: int) -> Registers:
        return Registers(leader_epoch)

    def replay_log(self, plog: PartitionLog, into: Registers, start: int | None,
                   end: int | None) -> int:
        count = 0
        for data, pos, header in log_batches(plog, start, end):
            for record in decode_records(data, pos, header):
                assert record.key is not None
                into.replay(record.key, record.value)
                count += 1
        return count

    async def activate(self, coordinator: Registers) -> None:
        coordinator.loaded = True

    def deactivate(self, coordinator: Registers) -> None:
        self.deactivated.append(coordinator)

    def describe(self, coordinator: Registers) -> str:
        return f"{len(coordinator.values)} registers"

    def held(self, coordinator: Registers) -> tuple[int, str]:
        return len(coordinator.values), "registers"

    def topic_configs(self) -> dict[str, str]:
        return {"cleanup.policy": "compact"}

    def next_deadline(self) -> int | None:
        return self.deadline

    async def fire_timers(self) -> None:
        self.deadline = None
        self.fired.set()

    def write(self, key: str, value: str) -> ErrorCode:
        """An operation as the adapters do it: append, then apply; a failed append reverts the
        key's coordinator to what its partition's log holds."""
        coordinator = self.coordinator_for(key)
        if isinstance(coordinator, ErrorCode):
            return coordinator
        partition = self.partition_for(key)
        try:
            self.append(partition, [Record(0, 0, key.encode(), value.encode())], coordinator)
        except StorageError:
            plog = self.partition_log(partition)
            assert plog is not None
            log_state = self.new_coordinator(0)
            self.replay_log(plog, log_state, None, self.committed_end(partition, plog, None))
            coordinator.values = log_state.values
            return ErrorCode.KAFKA_STORAGE_ERROR
        coordinator.replay(key.encode(), value.encode())
        return ErrorCode.NONE


def new_broker(data_dir: Path) -> Broker:
    settings = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.retention.check.interval.ms": "600000"}
    return build_node(data_dir, settings).broker


def publish_topic_led_elsewhere(broker: Broker) -> None:
    """Give the node's metadata the toy topic, every partition led by node 2 with a replica
    here (so its logs exist), so only the test hands this node leaderships. Call it inside
    trio (partition roles keep trio time)."""
    publish_topic(broker, leader=2)


def publish_topic(broker: Broker, *, leader: int, topic_id: uuid.UUID | None = None) -> uuid.UUID:
    """The toy topic in the node's metadata, every partition led by `leader` (1: this node,
    the only replica, so its high watermark follows its appends; 2: another node, with a
    replica here). Call it inside trio (partition roles keep trio time)."""
    image = MetadataImage()
    topic_id = topic_id or uuid.uuid4()
    replicas = (2, 1) if leader == 2 else (1,)
    records: list[MetadataRecord] = []
    for node in (1, 2):
        records += [
            RegisterBrokerRecord(node, uuid.uuid4(), 10 + node, (Endpoint("PLAINTEXT", "127.0.0.1", 1),), None),
            UnfenceBrokerRecord(node, 10 + node),
        ]
    records.append(TopicRecord(TOPIC, topic_id))
    records += [
        PartitionRecord(p, topic_id, replicas, replicas, leader=leader) for p in range(PARTITIONS)
    ]
    for offset, record in enumerate(records):
        image.apply(record, offset)
    broker.apply_metadata(image, None)
    return topic_id


@contextmanager
def read_only_disk(plog: PartitionLog) -> Iterator[None]:
    """Appends to `plog` fail with an OS error until the block ends."""
    fd = plog.segments[-1].fd
    saved = os.dup(fd)
    read_only = os.open(plog.segments[-1].log_path, os.O_RDONLY)
    try:
        os.dup2(read_only, fd)
        yield
    finally:
        os.close(read_only)
        os.dup2(saved, fd)
        os.close(saved)


@asynccontextmanager
async def serving(runtime: RegisterRuntime) -> AsyncIterator[None]:
    """The runtime's task running (loads start, timers fire) for the block."""
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runtime.serve)
        with trio.fail_after(TIMEOUT_S):
            yield
        nursery.cancel_scope.cancel()


async def led_here(runtime: RegisterRuntime) -> None:
    for p in range(PARTITIONS):
        await runtime.owned.wait_loaded(p)
        assert isinstance(runtime.coordinator_of_partition(p), Registers)


async def test_leadership_loads_the_partitions_and_a_restart_loads_them_back_by_replay(
    tmp_path: Path,
) -> None:
    broker = new_broker(tmp_path)
    try:
        runtime = RegisterRuntime(broker)  # a role listener before the metadata arrives
        topic_id = publish_topic(broker, leader=1)
        async with serving(runtime):
            await led_here(runtime)
            assert runtime.write("a", "1") is ErrorCode.NONE
            assert runtime.write("b", "2") is ErrorCode.NONE
            assert runtime.write("a", "3") is ErrorCode.NONE
            runtime.on_become_leader(TOPIC, PARTITIONS, 1)  # a partition the topic lacks
            await runtime.owned.wait_loaded(PARTITIONS)
            with pytest.raises(MissingPartition):
                runtime.append(PARTITIONS, [Record(0, 0, b"x", b"y")])
    finally:
        broker.close()
    broker = new_broker(tmp_path)
    try:
        runtime = RegisterRuntime(broker)
        publish_topic(broker, leader=1, topic_id=topic_id)  # what the metadata log replays
        async with serving(runtime):
            await led_here(runtime)
            values = {k: v for p in range(PARTITIONS)
                      for k, v in runtime.owned.loaded()[p].values.items()}
            assert values == {"a": "3", "b": "2"}
            assert all(c.loaded for c in runtime.coordinators())
    finally:
        broker.close()


async def test_loads_that_overlap_end_in_one_info_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broker = new_broker(tmp_path)
    try:
        runtime = RegisterRuntime(broker)
        topic_id = publish_topic(broker, leader=1)
        async with serving(runtime):
            await led_here(runtime)
            for key in ("a", "b", "c"):
                assert runtime.write(key, "1") is ErrorCode.NONE
    finally:
        broker.close()
    caplog.set_level(logging.DEBUG, "kafkapy.broker.coordinator_runtime")
    broker = new_broker(tmp_path)
    try:
        runtime = RegisterRuntime(broker)
        publish_topic(broker, leader=1, topic_id=topic_id)
        async with serving(runtime):
            await led_here(runtime)
    finally:
        broker.close()
    records = [r for r in caplog.records if r.name == "kafkapy.broker.coordinator_runtime"]
    infos = [r.getMessage() for r in records if r.levelno == logging.INFO]
    assert len(infos) == 1, infos
    assert re.fullmatch(rf"loaded 3 registers from {PARTITIONS} {TOPIC} partitions in \d+ ms", infos[0])
    per_partition = [r for r in records if r.getMessage().startswith(f"loaded {TOPIC}-")]
    assert len(per_partition) == PARTITIONS
    assert all(r.levelno == logging.DEBUG for r in per_partition)


async def test_a_failed_append_leaves_the_log_and_reverts_the_state(tmp_path: Path) -> None:
    broker = new_broker(tmp_path)
    key = key_in(0)
    try:
        runtime = RegisterRuntime(broker)
        topic_id = publish_topic(broker, leader=1)
        async with serving(runtime):
            await led_here(runtime)
            assert runtime.write(key, "kept") is ErrorCode.NONE
            plog = runtime.partition_log(0)
            assert plog is not None
            end = plog.log_end_offset
            with read_only_disk(plog):
                assert runtime.write(key, "lost") is ErrorCode.KAFKA_STORAGE_ERROR
            assert plog.log_end_offset == end
            assert runtime.owned.loaded()[0].values == {key: "kept"}
            assert runtime.write(key, "after") is ErrorCode.NONE  # the disk is back
    finally:
        broker.close()
    broker = new_broker(tmp_path)
    try:
        runtime = RegisterRuntime(broker)
        publish_topic(broker, leader=1, topic_id=topic_id)
        async with serving(runtime):
            await led_here(runtime)
            assert runtime.owned.loaded()[0].values == {key: "after"}
    finally:
        broker.close()


async def test_ownership_changes_load_drop_and_reload_the_partition(tmp_path: Path) -> None:
    broker = new_broker(tmp_path)
    publish_topic_led_elsewhere(broker)
    runtime = RegisterRuntime(broker)
    key = key_in(1)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(runtime.serve)
            with trio.fail_after(TIMEOUT_S):
                assert runtime.coordinator_for(key) is ErrorCode.NOT_COORDINATOR
                runtime.on_become_leader(TOPIC, 1, 5)
                assert runtime.coordinator_for(key) is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                await runtime.owned.wait_loaded(1)
                first = runtime.coordinator_for(key)
                assert isinstance(first, Registers)
                assert (first.epoch, first.loaded) == (5, True)
                assert runtime.write(key, "v1") is ErrorCode.NONE
                assert runtime.write(key_in(0), "x") is ErrorCode.NOT_COORDINATOR

                runtime.on_become_leader(TOPIC, 1, 4)  # an older leadership: ignored
                assert runtime.coordinator_for(key) is first

                runtime.on_become_follower(TOPIC, 1, 6)
                assert runtime.coordinator_for(key) is ErrorCode.NOT_COORDINATOR
                assert runtime.deactivated == [first]
                with pytest.raises(NotOwned):  # what the old coordinator would still write
                    runtime.append(1, [Record(0, 0, key.encode(), b"stale")], first)

                runtime.on_become_leader(TOPIC, 1, 7)
                await runtime.owned.wait_loaded(1)
                second = runtime.coordinator_for(key)
                assert isinstance(second, Registers)
                assert second is not first
                assert (second.epoch, second.values) == (7, {key: "v1"})
                plog = runtime.partition_log(1)
                assert plog is not None  # written in the leader epoch of its time
                assert [h.partition_leader_epoch for _, _, h in log_batches(plog)] == [5]
            nursery.cancel_scope.cancel()
    finally:
        broker.close()


async def test_timers_fire_at_their_deadline_and_a_wake_brings_one_forward(
    tmp_path: Path,
) -> None:
    broker = new_broker(tmp_path)
    runtime = RegisterRuntime(broker)
    try:
        async with trio.open_nursery() as nursery:
            runtime.deadline = now_ms() + 3_600_000  # an hour away: the task sleeps
            nursery.start_soon(runtime.serve)
            with trio.fail_after(TIMEOUT_S):
                await runtime.ready()
                await trio.testing.wait_all_tasks_blocked()
                assert not runtime.fired.is_set()
                runtime.deadline = now_ms()
                runtime.wake(runtime.deadline)  # earlier than the hour it sleeps until
                await runtime.fired.wait()
                assert runtime.deadline is None  # fire_timers ran
            nursery.cancel_scope.cancel()
    finally:
        broker.close()


class FakeController:
    """A cluster node's view of the controller: CreateTopics answers once `release` is set,
    then the topic is in the image."""

    def __init__(self) -> None:
        self.image = SimpleNamespace(topics={}, brokers={1: SimpleNamespace(fenced=False)})
        self.channel = self
        self.requests: list[CreateTopicsRequest] = []
        self.release = trio.Event()

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        self.requests.append(request)
        await self.release.wait()
        self.image.topics[TOPIC] = SimpleNamespace(partitions={})
        return CreateTopicsResponse(topics=[])


async def test_the_cluster_topic_is_asked_of_the_controller_once_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = new_broker(tmp_path)
    controller = FakeController()
    monkeypatch.setattr(broker, "_node", cast(Any, controller))  # the node's cluster parts
    runtime = RegisterRuntime(broker)
    answers: list[bool] = []

    async def ask() -> None:
        answers.append(await runtime.ensure_topic())

    try:
        with trio.fail_after(TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask)
                await trio.testing.wait_all_tasks_blocked()
                assert await runtime.ensure_topic() is False  # in flight: the client retries
                controller.release.set()
            assert answers == [True]
            assert await runtime.ensure_topic() is True
        assert [t.name for r in controller.requests for t in r.topics] == [TOPIC]
        assert controller.requests[0].topics[0].replication_factor == 1  # one broker registered
    finally:
        monkeypatch.undo()
        broker.close()


class GatedRuntime(RegisterRuntime):
    """Its loads wait in the worker thread until `gate` opens, and fail while `broken`."""

    def __init__(self, broker: Broker) -> None:
        super().__init__(broker)
        self.gate = threading.Event()
        self.broken = False
        self.tail_replayed = trio.Event()  # a load read its log to the end (then installs)

    def replay_log(self, plog: PartitionLog, into: Registers, start: int | None,
                   end: int | None) -> int:
        if start is None:  # the bulk of a load, in the worker thread
            self.gate.wait(TIMEOUT_S)
            if self.broken:
                raise OSError("unreadable segment")
        else:
            self.tail_replayed.set()
        return super().replay_log(plog, into, start, end)


async def test_a_load_overtaken_by_the_leadership_moving_away_is_discarded(
    tmp_path: Path,
) -> None:
    broker = new_broker(tmp_path)
    publish_topic_led_elsewhere(broker)
    runtime = GatedRuntime(broker)
    key = key_in(0)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(runtime.serve)
            with trio.fail_after(TIMEOUT_S):
                await runtime.ready()
                runtime.on_become_leader(TOPIC, 0, 3)
                await trio.testing.wait_all_tasks_blocked()  # the load waits in its thread
                runtime.on_become_follower(TOPIC, 0, 4)
                runtime.gate.set()
                await runtime.tail_replayed.wait()  # the load finished: nothing installed
                assert runtime.coordinator_for(key) is ErrorCode.NOT_COORDINATOR
                assert runtime.owned.loaded() == {}
            nursery.cancel_scope.cancel()
    finally:
        broker.close()


async def test_a_load_that_fails_leaves_the_partition_unowned_until_led_again(
    tmp_path: Path,
) -> None:
    broker = new_broker(tmp_path)
    publish_topic_led_elsewhere(broker)
    runtime = GatedRuntime(broker)
    runtime.gate.set()
    key = key_in(0)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(runtime.serve)
            with trio.fail_after(TIMEOUT_S):
                await runtime.ready()
                runtime.broken = True
                runtime.on_become_leader(TOPIC, 0, 3)
                await runtime.owned.wait_loaded(0)
                # clients are sent to look the coordinator up again, not told to wait
                assert runtime.coordinator_for(key) is ErrorCode.NOT_COORDINATOR
                runtime.broken = False
                runtime.on_become_leader(TOPIC, 0, 4)
                await runtime.owned.wait_loaded(0)
                loaded = runtime.coordinator_for(key)
                assert isinstance(loaded, Registers)
                assert loaded.epoch == 4
            nursery.cancel_scope.cancel()
    finally:
        broker.close()
