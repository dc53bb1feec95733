"""Idempotent producers on this broker: producer ids, and producer state per partition.

Why here: the rules live in `kafkapy.coordinator.idempotence` (a plain state machine); this
module is its runtime - which partition's state, loaded when, persisted where.

- `ProducerIds` hands out producer ids unique across the cluster and across restarts: blocks
  come from the active controller (AllocateProducerIds; ProducerIdsRecord in the metadata log,
  a quorum of one's own controller too), and callers await `ensure_available` first.
- `ProducerStates` keeps one `ProducerStateManager` per partition that idempotent producers
  write to. It is loaded on first use in a worker thread - from the newest producer snapshot at
  or below the log end offset, then by replaying the batch headers after it (Kafka's recovery) -
  and snapshotted into each partition directory at segment roll and clean shutdown, so restarts
  replay little (a damaged snapshot is skipped and the next older one tried).
  Loading also restores `.txnindex` entries of replayed abort markers the index lacks (a crash
  between the marker append and the index write), and sets the partition's last stable offset.
- Followers keep the state too (cluster mode): the replica fetcher replays each replicated
  append into it (`on_replicated`, per batch header) and loads it in the background the first
  time producer batches arrive; a truncation (`PartitionLog.truncations`) makes it stale and
  the next use reloads it. A replica that becomes leader therefore knows every producer's last
  sequences and open transactions, as Kafka's followers do.
- The last stable offset of a partition with loaded state follows its open transactions:
  `on_append` (called by `Broker.after_append`) moves it after every append; a partition whose
  state is not loaded follows the high watermark, so read_committed readers load the state
  first (`ensure_loaded`), which after a restart is what finds the open transactions.

Single owner: both are used from the trio thread only (loading runs in a thread but hands back a
new manager), so the validate -> append -> commit sequence of a produce never interleaves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable

from kafkapy.broker import runtime
from kafkapy.coordinator.idempotence import (
    ControlType,
    CorruptSnapshotError,
    ProducerBatch,
    ProducerStateManager,
    decode_snapshot,
    encode_snapshot,
)
from kafkapy.protocol.errors import ProtocolError
from kafkapy.protocol.records import (
    BatchHeader,
    Buffer,
    decode_records,
    iter_batches,
    parse_control_record,
)
from kafkapy.storage import PartitionLog

__all__ = [
    "BLOCK_SIZE",
    "ProducerIds",
    "ProducerIdsUnavailable",
    "ProducerStates",
    "update_stable_offset",
]

log = logging.getLogger(__name__)

BLOCK_SIZE = 1000

Key = tuple[str, int]


class ProducerIdsUnavailable(RuntimeError):
    """No controller block is at hand (the caller skipped `ensure_available`)."""


BlockSource = Callable[[], Awaitable[tuple[int, int]]]


class ProducerIds:
    """Blocks handed out by the active controller (`source()` -> (first id, count), Kafka's
    AllocateProducerIds), so ids are unique across the cluster; the next block is fetched in the
    background when the current one runs low, and `allocate` stays synchronous because callers
    `await ensure_available()` first."""

    def __init__(self, source: BlockSource) -> None:
        self._next = self._reserved_until = 0
        self._source = source
        self._spare: tuple[int, int] | None = None  # a prefetched controller block
        self._fetching: runtime.Event | None = None

    def _left(self) -> int:
        return self._reserved_until - self._next

    async def ensure_available(self, count: int = 1) -> None:
        """Make sure `allocate` has `count` ids without another await (waits for the
        controller when the block runs out - the rest of a block too short is skipped; raises
        what the controller channel raised)."""
        for _ in range(3):  # a concurrent caller may use up the block we waited for
            if self._left() >= count or self._take_spare():
                return
            await self._fetch()
        if self._left() < count and not self._take_spare():
            raise ProducerIdsUnavailable("no producer id block from the controller")

    def _take_spare(self) -> bool:
        if self._spare is None:
            return False
        start, count = self._spare
        self._spare = None
        self._next, self._reserved_until = start, start + count
        return count > 0

    async def _fetch(self) -> None:
        """One AllocateProducerIds at a time; concurrent callers wait for it."""
        if self._fetching is not None:
            await self._fetching.wait()
            return
        self._fetching = done = runtime.new_event()
        try:
            self._spare = await self._source()
        finally:
            self._fetching = None
            done.set()

    async def prefetch(self) -> None:
        """Fetch the next block when the current one is 90% used (Kafka's rule), so producers
        rarely wait for the controller. Errors are logged: `ensure_available` retries."""
        if self._spare is not None or self._fetching is not None:
            return
        if self._left() * 10 > BLOCK_SIZE:
            return
        try:
            await self._fetch()
        except Exception as exc:
            log.warning("prefetching a producer id block failed: %s", exc)

    def allocate(self) -> int:
        if self._left() <= 0 and not self._take_spare():
            raise ProducerIdsUnavailable("no producer id block from the controller")
        pid = self._next
        self._next += 1
        return pid


def _producer_batch(header: BatchHeader, data: Buffer, pos: int) -> ProducerBatch | None:
    """What producer state needs of one batch at `pos` of `data`: None for a batch without a
    producer id (or a marker whose record is unreadable)."""
    if header.producer_id < 0:
        return None
    control = None
    coordinator_epoch = -1
    if header.is_control:
        try:
            record = decode_records(data, pos, header)[0]
            commit, coordinator_epoch = parse_control_record(record)
        except (ProtocolError, IndexError):
            return None
        control = ControlType.COMMIT if commit else ControlType.ABORT
    return ProducerBatch.from_header(header, control=control, coordinator_epoch=coordinator_epoch)


def _replay_batches(plog: PartitionLog, from_offset: int, end_offset: int | None = None
                    ) -> list[ProducerBatch]:
    """Producer-relevant batch headers of the log in [`from_offset`, `end_offset`) (one pass)."""
    out: list[ProducerBatch] = []
    segments = list(plog.segments)
    for i, seg in enumerate(segments):
        if i + 1 < len(segments) and segments[i + 1].base_offset <= from_offset:
            continue
        if end_offset is not None and seg.base_offset >= end_offset:
            break
        for _, header, data in seg.batches(with_data=True):
            if end_offset is not None and header.base_offset >= end_offset:
                break
            if header.last_offset < from_offset:
                continue
            batch = _producer_batch(header, data if data is not None else b"", 0)
            if batch is not None:
                out.append(batch)
    return out


def replicated_batches(data: Buffer) -> list[ProducerBatch]:
    """The producer batches among whole batches a follower appended (per batch: headers only,
    and the one record of a marker)."""
    out: list[ProducerBatch] = []
    for pos, header in iter_batches(data):
        batch = _producer_batch(header, data, pos)
        if batch is not None:
            out.append(batch)
    return out


def _replay_into(plog: PartitionLog, mgr: ProducerStateManager, batches: list[ProducerBatch]) -> int:
    """Replay `batches` (already in the log) into `mgr` and restore their abort markers'
    `.txnindex` entries where the index lacks them. Returns how many were missing."""
    restored = 0
    for result in mgr.replay(batches):
        for a in result.aborted:
            restored += plog.restore_aborted_txn(
                a.producer_id, a.first_offset, a.last_offset, a.last_stable_offset
            )
    return restored


def load_state(plog: PartitionLog, expiration_ms: int) -> ProducerStateManager:
    """Snapshot (if any) plus replay of the log after it, up to the log end offset when the
    load started (`last_map_offset`; `catch_up` adds what was appended meanwhile). Blocking:
    run in a worker thread."""
    mgr: ProducerStateManager | None = None
    end = below = plog.log_end_offset
    while mgr is None and (found := plog.read_producer_snapshot(below)) is not None:
        try:
            mgr = ProducerStateManager.from_snapshot(
                decode_snapshot(found[1]), producer_id_expiration_ms=expiration_ms
            )
        except CorruptSnapshotError as e:
            log.warning("%s: skipping damaged producer snapshot %d: %s", plog.directory.name,
                        found[0], e.reason)
            below = found[0] - 1  # try the next older one
    if mgr is None:
        mgr = ProducerStateManager(producer_id_expiration_ms=expiration_ms, last_map_offset=0)
    restored = _replay_into(plog, mgr, _replay_batches(plog, mgr.last_map_offset, end))
    if restored:
        log.warning("%s: restored %d missing .txnindex entries", plog.directory.name, restored)
    mgr.update_map_end_offset(end)
    return mgr


def catch_up(plog: PartitionLog, mgr: ProducerStateManager) -> None:
    """Replay what the log gained after `mgr.last_map_offset` (appended while it loaded in a
    worker thread; on the trio thread, so nothing appends meanwhile)."""
    end = plog.log_end_offset
    if mgr.last_map_offset < end:
        _replay_into(plog, mgr, _replay_batches(plog, mgr.last_map_offset, end))
        mgr.update_map_end_offset(end)


def update_stable_offset(plog: PartitionLog, mgr: ProducerStateManager) -> None:
    """Move the LSO after the high watermark moved or a transaction opened or closed: the first
    offset of the oldest open transaction, else None (follow the high watermark)."""
    mgr.on_high_watermark_updated(plog.high_watermark)
    plog.last_stable_offset = mgr.first_unstable_offset()


class ProducerStates:
    """Producer state per partition, leader and follower alike (Kafka keeps it on every
    replica, so a follower that becomes leader knows every producer's last sequences and open
    transactions): the leader's appends go through it (`validate_append` / `complete_append`),
    a follower's replicated appends are replayed into it (`on_replicated`). A state is valid
    for the log it was read from and the log's `truncations` count: a truncation (a diverged
    follower, a restart of the log) makes it stale, and the next use reloads it from the
    newest snapshot at or below the new end plus the log after it (Kafka's
    `truncateAndReload`)."""

    def __init__(self, expiration_ms: int) -> None:
        self.expiration_ms = expiration_ms
        # (log, its truncation count when read, state)
        self._states: dict[Key, tuple[PartitionLog, int, ProducerStateManager]] = {}
        self._loading: dict[Key, runtime.Event] = {}
        self._active_base: dict[Key, int] = {}  # active segment seen by the last append
        self._forgotten: dict[Key, int] = {}  # forget() count: a load it overtook is not kept

    async def get(self, key: Key, plog: PartitionLog) -> ProducerStateManager:
        """The partition's state, loading it in a worker thread the first time (again after
        a truncation)."""
        while True:
            known = self.loaded(key, plog)
            if known is not None:
                return known
            loading = self._loading.get(key)
            if loading is None:
                break
            await loading.wait()
        done = self._loading[key] = runtime.new_event()
        try:
            forgotten = self._forgotten.get(key, 0)
            while True:
                truncations = plog.truncations
                mgr = await runtime.get().run_sync_in_thread(load_state, plog, self.expiration_ms)
                if plog.truncations == truncations:
                    break
                log.info("%s-%d: the log was truncated while its producer state loaded: "
                         "loading again", *key)
            catch_up(plog, mgr)
            if self._forgotten.get(key, 0) == forgotten:
                self._states[key] = (plog, truncations, mgr)
                update_stable_offset(plog, mgr)
            return mgr
        finally:
            del self._loading[key]
            done.set()

    def loaded(self, key: Key, plog: PartitionLog) -> ProducerStateManager | None:
        """The partition's state if it is loaded and still valid (no waiting)."""
        known = self._states.get(key)
        if known is None or known[0] is not plog:
            return None
        if known[1] != plog.truncations:
            log.info("%s-%d: log truncated: producer state will be reloaded", *key)
            del self._states[key]
            return None
        return known[2]

    def forget(self, key: Key) -> None:
        """Drop the partition's state (its replica left this broker or its log is gone)."""
        self._states.pop(key, None)
        self._active_base.pop(key, None)
        self._forgotten[key] = self._forgotten.get(key, 0) + 1

    def on_replicated(self, key: Key, plog: PartitionLog, data: Buffer) -> bool:
        """A follower appended the whole batches `data`: replay them into the partition's
        state (with the `.txnindex` entries of abort markers) if it is loaded. True when it is
        not loaded but `data` has producer batches: the caller should load it (`get`, which
        reads them from the log), so the state is at hand when this replica becomes leader."""
        batches = replicated_batches(data)
        mgr = self.loaded(key, plog)
        if mgr is None:
            return bool(batches) and key not in self._loading
        if batches:
            try:
                result = mgr.append_replicated(batches, int(time.time() * 1000))
            except ProtocolError as exc:  # the leader wrote what its own rules refuse
                log.warning("%s-%d: replicated batches do not fit the producer state (%s): "
                            "it will be reloaded from the log", *key, exc)
                self.forget(key)
                return True
            for a in result.aborted:
                plog.append_aborted_txn(a.producer_id, a.first_offset, a.last_offset,
                                        a.last_stable_offset)
        mgr.update_map_end_offset(plog.log_end_offset)
        return False

    async def ensure_loaded(self, key: Key, plog: PartitionLog) -> None:
        """Load the partition's state (and so its LSO) unless it is loaded already."""
        if self.loaded(key, plog) is None:
            await self.get(key, plog)

    def on_append(self, key: Key, plog: PartitionLog) -> None:
        """After any append to the partition (the high watermark moved): update its LSO, and
        snapshot the state when the log rolled a new segment (Kafka's rule), so recovery after a
        crash replays at most about one segment."""
        mgr = self.loaded(key, plog)
        if mgr is None:
            return
        update_stable_offset(plog, mgr)
        active = plog.segments[-1].base_offset
        seen = self._active_base.get(key)
        self._active_base[key] = active
        if seen is not None and seen != active and mgr.last_map_offset > 0:
            try:
                plog.write_producer_snapshot(
                    mgr.last_map_offset, encode_snapshot(mgr.export_snapshot()), fsync=False
                )
            except OSError:
                log.exception("could not snapshot producer state of %s-%d", *key)

    def expire(self, now_ms: int) -> int:
        """Drop producers idle longer than `producer.id.expiration.ms`; returns how many."""
        return sum(len(mgr.remove_expired_producers(now_ms)) for _, _, mgr in self._states.values())

    def forget_topic(self, topic: str) -> None:
        for key in [k for k in self._states if k[0] == topic]:
            self.forget(key)

    def snapshot_all(self) -> None:
        """Write every loaded state next to its log (clean shutdown; blocking)."""
        for (topic, partition), (plog, truncations, mgr) in list(self._states.items()):
            if truncations != plog.truncations:
                continue  # stale: the next start reloads it from the log
            try:
                plog.write_producer_snapshot(mgr.last_map_offset, encode_snapshot(mgr.export_snapshot()))
            except Exception:
                log.exception("could not snapshot producer state of %s-%d", topic, partition)
