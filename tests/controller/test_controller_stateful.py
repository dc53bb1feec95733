"""Random broker/topic/ISR histories against the QuorumController's invariants.

After every step: the records replayed (through the codec) into a separate image give the
controller's image; every partition has a leader that is in its ISR and active, or -1; the ISR
is a non-empty subset of the replicas and, while there is a leader, holds only active brokers;
leader and partition epochs never go back and the partition epoch moves on every change; no two
topics share an id. Failover (a new controller from the committed image) is one of the steps;
SCRAM credential changes interleave with the rest and follow a set model across failovers.
"""

from __future__ import annotations

import random
import uuid
from typing import TypeVar

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kafkapy.controller.controller import (
    AlterPartitionItem,
    ConfigChange,
    ConfigOp,
    ControllerConfig,
    ControllerResult,
    NewPartitions,
    NewTopic,
    QuorumController,
    Reassignment,
    ScramDeletion,
    ScramUpsertion,
)
from kafkapy.controller.image import MetadataImage, PartitionImage
from kafkapy.controller.records import ConfigResourceType, Endpoint, decode_record, encode_record
from kafkapy.protocol.errors import ErrorCode

T = TypeVar("T")
BROKERS = st.integers(1, 5)
TOPICS = st.sampled_from(["a", "b", "c"])
CONFIG = ControllerConfig(cluster_id="c", session_timeout_ms=1000)


class ControllerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.ctl = QuorumController(CONFIG, MetadataImage(), rng=random.Random(0))
        self.replica = MetadataImage()
        self.now_ms = 0
        self.failovers = 0
        self.seen: dict[tuple[uuid.UUID, int], PartitionImage] = {}
        self.scram: set[tuple[str, str]] = set()

    def commit(self, result: ControllerResult[T]) -> T:
        for record in result.records:
            self.replica.apply(decode_record(encode_record(record)), self.replica.offset + 1)
        assert self.replica == self.ctl.image
        return result.response

    def epoch(self, broker_id: int) -> int:
        reg = self.ctl.image.brokers.get(broker_id)
        return reg.epoch if reg is not None else -1

    @initialize()
    def three_brokers(self) -> None:
        for broker in (1, 2, 3):
            self.start_broker(broker)

    @rule(broker=BROKERS)
    def start_broker(self, broker: int) -> None:
        """Register and heartbeat caught up: the common path to an active broker."""
        self.register(broker, previous=True)
        self.heartbeat(broker, behind=False, want_fence=False, want_shutdown=False)

    @rule(broker=BROKERS, previous=st.booleans())
    def register(self, broker: int, previous: bool) -> None:
        self.commit(
            self.ctl.register_broker(
                broker,
                cluster_id="c",
                incarnation_id=uuid.uuid4(),
                endpoints=[Endpoint("PLAINTEXT", "h", broker)],
                now_ms=self.now_ms,
                previous_broker_epoch=self.epoch(broker) if previous else -1,
            )
        )

    @rule(
        broker=BROKERS,
        behind=st.booleans(),
        want_fence=st.booleans(),
        want_shutdown=st.booleans(),
    )
    def heartbeat(self, broker: int, behind: bool, want_fence: bool, want_shutdown: bool) -> None:
        offset = self.replica.offset - (3 if behind else 0)
        self.commit(
            self.ctl.broker_heartbeat(
                broker,
                self.epoch(broker),
                current_metadata_offset=offset,
                want_fence=want_fence and not want_shutdown,
                want_shutdown=want_shutdown,
                now_ms=self.now_ms,
            )
        )

    @rule(ms=st.integers(0, 800))
    def tick(self, ms: int) -> None:
        self.now_ms += ms
        self.commit(self.ctl.tick(self.now_ms))

    @rule(name=TOPICS, partitions=st.integers(1, 3), rf=st.integers(1, 3))
    def create_topic(self, name: str, partitions: int, rf: int) -> None:
        [res] = self.commit(self.ctl.create_topics([NewTopic(name, partitions, rf)]))
        event(f"create: {res.error.name}")

    @rule(name=TOPICS)
    def delete_topic(self, name: str) -> None:
        self.commit(self.ctl.delete_topics([name]))

    @rule(name=TOPICS, extra=st.integers(1, 2))
    def add_partitions(self, name: str, extra: int) -> None:
        topic = self.ctl.image.topics.get(name)
        count = (len(topic.partitions) if topic else 0) + extra
        self.commit(self.ctl.create_partitions([NewPartitions(name, count)]))

    @rule(name=TOPICS, data=st.data(), stale=st.booleans())
    def alter_partition(self, name: str, data: st.DataObject, stale: bool) -> None:
        topic = self.ctl.image.topics.get(name)
        if topic is None:
            return
        pid = data.draw(st.sampled_from(sorted(topic.partitions)))
        part = topic.partitions[pid]
        sender = part.leader if part.leader != -1 else part.replicas[0]
        others = data.draw(st.lists(st.sampled_from(part.replicas), unique=True))
        isr = [sender, *[r for r in others if r != sender]]
        item = AlterPartitionItem(
            name,
            None,
            pid,
            part.leader_epoch - (1 if stale else 0),
            [(r, -1) for r in isr],
            part.partition_epoch,
        )
        reply = self.commit(self.ctl.alter_partition(sender, self.epoch(sender), [item]))
        event(f"alter_partition: {reply.partitions[0].error.name}")

    @rule(unclean=st.booleans())
    def set_unclean(self, unclean: bool) -> None:
        op = ConfigOp("unclean.leader.election.enable", 0, "true" if unclean else "false")
        self.commit(
            self.ctl.incremental_alter_configs([ConfigChange(ConfigResourceType.BROKER, "", [op])])
        )

    @rule()
    def preferred_election(self) -> None:
        self.commit(self.ctl.elect_leaders(0, None))

    @rule(name=TOPICS, data=st.data(), unclean=st.booleans())
    def elect_leaders(self, name: str, data: st.DataObject, unclean: bool) -> None:
        """ElectLeaders for explicit partitions: each answer matches what happened (Kafka's
        rules), and an unclean election goes outside the ISR only when no ISR member is live."""
        topic = self.ctl.image.topics.get(name)
        if topic is None:
            return
        pids = data.draw(st.lists(st.sampled_from(sorted(topic.partitions)), unique=True))
        before = dict(topic.partitions)
        active = self.ctl.image.is_active
        results = self.commit(
            self.ctl.elect_leaders(1 if unclean else 0, [(name, p) for p in pids])
        )
        assert [(r.topic, r.partition) for r in results] == [(name, p) for p in pids]
        for r in results:
            old, new = before[r.partition], self.ctl.image.topics[name].partitions[r.partition]
            event(f"elect_leaders unclean={unclean}: {r.error.name}")
            if r.error is not ErrorCode.NONE:
                assert new == old
            if r.error is ErrorCode.ELECTION_NOT_NEEDED:
                assert old.leader == old.replicas[0] if not unclean else active(old.leader)
            elif r.error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE:
                assert not unclean
                assert old.replicas[0] not in old.isr or not active(old.replicas[0])
            elif r.error is ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE:
                assert unclean
                assert not any(active(b) for b in old.replicas)
            else:
                assert r.error is ErrorCode.NONE
                assert new.leader != -1
                assert active(new.leader)
                assert new.leader_epoch > old.leader_epoch
                first = old.replicas[0]
                if not unclean and first in old.isr and active(first):
                    assert new.leader == first
                if unclean and not any(active(b) for b in old.isr):
                    assert new.isr == (new.leader,)
                else:
                    assert new.leader in old.isr

    @rule(name=TOPICS, data=st.data(), cancel=st.booleans())
    def reassign(self, name: str, data: st.DataObject, cancel: bool) -> None:
        """Start, change or cancel a reassignment: the answer matches what happened."""
        topic = self.ctl.image.topics.get(name)
        if topic is None:
            return
        pid = data.draw(st.sampled_from(sorted(topic.partitions)))
        old = topic.partitions[pid]
        target = None if cancel else data.draw(st.lists(BROKERS, min_size=1, max_size=3))
        [r] = self.commit(self.ctl.alter_partition_reassignments([Reassignment(name, pid, target)]))
        event(f"reassign cancel={cancel}: {r.error.name}")
        new = self.ctl.image.topics[name].partitions[pid]
        if r.error is not ErrorCode.NONE:
            assert new == old
            if r.error is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS:
                assert cancel
                assert not old.adding_replicas
                assert not old.removing_replicas
            return
        if target is not None:
            moving = new.adding_replicas or new.removing_replicas
            # the target replicas, first and in order; the ones leaving after them
            assert new.replicas[: len(target)] == tuple(target)
            assert set(new.replicas) == set(target) | (set(old.replicas) if moving else set())
        else:
            assert not new.adding_replicas
            assert not new.removing_replicas
            assert set(new.replicas) == set(old.replicas) - set(old.adding_replicas)

    @rule(user=st.sampled_from(["u", "v"]), mechanism=st.sampled_from([1, 2]), delete=st.booleans())
    def alter_scram(self, user: str, mechanism: int, delete: bool) -> None:
        key = (user, {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}[mechanism])
        if delete:
            result = self.ctl.alter_user_scram_credentials([ScramDeletion(user, mechanism)], [])
            (r,) = self.commit(result)
            assert r.error is (ErrorCode.NONE if key in self.scram else ErrorCode.RESOURCE_NOT_FOUND)
            self.scram.discard(key)
        else:
            upsert = ScramUpsertion(user, mechanism, 4096, b"salt", b"salted")
            (r,) = self.commit(self.ctl.alter_user_scram_credentials([], [upsert]))
            assert r.error is ErrorCode.NONE
            self.scram.add(key)
        # across failovers too: a new controller knows the credentials from the image
        assert set(self.ctl.image.scram_credentials) == self.scram

    @rule()
    def failover(self) -> None:
        # A fresh seed per failover: a re-seeded rng would hand out deleted topics' ids again.
        self.failovers += 1
        rng = random.Random(self.failovers)
        self.ctl = QuorumController(CONFIG, self.replica, now_ms=self.now_ms, rng=rng)

    @invariant()
    def partitions_are_sane(self) -> None:
        image = self.ctl.image
        assert len(image.topics_by_id) == len(image.topics)
        for topic in image.topics.values():
            assert image.topics_by_id[topic.topic_id] == topic.name
            for pid, part in topic.partitions.items():
                assert part.isr
                assert set(part.isr) <= set(part.replicas)
                assert set(part.adding_replicas) <= set(part.replicas)
                assert set(part.removing_replicas) <= set(part.replicas)
                assert not set(part.adding_replicas) & set(part.removing_replicas)
                target = [r for r in part.replicas if r not in part.removing_replicas]
                if part.adding_replicas or part.removing_replicas:
                    assert not set(target) <= set(part.isr)  # else it would have completed
                if part.leader != -1:
                    assert part.leader in part.isr
                    assert all(image.is_active(r) for r in part.isr)
                old = self.seen.get((topic.topic_id, pid))
                if old is not None:
                    assert part.leader_epoch >= old.leader_epoch
                    if part.leader != old.leader:
                        event("leader moved")
                        assert part.leader_epoch > old.leader_epoch
                    if part != old:
                        assert part.partition_epoch > old.partition_epoch
                self.seen[(topic.topic_id, pid)] = part

    @invariant()
    def heartbeat_errors_are_clean(self) -> None:
        # A broker id never registered gets BROKER_ID_NOT_REGISTERED, never a crash.
        r = self.ctl.broker_heartbeat(99, 0, current_metadata_offset=0, now_ms=self.now_ms)
        assert r.response.error is ErrorCode.BROKER_ID_NOT_REGISTERED
        assert r.records == []


ControllerMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=50, deadline=None
)
test_controller_stateful = ControllerMachine.TestCase
