"""Test helpers: an in-process broker on 127.0.0.1:0 and a minimal client speaking our codec.

Why our own codec and real sockets: the server tests check wire behaviour (ordering, framing,
error codes) end to end without any mocked broker; real-client tests live in compat_tests/.
"""

from __future__ import annotations

import struct
import threading
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from kafkapy.broker.config import BrokerConfig, ConfigSource
from kafkapy.protocol import ApiKey, RequestHeader, decode_response, encode_request
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeTransactionsRequest,
    FindCoordinatorRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
    MetadataResponse,
)
from kafkapy.protocol.records import Record, build_batch
from kafkapy.server.app import Server
from kafkapy.server.broker import Broker

IO_TIMEOUT_S = 10


def build_node(data_dir: Path | None, settings: Mapping[str, str]) -> Server:
    """The node `settings` describe, built as `kafkapy serve` builds it but not started; its
    broker is `server.broker`. `data_dir`: its `log.dirs` unless `settings` name them; None: a
    temporary one, as `--memory`. Every test builds its node here, so how a node is composed
    is written once."""
    full = dict(settings)
    if data_dir is not None:
        full.setdefault("log.dirs", str(data_dir))  # an explicit `log.dirs` wins
    broker = Broker(BrokerConfig(full), memory=data_dir is None)
    try:
        return Server(broker)
    except BaseException:
        broker.close()
        raise


@asynccontextmanager
async def running_broker(data_dir: Path | None, **overrides: str) -> AsyncIterator[tuple[Broker, Server, int]]:
    """Start a broker + server in a nursery; yields (broker, server, port); stops it cleanly."""
    settings = {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.retention.check.interval.ms": "600000",
        # one partition: creating and closing 50 of them costs seconds on a slow shared disk
        "offsets.topic.num.partitions": "1",
    }
    settings.update(overrides)
    server = build_node(data_dir, settings)
    broker = server.broker
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(server.run)
        try:
            with trio.fail_after(IO_TIMEOUT_S):
                assert await server.wait_ready(), "the server stopped before it was ready"
            yield broker, server, bound[0].port
        finally:
            server.request_shutdown()
            with trio.fail_after(IO_TIMEOUT_S):
                await server.stopped.wait()


class NodeThread:
    """A node (`running_broker(data_dir, **overrides)`) served by a trio loop in a background
    thread, for synchronous tests (hypothesis state machines, sync fixtures): `call` runs a
    coroutine function in that loop; `stop` shuts the node down and joins the thread."""

    def __init__(self, data_dir: Path | None, **overrides: str) -> None:
        self._data_dir = data_dir
        self._overrides = overrides
        self._started = threading.Event()
        self._failure: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self.broker: Broker | None = None
        self.port = 0
        self._thread = threading.Thread(target=self._main, name="kafkapy-node", daemon=True)
        self._thread.start()
        if not self._started.wait(IO_TIMEOUT_S * 3):
            raise TimeoutError("the node did not start")
        if self._failure is not None:
            raise self._failure

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as e:  # handed to the test thread
            self._failure = e
        finally:
            self._started.set()

    async def _serve(self) -> None:
        async with running_broker(self._data_dir, **self._overrides) as (broker, _, port):
            self.broker, self.port = broker, port
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            self._started.set()
            await self._stop.wait()

    def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        assert self._token is not None
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def stop(self) -> None:
        if self._token is not None and self._stop is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(IO_TIMEOUT_S * 3)
        assert not self._thread.is_alive(), "the node did not stop"
        if self._failure is not None:
            raise self._failure


class Client:
    """Pipelining-capable raw client: `send` many, `receive` in order."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._buf = bytearray()
        self._corr = 0
        self.pending: list[tuple[int, int, int]] = []  # (correlation id, api key, version)

    @classmethod
    async def connect(cls, port: int) -> Client:
        with trio.fail_after(IO_TIMEOUT_S):
            return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def aclose(self) -> None:
        await self.stream.aclose()

    async def send(self, api_key: int, version: int, msg: Any, *, client_id: str = "test") -> int:
        self._corr += 1
        frame = encode_request(RequestHeader(api_key, version, self._corr, client_id), msg)
        await self.send_raw(struct.pack(">i", len(frame)) + frame)
        self.pending.append((self._corr, api_key, version))
        return self._corr

    async def send_raw(self, data: bytes) -> None:
        with trio.fail_after(IO_TIMEOUT_S):
            await self.stream.send_all(data)

    async def read_frame(self, wait_s: float = IO_TIMEOUT_S) -> bytes | None:
        """The next response frame, or None when the server closed the connection."""
        with trio.fail_after(wait_s):
            while True:
                if len(self._buf) >= 4:
                    (size,) = struct.unpack_from(">i", self._buf)
                    if len(self._buf) >= 4 + size:
                        frame = bytes(self._buf[4 : 4 + size])
                        del self._buf[: 4 + size]
                        return frame
                data = await self.stream.receive_some(1 << 20)
                if not data:
                    return None
                self._buf += data

    async def receive(self, wait_s: float = IO_TIMEOUT_S) -> tuple[int, Any]:
        corr, api_key, version = self.pending.pop(0)
        frame = await self.read_frame(wait_s)
        assert frame is not None, "server closed the connection"
        got_corr, msg = decode_response(api_key, version, frame)
        assert got_corr == corr, f"response {got_corr} out of order, expected {corr}"
        return corr, msg

    async def request(self, api_key: int, version: int, msg: Any) -> Any:
        await self.send(api_key, version, msg)
        return (await self.receive())[1]


def batch(*values: bytes, key: bytes | None = None, timestamp: int | None = None) -> bytes:
    ts = timestamp if timestamp is not None else int(time.time() * 1000)
    records = [Record(i, 0, key, v, []) for i, v in enumerate(values)]
    return build_batch(records, base_timestamp=ts)


class TopicRequestError(AssertionError):
    """An admin request answered `error_code` for the topic (tests match on it)."""

    def __init__(self, what: str, error_code: int, message: str | None = None) -> None:
        super().__init__(f"{what}: {ErrorCode(error_code).name} ({message})")
        self.error_code = error_code


@dataclass(frozen=True, slots=True)
class TopicListing:
    """A topic as Metadata lists it."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    internal: bool = False


# Topic administration over the wire. Why not the broker's own methods: a topic exists once the
# node has published it (a single node included), so tests create, grow, alter and delete topics
# the way clients do and wait until Metadata shows the outcome.


async def create_topic(
    port: int,
    name: str,
    partitions: int = -1,
    configs: Mapping[str, str | None] | None = None,
) -> TopicListing:
    """Create `name` (CreateTopics v7; -1 partitions: the broker's default) and return once
    Metadata lists it with a leader for every partition; TopicRequestError if refused."""
    topic = CreateTopicsRequest.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=-1,
        configs=[
            CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
            for k, v in (configs or {}).items()
        ],
    )
    request = CreateTopicsRequest(topics=[topic], timeout_ms=IO_TIMEOUT_S * 1000)
    async with _admin_client(port) as client:
        response = await client.request(ApiKey.CREATE_TOPICS, 7, request)
        (result,) = response.topics
        if result.error_code != ErrorCode.NONE:
            raise TopicRequestError(f"create {name}", result.error_code, result.error_message)
        await _wait_for_leaders(client, name, result.num_partitions)
    return TopicListing(name, result.topic_id, result.num_partitions)


async def create_partitions(port: int, name: str, count: int) -> None:
    """Grow `name` to `count` partitions (CreatePartitions v3) and return once Metadata lists a
    leader for each; TopicRequestError if refused."""
    grow = CreatePartitionsRequest.CreatePartitionsTopic(name=name, count=count)
    request = CreatePartitionsRequest(topics=[grow], timeout_ms=IO_TIMEOUT_S * 1000)
    async with _admin_client(port) as client:
        response = await client.request(ApiKey.CREATE_PARTITIONS, 3, request)
        (result,) = response.results
        if result.error_code != ErrorCode.NONE:
            raise TopicRequestError(f"grow {name}", result.error_code, result.error_message)
        await _wait_for_leaders(client, name, count)


async def alter_topic_configs(port: int, name: str, configs: Mapping[str, str | None]) -> None:
    """Set (a None value: delete) the topic's own configs with IncrementalAlterConfigs v1;
    TopicRequestError if refused. The logs apply them once the change is published: tests that
    look at a log wait for it (`wait_until`)."""
    ops = [
        IncrementalAlterConfigsRequest.AlterableConfig(
            name=k, config_operation=0 if v is not None else 1, value=v
        )
        for k, v in configs.items()
    ]
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=2, resource_name=name, configs=ops
    )
    request = IncrementalAlterConfigsRequest(resources=[resource])
    async with _admin_client(port) as client:
        response = await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, request)
    (result,) = response.responses
    if result.error_code != ErrorCode.NONE:
        raise TopicRequestError(f"alter {name}", result.error_code, result.error_message)


async def delete_topic(port: int, name: str) -> None:
    """Delete `name` (DeleteTopics v6) and return once Metadata no longer lists it;
    TopicRequestError if refused."""
    topic = DeleteTopicsRequest.DeleteTopicState(name=name)
    request = DeleteTopicsRequest(topics=[topic], timeout_ms=IO_TIMEOUT_S * 1000)
    async with _admin_client(port) as client:
        response = await client.request(ApiKey.DELETE_TOPICS, 6, request)
        (result,) = response.responses
        if result.error_code != ErrorCode.NONE:
            raise TopicRequestError(f"delete {name}", result.error_code, result.error_message)

        def gone(md: MetadataResponse) -> bool:
            return all(t.name != name or t.error_code != ErrorCode.NONE for t in md.topics)

        await _wait_for_metadata(client, name, gone, f"topic {name} is still listed")


async def list_topics(port: int) -> dict[str, TopicListing]:
    """Every topic Metadata (v12, no auto-creation) lists without error, internal ones included."""
    request = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    async with _admin_client(port) as client:
        md = await client.request(ApiKey.METADATA, 12, request)
    return {
        t.name: TopicListing(t.name, t.topic_id, len(t.partitions), t.is_internal)
        for t in md.topics
        if t.name is not None and t.error_code == ErrorCode.NONE
    }


async def topic_overrides(port: int, name: str) -> dict[str, str | None]:
    """The topic's own configs (DescribeConfigs v4, source DYNAMIC_TOPIC_CONFIG): those set on it
    at creation or since, which override the broker's defaults."""
    resource = DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=name)
    async with _admin_client(port) as client:
        response = await client.request(
            ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[resource])
        )
    (result,) = response.results
    if result.error_code != ErrorCode.NONE:
        raise TopicRequestError(f"describe {name}", result.error_code, result.error_message)
    return {
        c.name: c.value
        for c in result.configs
        if c.config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    }


GROUP_KEY, TRANSACTION_KEY = 0, 1
#: the answers of a coordinator that is not (yet) serving a key: clients look it up again and retry
COORDINATOR_NOT_READY = frozenset({
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
})


async def find_coordinator(client: Client, key: str, key_type: int = GROUP_KEY) -> int:
    """Return once the coordinator of a group (or, `TRANSACTION_KEY`, a transactional id) serves
    it: FindCoordinator v3 answers, and a describe of the key (DescribeGroups /
    DescribeTransactions) no longer says the coordinator is missing or loading - what a client
    retries while the internal topic is made and loaded. The coordinator's node id."""
    find = FindCoordinatorRequest(key=key, key_type=key_type)
    error = ErrorCode.REQUEST_TIMED_OUT
    with trio.move_on_after(IO_TIMEOUT_S):
        while True:
            found = await client.request(ApiKey.FIND_COORDINATOR, 3, find)
            error = ErrorCode(found.error_code)
            if error == ErrorCode.NONE:
                error = await _describe_key(client, key, key_type)
                if error not in COORDINATOR_NOT_READY:
                    return int(found.node_id)
            await trio.sleep(0.02)
    raise AssertionError(f"no coordinator serves {key!r} (last error {error.name})")


async def _describe_key(client: Client, key: str, key_type: int) -> ErrorCode:
    if key_type == GROUP_KEY:
        groups = await client.request(ApiKey.DESCRIBE_GROUPS, 5, DescribeGroupsRequest(groups=[key]))
        return ErrorCode(groups.groups[0].error_code)
    request = DescribeTransactionsRequest(transactional_ids=[key])
    described = await client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, request)
    return ErrorCode(described.transaction_states[0].error_code)


async def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = IO_TIMEOUT_S) -> None:
    """Poll `condition` until true (state a node applies once a change is published, such as a
    topic config reaching its logs); AssertionError naming `what` after `timeout_s`."""
    with trio.move_on_after(timeout_s):
        while True:
            if condition():
                return
            await trio.sleep(0.01)
    raise AssertionError(f"timed out waiting until {what}")


@asynccontextmanager
async def _admin_client(port: int) -> AsyncIterator[Client]:
    client = await Client.connect(port)
    try:
        yield client
    finally:
        await client.aclose()


async def _wait_for_leaders(client: Client, name: str, partitions: int) -> None:
    def led(md: MetadataResponse) -> bool:
        for t in md.topics:
            if t.name == name and t.error_code == ErrorCode.NONE:
                leaders = [p.leader_id for p in t.partitions if p.error_code == ErrorCode.NONE]
                return len(leaders) == partitions and min(leaders, default=-1) >= 0
        return False

    await _wait_for_metadata(client, name, led, f"topic {name} has no leader for all {partitions} partitions")


async def _wait_for_metadata(
    client: Client, name: str, done: Callable[[MetadataResponse], bool], failure: str
) -> None:
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=name)], allow_auto_topic_creation=False
    )
    with trio.move_on_after(IO_TIMEOUT_S):
        while True:
            if done(await client.request(ApiKey.METADATA, 12, request)):
                return
            await trio.sleep(0.01)
    raise AssertionError(failure)
