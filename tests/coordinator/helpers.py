"""A small harness around GroupCoordinator: assigns request ids, collects completions and
records, and checks that no request is ever answered twice."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from kafkapy.coordinator.group import (
    PENDING,
    GroupConfig,
    GroupCoordinator,
    GroupRecord,
    JoinGroupResult,
    Result,
    SyncGroupResult,
    encode_key,
    encode_value,
)

CONSUMER = "consumer"


def subscription(*topics: str, user_data: bytes = b"") -> bytes:
    """A consumer-protocol Subscription v0 (what the Java/librdkafka clients send)."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for t in topics:
        raw = t.encode()
        out += len(raw).to_bytes(2, "big") + raw
    return out + len(user_data).to_bytes(4, "big", signed=True) + user_data


@dataclass
class Harness:
    config: GroupConfig = field(default_factory=lambda: GroupConfig(initial_rebalance_delay_ms=0))
    now_ms: int = 0
    coordinator: GroupCoordinator = field(init=False)
    answers: dict[int, JoinGroupResult | SyncGroupResult] = field(default_factory=dict)
    records: list[GroupRecord] = field(default_factory=list)

    def __post_init__(self) -> None:
        counter = itertools.count(1)
        self.coordinator = GroupCoordinator(
            self.config, member_id_factory=lambda client: f"{client}-{next(counter)}"
        )
        self.coordinator.load_complete(self.now_ms)
        self._ids = itertools.count(1)

    def _take(self, result: Result[object]) -> None:
        self.records.extend(result.records)
        for c in result.completions:
            assert c.request_id not in self.answers, f"request {c.request_id} answered twice"
            self.answers[c.request_id] = c.response

    def join(
        self, group: str = "g", member_id: str = "", *, instance: str | None = None,
        client: str = "c", protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = CONSUMER, session_ms: int = 10_000, rebalance_ms: int = 30_000,
        v4: bool = True,
    ) -> tuple[int, JoinGroupResult | None]:
        """Send JoinGroup; returns (request id, immediate answer or None if pending)."""
        rid = next(self._ids)
        result = self.coordinator.join_group(
            request_id=rid, group_id=group, member_id=member_id, group_instance_id=instance,
            client_id=client, client_host="/127.0.0.1", session_timeout_ms=session_ms,
            rebalance_timeout_ms=rebalance_ms, protocol_type=protocol_type,
            protocols=protocols if protocols is not None else [("range", subscription("t"))],
            require_known_member_id=v4, now_ms=self.now_ms,
        )
        self._take(result)
        if result.response is PENDING:
            return rid, None
        assert isinstance(result.response, JoinGroupResult)
        self.answers[rid] = result.response
        return rid, result.response

    def join_new(self, group: str = "g", **kw: Any) -> int:
        """A v4+ first join: MEMBER_ID_REQUIRED, then the real join. Returns the request id."""
        _, first = self.join(group, **kw)
        assert first is not None
        if first.error.name != "MEMBER_ID_REQUIRED":
            raise AssertionError(first)
        rid, _ = self.join(group, first.member_id, **kw)
        return rid

    def sync(
        self, member_id: str, generation: int, group: str = "g", *,
        assignments: list[tuple[str, bytes]] | None = None, instance: str | None = None,
        protocol_type: str | None = None, protocol_name: str | None = None,
    ) -> tuple[int, SyncGroupResult | None]:
        rid = next(self._ids)
        result = self.coordinator.sync_group(
            request_id=rid, group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=assignments or [], now_ms=self.now_ms,
        )
        self._take(result)
        if result.response is PENDING:
            return rid, None
        assert isinstance(result.response, SyncGroupResult)
        self.answers[rid] = result.response
        return rid, result.response

    def heartbeat(self, member_id: str, generation: int, group: str = "g", *,
                  instance: str | None = None) -> object:
        result = self.coordinator.heartbeat(
            group_id=group, generation_id=generation, member_id=member_id,
            group_instance_id=instance, now_ms=self.now_ms,
        )
        self._take(result)
        return result.response

    def advance(self, ms: int) -> None:
        """Move time forward, firing every timer at its own deadline (like the driver)."""
        target = self.now_ms + ms
        for _ in range(100_000):
            deadline = self.coordinator.next_deadline()
            if deadline is None or deadline > target:
                break
            self.now_ms = max(self.now_ms, deadline)
            self._take(self.coordinator.poll(self.now_ms))
        self.now_ms = target

    def take(self, result: Result[object]) -> object:
        self._take(result)
        return result.response

    def replayed(self) -> GroupCoordinator:
        """A fresh coordinator rebuilt from the records' bytes, as at broker start-up."""
        fresh = GroupCoordinator(self.config)
        for r in self.records:
            fresh.replay_bytes(encode_key(r.key), encode_value(r.value), producer_id=r.producer_id)
        fresh.load_complete(self.now_ms)
        return fresh
