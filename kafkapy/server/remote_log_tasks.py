"""The remote log manager's tasks on the event loop: replaying `__remote_log_metadata`, copying
and remote retention in worker threads, deleting a deleted topic's remote data.

Why here: `kafkapy.broker.remote_log.RemoteLogManager` decides and calls the object store
synchronously; the event loop must never wait on S3, so every run of it goes to a worker thread
(`runtime.thread_limiter`: at most two at once), and what it publishes comes back to the loop
(`trio.from_thread.run`) to be appended to the metadata topic like a coordinator's record, then
waited for until replicated. A thread left running at shutdown is abandoned (its uploads belong
to a copy that never finishes: readers never see it, rule 1 of `metadata_cache`).

Replay: every broker reads the `__remote_log_metadata` partitions it has a replica of, up to
their high watermark, and applies each record - so a new leader or a follower knows what is
remote. The partitions it needs (those carrying its tiered replicas' records) and holds no
replica of (clusters larger than the topic's replication factor) it fetches from their leaders
as a consumer (`MetadataPartitionFetcher`), as Kafka's metadata manager consumes them.
A record whose metadata partition another broker leads is produced to it (acks=all) over the
inter-broker listener, as Kafka's metadata manager produces with its own client.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import trio

from kafkapy.broker import runtime
from kafkapy.broker.clock import now_ms
from kafkapy.broker.config import BrokerConfig, ConfigError
from kafkapy.broker.errors import PeerError
from kafkapy.broker.internal_topics import (
    REPLICATION_TIMEOUT_MS,
    InternalTopicsHost,
    ensure_cluster_topic,
    log_batches,
    partition_leader,
    wait_replicated,
)
from kafkapy.broker.ports import PeerRequests
from kafkapy.broker.remote_fetch import is_tiered
from kafkapy.broker.remote_log import (
    REMOTE_LOG_METADATA_TOPIC,
    RemoteLogManager,
    TieredReplica,
    metadata_topic_configs,
)
from kafkapy.controller.image import TopicImage
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import ProduceRequest, ProduceResponse
from kafkapy.protocol.records import Record, build_batch, decode_records
from kafkapy.server.remote_log_metadata_fetch import MetadataPartitionFetcher
from kafkapy.storage.errors import StorageError
from kafkapy.storage.remote.copier import CopyBackoff
from kafkapy.storage.remote.layout import TopicIdPartition
from kafkapy.storage.remote.metadata import (
    RemoteLogMetadata,
    RemotePartitionDeleteMetadata,
    encode_remote_log_metadata,
)
from kafkapy.storage.remote.object_store import ObjectStoreUnavailableError

if TYPE_CHECKING:
    from kafkapy.server.cluster.partition_roles import ReplicaManager
    from kafkapy.storage import LogManager, PartitionLog


class RemoteLogHost(InternalTopicsHost, Protocol):
    """What the tasks use of the broker (a Protocol: the broker builds them)."""

    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def storage_lock(self) -> trio.Lock: ...

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None: ...
    def after_append(self, topic: str, partition: int, plog: PartitionLog) -> None: ...

__all__ = ["RemoteLogTasks", "remote_log_manager"]

log = logging.getLogger(__name__)

#: how often the metadata topic is replayed (a new leader learns of copies within this)
REPLAY_INTERVAL_S = 1.0
_RF_KEY = "remote.log.metadata.topic.replication.factor"
_DELETE_ON_DISABLE = "remote.log.delete.on.disable"
_PRODUCE_VERSION = 9
T = TypeVar("T")


def remote_log_manager(config: BrokerConfig, node_id: int) -> RemoteLogManager | None:
    """The broker's remote log manager when `remote.log.storage.system.enable` is true, on the
    S3 store `rsm.config.*` names (ConfigError when they do not make one); else None."""
    if not config.get_bool("remote.log.storage.system.enable"):
        return None
    from kafkapy.storage.remote.s3 import S3Config, S3ObjectStore  # boto3 only when tiering

    try:
        store = S3ObjectStore(S3Config.from_properties(config.remote_storage_properties))
    except ValueError as exc:
        raise ConfigError(f"remote.log.storage.system.enable=true: {exc}") from None
    backoff = CopyBackoff(
        initial_ms=max(1, config.get_int("remote.log.manager.copier.retry.backoff.ms")),
        max_ms=max(1, config.get_int("remote.log.manager.copier.retry.backoff.max.ms")))
    return RemoteLogManager(
        store, broker_id=node_id, backoff=backoff,
        metadata_partitions=config.get_int("remote.log.metadata.topic.num.partitions"))


class MetadataNotPublished(ObjectStoreUnavailableError):
    """`__remote_log_metadata` could not take the record now (no topic yet, not led here, not
    replicated): the copy is retried later."""


class RemoteLogTasks:
    """The periodic work of one broker's remote log manager (module docstring)."""

    def __init__(self, broker: RemoteLogHost, manager: RemoteLogManager) -> None:
        self.broker = broker
        self.manager = manager
        self._replayed: dict[int, int] = {}  # metadata partition -> next offset to apply
        self._deleted: dict[uuid.UUID, TopicImage] = {}
        self._limiter = runtime.get().thread_limiter(2)
        self._peers: PeerRequests | None = None  # to metadata partitions led elsewhere
        self.metadata_fetcher = MetadataPartitionFetcher(broker, manager)
        config = broker.config
        self._interval_s = max(config.get_int("remote.log.manager.task.interval.ms"), 10) / 1000
        self._topic_configs = metadata_topic_configs(
            config.get_int("remote.log.metadata.topic.retention.ms"))

    def on_topics_deleted(self, deleted: Mapping[uuid.UUID, TopicImage]) -> None:
        """Deleted topics (from the metadata image): their remote data goes at the next run."""
        self._deleted.update(deleted)

    async def serve(self) -> None:
        """Replay every `REPLAY_INTERVAL_S`; copy, retain and delete every task interval."""
        next_run = trio.current_time() + min(self._interval_s, REPLAY_INTERVAL_S)
        try:
            while True:
                await trio.sleep(min(self._interval_s, REPLAY_INTERVAL_S))
                try:
                    for value in await self._in_thread(self.read_metadata):
                        self.manager.apply_value(value)  # on the loop: RemoteTier reads there
                    for value in await self.metadata_fetcher.poll():  # partitions not held here
                        self.manager.apply_value(value)
                    if trio.current_time() >= next_run:
                        next_run = trio.current_time() + self._interval_s
                        await self.run_once()
                except Exception:
                    log.exception("remote log manager task failed")
        finally:
            with trio.move_on_after(1, shield=True):
                await self.aclose()

    async def run_once(self) -> None:
        """One task run: copy, local retention of what is copied, remote retention, deletes."""
        replicas = self.tiered_replicas()
        publish = self._blocking_publish
        await self._in_thread(self.manager.run_copies, replicas, publish, now_ms())
        async with self.broker.storage_lock:
            await self._in_thread(self._local_retention, replicas)
        await self._in_thread(self.manager.run_remote_retention, replicas, publish, now_ms())
        if self._deleted:
            await self._in_thread(self._delete_topics)
        disabled = self.disabled_partitions()
        if disabled:
            await self._in_thread(self._delete_disabled, disabled)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn` on a worker thread; abandoned at shutdown (module docstring)."""
        limiter = cast("trio.CapacityLimiter", self._limiter)
        return await trio.to_thread.run_sync(fn, *args, limiter=limiter, abandon_on_cancel=True)

    def tiered_replicas(self) -> list[TieredReplica]:
        """The local replicas of `remote.storage.enable` topics, leaders with their epoch."""
        out = []
        for role in list(self.broker.replicas.roles.values()):
            plog = self.broker.partition_log(role.topic, role.partition)
            if plog is None or plog.offline or not plog.tiered:
                continue
            tp = TopicIdPartition(role.topic, role.topic_id, role.partition)
            out.append(TieredReplica(tp, plog, role.leader_epoch if role.is_leader else None))
        return out

    def _local_retention(self, replicas: list[TieredReplica]) -> None:
        self.manager.sync_copied_offsets(replicas)
        for replica in replicas:
            try:
                replica.log.delete_old_segments(now_ms())
            except (StorageError, OSError) as exc:  # that log only; the others go on
                log.error("local retention of %s failed: %s", replica.partition, exc)

    # --- the metadata topic -------------------------------------------------------------------
    def read_metadata(self) -> list[bytes]:
        """The record values of the local metadata replicas not read yet, up to their high
        watermark (worker thread; the caller applies them on the event loop)."""
        values: list[bytes] = []
        for partition in range(self.manager.metadata_partitions):
            plog = self.broker.logs.get(REMOTE_LOG_METADATA_TOPIC, partition)
            if plog is None:
                continue
            start = self._replayed.get(partition, 0)
            end = plog.high_watermark
            for data, pos, header in log_batches(plog, start, end):
                if not header.is_control:
                    for record in decode_records(data, pos, header):
                        if record.value is not None:
                            values.append(record.value)
                start = header.last_offset + 1
            self._replayed[partition] = max(start, plog.log_start_offset)
        return values

    def _blocking_publish(self, record: RemoteLogMetadata) -> None:
        """`publish` for the worker thread: the append and the apply run on the event loop."""
        trio.from_thread.run(self.publish, record)

    async def publish(self, record: RemoteLogMetadata) -> None:
        """Append `record` to its metadata partition and wait until replicated, then apply it
        here (its replay later is a no-op)."""
        await self._append(record)
        self.manager.apply(record)

    async def _append(self, record: RemoteLogMetadata) -> None:
        broker = self.broker
        tp = record.partition if isinstance(record, RemotePartitionDeleteMetadata) else (
            record.segment_id.partition)
        partition = self.manager.metadata_partition(tp)
        if not await ensure_cluster_topic(broker, REMOTE_LOG_METADATA_TOPIC,
                                          self.manager.metadata_partitions,
                                          self._topic_configs, _RF_KEY):
            raise MetadataNotPublished(f"{REMOTE_LOG_METADATA_TOPIC} does not exist yet")
        leader = partition_leader(broker, REMOTE_LOG_METADATA_TOPIC, partition)
        if leader is None or leader[0] < 0:
            raise MetadataNotPublished(f"{REMOTE_LOG_METADATA_TOPIC}-{partition} has no leader")
        now = now_ms()
        data = build_batch([Record(value=encode_remote_log_metadata(record))], base_timestamp=now)
        if leader[0] != broker.node_id:
            await self._produce_to(leader[0], partition, data)
            return
        plog = broker.partition_log(REMOTE_LOG_METADATA_TOPIC, partition)
        role = broker.replicas.leader_role(REMOTE_LOG_METADATA_TOPIC, partition)
        if plog is None or role is None:
            raise MetadataNotPublished(f"{REMOTE_LOG_METADATA_TOPIC}-{partition}: not led here yet")
        plog.append(data, now_ms=now, leader_epoch=role.leader_epoch)
        broker.after_append(REMOTE_LOG_METADATA_TOPIC, partition, plog)
        code = await wait_replicated(broker, REMOTE_LOG_METADATA_TOPIC, partition,
                                     plog.log_end_offset)
        if code != ErrorCode.NONE:
            raise MetadataNotPublished(f"{REMOTE_LOG_METADATA_TOPIC}-{partition}: {code.name}")

    async def _produce_to(self, leader: int, partition: int, data: bytes) -> None:
        """Produce (acks=all) the record to the metadata partition's leader elsewhere, over the
        inter-broker listener, as Kafka's metadata manager produces with a client."""
        if self._peers is None:
            self._peers = self.broker.cluster.new_broker_peers("kafkapy-remote-log-metadata")
        request = ProduceRequest(acks=-1, timeout_ms=REPLICATION_TIMEOUT_MS, topic_data=[
            ProduceRequest.TopicProduceData(name=REMOTE_LOG_METADATA_TOPIC, partition_data=[
                ProduceRequest.PartitionProduceData(index=partition, records=data)])])
        try:
            response: ProduceResponse = await self._peers.request(
                leader, ApiKey.PRODUCE, _PRODUCE_VERSION, request,
                timeout_s=2 * REPLICATION_TIMEOUT_MS / 1000)
        except PeerError as exc:
            raise MetadataNotPublished(f"producing to node {leader} failed: {exc}") from exc
        codes = [p.error_code for t in response.responses for p in t.partition_responses]
        if codes != [ErrorCode.NONE]:
            raise MetadataNotPublished(
                f"{REMOTE_LOG_METADATA_TOPIC}-{partition} on node {leader}: {codes}")

    async def aclose(self) -> None:
        """Close the connections to other brokers' metadata partitions (at shutdown)."""
        if self._peers is not None:
            await self._peers.aclose()
        await self.metadata_fetcher.aclose()

    # --- tiering turned off (KIP-950) ---------------------------------------------------------
    def disabled_partitions(self) -> list[TopicIdPartition]:
        """The partitions with remote data, of topics that turned `remote.storage.enable` off
        with `remote.log.delete.on.disable=true`, whose metadata partition is led here (the
        broker that deletes a deleted topic's partition deletes these; on the event loop)."""
        out = []
        for image in list(self.broker.cluster.image.topics.values()):
            configs = image.configs
            if is_tiered(configs) or configs.get(_DELETE_ON_DISABLE, "").strip().lower() != "true":
                continue
            for tp in self.manager.undeleted_partitions(image.topic_id):
                leader = partition_leader(self.broker, REMOTE_LOG_METADATA_TOPIC,
                                          self.manager.metadata_partition(tp))
                if leader is not None and leader[0] == self.broker.node_id:
                    out.append(tp)
        return out

    def _delete_disabled(self, partitions: list[TopicIdPartition]) -> None:
        """Delete the remote data of partitions whose topic turned tiering off (worker thread):
        DELETE_PARTITION_MARKED/STARTED, the objects, FINISHED; a failure is retried next run."""
        for tp in partitions:
            try:
                self.manager.delete_partition(tp, self._blocking_publish, now_ms())
            except Exception as exc:
                log.warning("deleting %s from the remote tier (remote.storage.enable turned off) "
                            "failed: %s", tp, exc)

    # --- deleted topics -----------------------------------------------------------------------
    def _delete_topics(self) -> None:
        """Delete the remote data of deleted topics whose metadata partition is led here."""
        for topic_id, image in list(self._deleted.items()):
            done = True
            for tp in self.manager.known_partitions(topic_id):
                partition = self.manager.metadata_partition(tp)
                leader = partition_leader(self.broker, REMOTE_LOG_METADATA_TOPIC, partition)
                if leader is None or leader[0] != self.broker.node_id:
                    continue  # the metadata partition's leader deletes it
                try:
                    self.manager.delete_partition(tp, self._blocking_publish, now_ms())
                except Exception as exc:
                    done = False
                    log.warning("deleting %s from the remote tier failed: %s", tp, exc)
            if done:
                self._deleted.pop(topic_id, None)
                log.info("remote data of deleted topic %s handled", image.name)
