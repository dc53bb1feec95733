"""The topic table of a running node against a model across creates, deletes, growth, config
changes and restarts, all over the wire."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.server.broker import Broker

from .helpers import (
    IO_TIMEOUT_S,
    TopicRequestError,
    alter_topic_configs,
    create_partitions,
    create_topic,
    delete_topic,
    list_topics,
    running_broker,
    topic_overrides,
    wait_until,
)

NAMES = st.sampled_from(["a", "b", "c.d", "c_d"])
DEFAULT_RETENTION_MS = 604800000


class NodeThread:
    """A node (`running_broker` on `data_dir`) served by a trio loop in a background thread, so a
    synchronous hypothesis state machine can drive it: `call` runs a coroutine function there."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
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
        overrides = {"log.segment.bytes": "1048576"}
        async with running_broker(self._data_dir, **overrides) as (broker, _, port):
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


class TopicTableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kafkapy-test-"))
        self.node = NodeThread(self.dir)
        self.model: dict[str, tuple[int, dict[str, str]]] = {}

    def teardown(self) -> None:
        try:
            self.node.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(name=NAMES, partitions=st.integers(1, 3))
    def create(self, name: str, partitions: int) -> None:
        collides = any(o != name and o.replace(".", "_") == name.replace(".", "_") for o in self.model)
        try:
            self.node.call(create_topic, self.node.port, name, partitions)
        except TopicRequestError:
            assert name in self.model or collides
            return
        assert name not in self.model
        assert not collides
        self.model[name] = (partitions, {})

    @rule(name=NAMES)
    def delete(self, name: str) -> None:
        try:
            self.node.call(delete_topic, self.node.port, name)
        except TopicRequestError:
            assert name not in self.model
            return
        del self.model[name]

    @rule(name=NAMES, extra=st.integers(1, 2))
    def grow(self, name: str, extra: int) -> None:
        if name not in self.model:
            return
        count, configs = self.model[name]
        self.node.call(create_partitions, self.node.port, name, count + extra)
        self.model[name] = (count + extra, configs)

    @rule(name=NAMES, retention=st.sampled_from(["-1", "1000", "604800000"]))
    def set_config(self, name: str, retention: str) -> None:
        if name not in self.model:
            return
        self.node.call(alter_topic_configs, self.node.port, name, {"retention.ms": retention})
        self.model[name] = (self.model[name][0], {"retention.ms": retention})

    @rule()
    def restart(self) -> None:
        self.node.stop()
        self.node = NodeThread(self.dir)

    @invariant()
    def table_matches_model(self) -> None:
        self.node.call(self._check)

    async def _check(self) -> None:
        port, broker = self.node.port, self.node.broker
        assert broker is not None
        listed = await list_topics(port)
        assert {t.name: t.partitions for t in listed.values() if not t.internal} == {
            name: count for name, (count, _) in self.model.items()
        }
        for name, (_, configs) in self.model.items():
            assert await topic_overrides(port, name) == configs

        def logs_match() -> bool:
            """Every partition has a log with the topic's retention, and no log beyond them (the
            logs follow the metadata once it is published)."""
            for name, (count, configs) in self.model.items():
                retention = int(configs.get("retention.ms", DEFAULT_RETENTION_MS))
                for p in range(count):
                    plog = broker.partition_log(name, p)
                    if plog is None or plog.config.retention_ms != retention:
                        return False
                if broker.partition_log(name, count) is not None:
                    return False
            return True

        await wait_until(logs_match, f"the logs match the topics {self.model}")


TestTopicTable = TopicTableMachine.TestCase
TestTopicTable.settings = settings(max_examples=15, stateful_step_count=15, deadline=None)
