"""Model-based property tests for producer state.

Random producers (honest sends, retries, gaps, zombies, epoch bumps, coordinator markers), time
passing, expiration sweeps, high-watermark moves, snapshots and restarts. A small independent
model predicts every outcome; after every step:

- the last stable offset never exceeds the first offset of an open transaction (and equals the
  model's LSO exactly);
- a snapshot round trip is lossless;
- rebuilding from any earlier snapshot plus a replay of the log reproduces the live state.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from kafkapy.coordinator.idempotence import (
    AbortedTxn,
    AppendOrigin,
    ControlType,
    ProducerBatch,
    ProducerStateError,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)
from kafkapy.protocol.errors import ErrorCode

EXPIRY = 1_000
PIDS = st.integers(0, 3)


@dataclass
class Producer:
    """Client view plus the model of the broker's entry for one producer id."""

    epoch: int = 0  # the client's epoch
    next_seq: int = 0
    written: list[tuple[int, int, int]] = field(default_factory=list)  # (seq, count, offset)
    known: bool = False  # the broker holds an entry
    broker_epoch: int = -1
    last_ts: int = 0
    open_first: int | None = None


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.mgr = ProducerStateManager(producer_id_expiration_ms=EXPIRY)
        self.now = 0
        self.leo = 0
        self.hw = 0
        self.log: list[ProducerBatch] = []
        self.producers: dict[int, Producer] = {}
        self.unreplicated: list[tuple[int, int]] = []  # (first offset, marker offset)
        self.snapshots: list[bytes] = [encode_snapshot(self.mgr.export_snapshot())]

    # ---------------------------------------------------------------- helpers

    def producer(self, pid: int) -> Producer:
        return self.producers.setdefault(pid, Producer())

    def expired(self, p: Producer) -> bool:
        return p.known and p.open_first is None and self.now - p.last_ts >= EXPIRY

    def live(self, p: Producer) -> bool:
        # only the sweep forgets a producer: an idle one keeps its state until it runs
        return p.known

    def batch(self, pid: int, epoch: int, seq: int, n: int, txn: bool) -> ProducerBatch:
        return ProducerBatch(
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=seq,
            last_offset_delta=n - 1,
            base_offset=self.leo,
            max_timestamp=self.now,
            is_transactional=txn,
        )

    def expect_error(self, batch: ProducerBatch, code: ErrorCode, origin: AppendOrigin) -> None:
        before = self.mgr.export_snapshot()
        with pytest.raises(ProducerStateError) as info:
            self.mgr.check_and_update(batch, self.now, origin)
        assert info.value.error_code is code
        assert self.mgr.export_snapshot() == before

    def append(
        self, batch: ProducerBatch, origin: AppendOrigin = AppendOrigin.CLIENT
    ) -> tuple[AbortedTxn, ...]:
        result = self.mgr.check_and_update(batch, self.now, origin)
        assert result.duplicate is None
        self.log.append(batch)
        self.leo = batch.last_offset + 1
        return result.aborted

    def model_lso(self) -> int:
        firsts = [p.open_first for p in self.producers.values() if p.open_first is not None]
        firsts += [first for first, _ in self.unreplicated]
        return min([*firsts, self.hw])

    # ---------------------------------------------------------------- client sends

    @rule(pid=PIDS, n=st.integers(1, 3), txn=st.booleans())
    def send_next(self, pid: int, n: int, txn: bool) -> None:
        p = self.producer(pid)
        if not txn and p.open_first is not None:
            txn = True  # an honest client stays transactional until the marker
        batch = self.batch(pid, p.epoch, p.next_seq, n, txn)
        if not self.live(p) and p.next_seq != 0:
            self.expect_error(batch, ErrorCode.UNKNOWN_PRODUCER_ID, AppendOrigin.CLIENT)
            p.next_seq, p.written = 0, []  # the client resets its sequence
            return
        fresh = not self.live(p) or p.epoch != p.broker_epoch
        self.append(batch)
        if fresh:
            p.written = []
        p.written.append((p.next_seq, n, batch.base_offset))
        p.next_seq += n
        p.known, p.broker_epoch, p.last_ts = True, p.epoch, self.now
        if txn and p.open_first is None:
            p.open_first = batch.base_offset

    @precondition(lambda self: any(self.live(p) and p.written for p in self.producers.values()))
    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        pid = data.draw(
            st.sampled_from(
                sorted(k for k, p in self.producers.items() if self.live(p) and p.written)
            )
        )
        p = self.producers[pid]
        index = data.draw(st.integers(0, len(p.written) - 1))
        seq, n, offset = p.written[index]
        batch = self.batch(pid, p.epoch, seq, n, p.open_first is not None)
        if index < len(p.written) - 5:
            self.expect_error(batch, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, AppendOrigin.CLIENT)
            return
        before = self.mgr.export_snapshot()
        result = self.mgr.check_and_update(batch, self.now)
        assert result.duplicate is not None
        assert (result.duplicate.first_offset, result.duplicate.last_offset) == (
            offset,
            offset + n - 1,
        )
        assert self.mgr.export_snapshot() == before

    @rule(pid=PIDS, skip=st.integers(1, 3))
    def gap(self, pid: int, skip: int) -> None:
        p = self.producer(pid)
        batch = self.batch(pid, p.epoch, p.next_seq + skip, 1, p.open_first is not None)
        # unknown (or expired) producers must start at 0; known ones must follow their last
        # sequence, and a bumped epoch must start at 0 too
        live = self.live(p)
        code = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER if live else ErrorCode.UNKNOWN_PRODUCER_ID
        self.expect_error(batch, code, AppendOrigin.CLIENT)

    @precondition(
        lambda self: any(self.live(p) and p.broker_epoch > 0 for p in self.producers.values())
    )
    @rule(data=st.data())
    def zombie(self, data: st.DataObject) -> None:
        pid = data.draw(
            st.sampled_from(
                sorted(k for k, p in self.producers.items() if self.live(p) and p.broker_epoch > 0)
            )
        )
        p = self.producers[pid]
        batch = self.batch(pid, p.broker_epoch - 1, data.draw(st.integers(0, 5)), 1, True)
        self.expect_error(batch, ErrorCode.INVALID_PRODUCER_EPOCH, AppendOrigin.CLIENT)

    @rule(pid=PIDS)
    def bump_epoch(self, pid: int) -> None:
        p = self.producer(pid)
        if p.open_first is None:
            p.epoch, p.next_seq, p.written = p.epoch + 1, 0, []

    # ---------------------------------------------------------------- coordinator markers

    @rule(pid=PIDS, commit=st.booleans(), bump=st.booleans())
    def marker(self, pid: int, commit: bool, bump: bool) -> None:
        p = self.producer(pid)
        if self.expired(p) or (not p.known and p.next_seq != 0):
            return  # see the module docstring of the real coordinator: markers follow data
        epoch = p.epoch + (1 if bump else 0)
        batch = ProducerBatch(
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=-1,
            last_offset_delta=0,
            base_offset=self.leo,
            max_timestamp=self.now,
            is_transactional=True,
            control=ControlType.COMMIT if commit else ControlType.ABORT,
        )
        first = self.leo if p.open_first is None else p.open_first
        p.open_first = None
        others = [q.open_first for q in self.producers.values() if q.open_first is not None]
        aborted = self.append(batch, AppendOrigin.COORDINATOR)
        expected = (
            ()
            if commit
            else (AbortedTxn(pid, first, batch.base_offset, min([*others, batch.base_offset + 1])),)
        )
        assert aborted == expected
        self.unreplicated.append((first, batch.base_offset))
        if epoch != p.broker_epoch:
            p.written = []
        if bump or p.epoch > p.broker_epoch:
            p.next_seq = 0
        p.epoch = p.broker_epoch = epoch
        p.known, p.last_ts = True, self.now

    # ---------------------------------------------------------------- time, HW, restarts

    @rule(dt=st.sampled_from([1, EXPIRY // 2, EXPIRY]))
    def advance(self, dt: int) -> None:
        self.now += dt

    @rule()
    def sweep(self) -> None:
        removed = set(self.mgr.remove_expired_producers(self.now))
        model = {pid for pid, p in self.producers.items() if self.expired(p)}
        assert removed == model
        for pid in model:
            self.producers[pid].known = False

    @rule()
    def advance_high_watermark(self) -> None:
        self.hw = self.leo
        self.mgr.on_high_watermark_updated(self.hw)
        self.unreplicated = [(f, last) for f, last in self.unreplicated if last >= self.hw]

    @rule()
    def snapshot(self) -> None:
        self.snapshots.append(encode_snapshot(self.mgr.export_snapshot()))

    @rule(data=st.data(), restart=st.booleans())
    def rebuild(self, data: st.DataObject, restart: bool) -> None:
        self.sweep()
        snap = data.draw(st.sampled_from(self.snapshots))
        rebuilt = ProducerStateManager.from_snapshot(
            decode_snapshot(snap), producer_id_expiration_ms=EXPIRY
        )
        rebuilt.replay(self.log)
        rebuilt.on_high_watermark_updated(self.hw)
        rebuilt.remove_expired_producers(self.now)
        assert rebuilt.export_snapshot() == self.mgr.export_snapshot()
        if restart:
            self.mgr = rebuilt

    # ---------------------------------------------------------------- invariants

    @invariant()
    def lso_never_passes_an_open_transaction(self) -> None:
        lso = self.mgr.last_stable_offset(self.hw)
        for p in self.producers.values():
            if p.open_first is not None:
                assert lso <= p.open_first
        assert lso == self.model_lso()
        assert self.mgr.ongoing_transactions() == {
            pid: p.open_first for pid, p in self.producers.items() if p.open_first is not None
        }

    @invariant()
    def snapshot_round_trip(self) -> None:
        snap = self.mgr.export_snapshot()
        assert decode_snapshot(encode_snapshot(snap)) == snap


ProducerStateMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestProducerState = ProducerStateMachine.TestCase


# ---------------------------------------------------------------- arbitrary header values

wire_batches = st.builds(
    ProducerBatch,
    producer_id=st.sampled_from([-1, 0, 1]) | st.integers(-(2**63), 2**63 - 1),
    producer_epoch=st.sampled_from([-1, 0, 1]) | st.integers(-(2**15), 2**15 - 1),
    base_sequence=st.sampled_from([-1, 0, 1, 2**31 - 1]) | st.integers(-(2**31), 2**31 - 1),
    last_offset_delta=st.integers(0, 5),
    base_offset=st.just(0),
    max_timestamp=st.integers(-1, 10**6),
    is_transactional=st.booleans(),
    control=st.none() | st.sampled_from(ControlType),
    coordinator_epoch=st.integers(-(2**31), 2**31 - 1),
)


@given(st.lists(st.tuples(wire_batches, st.sampled_from(AppendOrigin)), max_size=25))
@settings(max_examples=200, deadline=None)
def test_arbitrary_batches_append_or_refuse_cleanly(
    steps: list[tuple[ProducerBatch, AppendOrigin]],
) -> None:
    mgr = ProducerStateManager(producer_id_expiration_ms=EXPIRY)
    offset = 0
    for batch, origin in steps:
        placed = ProducerBatch(
            producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch,
            base_sequence=batch.base_sequence,
            last_offset_delta=batch.last_offset_delta,
            base_offset=offset,
            max_timestamp=batch.max_timestamp,
            is_transactional=batch.is_transactional,
            control=batch.control,
            coordinator_epoch=batch.coordinator_epoch,
        )
        before = mgr.export_snapshot()
        refused: ErrorCode | None = None
        try:
            result = mgr.check_and_update(placed, 0, origin)
        except ProducerStateError as exc:
            refused = exc.error_code
        if refused is not None:
            assert refused is not ErrorCode.NONE
            assert mgr.export_snapshot() == before
            continue
        if result.duplicate is None:
            offset = placed.last_offset + 1
        lso = mgr.last_stable_offset(offset)
        assert all(lso <= first for first in mgr.ongoing_transactions().values())
        snap = mgr.export_snapshot()
        assert decode_snapshot(encode_snapshot(snap)) == snap
