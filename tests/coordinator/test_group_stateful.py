"""Hypothesis stateful test: random clients against one group, checking invariants throughout.

Clients behave like real ones (join, sync with the generation they got, heartbeat, commit,
leave, crash = go silent) while time moves; the invariants are what users rely on: every
request is answered at most once, states follow the table, a Stable group's leader is a member,
generations never go back, accepted commits are what OffsetFetch returns, and replaying the
records rebuilds the durable state.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.coordinator.group import (
    GroupConfig,
    GroupState,
    JoinGroupResult,
    OffsetToCommit,
    SyncGroupResult,
    TopicPartition,
)
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness, subscription

N_CLIENTS = 4


@dataclass
class Client:
    member_id: str = ""
    generation: int = -1
    join_rid: int | None = None
    sync_rid: int | None = None
    instance: str | None = None


class GroupMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness(GroupConfig(initial_rebalance_delay_ms=0))
        self.clients = [Client(instance=f"i{i}" if i % 2 else None) for i in range(N_CLIENTS)]
        self.max_generation = 0
        self.committed: dict[TopicPartition, int] = {}
        self.seen_answers = 0

    def _collect(self) -> None:
        """Route completed Join/SyncGroup answers to the clients that asked."""
        for c in self.clients:
            if c.join_rid is not None and c.join_rid in self.h.answers:
                answer = self.h.answers[c.join_rid]
                assert isinstance(answer, JoinGroupResult)
                c.join_rid = None
                if answer.error in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED):
                    c.member_id = answer.member_id
                if answer.error is ErrorCode.NONE:
                    c.generation = answer.generation_id
                elif answer.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    c.member_id, c.generation = "", -1
            if c.sync_rid is not None and c.sync_rid in self.h.answers:
                answer = self.h.answers[c.sync_rid]
                assert isinstance(answer, SyncGroupResult)
                c.sync_rid = None
                if answer.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                    c.member_id, c.generation = "", -1

    @rule(i=st.integers(0, N_CLIENTS - 1), meta=st.sampled_from([b"", b"x"]))
    def join(self, i: int, meta: bytes) -> None:
        c = self.clients[i]
        if c.join_rid is not None:
            return
        c.join_rid, _ = self.h.join(
            member_id=c.member_id, instance=c.instance, client=f"c{i}",
            protocols=[("range", subscription("t", user_data=meta))],
        )
        self._collect()

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def sync(self, i: int) -> None:
        c = self.clients[i]
        if not c.member_id or c.sync_rid is not None:
            return
        group = self.h.coordinator.groups.get("g")
        members = list(group.members) if group else []
        c.sync_rid, _ = self.h.sync(
            c.member_id, c.generation, instance=c.instance,
            assignments=[(m, m.encode()) for m in members[:2]],
        )
        self._collect()

    @rule()
    def everyone_syncs(self) -> None:
        """Live clients answer a completed join together, as real ones do within ms."""
        for i in range(N_CLIENTS):
            self.sync(i)

    @rule()
    def everyone_rejoins(self) -> None:
        for i in range(N_CLIENTS):
            if self.clients[i].member_id:
                self.join(i, b"")

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def heartbeat(self, i: int) -> None:
        c = self.clients[i]
        if c.member_id:
            error = self.h.heartbeat(c.member_id, c.generation, instance=c.instance)
            if error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID):
                c.member_id, c.generation = "", -1

    @rule(i=st.integers(0, N_CLIENTS - 1), offset=st.integers(0, 1000))
    def commit(self, i: int, offset: int) -> None:
        c = self.clients[i]
        result = self.h.coordinator.commit_offsets(
            group_id="g", member_id=c.member_id, group_instance_id=c.instance,
            generation_id=c.generation if c.member_id else -1,
            offsets=[OffsetToCommit("t", i % 2, offset)], now_ms=self.h.now_ms,
        )
        self.h.take(result)  # type: ignore[arg-type]
        assert isinstance(result.response, list)
        [(tp, error)] = result.response
        if error is ErrorCode.NONE:
            self.committed[tp] = offset

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def leave(self, i: int) -> None:
        c = self.clients[i]
        if not c.member_id:
            return
        result = self.h.coordinator.leave_group(
            group_id="g", members=[(c.member_id, c.instance)], now_ms=self.h.now_ms
        )
        self.h.take(result)  # type: ignore[arg-type]
        self._collect()
        c.member_id, c.generation = "", -1

    @rule(i=st.integers(0, N_CLIENTS - 1))
    def crash(self, i: int) -> None:
        """The process dies: it forgets everything; its requests stay pending at the broker."""
        instance = self.clients[i].instance
        self.clients[i] = Client(instance=instance)

    @rule(ms=st.sampled_from([100, 3000, 11_000, 40_000]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)
        self._collect()

    @precondition(lambda self: "g" in self.h.coordinator.groups)
    @invariant()
    def group_is_consistent(self) -> None:
        group = self.h.coordinator.groups["g"]
        assert group.generation >= self.max_generation
        self.max_generation = group.generation
        if group.state is GroupState.EMPTY:
            assert not group.members
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            assert group.members
            assert group.leader in group.members
            assert group.protocol is not None
        for iid, mid in group.static_members.items():
            assert group.members[mid].group_instance_id == iid
        for m in group.members.values():
            assert m.awaiting_sync is None or group.state is GroupState.COMPLETING_REBALANCE
            assert m.awaiting_join is None or group.state is GroupState.PREPARING_REBALANCE

    @invariant()
    def commits_are_visible(self) -> None:
        result = self.h.coordinator.fetch_offsets(group_id="g", partitions=list(self.committed))
        for p in result.response.partitions:  # type: ignore[union-attr]
            assert p.offset == self.committed[TopicPartition(p.topic, p.partition)]

    @invariant()
    def replay_rebuilds_durable_state(self) -> None:
        live = self.h.coordinator.groups.get("g")
        if live is None or live.state not in (GroupState.STABLE, GroupState.EMPTY):
            return
        loaded = self.h.replayed().groups.get("g")
        if loaded is None:  # a group that never completed a generation has no record yet
            assert live.generation == 0
            return
        assert (loaded.state, loaded.generation, loaded.protocol, loaded.leader) == (
            live.state, live.generation, live.protocol, live.leader)
        assert {k: v.assignment for k, v in loaded.members.items()} == {
            k: v.assignment for k, v in live.members.items()}


TestGroupMachine = GroupMachine.TestCase
TestGroupMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
