"""A follower whose fetch offset the leader keeps in the remote tier only (KIP-405) restarts at
the leader's local log start with the remote segment's leader epochs, then replicates on.

Two in-process brokers; the remote tier is a real S3 server (SeaweedFS; KAFKAPY_TEST_S3=moto)
filled by the storage copier from the leader's rolled segments, its metadata shared by both
brokers as both replay `__remote_log_metadata`.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkapy.broker.remote_fetch import RemoteTier
from kafkapy.coordinator.idempotence.producer_state import ProducerSnapshot
from kafkapy.coordinator.idempotence.snapshot import encode_snapshot
from kafkapy.protocol.records import Record, build_batch, iter_batches
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataStore
from kafkapy.storage.remote.reader import RemoteLogReader
from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.testing.object_store import S3Server
from kafkapy.testing.remote_tier import copy_rolled_segments
from tests.server.cluster.replication_helpers import produce, running_cluster, wait_for

TOPIC = "tiered"


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    kind = os.environ.get("KAFKAPY_TEST_S3", "seaweedfs")
    with S3Server(kind) as server:  # type: ignore[arg-type]
        yield server


def _batch(i: int) -> bytes:
    return build_batch([Record(j, j, None, f"r{i}-{j}".encode() * 20, []) for j in range(3)],
                       base_timestamp=1_700_000_000_000 + i)


@pytest.mark.slow
async def test_a_follower_told_offset_moved_to_tiered_storage_restarts_at_the_leaders_local_log(
        tmp_path: Path, s3_server: S3Server) -> None:
    async with running_cluster(tmp_path, 2) as (controller, nodes):
        st = controller.ctl._st
        st.config = dataclasses.replace(st.config, remote_log_storage_system_enable=True)
        controller.create_topic(TOPIC, 1, rf=2, configs={"remote.storage.enable": "true"})
        leader_id = controller.image.topics[TOPIC].partitions[0].leader
        leader, follower = nodes[leader_id], nodes[3 - leader_id]
        client = await leader.client()
        plog = leader.broker.logs.get(TOPIC, 0)
        assert plog is not None
        for i in range(40):
            assert (await produce(client, TOPIC, _batch(i))).error_code == 0
            if i % 8 == 7:
                plog.roll()
        # the producer state as of the end of the remote segment the follower restarts after
        snapshot_at = plog.segments[-2].base_offset  # the last rolled segment's, the local log start to be
        snapshot = encode_snapshot(ProducerSnapshot(snapshot_at, ()))
        plog.write_producer_snapshot(snapshot_at, snapshot)
        store = S3ObjectStore(s3_server.config(key_prefix=f"r-{uuid.uuid4().hex[:12]}"))
        metadata = RemoteLogMetadataStore()
        for node in nodes.values():
            node.broker.remote_tier = RemoteTier(metadata, RemoteLogReader(store))
        copied = copy_rolled_segments(plog, TOPIC, 0, store, metadata, leader_epoch=plog.leader_epochs.latest_epoch)
        assert len(copied) >= 3
        local_start = plog.delete_records_before(copied[-1].start_offset)

        fplog = follower.broker.logs.get(TOPIC, 0)
        assert fplog is not None
        fplog.truncate_fully(0)  # a follower with nothing: its next fetch is below the leader's local log
        await wait_for(lambda: fplog.log_end_offset == plog.log_end_offset and fplog.log_start_offset > 0,
                       timeout_s=20, what="the follower to rebuild from the remote tier and catch up",
                       detail=lambda: (fplog.log_start_offset, fplog.log_end_offset, plog.log_end_offset))
        # restarted after the remote segment holding the offset before the leader's local log
        assert fplog.log_start_offset == copied[-2].end_offset + 1 == local_start
        assert fplog.leader_epochs.entries == plog.leader_epochs.entries
        assert fplog.read_producer_snapshot(local_start) == (local_start, snapshot)  # copied by the leader
        offset = local_start
        while offset < plog.log_end_offset:
            mine = fplog.read_bytes(offset, 1 << 20)
            assert mine == plog.read_bytes(offset, 1 << 20), offset
            offset = _last(mine) + 1
        # more records replicate as usual
        assert (await produce(client, TOPIC, _batch(99))).error_code == 0
        await wait_for(lambda: fplog.log_end_offset == plog.log_end_offset, what="replication after the rebuild")


def _last(data: bytes) -> int:
    return max(h.base_offset + h.last_offset_delta for _, h in iter_batches(data))
