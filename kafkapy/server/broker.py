"""The Broker: one object wiring configuration, topic metadata, logs and per-request state.

Why one owner: everything here is touched only from the trio thread (handlers run there), so the
topic table, fetch sessions and wake-ups need no locks - the single-owner model of franz-go's
kfake. Maintenance that may block (retention, cleaning, flushing) runs in a worker thread while
holding `storage_lock` (one maintenance job at a time, never overlapping close); PartitionLog
itself is safe against appends from the trio thread meanwhile (see kafkapy.storage.log).

One node model (docs/cluster.md): every node is a cluster member - a lone node is a quorum of
one. `cluster` is the `ClusterNode` (built by `open_cluster()`, which the Server calls) and
`replicas` the `ReplicaManager` holding each local partition's role; topics come from the
metadata image (`apply_metadata`) into an in-memory topic table, and the high watermark follows
the ISR (at once when the leader is the whole ISR). Topics are created, grown, altered and
deleted only by the controller (handlers forward to it through `cluster.channel`).

Handlers reach partition data through `partitions` (the facade); domain errors are
`BrokerError` with a Kafka error code; storage never sees wire types.
"""

from __future__ import annotations

import fcntl
import functools
import logging
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from kafkapy import __version__
from kafkapy.authorizer import StandardAuthorizer, parse_super_users
from kafkapy.broker.clock import now_ms
from kafkapy.broker.config import BrokerConfig, Listener
from kafkapy.broker.errors import BrokerError, storage_failure
from kafkapy.broker.faults import FaultInjector
from kafkapy.broker.fetch_session import FetchSessionCache
from kafkapy.broker.group_driver import GroupDriver
from kafkapy.broker.idempotence import ProducerIds, ProducerStates
from kafkapy.broker.internal_topics import RoleListener
from kafkapy.broker.log_state import PartitionLogStates
from kafkapy.broker.metadata_store import (
    MetaProperties,
    TopicInfo,
    TopicStore,
    cluster_id_for,
)
from kafkapy.broker.notify import PartitionWaiters
from kafkapy.broker.partitions import Partitions, auto_create
from kafkapy.broker.request_ports import RequestPorts
from kafkapy.broker.stats import BrokerStats
from kafkapy.broker.txn_driver import TxnDriver
from kafkapy.controller.acls import acl_binding
from kafkapy.controller.image import MetadataDelta, MetadataImage
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.sasl import ScramCredential
from kafkapy.quota.client_quotas import ClientQuotaManager
from kafkapy.server.cluster.lifecycle import LocalControllerCall
from kafkapy.server.cluster.migration import migrate_topics_file
from kafkapy.server.cluster.node import ClusterNode
from kafkapy.server.cluster.partition_roles import PartitionRole, ReplicaManager
from kafkapy.server.security.credentials import CredentialStore
from kafkapy.storage import LogConfig, LogManager, PartitionLog
from kafkapy.storage.checkpoint import read_remote_log_start
from kafkapy.storage.errors import InvalidLogConfigError, StorageError

if TYPE_CHECKING:  # tiering modules: loaded only with remote.log.storage.system.enable
    from kafkapy.broker.remote_fetch import RemoteTier
    from kafkapy.broker.remote_log import RemoteLogManager
    from kafkapy.server.remote_log_tasks import RemoteLogTasks
    from kafkapy.storage.remote.layout import TopicIdPartition

__all__ = ["Broker", "BrokerError", "now_ms", "storage_failure"]

log = logging.getLogger(__name__)

BROKER_LOCK_FILE = ".kafkapy-broker.lock"


def _lock_data_dir(data_dir: Path) -> int:
    """Hold `<data_dir>/.kafkapy-broker.lock` (flock) so two brokers never share a data dir.

    Its own file, beside any lock the log store takes, so neither depends on the other."""
    fd = os.open(data_dir / BROKER_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise ValueError(f"data dir {data_dir} is in use by another kafkapy process") from None
    return fd


def _configured_faults(config: BrokerConfig) -> FaultInjector | None:
    """The test fault injector the `kafkapy.test.fault.*` configs ask for (None: off, the
    production case)."""
    drop_after = config.get_int("kafkapy.test.fault.drop.after.produce.append")
    if drop_after <= 0 and not config.get("kafkapy.test.fault.control.socket"):
        return None
    injector = FaultInjector()
    if drop_after > 0:
        injector.drop_after_produce_append(drop_after)
    return injector


def _authorizer(config: BrokerConfig) -> StandardAuthorizer | None:
    if not config.authorizer_enabled:
        return None
    return StandardAuthorizer(
        super_users=parse_super_users(config.get("super.users")),
        allow_everyone_if_no_acl_found=config.get_bool("allow.everyone.if.no.acl.found"),
    )


def _follow_acls(
    authorizer: StandardAuthorizer, image: MetadataImage, changed: Iterable[uuid.UUID] | None
) -> None:
    """Make the authorizer's ACLs the image's: for each `changed` id, the image's binding or
    none (an ACL never changes under its id); `changed` None reloads them all."""
    if changed is None:
        authorizer.clear()
        changed = image.acls
    for acl_id in changed:
        record = image.acls.get(acl_id)
        if record is None:
            authorizer.remove_acl(acl_id)
        else:
            authorizer.add_acl(acl_id, acl_binding(record))


class Broker:
    """Resource handling: `Broker.open()` opens the logs; `close()` flushes and closes them with
    the clean-shutdown marker and removes the temporary data dir of a `--memory` broker."""

    def __init__(
        self, config: BrokerConfig, *, memory: bool = False, fault_injector: FaultInjector | None = None
    ) -> None:
        """`fault_injector`: a test's request faults (kafkapy.broker.faults); without one, a
        `kafkapy.test.fault.*` config makes one, and production has none."""
        self.config = config
        self.node_id = config.node_id
        #: the SASL user database (configured users, and the metadata log's SCRAM credentials
        #: read from the published image); first, as a bad user list (ValueError) must fail
        #: before the data dirs are locked
        self.credentials = CredentialStore.from_config(config, published=self._published_scram)
        self._authorizer = _authorizer(config)
        # the remote tier (KIP-405); a bad `rsm.config.*` fails before the data dirs are locked
        self._open_remote_tier(config)
        #: each local partition's log state (ready / loading / offline): what every path that
        #: serves a partition asks first (kafkapy.broker.log_state)
        self.log_states = PartitionLogStates()
        self._open_storage(memory)
        #: cluster mode: derived from the voters, the same on every member (`cluster_id_for`)
        # (a quorum of one, with no voters configured, keeps the one of its data dir)
        self.cluster_id = (
            cluster_id_for(config.cluster) if config.cluster.voters_configured else self.meta.cluster_id
        )
        # the ClusterNode, built by `open_cluster()` (see `cluster`)
        self._node: ClusterNode | None = None
        self._ports: RequestPorts | None = None
        #: `on_become_leader` / `on_become_follower(topic, partition, leader_epoch)` callbacks
        self.role_listeners: list[RoleListener] = []
        # the metadata log is the topic table: memory only, filled by apply_metadata; the
        # logs on disk keep their checkpointed high watermarks (not everything is committed)
        self.topics = TopicStore()
        #: partition roles (see kafkapy.server.cluster.partition_roles)
        self.replicas = ReplicaManager(self)
        try:
            if config.cluster.quorum_of_one:
                migrate_topics_file(self.logs, self.data_dirs[0], self.node_id)
        except BaseException:
            self.logs.close(clean=False)
            self._release_locks()
            raise
        #: counters for /metrics and request logging (ValueError: unknown API in log.requests)
        self.stats = BrokerStats(config.get_list("kafkapy.log.requests"))
        self.waiters = PartitionWaiters()
        #: client quotas (kafkapy.quota), kept to the published image's by `apply_metadata`
        self.quotas = ClientQuotaManager(
            samples=max(1, config.get_int("quota.window.num")),
            window_ms=max(1, config.get_int("quota.window.size.seconds")) * 1000,
        )
        self.fetch_sessions = FetchSessionCache(
            config.get_int("max.incremental.fetch.session.cache.slots")
        )
        self._fault_injector = fault_injector or _configured_faults(config)
        #: producer ids from the active controller's blocks (`cluster.channel`, once built)
        self.producer_ids = ProducerIds(lambda: self.cluster.channel.allocate_producer_ids())
        self.producer_states = ProducerStates(config.get_int("producer.id.expiration.ms"))
        self.storage_lock = trio.Lock()
        self.shutting_down = False
        # listener name -> (host, port) advertised to clients; filled in once sockets are bound
        self.endpoints: dict[str, tuple[str, int]] = {}
        self.version = __version__
        #: the coordinator runtimes (state loaded on first use; the server runs their timers)
        self.group_coordinator = GroupDriver(self)
        self.txn_coordinator = TxnDriver(self)
        #: every handler's way to partition data (leader lookup, append, read, offsets)
        self.partitions = Partitions(self)

    def _open_remote_tier(self, config: BrokerConfig) -> None:
        """`remote_log` (the write side: copies, retention, the metadata topic) and the read
        side over its metadata and object store (`remote_tier`); both None without tiering,
        and then none of the tiering modules is imported (start-up time)."""
        #: the remote log manager (kafkapy.broker.remote_log); None without tiering
        self.remote_log: RemoteLogManager | None = None
        self._remote_tier: RemoteTier | None = None
        if not config.get_bool("remote.log.storage.system.enable"):
            return
        from kafkapy.broker.remote_fetch import RemoteTier
        from kafkapy.server.remote_log_tasks import remote_log_manager

        self.remote_log = remote_log_manager(config, self.node_id)
        if self.remote_log is not None:
            self._remote_tier = RemoteTier.from_config(config, self.remote_log.metadata, self.remote_log.store)
            self.remote_log.metadata.persisted_log_start = self._persisted_remote_log_start

    def _persisted_remote_log_start(self, tp: TopicIdPartition) -> int:
        """The remote log start a DeleteRecords set that this replica checkpointed for `tp`
        (-1: none, this broker holds no log of that topic incarnation, or its disk fails - then
        the replay goes on from the first remote segment's start)."""
        plog = self.logs.get(tp.topic, tp.partition)
        if plog is None or plog.topic_id != tp.topic_id:
            return -1
        try:
            return read_remote_log_start(plog.directory)
        except OSError as exc:
            log.warning("%s: cannot read the remote log start checkpoint: %s", tp, exc)
            return -1

    @functools.cached_property
    def remote_log_tasks(self) -> RemoteLogTasks | None:
        """The remote log manager's periodic work (the server runs `serve`); None: no tiering."""
        if self.remote_log is None:
            return None
        from kafkapy.server.remote_log_tasks import RemoteLogTasks

        return RemoteLogTasks(self, self.remote_log)

    @property
    def authorizer(self) -> StandardAuthorizer | None:
        """What requests are authorized against (`RequestContext.authorize`): StandardAuthorizer
        when `authorizer.class.name` names it, else None (no authorizer: every request allowed).
        Its ACLs follow the published metadata image (`apply_metadata`)."""
        return self._authorizer

    @authorizer.setter
    def authorizer(self, authorizer: StandardAuthorizer | None) -> None:
        self._authorizer = authorizer
        if self._ports is not None:
            self._ports.authorizer = authorizer

    @property
    def remote_tier(self) -> RemoteTier | None:
        """The remote tier's read side (KIP-405): the remote log manager, which owns the object
        store and the `__remote_log_metadata` replay, installs it when
        `remote.log.storage.system.enable` is on; None: no tiered storage here."""
        return self._remote_tier

    @remote_tier.setter
    def remote_tier(self, tier: RemoteTier | None) -> None:
        self._remote_tier = tier
        if tier is not None:
            tier.metadata.persisted_log_start = self._persisted_remote_log_start
        if self._ports is not None:
            self._ports.remote_tier = tier

    @property
    def fault_injector(self) -> FaultInjector | None:
        """A test's request faults (kafkapy.broker.faults); None in production."""
        return self._fault_injector

    @fault_injector.setter
    def fault_injector(self, injector: FaultInjector | None) -> None:
        self._fault_injector = injector
        if self._ports is not None:
            self._ports.fault_injector = injector

    # -- start-up ---------------------------------------------------------------------------------
    def _open_storage(self, memory: bool) -> None:
        """Lock the data dirs (a temporary one for `memory`), open their logs and read or write
        meta.properties; on failure nothing stays locked or open."""
        self._temp_dir: Path | None = None
        if memory:
            self._temp_dir = Path(tempfile.mkdtemp(prefix="kafkapy-"))
            self.data_dirs = [self._temp_dir]
        else:
            self.data_dirs = self.config.data_dirs
        self._locks: list[int] = []
        try:
            for d in self.data_dirs:
                d.mkdir(parents=True, exist_ok=True)
                self._locks.append(_lock_data_dir(d))
        except BaseException:
            self._release_locks()
            raise
        self.default_log_config = LogConfig.from_topic_configs(self.config.topic_defaults())
        # first: the log manager locks the data dirs (a second broker on them fails here)
        self.logs = LogManager(self.data_dirs, self.default_log_config, on_io_failure=self._log_dir_failed)
        for (topic, partition), error in self.logs.failed_logs().items():
            self.log_states.set_offline(topic, partition, str(error))
        try:
            self.meta = MetaProperties.load_or_create(self.data_dirs[0], self.node_id)
        except BaseException:
            self.logs.close(clean=False)
            self._release_locks()
            raise

    def _published_scram(self) -> Mapping[tuple[str, str], ScramCredential]:
        """The metadata log's SCRAM credentials: the cluster node's published image (none before
        the node is built: nothing is served then)."""
        node = self._node
        return node.image.scram_credentials if node else {}

    def _log_dir_failed(self, data_dir: Path, log_dir: Path, reason: str) -> None:
        """A log's write or fsync failed with an I/O error (any thread): the cluster node halts
        (ClusterNode.log_dir_failed); a quorum of one - a single node, with no replica anywhere
        to take over - keeps answering KAFKA_STORAGE_ERROR."""
        if self._node is not None and not self.config.cluster.quorum_of_one:
            self._node.log_dir_failed(data_dir, log_dir, reason)

    def begin_shutdown(self) -> None:
        """The server stopped reading requests: long polls answer now and group requests are
        sent elsewhere (`shutting_down`)."""
        self.shutting_down = True

    def open_cluster(
        self, *, halt: Callable[[], None] | None = None, local_call: LocalControllerCall | None = None
    ) -> ClusterNode:
        """Build this broker's cluster node and keep it as `cluster` (ValueError if it is
        already built). Call it inside `trio.run` (the Server does, in its constructor): the
        node's parts read trio's clock. `halt`: what a log dir failure does (None: exit the
        process); `local_call`: this process's controller handlers, for the controller
        channel's in-process calls (the Server gives them; None: over the wire only)."""
        if self._node is not None:
            raise ValueError("the cluster node is already open")
        self._node = ClusterNode(self, halt=halt, local_call=local_call)
        return self._node

    def _request_ports(self, node: ClusterNode) -> RequestPorts:
        """What handlers may use of this broker and its node (kafkapy.broker.request_ports):
        built once, shared by every request context."""
        return RequestPorts(
            local=self, config=self.config, topics=self.topics, partitions=self.partitions,
            groups=self.group_coordinator, transactions=self.txn_coordinator, internal_topics=self,
            auto_create_topic=functools.partial(auto_create, self),
            authorizer=self.authorizer, quotas=self.quotas, metadata=node, controller=node.channel,
            active_controller=node.controller, quorum=node.raft, replicas=self.replicas,
            credentials=self.credentials, producer_ids=self.producer_ids,
            fetch_sessions=self.fetch_sessions, waiters=self.waiters, stats=self.stats,
            fault_injector=self.fault_injector, remote_tier=self.remote_tier,
        )

    @property
    def ports(self) -> RequestPorts:
        """The handlers' ports, built from the cluster node on first use (the first connection);
        RuntimeError before the node is open, as `cluster`."""
        ports = self._ports
        if ports is None:
            ports = self._ports = self._request_ports(self.cluster)
        return ports

    @property
    def cluster(self) -> ClusterNode:
        """This node's cluster parts (Raft, publisher, controller, channel, lifecycle,
        fetchers). Every node has them: a broker serves only once the Server built them, so
        a use before `open_cluster()` is a programming error (RuntimeError)."""
        node = self._node
        if node is None:
            raise RuntimeError("the cluster node is not open: build the node with Server(broker)")
        return node

    # -- listeners --------------------------------------------------------------------------------
    def set_bound(self, listener: Listener, host: str, port: int) -> None:
        """Record the real bound address, and from it what to advertise for `listener`."""
        adv = next(
            (a for a in self.config.advertised_listeners if a.name == listener.name), None
        )
        if adv is not None and self.config.get("advertised.listeners"):
            adv_host = adv.host or "127.0.0.1"
            adv_port = adv.port or port
        else:
            adv_host = listener.host if listener.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
            adv_port = port
        self.endpoints[listener.name] = (adv_host, adv_port)

    def advertised(self, listener_name: str) -> tuple[str, int]:
        if listener_name in self.endpoints:
            return self.endpoints[listener_name]
        return next(iter(self.endpoints.values()), ("127.0.0.1", 9092))

    # -- topics -----------------------------------------------------------------------------------
    def log_config(self, info: TopicInfo) -> LogConfig:
        return LogConfig.from_topic_configs(info.configs, self.default_log_config)

    def topic_config_value(self, info: TopicInfo, key: str) -> str:
        if key in info.configs:
            return info.configs[key]
        return self.config.topic_default(key)[0]

    def auto_create_allowed(self) -> bool:
        return self.config.get_bool("auto.create.topics.enable")

    def apply_topic_configs(self, info: TopicInfo) -> None:
        """Push the topic's config to its open logs (file writes; any thread). A log whose
        config cannot be written goes offline alone (`log_states`); the others follow."""
        cfg = self.log_config(info)
        for p in range(info.partitions):
            plog = self.logs.get(info.name, p)
            if plog is not None:
                try:
                    plog.set_config(cfg, self.default_log_config)
                except StorageError as e:
                    self.log_states.set_offline(info.name, p, str(e))

    # -- partitions -------------------------------------------------------------------------------
    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return self.logs.get(topic, partition)

    def after_append(self, topic: str, partition: int, plog: PartitionLog) -> None:
        """A leader appended: the HW moves when the ISR has the data (at once when the leader
        is the whole ISR), and the last stable offset follows the partition's open
        transactions (if its producer state is loaded; see `ProducerStates.on_append`)."""
        self.replicas.on_leader_append(topic, partition, plog)
        self.producer_states.on_append((topic, partition), plog)
        self.waiters.notify((topic, partition))

    # -- metadata ---------------------------------------------------------------------------------
    def apply_metadata(self, image: MetadataImage, delta: MetadataDelta | None) -> None:
        """A new MetadataImage was published (`delta`: what changed, None = look at everything):
        topics, logs and partition roles follow it (kafkapy.server.cluster.partition_roles), and
        so do the authorizer's ACLs; client quotas are enforced as the image has them."""
        if delta is None or delta.client_quotas_changed:
            self.quotas.update(image.client_quotas)
        if self.authorizer is not None and (delta is None or delta.changed_acls):
            _follow_acls(self.authorizer, image, None if delta is None else delta.changed_acls)
        changed = delta is None or delta.changed_broker_configs
        if changed and self.apply_dynamic_configs(image.broker_configs):
            for info in self.topics.all():
                self.apply_topic_configs(info)
        if delta is None or delta.changed_group_configs:
            self.config.set_group_configs(image.group_configs)
        self.replicas.apply(image, delta)
        if self.remote_log_tasks is not None and delta is not None and delta.deleted_topics:
            self.remote_log_tasks.on_topics_deleted(delta.deleted_topics)

    def apply_dynamic_configs(self, configs: Mapping[str, Mapping[str, str]]) -> bool:
        """Take `configs` (resource "" / node id -> values) as the dynamic broker config layers
        (kafkapy.server.dynamic_config) and the default log config they give; True when the
        defaults changed (each topic's logs then need `apply_topic_configs`). A combination
        that does not give a valid log config (validated before it was stored, so only an
        older kafkapy's) keeps the previous defaults, logged."""
        own = configs.get(str(self.node_id), {})
        previous = self.config.dynamic_layers()
        self.config.set_dynamic(own, configs.get("", {}))
        try:
            defaults = LogConfig.from_topic_configs(self.config.topic_defaults())
        except InvalidLogConfigError as e:
            log.warning("ignoring dynamic broker configs: %s", e)
            self.config.set_dynamic(*previous)
            return False
        if defaults == self.default_log_config:
            return False
        self.default_log_config = defaults
        self.logs.default_config = defaults
        return True

    def partition_role(self, topic: str, partition: int) -> PartitionRole | None:
        """This node's role for the partition (None: no replica here)."""
        return self.replicas.role(topic, partition)

    async def wait_replicated(self, topic: str, partition: int, end_offset: int, timeout_ms: int) -> ErrorCode:
        """NONE once the partition's HW reached `end_offset`; else NOT_LEADER_OR_FOLLOWER,
        NOT_ENOUGH_REPLICAS_AFTER_APPEND or REQUEST_TIMED_OUT."""
        return await self.replicas.wait_replicated(topic, partition, end_offset, timeout_ms)

    # -- maintenance ------------------------------------------------------------------------------
    async def run_maintenance(self, kind: str) -> None:
        """Run `run_retention` / `run_cleaner` / `flush_dirty` / `start_writeback` in a thread,
        holding the storage lock."""
        fn = {
            "retention": self.logs.run_retention,
            "cleaner": self.logs.run_cleaner,
            "flush": self.logs.flush_dirty,
            "writeback": self.logs.start_writeback,
        }[kind]
        async with self.storage_lock:
            await trio.to_thread.run_sync(fn, now_ms())
            if self.logs.flush_times_ms:
                times, self.logs.flush_times_ms = self.logs.flush_times_ms, []
                for ms in times:
                    self.stats.log_flush_ms.observe(ms)

    def close(self) -> None:
        try:
            self.producer_states.snapshot_all()
            self.logs.close(clean=True)
        finally:
            self._release_locks()
            if self._temp_dir is not None:
                shutil.rmtree(self._temp_dir, ignore_errors=True)

    def _release_locks(self) -> None:
        for fd in self._locks:
            os.close(fd)  # closing drops the flock
        self._locks = []

    def describe(self) -> str:
        where = "memory (temporary)" if self._temp_dir is not None else ", ".join(map(str, self.data_dirs))
        return f"data dir {where}, node id {self.node_id}, cluster id {self.cluster_id}, kafkapy {self.version}"

