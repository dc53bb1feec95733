"""DeleteRecords below the local log start of a tiered topic (KIP-405): the log start over
both tiers moves to the requested offset (the answer's low watermark, ListOffsets -2, Fetch's
log start), fetches below it answer OFFSET_OUT_OF_RANGE even while the segment holding them is
still remote, and the remote log manager's retention pass deletes the remote segments wholly
below it (objects and all) and keeps the one straddling it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from kafkapy.broker.remote_fetch import REMOTE_STORAGE_ENABLE, RemoteTier
from kafkapy.broker.remote_log import TieredReplica
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import DeleteRecordsRequest
from kafkapy.storage.remote.layout import TopicIdPartition, kafka_uuid
from kafkapy.storage.remote.metadata import RemoteLogSegmentMetadataUpdate, RemoteLogSegmentState
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataStore
from kafkapy.testing.object_store import S3Server
from tests.broker.test_remote_fetch import (
    FETCH_V,
    TOPIC,
    _list_offsets,
    fetch_req,
    s3_server,
    tiered,
)
from tests.broker.test_remote_log import TIERED, TP, MemoryStore, Published, _log, _manager
from tests.server.helpers import Client, running_broker
from tests.storage.helpers import BASE_TS

__all__ = ["s3_server"]  # the module's S3 server fixture


def _delete_records(offset: int) -> DeleteRecordsRequest:
    return DeleteRecordsRequest(timeout_ms=5000, topics=[DeleteRecordsRequest.DeleteRecordsTopic(
        name=TOPIC, partitions=[DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=offset)])])


async def test_delete_records_below_the_local_log_start_moves_the_remote_log_start(
        tmp_path: Path, s3_server: S3Server) -> None:
    async with tiered(tmp_path, s3_server) as t:
        assert t.local_start[0] > 20
        target = 17  # inside a remote segment, not its first offset
        client = await Client.connect(t.port)
        resp = await client.request(ApiKey.DELETE_RECORDS, 2, _delete_records(target))
        part = resp.topics[0].partitions[0]
        assert (part.error_code, part.low_watermark) == (ErrorCode.NONE, target)
        assert (await _list_offsets(client, -2))[:2] == (0, target)
        assert (await _list_offsets(client, -4))[:2] == (0, t.local_start[0])
        below = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: target - 1}))).responses[0].partitions[0]
        assert (below.error_code, below.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, target)
        at = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: target}))).responses[0].partitions[0]
        assert at.error_code == ErrorCode.NONE
        assert at.records
        assert at.log_start_offset == target
        assert (await _list_offsets(client, 0))[:2] == (0, target)  # by timestamp: not below it
        lower = await client.request(ApiKey.DELETE_RECORDS, 2, _delete_records(5))  # never moves down
        assert lower.topics[0].partitions[0].low_watermark == target
        await client.aclose()


async def test_the_moved_log_start_holds_after_a_restart(tmp_path: Path, s3_server: S3Server) -> None:
    target = 17  # inside the first remote segment, not its first offset
    async with tiered(tmp_path, s3_server) as t:
        tier = t.broker.remote_tier
        assert tier is not None
        client = await Client.connect(t.port)
        resp = await client.request(ApiKey.DELETE_RECORDS, 2, _delete_records(target))
        assert resp.topics[0].partitions[0].low_watermark == target
        await client.aclose()
        plog = t.broker.logs.get(TOPIC, 0)
        assert plog is not None
        cache = tier.metadata.cache(TopicIdPartition(TOPIC, plog.topic_id, 0))
        assert cache is not None
        segments, reader = cache.segments(), tier.reader
        assert segments[0].start_offset < target <= segments[0].end_offset
    async with running_broker(tmp_path) as (broker, _, port):
        info = broker.topics.get(TOPIC)
        assert info is not None
        info.configs[REMOTE_STORAGE_ENABLE] = "true"
        metadata = RemoteLogMetadataStore()
        broker.remote_tier = RemoteTier(metadata, reader)
        for segment in segments:  # the `__remote_log_metadata` replay: no record carries the log start
            metadata.apply(dataclasses.replace(segment, state=RemoteLogSegmentState.COPY_SEGMENT_STARTED))
            metadata.apply(RemoteLogSegmentMetadataUpdate(
                segment.segment_id, segment.broker_id, segment.event_timestamp_ms,
                RemoteLogSegmentState.COPY_SEGMENT_FINISHED))
        client = await Client.connect(port)
        assert (await _list_offsets(client, -2))[:2] == (0, target)
        below = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: target - 1}))).responses[0].partitions[0]
        assert (below.error_code, below.log_start_offset) == (ErrorCode.OFFSET_OUT_OF_RANGE, target)
        at = (await client.request(ApiKey.FETCH, FETCH_V, fetch_req({0: target}))).responses[0].partitions[0]
        assert (at.error_code, at.log_start_offset) == (ErrorCode.NONE, target)
        assert at.records
        await client.aclose()


def test_retention_deletes_the_remote_segments_wholly_below_the_deleted_records(tmp_path: Path) -> None:
    plog = _log(tmp_path / "orders-0", TIERED, batches=30)
    store = MemoryStore()
    manager = _manager(store)
    published = Published(manager)
    replica = TieredReplica(TP, plog, 0)
    manager.run_copies([replica], published, BASE_TS)
    copied = manager.remote_segments(TP)
    assert len(copied) >= 3
    target = copied[2].start_offset + 1  # the third segment straddles it
    cache = manager.cache(TP)
    assert cache is not None
    cache.advance_log_start(target)
    assert manager.remote_log_start_offset(TP) == target
    published.clear()
    assert manager.run_remote_retention([replica], published, BASE_TS) == 2
    assert [s.start_offset for s in manager.remote_segments(TP)] == [s.start_offset for s in copied[2:]]
    states = [r.state for r in published if isinstance(r, RemoteLogSegmentMetadataUpdate)]
    assert states == [RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                      RemoteLogSegmentState.DELETE_SEGMENT_FINISHED] * 2
    gone = [kafka_uuid(s.segment_id.id) for s in copied[:2]]
    assert not [k for k in store.objects if any(g in k for g in gone)]
    assert manager.remote_log_start_offset(TP) == target
