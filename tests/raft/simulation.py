"""A deterministic, seeded simulation of a Raft quorum (in the spirit of Kafka's
RaftEventSimulationTest): N `RaftCore`s over an in-memory router with message loss, random
delay (hence reordering), network partitions, and crashes with restart from the persisted
`QuorumState` and the flushed part of the log.

Every node is driven exactly as the server drives it: after each input, `poll()`; persist the
state, flush the log when told (modelled by `MemoryRaftLog`: a crash keeps only what was
flushed), send the requests, apply the committed entries; a request's response leaves only after
that. The invariants are checked after every event (see `Simulation.check_node`).

Snapshots: a node's state machine is the list of entries it applied; every `snapshot_every`
applied entries it snapshots that list (stored through the log, then `snapshot_written`, as the
server does), so logs start above 0 and nodes that fall behind or restart empty catch up by
FetchSnapshot (in small chunks, to cover the chunking). A loaded snapshot must be exactly the
committed prefix - the state machine safety check covers snapshots too.
"""

from __future__ import annotations

import heapq
import itertools
import pickle
import random
from dataclasses import dataclass, field

from kafkapy.raft import (
    Entry,
    MemoryRaftLog,
    QuorumState,
    RaftCore,
    RaftRequest,
    Role,
    SnapshotId,
)

ELECTION_TIMEOUT_MS = 300
FETCH_TIMEOUT_MS = 600
FETCH_INTERVAL_MS = 40
REQUEST_TIMEOUT_MS = 200  # when a message is lost the sender hears "failed" after this
SNAPSHOT_CHUNK_BYTES = 256


class InvariantViolation(AssertionError):
    pass


@dataclass
class SimNode:
    node_id: int
    core: RaftCore
    log: MemoryRaftLog
    persisted: QuorumState
    alive: bool = True
    incarnation: int = 0
    applied: list[Entry] = field(default_factory=list)
    checked_end: int = 0  # log prefix already checked against the global entry table
    tick_token: int = 0
    paused_until: int = 0  # SIGSTOP: everything for it waits (in its sockets) until then


@dataclass(order=True)
class _Event:
    at: int
    seq: int
    kind: str = field(compare=False)
    args: tuple[object, ...] = field(compare=False)


class Simulation:
    """The cluster, the router and the invariant checks; all randomness from one seed."""

    def __init__(
        self,
        seed: int,
        voters: int,
        observers: int = 1,
        *,
        loss: float = 0.05,
        honour_flush: bool = True,
        snapshot_every: int | None = 25,
        pre_vote: bool = False,
    ) -> None:
        self.seed = seed
        self.snapshot_every = snapshot_every
        self.pre_vote = pre_vote
        self.snapshots_taken = 0
        self.snapshots_installed = 0
        self.honour_flush = honour_flush  # False: a broken driver that never fsyncs
        self.faults_on = True  # False: scheduled crashes are called off (healing)
        self.rng = random.Random(seed)
        self.voter_ids = frozenset(range(1, voters + 1))
        self.observer_ids = frozenset(range(100, 100 + observers))
        self.loss = loss
        self.now = 0
        self._seq = itertools.count()
        self._queue: list[_Event] = []
        self.partition: dict[int, int] = {}  # node -> side; nodes on different sides can't talk
        self.nodes: dict[int, SimNode] = {}
        # invariant bookkeeping
        self.leaders_by_epoch: dict[int, int] = {}
        self.entry_table: dict[
            tuple[int, int], tuple[bytes, int]
        ] = {}  # (offset, epoch) -> (data, prev epoch)
        self.committed: list[Entry] = []
        self.proposed = 0
        self.events = 0
        for node_id in sorted(self.voter_ids | self.observer_ids):
            log = MemoryRaftLog()
            state = QuorumState(0)
            core = self._new_core(node_id, log, state, 0)
            self.nodes[node_id] = SimNode(node_id, core, log, state)
        for node in self.nodes.values():
            self._after(node)

    # ------------------------------------------------------------------ driving

    def _new_core(
        self, node_id: int, log: MemoryRaftLog, state: QuorumState, incarnation: int
    ) -> RaftCore:
        return RaftCore(
            node_id,
            self.voter_ids,
            log,
            state,
            now_ms=self.now,
            rng=random.Random(self.seed * 7919 + node_id * 131 + incarnation),
            election_timeout_ms=ELECTION_TIMEOUT_MS,
            fetch_timeout_ms=FETCH_TIMEOUT_MS,
            fetch_interval_ms=FETCH_INTERVAL_MS,
            max_fetch_entries=20,
            max_snapshot_chunk_bytes=SNAPSHOT_CHUNK_BYTES,
            pre_vote=self.pre_vote,
        )

    def _push(self, at: int, kind: str, *args: object) -> None:
        heapq.heappush(self._queue, _Event(at, next(self._seq), kind, args))

    def _connected(self, a: int, b: int) -> bool:
        return self.partition.get(a, 0) == self.partition.get(b, 0)

    def _send(self, src: SimNode, dst: int, request: RaftRequest) -> None:
        target = self.nodes[dst]
        if not self._connected(src.node_id, dst) or self.rng.random() < self.loss:
            self._push(
                self.now + REQUEST_TIMEOUT_MS, "failed", src.node_id, src.incarnation, dst, request
            )
            return
        delay = self.rng.randint(1, 25)
        self._push(
            self.now + delay,
            "request",
            src.node_id,
            src.incarnation,
            dst,
            target.incarnation,
            request,
        )

    def _after(self, node: SimNode) -> None:
        """Act on the node's Ready exactly as the server's driver does, then re-arm its timer."""
        ready = node.core.poll()
        if ready.state is not None:
            node.persisted = ready.state
        if ready.flush_log and self.honour_flush:
            node.log.flush()
        for dst, request in ready.requests:
            self._send(node, dst, request)
        if ready.snapshot is not None:
            self._load_snapshot(node, ready.snapshot)
            self.snapshots_installed += 1
        for entry in ready.committed:
            self._apply(node, entry)
        self._maybe_snapshot(node)
        node.tick_token += 1
        self._push(
            max(node.core.next_deadline_ms(), self.now),
            "tick",
            node.node_id,
            node.incarnation,
            node.tick_token,
        )
        self.check_node(node)

    def _apply(self, node: SimNode, entry: Entry) -> None:
        if entry.offset != len(node.applied):
            raise InvariantViolation(
                f"node {node.node_id} applied {entry.offset} after {len(node.applied)} entries"
            )
        node.applied.append(entry)
        if entry.offset < len(self.committed):
            if self.committed[entry.offset] != entry:
                raise InvariantViolation(
                    f"node {node.node_id} committed {entry} but {self.committed[entry.offset]} was committed before"
                )
        else:
            self.committed.append(entry)

    def _load_snapshot(self, node: SimNode, sid: SnapshotId) -> None:
        """Replace the node's state machine with the snapshot's (what the driver does)."""
        got = node.log.read_snapshot(sid, 0, 1 << 30)
        if got is None:
            raise InvariantViolation(f"node {node.node_id} cannot read its snapshot {sid}")
        applied: list[Entry] = pickle.loads(got[0])
        if len(applied) != sid.end_offset or (applied and applied[-1].epoch != sid.epoch):
            raise InvariantViolation(
                f"node {node.node_id} snapshot {sid} holds {len(applied)} entries"
            )
        if applied != self.committed[: len(applied)] and len(self.committed) >= len(applied):
            raise InvariantViolation(
                f"node {node.node_id} loaded a snapshot unlike the committed log"
            )
        self.committed.extend(applied[len(self.committed) :])
        node.applied = list(applied)

    def _maybe_snapshot(self, node: SimNode) -> None:
        if self.snapshot_every is None or not node.applied:
            return
        if len(node.applied) - node.log.start_offset() < self.snapshot_every:
            return
        sid = SnapshotId(len(node.applied), node.applied[-1].epoch)
        node.log.store_snapshot(sid, pickle.dumps(node.applied))
        node.core.snapshot_written(sid)
        self.snapshots_taken += 1

    def _paused_target(self, ev: _Event) -> SimNode | None:
        """The paused node `ev` is for (a request waits in its socket, a response or a timer
        for its process to run again), if any."""
        if ev.kind in ("propose", "crash"):
            return None
        node_id = ev.args[2] if ev.kind == "request" else ev.args[0]
        node = self.nodes[node_id]  # type: ignore[index]
        return node if node.paused_until > self.now else None

    def step(self) -> bool:
        if not self._queue:
            return False
        ev = heapq.heappop(self._queue)
        self.now = max(self.now, ev.at)
        self.events += 1
        paused = self._paused_target(ev)
        if paused is not None:
            self._push(paused.paused_until, ev.kind, *ev.args)  # in arrival order
            return True
        match ev.kind:
            case "tick":
                node_id, inc, token = ev.args
                node = self.nodes[node_id]  # type: ignore[index]
                if node.alive and node.incarnation == inc and node.tick_token == token:
                    node.core.tick(self.now)
                    self._after(node)
            case "request":
                src_id, src_inc, dst_id, dst_inc, request = ev.args
                dst = self.nodes[dst_id]  # type: ignore[index]
                src = self.nodes[src_id]  # type: ignore[index]
                if (
                    not dst.alive
                    or dst.incarnation != dst_inc
                    or not self._connected(src_id, dst_id)
                ):  # type: ignore[arg-type]
                    self._push(
                        self.now + REQUEST_TIMEOUT_MS, "failed", src_id, src_inc, dst_id, request
                    )
                    return True
                response = dst.core.handle_request(src_id, request, self.now)  # type: ignore[arg-type]
                self._after(dst)  # persist before the response leaves
                if self.rng.random() < self.loss or not self._connected(src_id, dst_id):  # type: ignore[arg-type]
                    self._push(
                        self.now + REQUEST_TIMEOUT_MS, "failed", src_id, src_inc, dst_id, request
                    )
                else:
                    self._push(
                        self.now + self.rng.randint(1, 25),
                        "response",
                        src_id,
                        src_inc,
                        dst_id,
                        request,
                        response,
                    )
                del src
            case "response":
                src_id, src_inc, dst_id, request, response = ev.args
                src = self.nodes[src_id]  # type: ignore[index]
                if src.alive and src.incarnation == src_inc:
                    src.core.handle_response(dst_id, request, response, self.now)  # type: ignore[arg-type]
                    self._after(src)
            case "failed":
                src_id, src_inc, dst_id, request = ev.args
                src = self.nodes[src_id]  # type: ignore[index]
                if src.alive and src.incarnation == src_inc:
                    src.core.request_failed(dst_id, request, self.now)  # type: ignore[arg-type]
                    self._after(src)
            case "propose":
                self.propose_to_leaders()
            case "crash":
                node_id, inc = ev.args
                if self.faults_on and self.nodes[node_id].incarnation == inc:  # type: ignore[index]
                    self.crash(node_id)  # type: ignore[arg-type]
        return True

    def run_until(self, until_ms: int, max_events: int = 400_000) -> None:
        while self._queue and self._queue[0].at <= until_ms:
            if self.events >= max_events:
                raise InvariantViolation(
                    f"more than {max_events} events by {self.now} ms (seed {self.seed})"
                )
            self.step()
        self.now = max(self.now, until_ms)

    # ------------------------------------------------------------------ faults and load

    def propose_to_leaders(self) -> list[tuple[int, int, bytes]]:
        """Propose one fresh entry to every node that thinks it leads; (node, offset, data)."""
        out = []
        for node in self.nodes.values():
            if node.alive and node.core.is_leader and node.paused_until <= self.now:
                self.proposed += 1
                data = f"e{self.proposed}".encode()
                offset = node.core.propose([data], self.now)
                out.append((node.node_id, offset, data))
                self._after(node)
        return out

    def crash(self, node_id: int) -> None:
        node = self.nodes[node_id]
        node.alive = False
        node.incarnation += 1

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.alive:
            return
        node.log = node.log.crash()  # the unflushed tail is gone
        node.core = self._new_core(node_id, node.log, node.persisted, node.incarnation)
        node.applied = []
        snapshot = node.log.latest_snapshot()
        if snapshot is not None:  # start-up loads the newest snapshot, then replays the tail
            self._load_snapshot(node, snapshot)
        node.checked_end = 0
        node.alive = True
        self._after(node)

    def pause(self, node_id: int, until_ms: int) -> None:
        """Stop the node's process (SIGSTOP) until `until_ms`: it runs no timer and reads
        nothing meanwhile; what was sent to it is read when it resumes, all at once."""
        self.nodes[node_id].paused_until = until_ms

    def split(self, side_a: set[int]) -> None:
        self.partition = {n: (1 if n in side_a else 0) for n in self.nodes}

    def heal(self) -> None:
        self.partition = {}

    def chaos(self, until_ms: int) -> None:
        """Run with loss, random partitions, crashes (any node, or the leader), clean leader
        shutdowns (resign, then stop) and restarts until `until_ms`, proposing all along."""
        while self.now < until_ms:
            step_end = min(until_ms, self.now + self.rng.randint(150, 900))
            roll = self.rng.random()
            if roll < 0.15:
                ids = sorted(self.nodes)
                self.split(set(self.rng.sample(ids, self.rng.randint(1, len(ids) // 2))))
            elif roll < 0.35:
                self.heal()
            elif roll < 0.5:
                alive = [n for n in sorted(self.nodes) if self.nodes[n].alive]
                down = len(self.nodes) - len(alive)
                if alive and down < 2:
                    self.crash(self.rng.choice(alive))
            elif roll < 0.6:
                leaders = self.leaders()
                down = sum(not n.alive for n in self.nodes.values())
                if leaders and down < 2:
                    self.crash(self.rng.choice(leaders))
            elif roll < 0.65:
                # a clean shutdown: the leader resigns (EndQuorumEpoch), then stops a moment later
                leaders = self.leaders()
                down = sum(not n.alive for n in self.nodes.values())
                if leaders and down < 2:
                    node = self.nodes[self.rng.choice(leaders)]
                    node.core.resign(self.now)
                    self._after(node)
                    self._push(
                        self.now + self.rng.randint(1, 30), "crash", node.node_id, node.incarnation
                    )
            elif roll < 0.75:
                for n in sorted(self.nodes):
                    self.restart(n)
            t = self.now
            while t < step_end:
                t += self.rng.randint(20, 120)
                self._push(t, "propose")
            self.run_until(step_end)

    # ------------------------------------------------------------------ invariants

    def check_node(self, node: SimNode) -> None:
        core = node.core
        # Election safety: at most one leader per epoch.
        if core.role is Role.LEADER:
            known = self.leaders_by_epoch.get(core.epoch)
            if known is None:
                self.leaders_by_epoch[core.epoch] = node.node_id
                self._check_leader_completeness(node)
            elif known != node.node_id:
                raise InvariantViolation(
                    f"epoch {core.epoch} has two leaders: {known} and {node.node_id}"
                )
        # Log matching: an (offset, epoch) pair names one entry, with one predecessor epoch.
        end = node.log.end_offset()
        start = max(min(node.checked_end, end), node.log.start_offset())
        for entry in node.log.read(start, end - start):
            prev = node.log.epoch_at(entry.offset - 1) if entry.offset else 0
            key = (entry.offset, entry.epoch)
            seen = self.entry_table.setdefault(key, (entry.data, prev or 0))
            if seen != (entry.data, prev or 0):
                raise InvariantViolation(f"log matching broken at {key} on node {node.node_id}")
        node.checked_end = end
        # Committed entries never change: the node's log agrees with them below its HW.
        hw = core.high_watermark
        if hw > end:
            raise InvariantViolation(f"node {node.node_id} HW {hw} beyond its log end {end}")
        if len(node.applied) != hw:
            raise InvariantViolation(
                f"node {node.node_id} applied {len(node.applied)} entries, HW {hw}"
            )
        if self.pre_vote:
            self._check_quorum_contact()

    def _check_quorum_contact(self) -> None:
        """Lease safety: a leader that has quorum contact (what the controller requires before
        it renews a broker's leader lease) is the newest leader - no live node leads a newer
        epoch. Only with pre-vote: without it a voter still in touch with its leader votes for
        any candidate of a newer epoch, so a successor can be elected while a majority is."""
        leaders = [n for n in self.nodes.values() if n.alive and n.core.is_leader]
        newest = max((n.core.epoch for n in leaders), default=0)
        for n in leaders:
            if (
                n.core.epoch < newest
                and n.paused_until <= self.now
                and n.core.has_quorum_contact(self.now)
            ):
                raise InvariantViolation(
                    f"node {n.node_id} has quorum contact as leader of epoch {n.core.epoch} at "
                    f"{self.now} ms, but epoch {newest} has a leader"
                )

    def _check_leader_completeness(self, node: SimNode) -> None:
        """A leader's log holds every committed entry (Raft paper 5.4.1, Leader Completeness)."""
        n = len(self.committed)
        start = node.log.start_offset()
        mine = node.log.read(start, max(0, n - start))
        if mine != self.committed[start : start + len(mine)] or start + len(mine) < n:
            raise InvariantViolation(
                f"leader {node.node_id} of epoch {node.core.epoch} lacks committed entries"
            )

    def leaders(self) -> list[int]:
        return [n.node_id for n in self.nodes.values() if n.alive and n.core.is_leader]
