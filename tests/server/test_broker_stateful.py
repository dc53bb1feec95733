"""The topic table of a running node against a model across creates, deletes, growth, config
changes and restarts, all over the wire."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from .helpers import (
    NodeThread,
    TopicRequestError,
    alter_topic_configs,
    create_partitions,
    create_topic,
    delete_topic,
    list_topics,
    topic_overrides,
    wait_until,
)

NAMES = st.sampled_from(["a", "b", "c.d", "c_d"])
DEFAULT_RETENTION_MS = 604800000
SEGMENT = {"log.segment.bytes": "1048576"}


class TopicTableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kafkapy-test-"))
        self.node = NodeThread(self.dir, **SEGMENT)
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
        self.node = NodeThread(self.dir, **SEGMENT)

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
