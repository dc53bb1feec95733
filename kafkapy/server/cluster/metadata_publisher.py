"""MetadataPublisher: committed metadata-log entries -> `image` -> the broker.

Why every node replays the log itself: the image is a pure function of the committed records,
so brokers, the active controller and standby controllers agree on topics, leaders and ISRs
without any other channel, and a restarted node rebuilds its image by replaying its log.

Each run of committed entries from Raft (in offset order, each once) is applied to a *copy* of
the current image, which then replaces `image` (the node's `image`): an image object is never
mutated after it was published, so code that holds one across an `await` sees one consistent
state. After the swap `apply_metadata(image, delta)` (the broker's: the data plane) adjusts
partition roles for what changed, and waiters (`wait_for`) are woken. The node subscribes
`on_committed` / `on_snapshot` to Raft.

Why a restarted broker holds its images back from the data plane: until it has caught up, its
image is what it replayed from disk plus whatever part of the log it fetched so far - a state
the cluster has left, where this node may still lead partitions, coordinate groups and
transactions in epochs that were superseded while it was down. Acting on it (becoming leader,
loading a coordinator, aborting "expired" transactions and sending their markers) races the
real leaders. So a broker's data plane sees no image until `may_publish()` (the node's
`ClusterNode.has_joined()` on a node with the broker role): the
controller unfences this process's registration only once its heartbeats report the
registration's own offset applied, so the image then holds everything committed before it.
The first image published after that carries no delta (the data plane looks at everything).
Kafka's broker does the same: its publishers are installed only after the controller says it
caught up (BrokerServer's initial catch-up). The image itself (`node.image`) follows every
commit meanwhile: heartbeats report its offset, and the Metadata handler waits on `has_joined`.

Error handling: a record that does not decode, or does not fit the image, is logged and
skipped (the image stays as it was for that record): a bad record must not stop a node from
following the rest of the log. An exception from `apply_metadata` is logged, never raised into
Raft's commit path.

Resource handling: no task of its own; it runs inside Raft's commit callback on the trio thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

import trio

from kafkapy.controller.image import MetadataApplyError, MetadataDelta, MetadataImage
from kafkapy.controller.records import decode_record
from kafkapy.protocol.errors import ProtocolError

if TYPE_CHECKING:
    from kafkapy.raft import Entry

__all__ = ["ApplyMetadata", "MetadataPublisher"]

#: what follows a published image: `(image, delta)`, delta None = look at everything
ApplyMetadata: TypeAlias = Callable[[MetadataImage, MetadataDelta | None], None]

log = logging.getLogger(__name__)


class MetadataPublisher:
    """See the module docstring."""

    def __init__(
        self, apply_metadata: ApplyMetadata, *, node_id: int, may_publish: Callable[[], bool] = lambda: True,
        quiet: bool = False,
    ) -> None:
        """`may_publish()`: may the data plane act on the current image yet (see the module
        doc)? `node_id` names this node in the log; `quiet`: holding and publishing the image
        are DEBUG lines (a quorum of one, where they happen at every start and mean nothing
        to a person)."""
        self._level = logging.DEBUG if quiet else logging.INFO
        self._apply_metadata = apply_metadata
        self._may_publish = may_publish
        self.node_id = node_id
        self.image = MetadataImage()
        #: offset / Raft epoch of the last committed entry applied (-1 / 0: none yet)
        self.applied_offset = -1
        self.applied_epoch = 0
        self._changed = trio.Event()
        #: an image was kept from the data plane (see the module doc); the next one goes whole
        self.held = False

    def on_committed(self, entries: Sequence[Entry]) -> None:
        """Apply a run of committed entries and publish the result (Raft's callback)."""
        if not entries:
            return
        image = self.image.copy()
        delta = MetadataDelta()
        for entry in entries:
            if entry.offset <= self.applied_offset:
                continue  # already applied (a callback must not apply an entry twice)
            if entry.data:
                self._apply(image, entry, delta)
            image.offset = entry.offset
            self.applied_offset = entry.offset
            self.applied_epoch = entry.epoch
        self.publish(image, delta, skip_apply=delta.is_empty() and not self.held)

    def on_snapshot(self, image: MetadataImage, epoch: int) -> None:
        """Replace the image with a metadata snapshot's (Raft's snapshot callback: at start-up,
        or when this node was below the leader's log start) and publish it. The delta names
        everything in the old or the new image, so the broker re-checks all of it."""
        old = self.image
        delta = MetadataDelta()
        for name, topic in image.topics.items():
            delta.changed_topics.add(name)
            delta.changed_partitions[name] = set(topic.partitions)
        for topic_id, name in old.topics_by_id.items():
            if image.topics_by_id.get(topic_id) != name:
                delta.deleted_topics[topic_id] = old.topics[name]
        delta.changed_brokers.update(old.brokers, image.brokers)
        delta.changed_broker_configs.update(old.broker_configs, image.broker_configs)
        delta.changed_group_configs.update(old.group_configs, image.group_configs)
        delta.changed_scram_users.update(u for u, _ in [*old.scram_credentials, *image.scram_credentials])
        delta.producer_ids_changed = True
        delta.changed_acls.update(old.acls, image.acls)
        delta.client_quotas_changed = True
        self.applied_offset = image.offset
        self.applied_epoch = epoch
        self.publish(image, delta)

    def publish(self, image: MetadataImage, delta: MetadataDelta | None, *, skip_apply: bool = False) -> None:
        """Make `image` the published one, hand it to the data plane (unless `skip_apply`:
        nothing changed) and wake the waiters."""
        self.image = image
        if not skip_apply:
            self._publish(image, delta)
        self._changed.set()
        self._changed = trio.Event()

    def _publish(self, image: MetadataImage, delta: MetadataDelta | None) -> None:
        """`apply_metadata(image, delta)` once this node may act on its image; until then the
        image is held back (and the first one after goes whole, delta None)."""
        if not self._may_publish():
            if not self.held:
                log.log(
                    self._level,
                    "node %d: metadata image at offset %d held from the data plane until this "
                    "broker has caught up and is unfenced", self.node_id, image.offset
                )
            self.held = True
            return
        whole = delta
        if self.held:
            self.held = False
            whole = None
            log.log(
                self._level,
                "node %d caught up at metadata offset %d: publishing its image",
                self.node_id, image.offset,
            )
        try:
            self._apply_metadata(image, whole)
        except Exception:
            log.exception("apply_metadata failed at offset %d", image.offset)

    @staticmethod
    def _apply(image: MetadataImage, entry: Entry, delta: MetadataDelta) -> None:
        try:
            record = decode_record(entry.data)
        except ProtocolError as exc:
            log.error("skipping undecodable metadata record at offset %d: %s", entry.offset, exc)
            return
        try:
            image.apply(record, entry.offset, delta)
        except MetadataApplyError as exc:
            log.error("skipping metadata record at offset %d (%r): %s", entry.offset, record, exc)

    async def wait_for(self, predicate: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """True once the published image satisfies `predicate`; False after `timeout_s`."""
        with trio.move_on_after(timeout_s):
            while not predicate(self.image):
                await self._changed.wait()
            return True
        return False

    async def wait_applied(self, offset: int, timeout_s: float) -> bool:
        """True once the entry at `offset` has been applied; False after `timeout_s`."""
        with trio.move_on_after(timeout_s):
            while self.applied_offset < offset:
                await self._changed.wait()
            return True
        return False
