"""Seeded simulations of 3- and 5-voter quorums plus an observer under loss, delay, reordering,
partitions and crash/restart; the invariants are checked after every event (simulation.py),
and after healing the quorum must make progress: a new entry commits on every node."""

from __future__ import annotations

import pytest

from kafkapy.raft import MemoryRaftLog, QuorumState
from tests.raft.simulation import InvariantViolation, Simulation

SEEDS = range(30)


def _heal_and_commit(sim: Simulation) -> None:
    """Heal everything, then a proposal must commit on every node within 15 s (a leader that
    is deposed right after healing may lose its proposal: then the next leader gets one)."""
    sim.heal()
    sim.loss = 0.0
    sim.faults_on = False
    for node_id in sorted(sim.nodes):
        sim.restart(node_id)
    deadline = sim.now + 15_000
    while sim.now < deadline:
        sim.run_until(sim.now + 50)
        # a deposed leader that has not heard of its successor yet may get one too
        proposals = sim.propose_to_leaders()
        if not proposals:
            continue
        offset = max(offset for _, offset, _ in proposals)
        round_end = min(deadline, sim.now + 3_000)
        while sim.now < round_end and not all(len(n.applied) > offset for n in sim.nodes.values()):
            sim.run_until(sim.now + 50)
        for _, offset, data in proposals:
            if all(
                len(n.applied) > offset and n.applied[offset].data == data
                for n in sim.nodes.values()
            ):
                return
    raise AssertionError(
        f"no proposal committed on every node 15 s after healing (seed {sim.seed})"
    )


@pytest.mark.parametrize("voters", [3, 5])
@pytest.mark.parametrize("seed", SEEDS)
def test_chaos_keeps_raft_safe_and_heals(voters: int, seed: int) -> None:
    """Election safety, log matching, leader completeness, state machine safety (paper 5.2-5.4)
    under chaos, then liveness once the network heals."""
    sim = Simulation(seed, voters, observers=1, loss=0.05)
    sim.chaos(until_ms=12_000)
    assert sim.committed, f"nothing committed in 12 s of chaos (seed {seed})"
    _heal_and_commit(sim)


def test_quiet_cluster_elects_once_and_commits_everything() -> None:
    """Without faults one leader is elected and every proposal commits on every node."""
    sim = Simulation(seed=1, voters=3, observers=1, loss=0.0)
    sim.run_until(3_000)
    assert len(sim.leaders()) == 1
    assert len(sim.leaders_by_epoch) == 1
    for _ in range(20):
        sim.propose_to_leaders()
        sim.run_until(sim.now + 30)
    sim.run_until(sim.now + 1_000)
    lengths = {len(n.applied) for n in sim.nodes.values()}
    assert lengths == {21}  # 20 proposals plus the leader's epoch-start no-op


def test_invariant_checker_catches_a_second_leader() -> None:
    """The checker itself can fail: a forged second leader in one epoch is reported."""
    sim = Simulation(seed=3, voters=3, observers=0, loss=0.0)
    sim.run_until(3_000)
    (leader,) = sim.leaders()
    other = next(n for n in sim.nodes if n != leader)
    sim.leaders_by_epoch[sim.nodes[leader].core.epoch] = other
    with pytest.raises(InvariantViolation):
        sim.check_node(sim.nodes[leader])


@pytest.mark.parametrize("seed", range(100, 108))
def test_heavy_loss_keeps_raft_safe_and_heals(seed: int) -> None:
    """A fifth of all messages lost: slower, but never unsafe, and it recovers."""
    sim = Simulation(seed, 5, observers=1, loss=0.2)
    sim.chaos(until_ms=10_000)
    _heal_and_commit(sim)


def test_checker_catches_a_driver_that_ignores_flush_log() -> None:
    """The crash model matters: with `flush_log` ignored, a crash loses acknowledged entries
    and some seed ends with a leader missing a committed entry (or a committed entry changed)."""
    found = []
    for seed in range(40):
        sim = Simulation(seed, 3, observers=1, honour_flush=False)
        try:
            sim.chaos(until_ms=12_000)
        except (InvariantViolation, RuntimeError) as exc:
            found.append(exc)
            break
    assert found, "no seed exposed the lost writes"


def test_chaos_without_snapshots_stays_safe() -> None:
    """The snapshot-free path (logs from offset 0) still holds the invariants."""
    for seed in range(5):
        sim = Simulation(seed, 3, observers=1, loss=0.05, snapshot_every=None)
        sim.chaos(until_ms=8_000)
        assert sim.snapshots_taken == 0
        _heal_and_commit(sim)


def test_chaos_catches_up_through_snapshots() -> None:
    """Under chaos nodes fall behind the leaders' log starts and catch up by FetchSnapshot."""
    installed = 0
    for seed in range(6):
        sim = Simulation(seed, 3, observers=1, loss=0.05)
        sim.chaos(until_ms=12_000)
        installed += sim.snapshots_installed
        _heal_and_commit(sim)
    assert installed > 0


def _commit_entries(sim: Simulation, count: int) -> None:
    for _ in range(count):
        sim.propose_to_leaders()
        sim.run_until(sim.now + 30)


def test_voter_cut_off_for_long_catches_up_by_snapshot() -> None:
    """A voter partitioned while the others commit (and snapshot, moving their log start past
    its log end) gets the snapshot, installs it and then follows the log tail."""
    sim = Simulation(seed=5, voters=3, observers=0, loss=0.0, snapshot_every=10)
    sim.run_until(3_000)
    (leader,) = sim.leaders()
    lagging = max(n for n in sim.nodes if n != leader)
    sim.split({lagging})
    _commit_entries(sim, 60)
    assert sim.nodes[leader].log.start_offset() > sim.nodes[lagging].log.end_offset()
    sim.heal()
    sim.run_until(sim.now + 3_000)
    _commit_entries(sim, 3)
    sim.run_until(sim.now + 1_000)
    node = sim.nodes[lagging]
    assert sim.snapshots_installed >= 1
    assert node.log.start_offset() > 0
    assert node.applied == sim.committed
    assert len(node.applied) >= 63


def test_observer_restarted_with_an_empty_disk_catches_up_by_snapshot() -> None:
    """A broker-only node that lost its whole data directory rebuilds from the leader's
    snapshot plus the tail, ending with exactly the committed entries."""
    sim = Simulation(seed=9, voters=3, observers=1, loss=0.0, snapshot_every=10)
    sim.run_until(3_000)
    _commit_entries(sim, 40)
    observer = sim.nodes[100]
    sim.crash(100)
    observer.log = MemoryRaftLog()  # a brand-new, empty data directory
    observer.persisted = QuorumState(0)
    sim.restart(100)
    sim.run_until(sim.now + 2_000)
    _commit_entries(sim, 2)
    sim.run_until(sim.now + 1_000)
    assert sim.snapshots_installed >= 1
    assert observer.log.latest_snapshot() is not None
    assert observer.applied == sim.committed
