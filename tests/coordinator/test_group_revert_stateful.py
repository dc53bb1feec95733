"""Hypothesis stateful test: the random clients of test_group_stateful.py while the disk under
`__consumer_offsets` fails now and then.

While the disk fails (for the next few writes), every operation or timer that writes records gets them reverted as the
driver does (`GroupCoordinator.revert` against the records written so far), and its own answer
becomes the handler's NOT_COORDINATOR. All the invariants of the plain machine must still hold
- in particular, accepted commits are what OffsetFetch returns and replaying only the records
that were written rebuilds the durable state - and no request a client still waits for is
forgotten: each is answered or held by a member of the group.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from kafkapy.coordinator.group import (
    PENDING,
    GroupConfig,
    GroupCoordinator,
    JoinGroupResult,
    LeaveGroupResult,
    Result,
    SyncGroupResult,
    encode_key,
    encode_value,
)
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness
from .test_group_stateful import GroupMachine

FAILED = ErrorCode.NOT_COORDINATOR


def _as_handler_answer(response: Any) -> Any:
    """What the handler sends when `finish` raised for a write of this operation."""
    if isinstance(response, JoinGroupResult):
        return JoinGroupResult(FAILED, member_id=response.member_id)
    if isinstance(response, SyncGroupResult):
        return SyncGroupResult(FAILED)
    if isinstance(response, LeaveGroupResult):
        return LeaveGroupResult(FAILED)
    if isinstance(response, list):
        return [(tp, FAILED) for tp, _ in response]
    return response  # PENDING (answered by a completion), None (timers)


@dataclass
class FlakyHarness(Harness):
    fail_writes: int = 0  # how many of the next writes fail
    reverted: int = 0

    def _take(self, result: Result[Any]) -> None:
        if not (self.fail_writes > 0 and result.records):
            super()._take(result)
            return
        self.fail_writes -= 1
        log_state = GroupCoordinator(self.config)
        for r in self.records:  # only what was written
            log_state.replay_bytes(
                encode_key(r.key), encode_value(r.value), producer_id=r.producer_id
            )
        reverted = self.coordinator.revert(
            result.records, log_state, error=FAILED, now_ms=self.now_ms,
            completions=result.completions,
        )
        if result.response is not PENDING:
            result.response = _as_handler_answer(result.response)
        self.reverted += 1
        super()._take(reverted)  # type: ignore[arg-type]


class FlakyDiskMachine(GroupMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = FlakyHarness(GroupConfig(initial_rebalance_delay_ms=0))

    @rule(writes=st.integers(1, 4))
    def disk_fails(self, writes: int) -> None:
        assert isinstance(self.h, FlakyHarness)
        self.h.fail_writes = writes

    @rule(writes=st.integers(1, 4))
    def disk_fails_again(self, writes: int) -> None:  # twice as likely as any client action
        self.disk_fails(writes)

    @invariant()
    def no_request_is_forgotten(self) -> None:
        group = self.h.coordinator.groups.get("g")
        held: set[int] = set()
        if group is not None:
            for m in group.members.values():
                held |= {rid for rid in (m.awaiting_join, m.awaiting_sync) if rid is not None}
        for c in self.clients:
            for rid in (c.join_rid, c.sync_rid):
                assert rid is None or rid in self.h.answers or rid in held, rid


TestFlakyDiskMachine = FlakyDiskMachine.TestCase
TestFlakyDiskMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
