"""Hypothesis stateful test of KIP-848 reconciliation: random members against one group.

Members join (some with a static instance id), heartbeat with or without reporting what they
own, leave, go silent (fenced by the session timeout) while time moves and partitions are
added. What users rely on, checked after every step: no partition is ever held by two members
(assigned or still being revoked); member epochs never pass the group's assignment epoch; the
records written rebuild exactly the live state. And whenever every member keeps heartbeating,
the group becomes Stable with every subscribed partition assigned exactly once (after the
session timeout of any static member that left for a restart, which keeps its partitions).
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.coordinator.group import ConsumerGroupState
from kafkapy.coordinator.group.consumer_state import as_set
from kafkapy.protocol.errors import ErrorCode

from .test_group_consumer import CH, Consumer

N = 4
TOPIC_SETS = [["t"], ["u"], ["t", "u"]]


class ReconcileMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = CH(topics={"t": 4, "u": 3})
        self.clients = [Consumer() for _ in range(N)]
        self.live = [False] * N
        self.subs: list[list[str]] = [["t"]] * N

    @property
    def group(self):  # type: ignore[no-untyped-def]
        return self.h.coordinator.consumer_groups.get("g")

    def _reset(self, i: int) -> None:
        self.clients[i] = Consumer()
        self.live[i] = False

    @rule(
        i=st.integers(0, N - 1),
        topics=st.sampled_from(TOPIC_SETS),
        assignor=st.sampled_from([None, "range", "uniform"]),
    )
    def join(self, i: int, topics: list[str], assignor: str | None) -> None:
        if self.live[i]:
            return
        c = self.clients[i] = Consumer()
        r = self.h.join(c, topics, assignor=assignor, instance=f"i{i}" if i % 2 else None)
        assert r.error is ErrorCode.NONE, r
        self.live[i], self.subs[i] = True, topics

    @rule(i=st.integers(0, N - 1), report_owned=st.booleans())
    def heartbeat(self, i: int, report_owned: bool) -> None:
        if not self.live[i]:
            return
        c = self.clients[i]
        r = self.h.ack(c) if report_owned else self.h.beat(c)
        if r.error in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            self._reset(i)  # fenced while silent: the client rejoins later
        else:
            assert r.error is ErrorCode.NONE, r

    @rule(i=st.integers(0, N - 1), topics=st.sampled_from(TOPIC_SETS))
    def resubscribe(self, i: int, topics: list[str]) -> None:
        if self.live[i]:
            r = self.h.beat(self.clients[i], topics=topics, owned=self.clients[i].owned)
            if r.error is ErrorCode.NONE:
                self.subs[i] = topics
            else:
                self._reset(i)

    @rule(i=st.integers(0, N - 1), static=st.booleans())
    def leave(self, i: int, static: bool) -> None:
        if self.live[i]:
            r = self.h.beat(self.clients[i], epoch=-2 if static and i % 2 else -1)
            assert r.error in (ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID)
            self._reset(i)

    @rule(ms=st.sampled_from([1_000, 20_000, 46_000]))
    def time_passes(self, ms: int) -> None:
        self.h.tick(ms)

    @rule(topic=st.sampled_from(["t", "u"]))
    def add_partition(self, topic: str) -> None:
        if self.h.topics[topic] < 8:
            self.h.topics[topic] += 1

    @rule()
    def everyone_keeps_heartbeating(self) -> None:
        """Live members heartbeat, reporting what they own, for longer than a session timeout:
        a static member that left for a restart (epoch -2) keeps its partitions until then."""
        for step in range(6 * N):
            if step % N == N - 1:
                self.h.tick(10_000)
            for i in range(N):
                if self.live[i]:
                    self.heartbeat(i, report_owned=True)
        group = self.group
        if group is None:
            return
        live_members = {mid for mid, m in group.members.items() if m.member_epoch >= 0}
        assert live_members == {
            c.member_id for c, up in zip(self.clients, self.live, strict=False) if up
        }
        if not live_members:
            return
        assert group.state is ConsumerGroupState.STABLE
        held = [tp for mid in live_members for tp in as_set(group.members[mid].assigned)]
        wanted = {
            (t, p)
            for i in range(N)
            if self.live[i]
            for t in self.subs[i]
            for p in range(self.h.topics[t])
        }
        assert sorted(held) == sorted(wanted), "every subscribed partition assigned once"
        for i in range(N):
            if self.live[i]:
                c = self.clients[i]
                assert {(t, p) for t, ps in c.owned.items() for p in ps} == as_set(
                    group.members[c.member_id].assigned
                )

    @invariant()
    def no_partition_held_twice(self) -> None:
        group = self.group
        if group is None:
            return
        seen: dict[tuple[str, int], str] = {}
        for mid, m in group.members.items():
            for tp in as_set(m.assigned) | as_set(m.pending_revocation):
                assert tp not in seen, f"{tp} held by {seen[tp]} and {mid}"
                seen[tp] = mid
            assert m.member_epoch <= group.assignment_epoch
        assert group.assignment_epoch == group.group_epoch

    @invariant()
    def replay_equals_live_state(self) -> None:
        live = self.h.coordinator.consumer_groups
        again = self.h.replayed().consumer_groups
        assert again.keys() == live.keys()
        for gid, g in live.items():
            r = again[gid]
            assert (r.group_epoch, r.assignment_epoch, r.topics) == (
                g.group_epoch,
                g.assignment_epoch,
                g.topics,
            )
            assert r.members == g.members
            assert r.owners == g.owners


ReconcileMachine.TestCase.settings = settings(
    max_examples=60, stateful_step_count=30, deadline=None
)
TestReconcile = ReconcileMachine.TestCase
