"""Log directories: DescribeLogDirs (key 35) v1-4, AlterReplicaLogDirs (key 34) v1-2.

DescribeLogDirs: one result per data directory with the sizes of the replicas this broker hosts
(with a metadata image, those the image names this broker a replica of - leader or follower; a
log left behind by a partition that moved away is not listed), offset lag 0, and the directory's
total and usable bytes (v4+). A null topic list means all.

AlterReplicaLogDirs moves replicas this broker hosts between its `log.dirs`
(`LogManager.move_log`, in a worker thread; answered when the move is complete - Kafka answers
at once and copies in the background, reporting the copy as a future replica). Errors per
partition: a path that is not a log dir -> LOG_DIR_NOT_FOUND, a replica moving already ->
REPLICA_NOT_AVAILABLE, a failed copy -> KAFKA_STORAGE_ERROR (the replica stays where it was). A
replica this broker does not host answers NONE and is created in that directory if it comes
(Kafka's preferred log dir).

Not served: v0 of either API (deprecated, removed in Kafka 4.0).

Authorization: DescribeLogDirs DESCRIBE, AlterReplicaLogDirs ALTER on the cluster (else
CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import logging
import os

from kafkapy.authorizer import AclOperation
from kafkapy.broker import runtime
from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.request_ports import RequestPorts
from kafkapy.controller.image import MetadataImage
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafkapy.protocol.messages.alter_replica_log_dirs import (
    AlterReplicaLogDirsResponse_AlterReplicaLogDirPartitionResult as MovedPartition,
)
from kafkapy.protocol.messages.describe_log_dirs import (
    DescribeLogDirsResponse_DescribeLogDirsPartition as LogDirPartition,
)
from kafkapy.storage.errors import StorageError

__all__ = ["handle_alter_replica_log_dirs", "handle_describe_log_dirs"]

log = logging.getLogger(__name__)


@handler(ApiKey.DESCRIBE_LOG_DIRS, min_version=1, max_version=4)
async def handle_describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest) -> DescribeLogDirsResponse:
    ports = ctx.ports
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeLogDirsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted: dict[str, set[int]] | None = None
    if req.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in req.topics}
    by_dir: dict[str, dict[str, list[LogDirPartition]]] = {
        str(d.resolve()): {} for d in ports.local.data_dirs
    }
    image = ports.metadata.image
    for (topic, partition), plog in sorted(ports.local.logs.logs().items()):
        if topic not in ports.topics:
            continue
        if not _hosted(image, ports.local.node_id, topic, partition):
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


def _hosted(image: MetadataImage, node_id: int, topic: str, partition: int) -> bool:
    """Cluster mode: the image lists this broker as a replica of the partition."""
    part = image.partition(topic, partition)
    return part is not None and node_id in part.replicas


@handler(ApiKey.ALTER_REPLICA_LOG_DIRS, min_version=1, max_version=2)
async def handle_alter_replica_log_dirs(
    ctx: RequestContext, req: AlterReplicaLogDirsRequest
) -> AlterReplicaLogDirsResponse:
    ports = ctx.ports
    allowed = ctx.authorize_cluster(AclOperation.ALTER)
    ctx.release_turn()  # a move copies files: later requests on the connection need not wait
    results: dict[str, list[MovedPartition]] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                if allowed:
                    code = await _move(ports, d.path, t.name, p)
                else:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                results.setdefault(t.name, []).append(
                    MovedPartition(partition_index=p, error_code=code))
    return AlterReplicaLogDirsResponse(results=[
        AlterReplicaLogDirsResponse.AlterReplicaLogDirTopicResult(topic_name=n, partitions=ps)
        for n, ps in results.items()
    ])


async def _move(ports: RequestPorts, path: str, topic: str, partition: int) -> ErrorCode:
    if ports.local.logs.data_dir_of(path) is None:
        return ErrorCode.LOG_DIR_NOT_FOUND
    try:
        await runtime.get().run_sync_in_thread(ports.local.logs.move_log, topic, partition, path)
    except KeyError:
        return ErrorCode.REPLICA_NOT_AVAILABLE
    except StorageError as exc:
        log.warning("moving %s-%d to %s failed: %s", topic, partition, path, exc)
        return exc.error_code
    return ErrorCode.NONE
