"""A broker holding no replica of the `__remote_log_metadata` partition its tiered partition
needs (four brokers, the metadata topic on three) still learns what is remote: it fetches that
partition from its leader as a consumer, so as a new leader it resumes copying where the
previous one stopped instead of copying the segments again."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest

from kafkapy.broker.remote_log import REMOTE_LOG_METADATA_TOPIC
from kafkapy.storage.remote.layout import TopicIdPartition
from kafkapy.testing.object_store import S3Server
from tests.server.cluster.replication_helpers import produce, running_cluster, wait_for
from tests.server.cluster.test_replication_tiered import TOPIC, _batch, s3_server

__all__ = ["s3_server"]  # the module's S3 server fixture


def _tiering(s3: S3Server) -> dict[str, str]:
    return {
        "remote.log.storage.system.enable": "true",
        "rsm.config.storage.s3.bucket.name": s3.bucket,
        "rsm.config.storage.s3.endpoint.url": s3.endpoint_url,
        "rsm.config.storage.s3.path.style.access.enabled": "true",
        "rsm.config.storage.aws.credentials.file": str(s3.credentials_file),
        "rsm.config.key.prefix": f"m-{uuid.uuid4().hex[:12]}",
        "remote.log.manager.task.interval.ms": "200",
        "remote.log.metadata.topic.num.partitions": "1",
    }


@pytest.mark.slow
async def test_a_broker_without_a_metadata_replica_fetches_the_metadata_from_its_leader(
        tmp_path: Path, s3_server: S3Server) -> None:
    async with running_cluster(tmp_path, 4, **_tiering(s3_server)) as (controller, nodes):
        st = controller.ctl._st
        st.config = dataclasses.replace(st.config, remote_log_storage_system_enable=True)
        controller.create_topic(REMOTE_LOG_METADATA_TOPIC, 1, rf=3)
        controller.create_topic(TOPIC, 1, rf=4, configs={"remote.storage.enable": "true", "retention.ms": "-1"})
        meta = controller.image.topics[REMOTE_LOG_METADATA_TOPIC].partitions[0]
        [outsider] = [n for n in nodes if n not in meta.replicas]
        part = controller.image.topics[TOPIC].partitions[0]
        leader = nodes[part.leader]
        client = await leader.client()
        plog = leader.broker.logs.get(TOPIC, 0)
        assert plog is not None
        for i in range(24):
            assert (await produce(client, TOPIC, _batch(i))).error_code == 0
            if i % 8 == 7:
                plog.roll()
        tp = TopicIdPartition(TOPIC, controller.image.topics[TOPIC].topic_id, 0)
        copied_end = plog.segments[-1].base_offset - 1
        manager = leader.broker.remote_log
        assert manager is not None
        await wait_for(lambda: manager.highest_copied_offset(tp) == copied_end, timeout_s=60,
                       what="the leader to copy its rolled segments",
                       detail=lambda: manager.highest_copied_offset(tp))
        assert nodes[outsider].broker.logs.get(REMOTE_LOG_METADATA_TOPIC, 0) is None
        tasks = nodes[outsider].broker.remote_log_tasks
        assert tasks is not None
        outside = nodes[outsider].broker.remote_log
        assert outside is not None
        await wait_for(lambda: outside.highest_copied_offset(tp) == copied_end, timeout_s=30,
                       what="the broker outside the metadata partition's replicas to learn the copies",
                       detail=lambda: (outside.highest_copied_offset(tp), tasks.metadata_fetcher.next_offsets))
        assert [s.start_offset for s in outside.remote_segments(tp)] == [
            s.start_offset for s in manager.remote_segments(tp)]
