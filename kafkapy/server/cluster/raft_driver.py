"""`RaftDriver`: runs the sans-IO `RaftCore` for the metadata quorum on trio and real sockets.

The core decides, the driver does: every input (a peer's request via the quorum handlers, a
peer's response, a failed request, a timer, a proposal) goes into the core under one lock,
then the driver acts on the core's `Ready` in the order the core requires - persist the quorum
state (fsync, worker thread), flush the log (fsync, worker thread), start sending the requests,
hand the committed entries to the subscribers - and only then may a handler send its response.

Requests go to the voters' controller listeners through the node's `PeerPool`, one task per
request (a Fetch long-polls at the leader, so it must not hold anything up). A failed or
undecodable exchange is reported to the core as `request_failed`.

Waiting: `propose()` appends at once and returns the offset; `wait_committed(offset)` returns
once that offset is committed (or raises `NotLeaderError` when the entry was lost with a change
of leader). `leader_changed` is a trio.Event replaced after it fires (take the current one, then
wait on it); `log_changed` likewise, for the long-polling Fetch handler.

Error handling: storage errors while persisting propagate out of `run()` (the node's supervisor
restarts the part - a Raft replica that cannot persist must not keep voting). A subscriber that
raises is logged and skipped; it does not stop delivery to the others.

Snapshots (KIP-630): once `metadata.log.max.record.bytes.between.snapshots` bytes of records
were committed since the last snapshot, the driver snapshots the published `MetadataImage` (the
node's, immutable once published, so it is encoded and written in a worker thread without the
lock), then tells the core, which moves the log start to it. Every node does this for itself. A
snapshot reaches the subscribers as an image (`on_snapshot`): at start-up the newest one is
loaded before the log tail is replayed, and one fetched from the leader (this node was below the
leader's log start) replaces the image before the entries after it.

Pre-vote (KIP-996) is on: a voter whose election timeout fires asks for pre-votes before it
bumps the epoch (see `kafkapy.raft.state.ProspectiveState`).

Resource handling: `run()` owns the send tasks and the snapshot task (its nursery); at
cancellation a leader resigns (EndQuorumEpoch to the voters, bounded by 0.5 s, shielded) so the
next leader is elected at once.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import trio

from kafkapy.controller.image import MetadataImage
from kafkapy.controller.snapshot import SnapshotError, decode_snapshot, encode_snapshot
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.raft import (
    Entry,
    FetchRequest,
    FetchResponse,
    NotLeaderError,
    QuorumState,
    RaftCore,
    RaftRequest,
    RaftResponse,
    Ready,
    ReplicaProgress,
    Role,
    SnapshotId,
)
from kafkapy.raft.wire import request_to_wire, response_from_wire
from kafkapy.server.cluster.metadata_log import MetadataLog, read_quorum_state, write_quorum_state
from kafkapy.server.cluster.peer import PeerError, PeerPool

if TYPE_CHECKING:
    from kafkapy.broker.config import ClusterConfig
    from kafkapy.storage import LogManager

__all__ = ["NotLeaderError", "RaftDriver"]

log = logging.getLogger(__name__)

FETCH_INTERVAL_MS = 50
#: the longest a Fetch waits at the leader for news (well under the fetch timeout)
FETCH_MAX_WAIT_MS = 500
FETCH_MAX_BYTES = 8 * 1024 * 1024
RESIGN_TIMEOUT_S = 0.5

Subscriber = Callable[[list[Entry]], None]
#: gets the image of a snapshot and the snapshot's epoch; what follows continues from its end
SnapshotSubscriber = Callable[[MetadataImage, int], None]
SNAPSHOT_BYTES_CONFIG = "metadata.log.max.record.bytes.between.snapshots"


def now_ms() -> int:
    """The driver's clock: trio's (monotonic; the autojump clock in tests)."""
    return int(trio.current_time() * 1000)


class RaftDriver:
    """One node's Raft replica of `__cluster_metadata-0` (see the module doc)."""

    def __init__(
        self,
        config: ClusterConfig,
        logs: LogManager,
        peers: PeerPool,
        *,
        cluster_id: str,
        snapshot_bytes: int,
        published_image: Callable[[], MetadataImage] | None = None,
    ) -> None:
        """`peers`: the voters' controller listeners; `published_image`: the image the
        subscribers published (what a snapshot holds; None: no snapshots are written)."""
        self.cluster_id = cluster_id
        self._peers = peers
        self._published_image = published_image
        self.node_id: int = config.node_id
        self.voters = frozenset(int(v) for v in config.voters)
        self.log = MetadataLog.open(logs)
        self.request_timeout_s = max(0.1, config.request_timeout_ms / 1000)
        state = read_quorum_state(self.log.directory)
        self._fetch_max_wait_ms = min(FETCH_MAX_WAIT_MS, max(10, config.fetch_timeout_ms // 4))
        self.core = RaftCore(
            self.node_id,
            self.voters,
            self.log,
            state,
            now_ms=now_ms(),
            rng=random.Random(),
            election_timeout_ms=config.election_timeout_ms,
            fetch_timeout_ms=config.fetch_timeout_ms,
            fetch_interval_ms=FETCH_INTERVAL_MS,
            pre_vote=True,
        )
        self._persisted = state
        self._lock = trio.Lock()
        self._wake = trio.Event()
        self._nursery: trio.Nursery | None = None
        # what a Ready asked for and is not done yet (kept across a failed fsync)
        self._unsent: list[tuple[int, RaftRequest]] = []
        self._undelivered: list[Entry] = []
        self._flush_pending = False
        self._leader_note_pending = False
        self._subscribers: list[Subscriber] = []
        self._snapshot_subscribers: list[SnapshotSubscriber] = []
        self._pending_snapshot: SnapshotId | None = None
        # offsets below this were handed to the subscribers (the log start is in a snapshot)
        self._committed_end = self.log.start_offset()
        self.snapshot_bytes = snapshot_bytes
        self._bytes_since_snapshot = 0
        self._snapshotting = False
        #: snapshots this process wrote / installed from the leader (tests, DescribeQuorum)
        self.snapshots_written = 0
        self.snapshots_installed = 0
        self.leader_changed = trio.Event()
        self.log_changed = trio.Event()
        self._committed_changed = trio.Event()
        self._last_seen = (self.core.leader_id, self.core.epoch, self.log.end_offset(), 0)
        #: per fetcher: (leader epoch, high watermark) of the last Fetch answer it was sent
        self._sent_hw: dict[int, tuple[int, int]] = {}
        #: resign (EndQuorumEpoch) when `run()` is cancelled; off = behave like a crash (tests)
        self.resign_on_stop = True

    # ------------------------------------------------------------------ read-only view

    @property
    def leader_id(self) -> int | None:
        return self.core.leader_id

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def is_leader(self) -> bool:
        return self.core.is_leader

    @property
    def role(self) -> Role:
        return self.core.role

    @property
    def high_watermark(self) -> int:
        return self.core.high_watermark

    @property
    def quorum_state(self) -> QuorumState:
        return self.core.quorum_state

    @property
    def committed_offset(self) -> int:
        """The end of what the subscribers have been given (offsets below it are applied)."""
        return self._committed_end

    def has_quorum_contact(self) -> bool:
        """`RaftCore.has_quorum_contact` now (see there)."""
        return self.core.has_quorum_contact(now_ms())

    def replica_progress(self) -> dict[int, ReplicaProgress]:
        return self.core.replica_progress()

    # ------------------------------------------------------------------ API for other parts

    def subscribe(
        self, callback: Subscriber, on_snapshot: SnapshotSubscriber | None = None
    ) -> None:
        """Call `callback(entries)` with every committed entry, in order, exactly once per
        process, and `on_snapshot(image, epoch)` with every snapshot to load instead of the
        entries it stands for; a late subscriber first gets the newest snapshot and everything
        committed after it (read back). Without `on_snapshot` a snapshot cannot be followed:
        such a subscriber only gets the entries (used where the whole log is not needed).

        Before `run()` starts (the parts are still being built) the start-up snapshot is only
        queued: it is handed out with the first Ready, when every part exists."""
        start = self.log.start_offset()
        snapshot = self.log.latest_snapshot()
        if snapshot is not None and on_snapshot is not None:
            if self._nursery is None and self._committed_end == start:
                self._pending_snapshot = snapshot
            else:
                self._deliver_snapshot_to(on_snapshot, snapshot)
        if self._committed_end > start:
            self._deliver_to(callback, self.log.read(start, self._committed_end - start))
        self._subscribers.append(callback)
        if on_snapshot is not None:
            self._snapshot_subscribers.append(on_snapshot)

    async def propose(self, records: Sequence[bytes]) -> int:
        """Append `records` as entries of this leader's epoch; the offset of the last one.
        Raises NotLeaderError on a non-leader."""
        async with self._lock:
            offset = self.core.propose(list(records), now_ms())
        # the run loop flushes and publishes: proposals arriving meanwhile share one fsync
        self._wake.set()
        return offset

    async def wait_committed(self, offset: int) -> None:
        """Return once `offset` is committed and applied; raises NotLeaderError when the entry
        proposed there was lost (a new leader overwrote it). Bounded by the caller's scope."""
        epoch = self.log.epoch_at(offset)
        while self._committed_end <= offset:
            if epoch is None or self.log.epoch_at(offset) != epoch:
                raise NotLeaderError(self.leader_id, self.epoch)
            event = self._committed_changed
            await event.wait()

    async def handle_request(self, src: int, request: RaftRequest) -> RaftResponse:
        """A peer's request, answered by the core once what it relies on is durable."""
        async with self._lock:
            response = self.core.handle_request(src, request, now_ms())
            await self._process()
        self._wake.set()  # the core's next deadline may have moved
        return response

    async def fetch(self, src: int, request: FetchRequest, max_wait_ms: int) -> RaftResponse:
        """A Fetch, long-polled: an answer with nothing new waits up to `max_wait_ms` for the
        log or the high watermark to change, then is answered again.

        An answer without entries but with a high watermark newer than the last one this
        fetcher was sent goes out at once (as Kafka's leader does): the HW may have moved while
        the fetcher's previous answer was on its way (another voter's fetch committed it), and
        holding the news back for a whole long poll would delay every metadata change on that
        node by `max_wait_ms`. Kafka's Fetch v18 carries the fetcher's HW; v17 does not, so
        the driver remembers what it last answered each fetcher (per epoch)."""
        changed = self.log_changed
        response = await self.handle_request(src, request)
        if (
            isinstance(response, FetchResponse)
            and not response.entries
            and response.diverging_epoch is None
            and response.error == ErrorCode.NONE
            and max_wait_ms > 0
            and not self._hw_is_news(src, response)
        ):
            with trio.move_on_after(max_wait_ms / 1000):
                await changed.wait()
            response = await self.handle_request(src, request)
        if isinstance(response, FetchResponse) and response.error == ErrorCode.NONE:
            self._sent_hw[src] = (response.leader_epoch, response.high_watermark)
        return response

    def _hw_is_news(self, src: int, response: FetchResponse) -> bool:
        """True when `src` has not been sent `response`'s high watermark in this epoch yet."""
        epoch, hw = self._sent_hw.get(src, (-1, -1))
        return epoch != response.leader_epoch or response.high_watermark > hw

    # ------------------------------------------------------------------ the loop

    async def run(self) -> None:
        """Drive the core until cancelled (see the module doc for errors and resources)."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                async with self._lock:
                    await self._process()
                while True:
                    deadline = self.core.next_deadline_ms()
                    with trio.move_on_at(deadline / 1000):
                        await self._wake.wait()
                    self._wake = trio.Event()
                    async with self._lock:
                        self.core.tick(now_ms())
                        await self._process()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await self._resign()

    async def _resign(self) -> None:
        """Clean shutdown of a leader: EndQuorumEpoch names the successors (bounded, best
        effort; the voters elect after a fetch timeout anyway)."""
        if not self.core.is_leader or not self.resign_on_stop:
            return
        self.core.resign(now_ms())
        ready = self.core.poll()
        await self._persist(self.core.quorum_state)
        with trio.move_on_after(RESIGN_TIMEOUT_S):
            async with trio.open_nursery() as nursery:
                for dst, req in ready.requests:
                    nursery.start_soon(self._exchange, dst, req, False)
        self._notify_leader()

    async def _process(self) -> None:
        """Act on the core's Ready (caller holds the lock): persist, flush, send, apply.

        Shielded: a Ready is handed out once, so a caller cancelled half-way (a connection
        closing) must not leave a state unpersisted or committed entries undelivered."""
        with trio.CancelScope(shield=True):
            await self._act(self.core.poll())

    async def _act(self, ready: Ready) -> None:
        """Everything the Ready asks for is queued first, so a failing fsync (raised to the
        caller) loses nothing: the next call persists/flushes again before sending or applying."""
        self._unsent.extend(ready.requests)
        if ready.snapshot is not None:
            # everything not delivered yet is in the snapshot (or was replaced by it)
            self._pending_snapshot = ready.snapshot
            self._undelivered = []
            self.snapshots_installed += 1
        self._undelivered.extend(ready.committed)
        self._flush_pending |= ready.flush_log
        self._leader_note_pending |= ready.leader_changed
        # the core's current state: at least as new as the Ready's, and a state whose write
        # failed last time is written now
        await self._persist(self.core.quorum_state)
        if self._flush_pending:
            await trio.to_thread.run_sync(self.log.flush)
            self._flush_pending = False
        if self._nursery is not None:
            try:
                while self._unsent:
                    dst, req = self._unsent[0]
                    self._nursery.start_soon(self._exchange, dst, req, True)
                    del self._unsent[0]
            except RuntimeError:
                pass  # run() is stopping (its nursery takes no new tasks): they stay unsent
        if self._pending_snapshot is not None:
            snapshot = self._pending_snapshot
            for on_snapshot in list(self._snapshot_subscribers):
                self._deliver_snapshot_to(on_snapshot, snapshot)
            self._pending_snapshot = None  # only once delivered: a failure is retried
            self._committed_end = snapshot.end_offset
            self._bytes_since_snapshot = 0
            self._committed_changed.set()
            self._committed_changed = trio.Event()
        if self._undelivered:
            committed, self._undelivered = self._undelivered, []
            for callback in list(self._subscribers):
                self._deliver_to(callback, committed)
            self._committed_end = committed[-1].offset + 1
            self._committed_changed.set()
            self._committed_changed = trio.Event()
            self._bytes_since_snapshot += sum(len(e.data) for e in committed)
            self._maybe_snapshot()
        if self._leader_note_pending:
            self._leader_note_pending = False
            self._notify_leader()
            # a waiter for an entry the new leader overwrote must look again
            self._committed_changed.set()
            self._committed_changed = trio.Event()
        seen = (
            self.core.leader_id,
            self.core.epoch,
            self.log.end_offset(),
            self.core.high_watermark,
        )
        if seen != self._last_seen:
            self._last_seen = seen
            self.log_changed.set()
            self.log_changed = trio.Event()

    async def _persist(self, state: QuorumState) -> None:
        if state != self._persisted:
            await trio.to_thread.run_sync(write_quorum_state, self.log.directory, state)
            self._persisted = state

    def _notify_leader(self) -> None:
        # a quorum of one elects itself at every start: no news for its log at INFO
        log.log(
            logging.DEBUG if len(self.voters) == 1 else logging.INFO,
            "node %d: raft epoch %d, leader %s (%s)",
            self.node_id,
            self.core.epoch,
            self.core.leader_id,
            self.core.role.value,
        )
        self.leader_changed.set()
        self.leader_changed = trio.Event()

    def _deliver_snapshot_to(self, callback: SnapshotSubscriber, snapshot: SnapshotId) -> None:
        """Load `snapshot` from the log and hand its image over. A snapshot that cannot be read
        is a broken data directory: raised (the node must not run on a partial image)."""
        got = self.log.read_snapshot(snapshot, 0, 1 << 31)
        if got is None:
            raise RuntimeError(f"metadata snapshot {snapshot} is missing")
        try:
            header, image = decode_snapshot(got[0])
        except SnapshotError as exc:
            raise RuntimeError(f"metadata snapshot {snapshot} is unreadable: {exc}") from exc
        if (header.end_offset, header.epoch) != (snapshot.end_offset, snapshot.epoch):
            raise RuntimeError(f"metadata snapshot {snapshot} says it is {header}")
        try:
            callback(image, snapshot.epoch)
        except Exception:
            log.exception("metadata snapshot subscriber %r failed on %s", callback, snapshot)

    def _maybe_snapshot(self) -> None:
        """Start a snapshot of the published image once enough was committed since the last
        one (one at a time, only while `run()` is running)."""
        if (
            self._snapshotting
            or self._nursery is None
            or self._bytes_since_snapshot < self.snapshot_bytes
            or self._published_image is None
        ):
            return
        image = self._published_image()
        if image.offset + 1 != self._committed_end:
            return  # the published image does not match what was committed
        epoch = self.log.epoch_at(image.offset)
        if epoch is None or image.offset + 1 <= self.log.start_offset():
            return
        self._snapshotting = True
        self._bytes_since_snapshot = 0
        try:
            self._nursery.start_soon(self._snapshot, image, SnapshotId(image.offset + 1, epoch))
        except RuntimeError:
            self._snapshotting = False  # run() is stopping

    async def _snapshot(self, image: MetadataImage, snapshot_id: SnapshotId) -> None:
        """Encode and store the snapshot in a worker thread, then let the core adopt it. A
        failure is logged, not raised: the log just keeps its start until the next try."""
        try:
            started = time.monotonic()
            data = await trio.to_thread.run_sync(
                lambda: encode_snapshot(
                    image,
                    end_offset=snapshot_id.end_offset,
                    epoch=snapshot_id.epoch,
                    timestamp_ms=int(time.time() * 1000),
                )
            )
            await trio.to_thread.run_sync(self.log.store_snapshot, snapshot_id, data)
            async with self._lock:
                self.core.snapshot_written(snapshot_id)
                await self._process()
            self.snapshots_written += 1
            log.info(
                "node %d: metadata snapshot %s written (%d bytes, %.0f ms)",
                self.node_id,
                snapshot_id,
                len(data),
                (time.monotonic() - started) * 1000,
            )
        except Exception:
            log.exception("node %d: metadata snapshot %s failed", self.node_id, snapshot_id)
        finally:
            self._snapshotting = False

    def _deliver_to(self, callback: Subscriber, entries: list[Entry]) -> None:
        try:
            callback(entries)
        except Exception:
            log.exception(
                "metadata subscriber %r failed on offsets %d-%d",
                callback,
                entries[0].offset,
                entries[-1].offset,
            )

    async def _exchange(self, dst: int, req: RaftRequest, report: bool) -> None:
        """Send one request and step its answer (or its failure) into the core."""
        wire = request_to_wire(
            req,
            cluster_id=self.cluster_id,
            dst=dst,
            max_wait_ms=self._fetch_max_wait_ms,
            max_bytes=FETCH_MAX_BYTES,
        )
        timeout = self.request_timeout_s
        if isinstance(req, FetchRequest):
            timeout += self._fetch_max_wait_ms / 1000
        response: RaftResponse | None = None
        refused = False
        try:
            body = await self._peers.request(
                dst, wire.api_key, wire.version, wire.body, timeout_s=timeout
            )
            response = response_from_wire(req, body)
        except (PeerError, ProtocolError, KeyError, ValueError) as exc:
            log.debug("raft %s to node %d failed: %s", type(req).__name__, dst, exc)
            refused = isinstance(exc, PeerError) and exc.refused
        if not report:
            return
        if response is None:
            # do not hammer a node that is down: the core retries after its backoff anyway
            async with self._lock:
                self.core.request_failed(dst, req, now_ms(), refused=refused)
                await self._process()
        else:
            async with self._lock:
                self.core.handle_response(dst, req, response, now_ms())
                await self._process()
        self._wake.set()  # the core's next deadline may have moved
