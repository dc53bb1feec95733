"""Fetch sessions (KIP-227): the cache as a model-checked state machine, and the wire protocol."""

from __future__ import annotations

import uuid

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.broker.fetch_session import FetchSessionCache, SessionPartition
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import FetchRequest, ProduceRequest
from tests.server.helpers import Client, batch, create_topic, running_broker

FETCH_V = 12


class SessionCacheModel(RuleBasedStateMachine):
    """The cache never holds more than max_slots consumer sessions, never evicts a recently
    used one for another consumer's, evicts the least recently used one first, and never
    refuses or evicts a follower's session for a consumer's."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = FetchSessionCache(3, evict_idle_ms=100, seed=1)
        self.now = 0
        self.last_used: dict[int, int] = {}
        self.lru: list[int] = []  # least recently used first
        self.followers: set[int] = set()

    @rule(dt=st.integers(0, 80))
    def tick(self, dt: int) -> None:
        self.now += dt

    @rule(privileged=st.booleans())
    def create(self, privileged: bool) -> None:
        before = dict(self.last_used)
        session = self.cache.create({("t", 0): SessionPartition(0, 100)}, self.now, privileged=privileged)
        consumers = [s for s in self.lru if s not in self.followers]
        if len(before) < 3 or (privileged and not consumers):
            assert session is not None
        elif not consumers:
            assert session is None  # the slots are followers': a consumer does without
        elif privileged or self.now - before[consumers[0]] >= 100:
            assert session is not None
            del self.last_used[consumers[0]]
            self.lru.remove(consumers[0])
        else:
            assert session is None
        if session is not None:
            assert session.session_id not in before
            assert session.epoch == 1
            self.last_used[session.session_id] = self.now
            self.lru.append(session.session_id)
            if privileged:
                self.followers.add(session.session_id)

    @precondition(lambda self: bool(self.last_used))
    @rule(data=st.data())
    def use(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.last_used)))
        assert self.cache.get(sid, self.now) is not None
        self.last_used[sid] = self.now
        self.lru.remove(sid)
        self.lru.append(sid)

    @precondition(lambda self: bool(self.last_used))
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        sid = data.draw(st.sampled_from(sorted(self.last_used)))
        assert self.cache.remove(sid) is not None
        del self.last_used[sid]
        self.lru.remove(sid)
        self.followers.discard(sid)

    @invariant()
    def matches_model(self) -> None:
        assert len(self.cache) == len(self.last_used) <= max(3, len(self.followers))
        assert self.followers <= set(self.last_used)  # no follower session was ever evicted


TestSessionCache = SessionCacheModel.TestCase
TestSessionCache.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)


def _fetch(topic: str, partitions: list[tuple[int, int]], *, session_id: int, epoch: int,
           forgotten: list[int] | None = None) -> FetchRequest:
    req = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=session_id, session_epoch=epoch)
    if partitions:
        req.topics = [FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20) for p, o in partitions])]
    if forgotten:
        req.forgotten_topics_data = [FetchRequest.ForgottenTopic(topic=topic, partitions=forgotten)]
    return req


def _parts(resp: object) -> dict[int, int]:
    """partition -> number of records bytes, over the response."""
    return {p.partition_index: len(p.records or b"") for t in resp.responses for p in t.partitions}  # type: ignore[attr-defined]


async def test_full_then_incremental_fetches_carry_only_changes() -> None:
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "s", 3)
        client = await Client.connect(port)
        full = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [(0, 0), (1, 0), (2, 0)], session_id=0, epoch=0))
        assert full.error_code == 0
        assert full.session_id != 0
        assert set(_parts(full)) == {0, 1, 2}
        sid = full.session_id
        # nothing changed: an incremental fetch returns no partitions at all
        quiet = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [], session_id=sid, epoch=1))
        assert (quiet.error_code, quiet.session_id, _parts(quiet)) == (0, sid, {})
        # data on partition 1 only: only partition 1 comes back
        produce = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
            name="s", partition_data=[ProduceRequest.PartitionProduceData(index=1, records=batch(b"x"))])])
        await client.request(ApiKey.PRODUCE, 9, produce)
        changed = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [], session_id=sid, epoch=2))
        assert list(_parts(changed)) == [1]
        assert _parts(changed)[1] > 0
        # forget partition 2, move partition 1 past the record: quiet again
        moved = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [(1, 1)], session_id=sid, epoch=3, forgotten=[2]))
        assert _parts(moved) == {}
        assert broker.fetch_sessions.get(sid, 0) is not None
        assert set(broker.fetch_sessions.get(sid, 0).partitions) == {("s", 0), ("s", 1)}  # type: ignore[union-attr]


async def test_session_errors_and_close() -> None:
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "s", 1)
        client = await Client.connect(port)
        unknown = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [], session_id=12345, epoch=1))
        assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        full = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [(0, 0)], session_id=0, epoch=0))
        wrong = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [], session_id=full.session_id, epoch=5))
        assert wrong.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
        closing = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [(0, 0)], session_id=full.session_id, epoch=-1))
        assert (closing.error_code, closing.session_id) == (0, 0)
        assert len(broker.fetch_sessions) == 0


async def test_sessions_beyond_the_cache_size_fall_back_to_sessionless() -> None:
    async with running_broker(None, **{"max.incremental.fetch.session.cache.slots": "1"}) as (_, _, port):
        await create_topic(port, "s", 1)
        client = await Client.connect(port)
        first = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [(0, 0)], session_id=0, epoch=0))
        second = await client.request(ApiKey.FETCH, FETCH_V, _fetch("s", [(0, 0)], session_id=0, epoch=0))
        assert first.session_id != 0
        assert (second.error_code, second.session_id) == (0, 0)


async def test_topic_ids_in_v13_and_unknown_topic_id() -> None:
    async with running_broker(None) as (_, _, port):
        info = await create_topic(port, "ids", 1)
        client = await Client.connect(port)
        stranger = uuid.uuid4()
        req = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_epoch=-1, topics=[
            FetchRequest.FetchTopic(topic_id=info.topic_id, partitions=[FetchRequest.FetchPartition(partition=0, partition_max_bytes=100)]),
            FetchRequest.FetchTopic(topic_id=stranger, partitions=[FetchRequest.FetchPartition(partition=0, partition_max_bytes=100)]),
        ])
        resp = await client.request(ApiKey.FETCH, 13, req)
        got = {t.topic_id: t.partitions[0].error_code for t in resp.responses}
        assert got == {info.topic_id: 0, stranger: ErrorCode.UNKNOWN_TOPIC_ID}


async def test_sessions_rotate_partitions_so_none_starves() -> None:
    """With a budget for one batch per fetch, a session serves both busy partitions in turn."""
    async with running_broker(None) as (_, _, port):
        await create_topic(port, "busy", 2)
        client = await Client.connect(port)
        for p in (0, 1):
            for i in range(4):
                produce = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
                    name="busy", partition_data=[ProduceRequest.PartitionProduceData(index=p, records=batch(b"%d" % i))])])
                await client.request(ApiKey.PRODUCE, 9, produce)
        req = _fetch("busy", [(0, 0), (1, 0)], session_id=0, epoch=0)
        req.max_bytes = 1
        first = await client.request(ApiKey.FETCH, FETCH_V, req)
        served = [p for p, size in _parts(first).items() if size]
        follow = _fetch("busy", [], session_id=first.session_id, epoch=1)
        follow.max_bytes = 1
        second = await client.request(ApiKey.FETCH, FETCH_V, follow)
        served += [p for p, size in _parts(second).items() if size]
        assert sorted(served) == [0, 1]
