"""Cluster description: DescribeCluster (key 60) v0-1, DescribeLogDirs (key 35) v1-4,
AlterReplicaLogDirs (key 34) v1-2, DescribeTopicPartitions (key 75) v0, DescribeQuorum (key 55)
v0-2 on the broker listeners.

Behaviour:
- DescribeCluster: this node as the only broker and the controller, with the cluster id. v1
  endpoint_type must be 1 (brokers); 2 (controllers) -> UNSUPPORTED_ENDPOINT_TYPE... on one node
  we answer controllers with the same node, as a combined KRaft node would.
- DescribeLogDirs: one result per data directory with partition sizes (offset lag is 0 - the
  leader is never behind itself), total and usable bytes (v4+). A null topic list means all.
- DescribeTopicPartitions: like Metadata for the named topics (or all, when none are named),
  sorted by name, paginated by `response_partition_limit` with a cursor.

Cluster mode (docs/cluster.md; single-node behaviour is unchanged): DescribeCluster lists the
unfenced brokers of the metadata image with their endpoint for the request's listener and the
same controller id as Metadata (a broker listener answers the BROKERS endpoint type only, as
Kafka's brokers do); DescribeTopicPartitions reports each partition's leader, leader epoch,
replicas, ISR and offline replicas from the image; DescribeLogDirs lists only the replicas this
broker hosts (the image names it as a replica), leader or follower, each with its local size.

AlterReplicaLogDirs moves replicas this broker hosts between its `log.dirs`
(`LogManager.move_log`, in a worker thread; answered when the move is complete - Kafka answers
at once and copies in the background, reporting the copy as a future replica). Errors per
partition: a path that is not a log dir -> LOG_DIR_NOT_FOUND, a replica moving already ->
REPLICA_NOT_AVAILABLE, a failed copy -> KAFKA_STORAGE_ERROR (the replica stays where it was). A
replica this broker does not host answers NONE and is created in that directory if it comes
(Kafka's preferred log dir).
v0 (deprecated, removed in Kafka 4.0) is not served.

DescribeQuorum (what `kafka-metadata-quorum.sh` and the admin clients' describeMetadataQuorum
send to a broker): cluster mode forwards it to the active controller, as Kafka's brokers do; a
single node is its own quorum of one - this node leads, is the only voter, and no metadata log
exists yet, so epoch and high watermark are 0 (issue 13 moves single nodes onto the metadata
log). Another topic or partition than `__cluster_metadata-0` is INVALID_REQUEST.

Authorized operations: every supported one (no authorizer), cluster and topics.

Not yet: racks in single-node mode.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol.acl_operations import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafkapy.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirsResponse_AlterReplicaLogDirPartitionResult as MovedPartition,
)
from kafkapy.protocol.messages.describe_log_dirs import (
    DescribeLogDirsResponse_DescribeLogDirsPartition as LogDirPartition,
)
from kafkapy.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsResponse_DescribeTopicPartitionsResponsePartition as PartitionEntry,
)
from kafkapy.server.broker import LEADER_EPOCH, Broker
from kafkapy.server.cluster.peer import PeerError
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.metadata import alive_brokers, controller_id_for_clients
from kafkapy.server.handlers.registry import handler
from kafkapy.server.metadata_store import TopicInfo
from kafkapy.storage.errors import StorageError

__all__ = ["handle_describe_cluster", "handle_describe_log_dirs", "handle_describe_topic_partitions"]

log = logging.getLogger(__name__)

BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2


@handler(ApiKey.DESCRIBE_CLUSTER, min_version=0, max_version=1)
async def handle_describe_cluster(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    if broker.replicas is not None and broker.cluster is not None:
        response = _describe_cluster_from_image(ctx, req)
    else:
        response = _describe_single_node(ctx, req)
    if req.include_cluster_authorized_operations:
        response.cluster_authorized_operations = CLUSTER_OPERATIONS  # no authorizer: all (KIP-430)
    return response


def _describe_single_node(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    host, port = broker.advertised(ctx.connection.listener_name)
    response = DescribeClusterResponse(
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
        endpoint_type=req.endpoint_type if ctx.api_version >= 1 else BROKERS_ENDPOINT,
        brokers=[DescribeClusterResponse.DescribeClusterBroker(broker_id=broker.node_id, host=host, port=port)],
    )
    if ctx.api_version >= 1 and req.endpoint_type not in (BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT):
        response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = f"Unsupported endpoint type {req.endpoint_type}"
        response.brokers = []
    return response


def _describe_cluster_from_image(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    broker = ctx.broker
    cluster: Any = broker.cluster
    listed = alive_brokers(cluster.image, ctx.connection.listener_name)
    response = DescribeClusterResponse(
        cluster_id=broker.cluster_id,
        controller_id=controller_id_for_clients(cluster, [b[0] for b in listed]),
        endpoint_type=req.endpoint_type if ctx.api_version >= 1 else BROKERS_ENDPOINT,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(broker_id=i, host=host, port=port, rack=rack)
            for i, host, port, rack in listed
        ],
    )
    if ctx.api_version >= 1 and req.endpoint_type != BROKERS_ENDPOINT:
        response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = "The broker listeners serve the BROKERS endpoint type only"
        response.brokers = []
    return response


@handler(ApiKey.DESCRIBE_LOG_DIRS, min_version=1, max_version=4)
async def handle_describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    broker = ctx.broker
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in req.topics}
    by_dir: dict[str, dict[str, list[LogDirPartition]]] = {
        str(d.resolve()): {} for d in broker.data_dirs
    }
    image: Any = broker.cluster.image if broker.cluster is not None else None
    for (topic, partition), plog in sorted(broker.logs.logs().items()):
        if topic not in broker.topics:
            continue
        if image is not None and not _hosted(image, broker.node_id, topic, partition):
            continue  # a log left behind (the partition moved away, or its metadata failed)
        if wanted is not None and partition not in wanted.get(topic, set()):
            continue
        dir_key = str(plog.directory.parent.resolve())
        by_dir.setdefault(dir_key, {}).setdefault(topic, []).append(
            DescribeLogDirsResponse.DescribeLogDirsPartition(
                partition_index=partition, partition_size=plog.size_bytes, offset_lag=0, is_future_key=False
            )
        )
    response = DescribeLogDirsResponse()
    for log_dir, topics in by_dir.items():
        total, usable = -1, -1
        try:
            st = os.statvfs(log_dir)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            pass
        response.results.append(DescribeLogDirsResponse.DescribeLogDirsResult(
            error_code=ErrorCode.NONE,
            log_dir=log_dir,
            topics=[DescribeLogDirsResponse.DescribeLogDirsTopic(name=n, partitions=p) for n, p in topics.items()],
            total_bytes=total,
            usable_bytes=usable,
        ))
    return response


def _hosted(image: Any, node_id: int, topic: str, partition: int) -> bool:
    """Cluster mode: the image lists this broker as a replica of the partition."""
    part = image.partition(topic, partition)
    return part is not None and node_id in part.replicas


def _partition(node: int, index: int) -> PartitionEntry:
    return DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
        partition_index=index, leader_id=node, leader_epoch=LEADER_EPOCH,
        replica_nodes=[node], isr_nodes=[node], eligible_leader_replicas=[], last_known_elr=[],
        offline_replicas=[],
    )


def _image_partition(image: Any, topic: str, index: int) -> PartitionEntry:
    """Cluster mode: the partition as the metadata image has it."""
    part = image.partition(topic, index)
    if part is None:
        return DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
            error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, partition_index=index, leader_id=-1,
        )

    def alive(b: int) -> bool:
        reg = image.brokers.get(b)
        return reg is not None and not reg.fenced

    leader = part.leader if part.leader >= 0 and alive(part.leader) else -1
    return DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
        partition_index=index, leader_id=leader, leader_epoch=part.leader_epoch,
        replica_nodes=list(part.replicas), isr_nodes=list(part.isr), eligible_leader_replicas=[],
        last_known_elr=[], offline_replicas=[r for r in part.replicas if not alive(r)],
    )


@handler(ApiKey.DESCRIBE_TOPIC_PARTITIONS, min_version=0, max_version=0)
async def handle_describe_topic_partitions(
    ctx: RequestContext, req: DescribeTopicPartitionsRequest
) -> DescribeTopicPartitionsResponse:
    broker = ctx.broker
    node = broker.node_id
    image: Any = broker.cluster.image if broker.replicas is not None and broker.cluster is not None else None
    names = sorted({t.name for t in req.topics}) if req.topics else [t.name for t in broker.topics.all()]
    cursor = req.cursor
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    budget = max(req.response_partition_limit, 1)
    response = DescribeTopicPartitionsResponse()
    for name in names:
        info: TopicInfo | None = broker.topics.get(name)
        if info is None:
            response.topics.append(DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name,
            ))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic(
            name=name, topic_id=info.topic_id, is_internal=info.internal,
            topic_authorized_operations=TOPIC_OPERATIONS,  # no authorizer: all (KIP-430)
        )
        response.topics.append(topic)
        for p in range(start, info.partitions):
            if budget == 0:
                response.next_cursor = DescribeTopicPartitionsResponse.Cursor(topic_name=name, partition_index=p)
                return response
            topic.partitions.append(_partition(node, p) if image is None else _image_partition(image, name, p))
            budget -= 1
    return response


_QUORUM_TOPIC, _QUORUM_PARTITION = "__cluster_metadata", 0


@handler(ApiKey.DESCRIBE_QUORUM, min_version=0, max_version=2)
async def handle_describe_quorum(ctx: RequestContext, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    broker = ctx.broker
    wanted = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
    if wanted != [(_QUORUM_TOPIC, _QUORUM_PARTITION)]:
        return DescribeQuorumResponse(error_code=ErrorCode.INVALID_REQUEST,
                                      error_message="only __cluster_metadata-0 has a quorum")
    if broker.cluster is not None:
        ctx.release_turn()
        try:
            response: DescribeQuorumResponse = await broker.cluster.channel.call(
                ApiKey.DESCRIBE_QUORUM, ctx.api_version, req)
        except PeerError as exc:
            code = ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))
            return DescribeQuorumResponse(error_code=code, error_message=str(exc))
        return response
    node = broker.node_id
    now = int(time.time() * 1000)
    me = DescribeQuorumResponse.ReplicaState(
        replica_id=node, log_end_offset=0, last_fetch_timestamp=now, last_caught_up_timestamp=now)
    part = DescribeQuorumResponse.PartitionData(
        partition_index=_QUORUM_PARTITION, leader_id=node, leader_epoch=0, high_watermark=0,
        current_voters=[me])
    listener = ctx.connection.listener_name
    host, port = broker.advertised(listener)
    return DescribeQuorumResponse(
        topics=[DescribeQuorumResponse.TopicData(topic_name=_QUORUM_TOPIC, partitions=[part])],
        nodes=[DescribeQuorumResponse.Node(node_id=node, listeners=[
            DescribeQuorumResponse.Listener(name=listener, host=host, port=port)])],
    )


@handler(ApiKey.ALTER_REPLICA_LOG_DIRS, min_version=1, max_version=2)
async def handle_alter_replica_log_dirs(
    ctx: RequestContext, req: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    broker = ctx.broker
    ctx.release_turn()  # a move copies files: later requests on the connection need not wait
    results: dict[str, list[MovedPartition]] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                code = await _move(broker, d.path, t.name, p)
                results.setdefault(t.name, []).append(
                    MovedPartition(partition_index=p, error_code=code))
    return AlterReplicaLogDirsResponse(results=[
        AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=n, partitions=ps)
        for n, ps in results.items()
    ])


async def _move(broker: Broker, path: str, topic: str, partition: int) -> ErrorCode:
    if broker.logs.data_dir_of(path) is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    try:
        await trio.to_thread.run_sync(broker.logs.move_log, topic, partition, path)
    except KeyError:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    except StorageError as exc:
        log.warning("moving %s-%d to %s failed: %s", topic, partition, path, exc)
        return exc.error_code
    return ErrorCode.NONE
