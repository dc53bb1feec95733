"""Hypothesis stateful test of the transaction coordinator.

Random clients (v1 and v2, with current or stale identities), marker completions, time, timeouts,
expiry and restarts. After every step:

- each record replayed is a legal transition (`VALID_PREVIOUS_STATES`), producer (id, epoch)
  never goes backwards, epochs stay within int16;
- replaying the emitted records (whole log, or compacted as the cleaner leaves it) into a fresh
  coordinator reproduces the state exactly;
- producer ids are never shared between transactional ids or idempotent producers;
- every Prepare* transaction has its marker action outstanding (nothing can get stuck), and no
  transaction outlives its timeout once the timer ran.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kafkapy.coordinator.txn import (
    VALID_PREVIOUS_STATES,
    CoordinatorResult,
    TopicPartition,
    TransactionCoordinator,
    TxnLogRecord,
    TxnState,
    WriteTxnMarkers,
    check_transition,
)
from kafkapy.coordinator.txn.records import (
    decode_key,
    encode_metadata_key,
    encode_metadata_value,
)
from kafkapy.coordinator.txn.state import MAX_PRODUCER_EPOCH
from kafkapy.protocol.errors import ErrorCode

T = TypeVar("T")
S = TxnState
E = ErrorCode
TIDS = st.sampled_from(["a", "b", "c"])
PARTS = st.lists(
    st.sampled_from([TopicPartition("x", 0), TopicPartition("x", 1), TopicPartition("y", 0)]),
    min_size=1,
    max_size=3,
)
CONFIG = {
    "producer_id_block_size": 3,
    "max_transaction_timeout_ms": 10_000,
    "transactional_id_expiration_ms": 50_000,
}
MODES = st.sampled_from(["none", "current", "stale"])
STEADY_EMPTY = {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.coord = TransactionCoordinator(**CONFIG)
        self.log: list[TxnLogRecord] = []
        self.now = 0
        self.identity: dict[str, tuple[int, int]] = {}  # what each client holds now
        self.stale: dict[str, list[tuple[int, int]]] = {}  # identities it held before
        self.pending: list[WriteTxnMarkers] = []
        self.owner: dict[int, str] = {}  # producer id -> transactional id ("" = idempotent)
        self.timers_ran_at = -1

    # ---------------------------------------------------------------- runtime

    def run(self, result: CoordinatorResult[T]) -> T:
        for record in result.records:
            self.apply(record)
        self.pending.extend(result.markers)
        return result.response

    def apply(self, record: TxnLogRecord) -> None:
        _, tid = decode_key(record.key)
        old = self.coord.transactions.get(tid) if tid is not None else None
        self.coord.replay(record.key, record.value)
        self.log.append(record)
        if tid is None:
            return
        new = self.coord.transactions.get(tid)
        if new is None:
            assert old is not None
            assert old.state in VALID_PREVIOUS_STATES[S.DEAD]
            return
        check_transition(None if old is None else old.state, new.state)
        assert 0 <= new.producer_epoch <= MAX_PRODUCER_EPOCH
        if old is not None:
            assert (new.producer_id, new.producer_epoch) >= (old.producer_id, old.producer_epoch)
        for pid in (new.producer_id, new.next_producer_id):
            if pid >= 0:
                assert self.owner.setdefault(pid, tid) == tid, f"producer id {pid} shared"

    def pick_identity(self, tid: str, use_stale: bool) -> tuple[int, int]:
        if use_stale and self.stale.get(tid):
            return self.stale[tid][-1]
        return self.identity.get(tid, (1_000_000, 0))

    def hand_out(self, tid: str, identity: tuple[int, int]) -> None:
        old = self.identity.get(tid)
        if old is not None and old != identity:
            self.stale.setdefault(tid, []).append(old)
        self.identity[tid] = identity

    # ---------------------------------------------------------------- client operations

    @rule(tid=TIDS, timeout=st.sampled_from([1_000, 10_000, 20_000]), mode=MODES)
    def init_producer_id(self, tid: str, timeout: int, mode: str) -> None:
        kw = {}
        if mode != "none":
            pid, epoch = self.pick_identity(tid, mode == "stale")
            kw = {"producer_id": pid, "producer_epoch": epoch}
        before = self.coord.transactions.get(tid)
        result = self.coord.init_producer_id(tid, timeout, self.now, **kw)
        r = self.run(result)
        if timeout > CONFIG["max_transaction_timeout_ms"]:
            assert r.error is E.INVALID_TRANSACTION_TIMEOUT
            return
        if r.error is E.NONE:
            md = self.coord.transactions[tid]
            assert (r.producer_id, r.producer_epoch) == md.client_identity()
            assert md.state is S.EMPTY
            self.hand_out(tid, (r.producer_id, r.producer_epoch))
        elif r.error is E.CONCURRENT_TRANSACTIONS:
            assert before is not None
            assert before.state not in STEADY_EMPTY
        else:
            assert r.error in (E.PRODUCER_FENCED, E.INVALID_PRODUCER_ID_MAPPING)
            assert mode != "none"
            assert result.records == ()

    @rule()
    def init_idempotent(self) -> None:
        result = self.coord.init_producer_id(None, 0, self.now)
        r = self.run(result)
        assert r.error is E.NONE
        pid = r.producer_id
        assert pid not in self.owner, "an idempotent producer got a used producer id"
        self.owner[pid] = ""

    @rule(
        tid=TIDS,
        parts=PARTS,
        stale=st.booleans(),
        verify=st.booleans(),
        version=st.sampled_from([1, 2]),
    )
    def add_partitions(
        self, tid: str, parts: list[TopicPartition], stale: bool, verify: bool, version: int
    ) -> None:
        pid, epoch = self.pick_identity(tid, stale)
        before = self.coord.transactions.get(tid)
        result = self.coord.add_partitions(
            tid, pid, epoch, parts, self.now, verify_only=verify, transaction_version=version
        )
        errors = self.run(result)
        assert isinstance(errors, dict)
        assert set(errors) == set(parts)
        if before is None or before.client_identity() != (pid, epoch):
            assert E.NONE not in errors.values()
            assert result.records == ()
        elif verify:
            assert result.records == ()
            assert all(
                (code is E.NONE) == (before.state is S.ONGOING and tp in before.partitions)
                for tp, code in errors.items()
            )
        elif before.state in STEADY_EMPTY or before.state is S.ONGOING:
            assert set(errors.values()) == {E.NONE}
            md = self.coord.transactions[tid]
            assert md.state is S.ONGOING
            assert set(parts) <= md.partitions
        else:
            assert set(errors.values()) == {E.CONCURRENT_TRANSACTIONS}

    @rule(tid=TIDS, group=st.sampled_from(["g1", "g2"]))
    def add_offsets(self, tid: str, group: str) -> None:
        pid, epoch = self.pick_identity(tid, False)
        self.run(self.coord.add_offsets(tid, pid, epoch, group, self.now))

    @rule(tid=TIDS, commit=st.booleans(), version=st.sampled_from([1, 2]), stale=st.booleans())
    def end_txn(self, tid: str, commit: bool, version: int, stale: bool) -> None:
        pid, epoch = self.pick_identity(tid, stale)
        before = self.coord.transactions.get(tid)
        result = self.coord.end_txn(tid, pid, epoch, commit, self.now, transaction_version=version)
        r = self.run(result)
        if r.error is not E.NONE:
            assert result.records == ()
        is_current = before is not None and before.client_identity() == (pid, epoch)
        if is_current and before is not None and before.state is S.ONGOING:
            assert r.error is E.NONE
        if r.error is E.NONE and version == 2 and result.records:
            assert (r.producer_id, r.producer_epoch) != (pid, epoch), "v2 always bumps"
            self.hand_out(tid, (r.producer_id, r.producer_epoch))

    @rule(tid=TIDS, epoch=st.sampled_from([MAX_PRODUCER_EPOCH - 2, MAX_PRODUCER_EPOCH - 1]))
    def jump_near_epoch_exhaustion(self, tid: str, epoch: int) -> None:
        """Load an old record with an epoch close to int16 max, so the rules that allocate a new
        producer id (and the fence bump) run in the random walks."""
        md = self.coord.transactions.get(tid)
        if md is None or md.state not in STEADY_EMPTY or md.producer_epoch >= epoch:
            return
        jumped = replace(md, producer_epoch=epoch)
        record = TxnLogRecord(
            self.coord.partition_for(tid), encode_metadata_key(tid), encode_metadata_value(jumped)
        )
        # not an operation's record, so no transition check: the same state at a later epoch
        self.coord.replay(record.key, record.value)
        self.log.append(record)
        self.hand_out(tid, jumped.client_identity())

    # ---------------------------------------------------------------- markers, timers, restart

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def write_markers(self, data: st.DataObject) -> None:
        action = self.pending.pop(data.draw(st.integers(0, len(self.pending) - 1)))
        md = self.coord.transactions.get(action.transactional_id)
        code = self.run(
            self.coord.complete_markers(
                action.transactional_id, action.producer_id, action.producer_epoch, self.now
            )
        )
        live = (
            md is not None
            and md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
            and (md.producer_id, md.producer_epoch) == (action.producer_id, action.producer_epoch)
        )
        assert (code is E.NONE) == live
        if live:
            assert md is not None
            assert action.partitions == md.partitions
            assert action.commit == (md.state is S.PREPARE_COMMIT)

    @rule(dt=st.sampled_from([10, 1_000, 15_000, 60_000]))
    def advance_and_run_timers(self, dt: int) -> None:
        self.now += dt
        aborted = self.run(self.coord.abort_timed_out_transactions(self.now))
        assert isinstance(aborted, list)
        for tid in aborted:
            assert self.coord.transactions[tid].state is S.PREPARE_ABORT
        expired = self.run(self.coord.expire_transactional_ids(self.now))
        assert isinstance(expired, list)
        for tid in expired:
            assert tid not in self.coord.transactions
        self.timers_ran_at = self.now

    @rule(compact=st.booleans())
    def restart(self, compact: bool) -> None:
        log = self.compacted() if compact else self.log
        fresh = TransactionCoordinator(**CONFIG)
        for record in log:
            fresh.replay(record.key, record.value)
        assert fresh.transactions == self.coord.transactions
        self.coord = fresh
        self.pending = []  # in-flight marker writes die with the process
        self.run(fresh.load_complete(self.now))

    def compacted(self) -> list[TxnLogRecord]:
        latest: dict[bytes, TxnLogRecord] = {}
        for record in self.log:
            latest.pop(record.key, None)
            latest[record.key] = record
        return list(latest.values())

    # ---------------------------------------------------------------- invariants

    @invariant()
    def replay_reproduces_state(self) -> None:
        for log in (self.log, self.compacted()):
            fresh = TransactionCoordinator(**CONFIG)
            for record in log:
                fresh.replay(record.key, record.value)
            assert fresh.transactions == self.coord.transactions
            assert fresh.producer_id_watermark == self.coord.producer_id_watermark

    @invariant()
    def states_are_consistent(self) -> None:
        outstanding = {(m.transactional_id, m.producer_id, m.producer_epoch) for m in self.pending}
        for tid, md in self.coord.transactions.items():
            assert md.state is not S.PREPARE_EPOCH_FENCE, "a fence is always followed by its abort"
            if md.state in STEADY_EMPTY:
                assert md.partitions == frozenset()
            else:
                assert md.partitions, f"{tid} is {md.state.value} without partitions"
            if md.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                assert (tid, md.producer_id, md.producer_epoch) in outstanding
            if md.state is S.ONGOING and self.timers_ran_at >= md.txn_start_timestamp:
                assert md.txn_start_timestamp + md.txn_timeout_ms >= self.timers_ran_at


CoordinatorMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestTransactionCoordinator = CoordinatorMachine.TestCase


# ---------------------------------------------------------------- arbitrary inputs never crash

I16 = st.integers(-(2**15), 2**15 - 1)
I32 = st.integers(-(2**31), 2**31 - 1)
ANY_IDS = st.sampled_from(["a", "b", ""]) | st.text(max_size=8)
ANY_PIDS = st.sampled_from([-1, 0, 1]) | st.integers(-(2**63), 2**63 - 1)
ANY_PARTS = st.lists(st.builds(TopicPartition, st.text(max_size=5), I32), max_size=3)
KINDS = st.sampled_from(["init", "add", "offsets", "end", "markers", "timers"])


@given(st.data())
@settings(max_examples=150, deadline=None)
def test_arbitrary_requests_never_crash(data: st.DataObject) -> None:
    """Whatever the (decoded) request fields, an operation answers; replay stays consistent."""
    coord = TransactionCoordinator(**CONFIG)
    log: list[TxnLogRecord] = []
    now = 0

    def run(result: CoordinatorResult[T]) -> T:
        for record in result.records:
            log.append(record)
            coord.replay(record.key, record.value)
        return result.response

    for _ in range(data.draw(st.integers(0, 30))):
        kind = data.draw(KINDS)
        if kind == "timers":
            now += data.draw(st.integers(0, 10**7))
            run(coord.abort_timed_out_transactions(now))
            run(coord.expire_transactional_ids(now))
            continue
        tid, pid, epoch = data.draw(ANY_IDS), data.draw(ANY_PIDS), data.draw(I16)
        if kind == "init":
            timeout = data.draw(I32)
            run(
                coord.init_producer_id(
                    data.draw(st.none() | ANY_IDS),
                    timeout,
                    now,
                    producer_id=pid,
                    producer_epoch=epoch,
                )
            )
        elif kind == "add":
            parts = data.draw(ANY_PARTS)
            verify = data.draw(st.booleans())
            version = data.draw(st.sampled_from([1, 2]))
            run(
                coord.add_partitions(
                    tid, pid, epoch, parts, now, verify_only=verify, transaction_version=version
                )
            )
        elif kind == "offsets":
            run(coord.add_offsets(tid, pid, epoch, data.draw(st.text(max_size=5)), now))
        elif kind == "end":
            commit = data.draw(st.booleans())
            version = data.draw(st.sampled_from([0, 1, 2, 5]))
            run(coord.end_txn(tid, pid, epoch, commit, now, transaction_version=version))
        else:
            run(coord.complete_markers(tid, pid, epoch, now))
    fresh = TransactionCoordinator(**CONFIG)
    for record in log:
        fresh.replay(record.key, record.value)
    assert fresh.transactions == coord.transactions
