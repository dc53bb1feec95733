"""The bookkeeping behind per-partition coordinators and cluster-wide producer ids.

`OwnedPartitions`: whatever order leadership arrives, leaves and loads finish in, a partition
answers with a coordinator only when its newest leadership finished loading, LOAD_IN_PROGRESS
while that load runs, NOT_COORDINATOR otherwise - checked against a model by hypothesis.

`ProducerIds` in cluster mode: ids come only from the blocks the controller handed out, never
twice, and `ensure_available` fetches a block when one is needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.lowlevel
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kafkapy.broker.idempotence import ProducerIds, ProducerIdsUnavailable
from kafkapy.broker.internal_topics import OwnedPartitions
from kafkapy.protocol import ErrorCode

E = ErrorCode


class OwnershipMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.owned: OwnedPartitions[str] = OwnedPartitions()
        # model: partition -> (epoch, loaded coordinator or None)
        self.model: dict[int, tuple[int, str | None]] = {}
        self.loads: list[tuple[int, int]] = []  # loads started, in any state

    @rule(p=st.integers(0, 2), epoch=st.integers(0, 5))
    def become_leader(self, p: int, epoch: int) -> None:
        started = self.owned.begin_load(p, epoch)
        known = self.model.get(p)
        expect = known is None or known[0] < epoch
        assert started == expect
        if started:
            self.model[p] = (epoch, None)
            self.loads.append((p, epoch))

    @rule(p=st.integers(0, 2))
    def become_follower(self, p: int) -> None:
        dropped = self.owned.drop(p)
        known = self.model.pop(p, None)
        assert dropped == (None if known is None else known[1])

    @rule(data=st.data())
    def a_load_finishes(self, data: st.DataObject) -> None:
        if not self.loads:
            return
        p, epoch = self.loads.pop(data.draw(st.integers(0, len(self.loads) - 1)))
        name = f"c{p}@{epoch}"
        installed = self.owned.finish_load(p, epoch, name)
        known = self.model.get(p)
        expect = known is not None and known == (epoch, None)
        assert installed == expect
        if installed:
            self.model[p] = (epoch, name)

    @invariant()
    def lookups_follow_the_model(self) -> None:
        for p in range(3):
            known = self.model.get(p)
            found = self.owned.lookup(p)
            if known is None:
                assert found == E.NOT_COORDINATOR
            elif known[1] is None:
                assert found == E.COORDINATOR_LOAD_IN_PROGRESS
            else:
                assert found == known[1]
        assert self.owned.loaded() == {p: c for p, (_, c) in self.model.items() if c is not None}


TestOwnership = OwnershipMachine.TestCase
TestOwnership.settings = settings(max_examples=60, stateful_step_count=30)


class Controller:
    """Hands out consecutive blocks, as the controller's AllocateProducerIds does."""

    def __init__(self, size: int) -> None:
        self.size, self.next, self.calls = size, 5000, 0

    async def allocate(self) -> tuple[int, int]:
        self.calls += 1
        await trio.lowlevel.checkpoint()
        start, self.next = self.next, self.next + self.size
        return start, self.size


async def test_cluster_ids_come_only_from_controller_blocks(tmp_path: Path) -> None:
    controller = Controller(size=1000)
    ids = ProducerIds(controller.allocate)
    with pytest.raises(ProducerIdsUnavailable):
        ids.allocate()  # no block fetched yet
    seen = set()
    with trio.fail_after(10):
        for _ in range(2500):
            await ids.ensure_available()
            seen.add(ids.allocate())
            await ids.prefetch()
    assert len(seen) == 2500
    assert min(seen) == 5000
    assert max(seen) < controller.next
    assert controller.calls == 3


async def test_concurrent_callers_share_one_controller_request(tmp_path: Path) -> None:
    controller = Controller(size=2)
    ids = ProducerIds(controller.allocate)
    got: list[int] = []

    async def producer() -> None:
        await ids.ensure_available()
        got.append(ids.allocate())

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(producer)
    assert len(set(got)) == 5
    assert controller.calls <= 3  # one request per block needed, not one per caller


async def test_a_failing_controller_is_reported_and_retried(tmp_path: Path) -> None:
    calls = 0

    async def flaky() -> tuple[int, int]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("no active controller")
        return 100, 10

    ids = ProducerIds(flaky)
    with pytest.raises(ConnectionError):
        await ids.ensure_available()
    await ids.ensure_available()
    assert ids.allocate() == 100


async def test_ensure_available_covers_the_ids_asked_for(tmp_path: Path) -> None:
    """A transactional InitProducerId may need two ids: a block with one left is skipped."""
    controller = Controller(size=3)
    ids = ProducerIds(controller.allocate)
    await ids.ensure_available()
    assert [ids.allocate(), ids.allocate()] == [5000, 5001]
    await ids.ensure_available(2)  # one left in the block: not enough
    assert [ids.allocate(), ids.allocate()] == [5003, 5004]
