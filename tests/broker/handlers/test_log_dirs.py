"""DescribeLogDirs and AlterReplicaLogDirs (handlers/log_dirs.py) on a single node, over the wire.

What admin tools (kafka-log-dirs.sh, kafka-reassign-partitions.sh --reassignment-json-file with
log dirs) rely on: every `log.dirs` entry is listed with the replicas it holds and its disk
figures; a move puts the replica in the named directory with its data, and a directory that is
not a log dir is LOG_DIR_NOT_FOUND for that partition only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterReplicaLogDirsRequest,
    DescribeLogDirsRequest,
)
from tests.server.helpers import Client, create_topic, running_broker

ARL = AlterReplicaLogDirsRequest


def _where(dirs: Any) -> dict[tuple[str, int], str]:
    return {(t.name, p.partition_index): r.log_dir
            for r in dirs.results for t in r.topics for p in t.partitions}


async def test_replicas_are_listed_and_moved_between_log_dirs(tmp_path: Path) -> None:
    one, two = (tmp_path / "one").resolve(), (tmp_path / "two").resolve()
    async with running_broker(tmp_path, **{"log.dirs": f"{one},{two}"}) as (_, _, port):
        client = await Client.connect(port)
        await create_topic(port, "d", 2)
        dirs = await client.request(ApiKey.DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None))
        assert sorted(r.log_dir for r in dirs.results) == sorted([str(one), str(two)])
        assert all(r.total_bytes > 0 and r.usable_bytes >= 0 for r in dirs.results)
        before = _where(dirs)
        assert set(before) >= {("d", 0), ("d", 1)}
        target = str(two) if before["d", 0] == str(one) else str(one)
        moved = await client.request(ApiKey.ALTER_REPLICA_LOG_DIRS, 2, ARL(dirs=[
            ARL.AlterReplicaLogDir(path=target, topics=[ARL.AlterReplicaLogDirTopic(name="d", partitions=[0])]),
            ARL.AlterReplicaLogDir(path=str(tmp_path / "nowhere"),
                                   topics=[ARL.AlterReplicaLogDirTopic(name="d", partitions=[1])]),
        ]))
        assert {(p.partition_index, p.error_code) for t in moved.results for p in t.partitions} == {
            (0, ErrorCode.NONE), (1, ErrorCode.LOG_DIR_NOT_FOUND)}
        after = _where(await client.request(ApiKey.DESCRIBE_LOG_DIRS, 4, DescribeLogDirsRequest(topics=None)))
        assert (after["d", 0], after["d", 1]) == (target, before["d", 1])
        await client.aclose()
