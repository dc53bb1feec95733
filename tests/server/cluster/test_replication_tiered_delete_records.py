"""DeleteRecords below the local log start of a tiered topic on a two-node cluster: the
follower keeps the remote log start the leader answers in its fetches (below the follower's
own local log start), so as the next leader it answers the same log start."""

from __future__ import annotations

import copy
import dataclasses
import uuid
from pathlib import Path

import pytest

from kafkapy.broker.remote_fetch import RemoteTier
from kafkapy.protocol import ApiKey
from kafkapy.protocol.messages import DeleteRecordsRequest
from kafkapy.storage.checkpoint import read_remote_log_start
from kafkapy.storage.remote.layout import TopicIdPartition
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataStore
from kafkapy.storage.remote.reader import RemoteLogReader
from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.testing.object_store import S3Server
from kafkapy.testing.remote_tier import copy_rolled_segments
from tests.server.cluster.replication_helpers import produce, running_cluster, wait_for
from tests.server.cluster.test_replication_tiered import TOPIC, _batch, s3_server

__all__ = ["s3_server"]  # the module's S3 server fixture


@pytest.mark.slow
async def test_the_follower_keeps_the_remote_log_start_delete_records_set(
        tmp_path: Path, s3_server: S3Server) -> None:
    async with running_cluster(tmp_path, 2) as (controller, nodes):
        st = controller.ctl._st
        st.config = dataclasses.replace(st.config, remote_log_storage_system_enable=True)
        controller.create_topic(TOPIC, 1, rf=2, configs={"remote.storage.enable": "true"})
        leader_id = controller.image.topics[TOPIC].partitions[0].leader
        leader, follower = nodes[leader_id], nodes[3 - leader_id]
        client = await leader.client()
        plog = leader.broker.logs.get(TOPIC, 0)
        fplog = follower.broker.logs.get(TOPIC, 0)
        assert plog is not None
        assert fplog is not None
        for i in range(40):
            assert (await produce(client, TOPIC, _batch(i))).error_code == 0
            if i % 8 == 7:
                plog.roll()
        store = S3ObjectStore(s3_server.config(key_prefix=f"d-{uuid.uuid4().hex[:12]}"))
        metadata = RemoteLogMetadataStore()
        copied = copy_rolled_segments(plog, TOPIC, 0, store, metadata, leader_epoch=plog.leader_epochs.latest_epoch)
        assert len(copied) >= 3
        followers_metadata = copy.deepcopy(metadata)  # each broker replays its own
        leader.broker.remote_tier = RemoteTier(metadata, RemoteLogReader(store))
        follower.broker.remote_tier = RemoteTier(followers_metadata, RemoteLogReader(store))
        local_start = copied[-1].start_offset
        await wait_for(lambda: fplog.high_watermark >= local_start, what="the follower to catch up")
        for log in (plog, fplog):  # what each replica's local retention does on its own
            log.delete_records_before(local_start)
        target = copied[1].start_offset + 1
        resp = await client.request(ApiKey.DELETE_RECORDS, 2, DeleteRecordsRequest(
            timeout_ms=5000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(name=TOPIC, partitions=[
                DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=target)])]))
        assert resp.topics[0].partitions[0].low_watermark == target
        assert (await produce(client, TOPIC, _batch(99))).error_code == 0  # the follower fetches again
        tp = TopicIdPartition(TOPIC, plog.topic_id, 0)
        cache = followers_metadata.cache(tp)
        assert cache is not None
        await wait_for(lambda: cache.log_start_offset() == target, what="the follower's remote log start",
                       detail=lambda: cache.log_start_offset())
        assert follower.broker.remote_tier.log_start_offset(TOPIC, plog.topic_id, 0, fplog.log_start_offset) == target
        # each replica checkpointed it, so a restart of every replica keeps it
        assert [read_remote_log_start(log.directory) for log in (plog, fplog)] == [target, target]
