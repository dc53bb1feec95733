"""ControllerDriver: runs the QuorumController on the node that leads the metadata quorum.

Why this shape (Kafka's QuorumController event loop, in trio):
- Activation: when this node becomes Raft leader of epoch E it waits until the publisher has
  applied an entry of epoch E (the leader's epoch-start no-op). Everything before it is then
  committed and in the image, and nothing after it has been proposed yet, so a controller built
  from that image predicts the offsets of its own records exactly (a broker epoch is the offset
  of its registration record). The controller is dropped the moment leadership is lost.
- Bootstrap: a metadata log without a finalized metadata.version (a new cluster, or a data dir
  written before kafkapy finalized features) gets the bootstrap FeatureLevelRecords
  (controller/features.py) as the first records the new active controller proposes, ahead of
  whatever operation comes first, or from the timer loop when none comes.
- Operations run one at a time (`submit`): the operation runs on the controller (which applies
  its records to its own uncommitted image at once), its records are proposed to Raft in the
  same critical section, and the answer is given once they are committed - outside the lock,
  so later operations pipeline behind it. An operation that emits nothing answers at once.
- A proposal whose offset differs from the prediction (should not happen) drops the controller;
  it is rebuilt once the publisher has applied everything proposed so far.
- Sessions: a heartbeat counts the moment it reaches the controller (`touch_session`), before
  it queues behind slower operations; a stall of the controller's own process (paused, starved:
  its timer loop woke far past a short sleep) does not count against the brokers' sessions, since
  their heartbeats could not be read meanwhile.
- Crashed brokers are fenced before their session expires when every listener of theirs
  refuses connections (`GoneDetector`, liveness.py).
- Timers: broker session expiry (`tick`) runs when the controller's next deadline passes; the
  leader-imbalance check (`auto.leader.rebalance.enable`, every
  `leader.imbalance.check.interval.seconds`; controller/balance.py) runs when the controller
  says it is due, and each leadership it moves is logged.

Error handling: losing leadership or a commit that does not come within the request timeout
raises `NotControllerError`, which handlers answer as NOT_CONTROLLER (brokers retry against the
new leader). Errors inside an operation propagate to the handler (a bug, logged by the
connection layer).

Resource handling: `run()` is one task (the activation watch and the session timer); it owns no
sockets.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import trio

from kafkapy.broker.config_rules import (
    DYNAMIC_BROKER_LISTS,
    PER_BROKER_KEYS,
    dynamic_config_problem,
    group_config_check,
)
from kafkapy.broker.controller_tags import (
    METADATA_OFFSET_TAG,
    pop_metadata_offset,
    set_metadata_offset,
)
from kafkapy.broker.errors import NotControllerError
from kafkapy.controller.controller import ControllerConfig, ControllerResult, QuorumController
from kafkapy.controller.records import encode_record
from kafkapy.raft import NotLeaderError
from kafkapy.server.cluster.liveness import GoneDetector

if TYPE_CHECKING:
    from kafkapy.broker.config import BrokerConfig, ClusterConfig
    from kafkapy.broker.stats import BrokerStats
    from kafkapy.server.cluster.metadata_publisher import MetadataPublisher
    from kafkapy.server.cluster.raft_driver import RaftDriver

__all__ = [
    "METADATA_OFFSET_TAG",
    "ControllerDriver",
    "NotControllerError",
    "monotonic_ms",
    "pop_metadata_offset",
    "set_metadata_offset",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

_POLL_S = 0.02
_IDLE_S = 0.25
#: an oversleep of the timer loop this long counts as a stall of this process
_STALL_S = 1.0



def monotonic_ms() -> int:
    """The controller's clock for broker sessions (trio's monotonic clock, in ms)."""
    return int(trio.current_time() * 1000)


def controller_config(config: BrokerConfig, cluster: ClusterConfig, cluster_id: str) -> ControllerConfig:
    return ControllerConfig(
        session_timeout_ms=cluster.session_timeout_ms,
        default_partitions=config.get_int("num.partitions"),
        default_replication_factor=cluster.default_replication_factor,
        min_insync_replicas=cluster.min_insync_replicas,
        unclean_leader_election_enable=cluster.unclean_leader_election,
        cluster_id=cluster_id,
        delete_topic_enable=config.get_bool("delete.topic.enable"),
        broker_config_check=dynamic_config_problem,
        broker_list_configs=DYNAMIC_BROKER_LISTS,
        broker_only_configs=PER_BROKER_KEYS,
        group_config_check=group_config_check(config),
        max_broker_partitions=config.get_int("max.broker.partitions"),
        max_partitions=config.get_int("max.partitions"),
        auto_leader_rebalance_enable=config.get_bool("auto.leader.rebalance.enable"),
        leader_imbalance_check_interval_ms=(
            config.get_int("leader.imbalance.check.interval.seconds") * 1000
        ),
        leader_imbalance_per_broker_percentage=config.get_int(
            "leader.imbalance.per.broker.percentage"
        ),
        remote_log_storage_system_enable=config.get_bool("remote.log.storage.system.enable"),
    )


class ControllerDriver:
    """See the module docstring."""

    def __init__(
        self,
        config: BrokerConfig,
        cluster: ClusterConfig,
        raft: RaftDriver,
        publisher: MetadataPublisher,
        *,
        cluster_id: str,
        stats: BrokerStats,
    ) -> None:
        """`raft` / `publisher`: this node's metadata quorum replica and the image it publishes;
        `stats`: where the commit latency goes."""
        self.cluster_config = cluster
        self.node_id = cluster.node_id
        self.raft = raft
        self.publisher = publisher
        self.stats = stats
        self.config = controller_config(config, cluster, cluster_id)
        self._controller: QuorumController | None = None
        self._epoch = -1
        self._last_proposed = -1
        self._last_proposed_epoch = -1
        self._lock = trio.Lock()
        self.request_timeout_s = max(cluster.request_timeout_ms, 1000) / 1000
        #: fences crashed brokers early on positive evidence (liveness.py)
        self.gone = GoneDetector(cluster, active=self.active, fence_gone=self._fence_gone)

    # -- state ----------------------------------------------------------------------------------

    def _raft(self) -> RaftDriver:
        return self.raft

    def active(self) -> QuorumController | None:
        """The controller if this node is the active controller now, else None."""
        raft = self._raft()
        if self._controller is None:
            return None
        if not raft.is_leader or raft.epoch != self._epoch:
            self._controller = None
            return None
        return self._controller

    def _maybe_activate(self) -> None:
        raft = self._raft()
        publisher = self.publisher
        if not raft.is_leader:
            if self._controller is not None:
                log.info("node %d is no longer the active controller", self.node_id)
            self._controller = None
            return
        if self._controller is not None and self._epoch == raft.epoch:
            return
        # Wait for this epoch's first entry, and for everything this epoch proposed before a
        # resync (what an earlier epoch of ours proposed may have been truncated away: waiting
        # for its offset could wait for ever).
        if publisher.applied_epoch != raft.epoch or (
            self._last_proposed_epoch == raft.epoch
            and publisher.applied_offset < self._last_proposed
        ):
            return
        image = publisher.image
        self._controller = QuorumController(
            self.config, image, now_ms=monotonic_ms(), next_offset=image.offset + 1
        )
        self._epoch = raft.epoch
        log.log(
            logging.DEBUG if self.cluster_config.quorum_of_one else logging.INFO,
            "node %d is the active controller (epoch %d, metadata offset %d, %d brokers)",
            self.node_id,
            raft.epoch,
            image.offset,
            len(image.brokers),
        )

    # -- operations -----------------------------------------------------------------------------

    async def _fence_gone(self, node_id: int, epoch: int) -> bool:
        """Fence a broker whose process is gone (liveness.py); False if not done."""
        try:
            return await self.submit(lambda c: c.fence_gone(node_id, epoch))
        except NotControllerError:
            return False

    async def submit(self, op: Callable[[QuorumController], ControllerResult[T]]) -> T:
        """Run `op` on the active controller, commit its records, return its response."""
        response, _ = await self.submit_with_offset(op)
        return response

    async def submit_with_offset(
        self,
        op: Callable[[QuorumController], ControllerResult[T]],
        *,
        commit_timeout_s: float | None = None,
    ) -> tuple[T, int]:
        """`submit`, also returning the metadata offset a reader must have applied to see the
        result (the last offset proposed so far; -1 when nothing was ever proposed).

        `commit_timeout_s` (default `controller.quorum.request.timeout.ms`) bounds the wait for
        the commit. Admin requests pass the client's own timeout: once their records are
        proposed, answering NOT_CONTROLLER early makes the broker retry an operation that will
        still commit, and the retry then answers as if it had not happened (a cancelled
        reassignment: NO_REASSIGNMENT_IN_PROGRESS)."""
        async with self._lock:
            self._maybe_activate()
            controller = self.active()
            if controller is None:
                raise NotControllerError("not the active controller")
            records = controller.bootstrap_features().records
            try:
                result = op(controller)
            except BaseException:
                if records:  # applied to its image, never proposed: its offsets are off now
                    self._controller = None
                raise
            records += result.records
            if not records:
                return result.response, self._last_proposed
            expected = controller.next_offset - 1
            data = [encode_record(r) for r in records]
            proposed_at = time.perf_counter()
            try:
                last = await self._raft().propose(data)
            except NotLeaderError as exc:
                self._controller = None
                raise NotControllerError("lost leadership while proposing") from exc
            if self._last_proposed_epoch != self._epoch:
                self._last_proposed = -1
            self._last_proposed = max(self._last_proposed, last)
            self._last_proposed_epoch = self._epoch
            if last != expected:
                log.warning(
                    "metadata offsets drifted (predicted %d, got %d): rebuilding the controller",
                    expected,
                    last,
                )
                self._controller = None
        wait_s = self.request_timeout_s if commit_timeout_s is None else commit_timeout_s
        with trio.move_on_after(max(wait_s, self.request_timeout_s)):
            try:
                await self._raft().wait_committed(last)
            except NotLeaderError as exc:
                raise NotControllerError(f"metadata offset {last} was lost") from exc
            commit_ms = (time.perf_counter() - proposed_at) * 1000
            self.stats.raft_commit_latency_ms.observe(commit_ms)
            return result.response, last
        raise NotControllerError(f"metadata offset {last} not committed in time")

    @property
    def last_proposed_offset(self) -> int:
        return self._last_proposed

    def touch_session(self, broker_id: int, broker_epoch: int) -> None:
        """A heartbeat of `broker_id` arrived: count it now (see the module docstring)."""
        controller = self.active()
        if controller is not None:
            controller.touch_session(broker_id, broker_epoch, monotonic_ms())

    # -- task -----------------------------------------------------------------------------------

    def suspect(self, node_id: int, reason: str) -> None:
        """`node_id`'s process may be gone: probe it (GoneDetector; no-op unless active)."""
        self.gone.suspect(node_id, reason)

    async def run(self) -> None:
        """Watch for leadership (activation), expire broker sessions, fence crashed brokers
        early and rebalance leaders periodically; runs until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.gone.run)
            await self._run_timers()

    async def _run_timers(self) -> None:
        while True:
            self._maybe_activate()
            controller = self.active()
            raft = self._raft()
            timeout = _IDLE_S
            if controller is not None:
                if controller.needs_bootstrap:
                    await self._bootstrap()
                deadline = controller.next_deadline_ms()
                if deadline is not None and monotonic_ms() >= deadline:
                    try:
                        fenced = await self.submit(lambda c: c.tick(monotonic_ms()))
                    except NotControllerError:
                        fenced = []
                    if fenced:
                        log.warning("fenced brokers %s: their sessions expired", fenced)
                await self._maybe_rebalance()
                deadline = controller.next_deadline_ms()
                if deadline is not None:
                    timeout = min(timeout, max(0.0, (deadline - monotonic_ms()) / 1000))
            elif raft.is_leader:
                timeout = _POLL_S  # leader, waiting for its epoch's first entry to be applied
            # Sleep until the next timer, or until Raft's leadership changes.
            changed = raft.leader_changed
            before = trio.current_time()
            with trio.move_on_after(timeout) as sleep:
                await changed.wait()
            if sleep.cancelled_caught:
                self._note_oversleep(trio.current_time() - before - timeout)

    async def _bootstrap(self) -> None:
        """Commit the bootstrap feature levels on an idle new controller (`submit` prepends
        them to any operation, so a no-op operation is enough)."""
        try:
            await self.submit(lambda c: ControllerResult([], None))
        except NotControllerError:
            return
        log.debug("finalized the bootstrap feature levels in the metadata log")

    def _note_oversleep(self, overslept_s: float) -> None:
        """A sleep that ended `overslept_s` late means this process did not run meanwhile
        (SIGSTOP, starvation): that time does not count against the brokers' sessions, whose
        heartbeats could not be read (see the module docstring). Checked before the next tick."""
        controller = self.active()
        if overslept_s < _STALL_S or controller is None:
            return
        controller.extend_sessions(int(overslept_s * 1000))
        log.warning(
            "controller on node %d did not run for %.1f s: broker sessions extended by that",
            self.node_id,
            overslept_s,
        )

    async def _maybe_rebalance(self) -> None:
        """The controller's leader-imbalance check when due (controller/balance.py): after a
        broker restart leadership stays where it moved until this runs."""
        controller = self.active()
        if controller is None:
            return
        due = controller.next_rebalance_ms()
        if due is None or monotonic_ms() < due:
            return
        try:
            reply = await self.submit(lambda c: c.rebalance_leaders(monotonic_ms()))
        except NotControllerError:
            return
        if not reply.moved:
            return
        log.info(
            "leader imbalance check: moved %d partition leaders to their preferred replicas%s: %s",
            len(reply.moved),
            " (more to move)" if reply.more else "",
            ", ".join(f"{m.topic}-{m.partition} {m.from_leader}->{m.to_leader}" for m in reply.moved[:20]),
        )
        for m in reply.moved:
            log.debug(
                "preferred leader election: %s-%d leader %d -> %d",
                m.topic,
                m.partition,
                m.from_leader,
                m.to_leader,
            )
