"""The topic table against a model across creates, deletes, growth, config changes and restarts."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.server.broker import Broker, BrokerError
from kafkapy.server.config import BrokerConfig

NAMES = st.sampled_from(["a", "b", "c.d", "c_d"])


class TopicTableMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="kafkapy-test-"))
        self.broker = self._open()
        self.model: dict[str, tuple[int, dict[str, str]]] = {}

    def _open(self) -> Broker:
        return Broker(BrokerConfig({"log.dirs": str(self.dir), "log.segment.bytes": "1048576"}))

    def teardown(self) -> None:
        self.broker.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(name=NAMES, partitions=st.integers(1, 3))
    def create(self, name: str, partitions: int) -> None:
        collides = any(o != name and o.replace(".", "_") == name.replace(".", "_") for o in self.model)
        try:
            self.broker.create_topic(name, partitions)
        except BrokerError:
            assert name in self.model or collides
            return
        assert name not in self.model
        assert not collides
        self.model[name] = (partitions, {})

    @rule(name=NAMES)
    def delete(self, name: str) -> None:
        try:
            self.broker.delete_topic(name)
        except BrokerError:
            assert name not in self.model
            return
        del self.model[name]

    @rule(name=NAMES, extra=st.integers(1, 2))
    def grow(self, name: str, extra: int) -> None:
        if name not in self.model:
            return
        count, configs = self.model[name]
        self.broker.create_partitions(name, count + extra)
        self.model[name] = (count + extra, configs)

    @rule(name=NAMES, retention=st.sampled_from(["-1", "1000", "604800000"]))
    def set_config(self, name: str, retention: str) -> None:
        if name not in self.model:
            return
        self.broker.set_topic_configs(name, {"retention.ms": retention})
        self.model[name] = (self.model[name][0], {"retention.ms": retention})

    @rule()
    def restart(self) -> None:
        self.broker.close()
        self.broker = self._open()

    @invariant()
    def table_matches_model(self) -> None:
        got = {t.name: (t.partitions, t.configs) for t in self.broker.topics.all() if not t.internal}
        assert got == self.model
        for name, (count, configs) in self.model.items():
            for p in range(count):
                plog = self.broker.partition_log(name, p)
                assert plog is not None
                assert plog.config.retention_ms == int(configs.get("retention.ms", "604800000"))
            assert self.broker.partition_log(name, count) is None


TestTopicTable = TopicTableMachine.TestCase
TestTopicTable.settings = settings(max_examples=15, stateful_step_count=15, deadline=None)
