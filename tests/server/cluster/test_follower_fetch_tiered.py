"""A consumer reading a follower (KIP-392) of a tiered topic below the follower's local log
start is served from the remote tier, byte-exact, as the leader would serve it; an offset below
the log start of both tiers still answers OFFSET_OUT_OF_RANGE."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest

from kafkapy.broker.remote_fetch import RemoteTier
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataStore
from kafkapy.storage.remote.reader import RemoteLogReader
from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.testing.object_store import S3Server
from kafkapy.testing.remote_tier import copy_rolled_segments
from tests.broker.test_remote_fetch import FETCH_V, fetch_req
from tests.server.cluster.replication_helpers import produce, running_cluster, wait_for
from tests.server.cluster.test_replication_tiered import TOPIC, _batch, s3_server

__all__ = ["s3_server"]  # the module's S3 server fixture


@pytest.mark.slow
async def test_a_consumer_reads_a_followers_remote_tier(tmp_path: Path, s3_server: S3Server) -> None:
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
        await wait_for(lambda: fplog.high_watermark == plog.high_watermark, what="the follower to catch up")
        expected = fplog.read_bytes(0, 3000)
        store = S3ObjectStore(s3_server.config(key_prefix=f"f-{uuid.uuid4().hex[:12]}"))
        metadata = RemoteLogMetadataStore()
        copied = copy_rolled_segments(plog, TOPIC, 0, store, metadata, leader_epoch=plog.leader_epochs.latest_epoch)
        assert len(copied) >= 3
        for node in nodes.values():
            node.broker.remote_tier = RemoteTier(metadata, RemoteLogReader(store))
        local_start = copied[-1].start_offset
        for log in (plog, fplog):  # what each replica's local retention does
            log.delete_records_before(local_start)

        consumer = await follower.client()
        part = (await consumer.request(ApiKey.FETCH, FETCH_V, fetch_req({0: 0}))).responses[0].partitions[0]
        assert (part.error_code, part.log_start_offset) == (ErrorCode.NONE, 0)
        assert part.records
        assert bytes(part.records) == expected[:len(part.records)]
        assert len(part.records) >= len(expected) // 2

        metadata.cache(copied[0].segment_id.partition).advance_log_start(copied[1].start_offset)  # type: ignore[union-attr]
        below = (await consumer.request(ApiKey.FETCH, FETCH_V, fetch_req({0: 0}))).responses[0].partitions[0]
        assert below.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
