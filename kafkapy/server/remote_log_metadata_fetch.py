"""Reading the `__remote_log_metadata` partitions this broker needs but holds no replica of.

Why: a broker learns what is remote by replaying the metadata partitions that carry its tiered
partitions' records (Kafka's partitioner over the topic id and partition). It replays its own
replicas from disk (`RemoteLogTasks.read_metadata`); on a cluster larger than the metadata
topic's replication factor some brokers hold no replica of a partition they need, and without
it a new leader there would not know what is remote and copy the segments again, and its
consumers and followers could not read the remote tier. Kafka's TopicBasedRemoteLogMetadataManager
consumes the metadata partitions of its assigned user partitions with a consumer; this is the
same: a consumer's Fetch (replica id -1, up to the high watermark) to each such partition's
leader over the inter-broker listener, from where the last one stopped.

Runs on the event loop (network only); the caller applies the values there.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from kafkapy.broker.errors import PeerError
from kafkapy.broker.internal_topics import InternalTopicsHost, partition_leader
from kafkapy.broker.remote_fetch import is_tiered
from kafkapy.broker.remote_log import REMOTE_LOG_METADATA_TOPIC, RemoteLogManager
from kafkapy.protocol.api_keys import ApiKey
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.protocol.messages import FetchRequest, FetchResponse
from kafkapy.protocol.records import decode_records, iter_batches
from kafkapy.storage.remote.layout import TopicIdPartition

if TYPE_CHECKING:
    from kafkapy.broker.ports import PeerRequests
    from kafkapy.server.cluster.partition_roles import ReplicaManager
    from kafkapy.storage import LogManager

__all__ = ["MetadataPartitionFetcher"]

log = logging.getLogger(__name__)

_FETCH_VERSION = 12
_MAX_BYTES = 8 << 20
_TIMEOUT_S = 10.0


class MetadataFetchHost(InternalTopicsHost, Protocol):
    """What the fetcher uses of the broker (its replicas, its logs, the cluster's image)."""

    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def logs(self) -> LogManager: ...


class MetadataPartitionFetcher:
    """See the module docstring."""

    def __init__(self, broker: MetadataFetchHost, manager: RemoteLogManager) -> None:
        self.broker = broker
        self.manager = manager
        #: metadata partition -> the next offset to fetch
        self.next_offsets: dict[int, int] = {}
        self._peers: PeerRequests | None = None

    def needed_partitions(self) -> set[int]:
        """The metadata partitions carrying records of tiered partitions with a replica here,
        and with no replica of their own here."""
        image = self.broker.cluster.image
        needed: set[int] = set()
        for role in list(self.broker.replicas.roles.values()):
            topic = image.topics.get(role.topic)
            if topic is None or not is_tiered(topic.configs):
                continue
            tp = TopicIdPartition(role.topic, role.topic_id, role.partition)
            needed.add(self.manager.metadata_partition(tp))
        return {p for p in needed if self.broker.logs.get(REMOTE_LOG_METADATA_TOPIC, p) is None}

    async def poll(self) -> list[bytes]:
        """The record values of every needed partition not read yet, from their leaders."""
        values: list[bytes] = []
        for partition in sorted(self.needed_partitions()):
            leader = partition_leader(self.broker, REMOTE_LOG_METADATA_TOPIC, partition)
            if leader is None or leader[0] < 0 or leader[0] == self.broker.node_id:
                continue
            try:
                values += await self._fetch(leader[0], partition)
            except (PeerError, ProtocolError) as exc:
                log.info("fetching %s-%d from node %d failed (retried): %s",
                         REMOTE_LOG_METADATA_TOPIC, partition, leader[0], exc)
        return values

    async def _fetch(self, leader: int, partition: int) -> list[bytes]:
        if self._peers is None:
            self._peers = self.broker.cluster.new_broker_peers("kafkapy-remote-log-metadata-consumer")
        offset = self.next_offsets.get(partition, 0)
        request = FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=_MAX_BYTES, isolation_level=0,
            session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
                topic=REMOTE_LOG_METADATA_TOPIC, partitions=[FetchRequest.FetchPartition(
                    partition=partition, fetch_offset=offset, partition_max_bytes=_MAX_BYTES)])])
        response: FetchResponse = await self._peers.request(
            leader, ApiKey.FETCH, _FETCH_VERSION, request, timeout_s=_TIMEOUT_S)
        part = response.responses[0].partitions[0]
        if part.error_code == ErrorCode.OFFSET_OUT_OF_RANGE and part.log_start_offset > offset:
            self.next_offsets[partition] = part.log_start_offset  # retention went past it
            return []
        if part.error_code != ErrorCode.NONE:
            raise PeerError(f"{ErrorCode(part.error_code).name}")
        data = bytes(part.records or b"")
        values: list[bytes] = []
        for pos, header in iter_batches(data):
            if header.last_offset < offset:
                continue
            if not header.is_control:
                values += [r.value for r in decode_records(data, pos, header)
                           if r.value is not None and header.base_offset + r.offset_delta >= offset]
            offset = header.last_offset + 1
        self.next_offsets[partition] = offset
        return values

    async def aclose(self) -> None:
        if self._peers is not None:
            await self._peers.aclose()
