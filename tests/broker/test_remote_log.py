"""RemoteLogManager as a plain class: real partition logs on disk, an in-memory object store
behind the port (the S3 side is tested against real servers in tests/storage/remote and
compat_tests/test_tiered_storage_copy.py), publish recorded, the clock given."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from pathlib import Path

import pytest

from kafkapy.broker.remote_log import RemoteLogManager, TieredReplica
from kafkapy.storage import LogConfig, PartitionLog
from kafkapy.storage.remote.copier import CopyBackoff
from kafkapy.storage.remote.layout import (
    RemoteLogSegmentId,
    SegmentObject,
    TopicIdPartition,
    kafka_uuid,
    segment_object_key,
)
from kafkapy.storage.remote.metadata import (
    RemoteLogMetadata,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemotePartitionDeleteMetadata,
    encode_remote_log_metadata,
)
from kafkapy.storage.remote.object_store import ObjectInfo, ObjectStoreUnavailableError
from tests.storage.helpers import BASE_TS, batch

TP = TopicIdPartition("orders", uuid.UUID(int=0xBEEF), 0)
SEGMENT_BYTES = 2000
TIERED = {"segment.bytes": str(SEGMENT_BYTES), "remote.storage.enable": "true",
          "local.retention.bytes": str(2 * SEGMENT_BYTES)}


class MemoryStore:
    """The object-store port over a dict; `down` makes every call fail as an outage does."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise ObjectStoreUnavailableError("store down")

    def put(self, key: str, data: bytes) -> None:
        self._check()
        self.objects[key] = bytes(data)

    def put_file(self, key: str, path: Path) -> None:
        self.put(key, path.read_bytes())

    def get(self, key: str, start: int = 0, end: int | None = None) -> bytes:
        self._check()
        return self.objects[key][start:end]

    def list(self, prefix: str) -> list[ObjectInfo]:
        self._check()
        return [ObjectInfo(k, len(v)) for k, v in sorted(self.objects.items()) if k.startswith(prefix)]

    def delete(self, keys: Iterable[str]) -> None:
        self._check()
        for key in list(keys):
            self.objects.pop(key, None)


class Published(list[RemoteLogMetadata]):
    """A `Publish` that records each record and applies it to the manager, as the broker's
    publish does once the record is replicated."""

    def __init__(self, manager: RemoteLogManager) -> None:
        super().__init__()
        self.manager = manager

    def __call__(self, record: RemoteLogMetadata) -> None:
        self.append(record)
        self.manager.apply(record)


def _log(directory: Path, configs: dict[str, str], batches: int = 20) -> PartitionLog:
    plog = PartitionLog(directory, LogConfig.from_topic_configs(configs), topic_id=TP.topic_id,
                        now_ms=BASE_TS)
    for i in range(batches):
        plog.append(batch([b"v" * 400], ts=BASE_TS + i), now_ms=BASE_TS, leader_epoch=0)
    plog.high_watermark = plog.log_end_offset
    return plog


def _manager(store: MemoryStore) -> RemoteLogManager:
    return RemoteLogManager(store, broker_id=1, metadata_partitions=3,
                            backoff=CopyBackoff(initial_ms=1000, max_ms=8000), random_unit=lambda: 0.5)


@pytest.fixture
def plog(tmp_path: Path) -> PartitionLog:
    return _log(tmp_path / "orders-0", TIERED)


def test_leader_copies_every_rolled_segment_below_the_high_watermark(plog: PartitionLog) -> None:
    store = MemoryStore()
    manager = _manager(store)
    published = Published(manager)
    rolled = plog.segments[:-1]
    assert len(rolled) >= 3
    copied = manager.run_copies([TieredReplica(TP, plog, 0)], published, BASE_TS)
    assert copied == len(rolled)
    segments = manager.remote_segments(TP)
    assert [s.start_offset for s in segments] == [s.base_offset for s in rolled]
    assert segments[-1].end_offset == plog.segments[-1].base_offset - 1
    assert plog.remote_copied_offset == segments[-1].end_offset
    kinds = [type(r) for r in published]
    assert kinds == [RemoteLogSegmentMetadata, RemoteLogSegmentMetadataUpdate] * len(rolled)
    logs = [k for k in store.objects if k.endswith(".log")]
    assert len(logs) == len(rolled)
    # nothing new: a second run copies nothing
    assert manager.run_copies([TieredReplica(TP, plog, 0)], published, BASE_TS) == 0


def test_nothing_at_or_above_the_last_stable_offset_is_copied(plog: PartitionLog) -> None:
    manager = _manager(MemoryStore())
    plog.high_watermark = plog.segments[1].base_offset  # the second segment is not committed
    manager.run_copies([TieredReplica(TP, plog, 0)], Published(manager), BASE_TS)
    assert [s.start_offset for s in manager.remote_segments(TP)] == [plog.segments[0].base_offset]


def test_a_follower_copies_nothing(plog: PartitionLog) -> None:
    manager = _manager(MemoryStore())
    assert manager.run_copies([TieredReplica(TP, plog, None)], Published(manager), BASE_TS) == 0
    assert manager.remote_segments(TP) == []


def test_a_new_leader_resumes_after_the_replayed_copies(plog: PartitionLog) -> None:
    store = MemoryStore()
    first = _manager(store)
    published = Published(first)
    plog.high_watermark = plog.segments[2].base_offset
    assert first.run_copies([TieredReplica(TP, plog, 0)], published, BASE_TS) == 2
    plog.high_watermark = plog.log_end_offset
    successor = _manager(store)
    for record in published:
        assert successor.apply_value(encode_remote_log_metadata(record))
    mine = Published(successor)
    successor.run_copies([TieredReplica(TP, plog, 1)], mine, BASE_TS)
    starts = [r.start_offset for r in mine if isinstance(r, RemoteLogSegmentMetadata)]
    assert starts == [s.base_offset for s in plog.segments[2:-1]]


def test_store_outage_keeps_local_segments_and_backs_off(plog: PartitionLog) -> None:
    store = MemoryStore()
    store.down = True
    manager = _manager(store)
    replica = TieredReplica(TP, plog, 0)
    before = [s.base_offset for s in plog.segments]
    assert manager.run_copies([replica], Published(manager), BASE_TS) == 0
    lag = manager.copier_lag_by_topic()["orders"]
    assert lag.segments == len(before) - 1
    assert lag.bytes > 0
    assert manager.counters.copy_failures == 1
    plog.delete_old_segments(BASE_TS + 10**9)
    assert [s.base_offset for s in plog.segments] == before  # nothing uncopied deleted
    store.down = False
    assert manager.run_copies([replica], Published(manager), BASE_TS + 999) == 0  # still backing off
    assert manager.run_copies([replica], Published(manager), BASE_TS + 1000) == len(before) - 1
    assert manager.copier_lag_by_topic()["orders"].bytes == 0
    plog.delete_old_segments(BASE_TS)
    assert sum(s.size for s in plog.segments) <= 2 * SEGMENT_BYTES + SEGMENT_BYTES  # bound + one
    assert plog.log_start_offset == plog.segments[0].base_offset > 0


def test_copy_disabled_topic_copies_nothing(tmp_path: Path) -> None:
    plog = _log(tmp_path / "orders-0", {**TIERED, "remote.log.copy.disable": "true",
                                        "local.retention.bytes": "-2"})
    manager = _manager(MemoryStore())
    assert manager.run_copies([TieredReplica(TP, plog, 0)], Published(manager), BASE_TS) == 0


def test_remote_retention_deletes_the_oldest_remote_segments(tmp_path: Path) -> None:
    plog = _log(tmp_path / "orders-0", {**TIERED, "retention.bytes": str(4 * SEGMENT_BYTES)},
                batches=30)
    store = MemoryStore()
    manager = _manager(store)
    published = Published(manager)
    replica = TieredReplica(TP, plog, 0)
    manager.run_copies([replica], published, BASE_TS)
    copied = manager.remote_segments(TP)
    published.clear()
    deleted = manager.run_remote_retention([replica], published, BASE_TS)
    assert deleted > 0
    remaining = manager.remote_segments(TP)
    assert [s.start_offset for s in remaining] == [s.start_offset for s in copied[deleted:]]
    states = [r.state for r in published if isinstance(r, RemoteLogSegmentMetadataUpdate)]
    assert states == [RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                      RemoteLogSegmentState.DELETE_SEGMENT_FINISHED] * deleted
    gone = [kafka_uuid(s.segment_id.id) for s in copied[:deleted]]
    assert not [k for k in store.objects if any(g in k for g in gone)]
    assert len([k for k in store.objects if k.endswith(".log")]) == len(remaining)
    assert sum(s.segment_size_in_bytes for s in remaining) + plog.segments[-1].size <= (
        4 * SEGMENT_BYTES + max(s.segment_size_in_bytes for s in copied))


class OrderedDeletes(MemoryStore):
    """Records every key in the order the store was asked to delete it."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted: list[str] = []

    def delete(self, keys: Iterable[str]) -> None:
        batch = list(keys)
        super().delete(batch)
        self.deleted += batch


def test_a_remote_segment_is_deleted_log_last_so_no_listing_shows_orphans(tmp_path: Path) -> None:
    """A bucket listing taken mid-delete never shows a segment's indexes, snapshot or checkpoint
    without its `.log`: the `.log` (written last) is deleted last, in a request of its own."""
    plog = _log(tmp_path / "orders-0", {**TIERED, "retention.bytes": str(4 * SEGMENT_BYTES)},
                batches=30)
    store = OrderedDeletes()
    manager = _manager(store)
    published = Published(manager)
    replica = TieredReplica(TP, plog, 0)
    manager.run_copies([replica], published, BASE_TS)
    assert manager.run_remote_retention([replica], published, BASE_TS) > 0
    by_segment: dict[str, list[str]] = {}
    for key in store.deleted:
        by_segment.setdefault(key.rsplit(".", 1)[0], []).append(key)
    assert by_segment
    for keys in by_segment.values():
        assert keys[-1].endswith(".log")
        assert len(keys) > 1


def test_deleting_a_partition_removes_its_objects(plog: PartitionLog) -> None:
    store = MemoryStore()
    manager = _manager(store)
    published = Published(manager)
    manager.run_copies([TieredReplica(TP, plog, 0)], published, BASE_TS)
    assert manager.known_partitions(TP.topic_id) == [TP]
    manager.delete_partition(TP, published, BASE_TS)
    assert store.objects == {}
    assert isinstance(published[-1], RemotePartitionDeleteMetadata)
    assert manager.remote_segments(TP) == []


def test_unreadable_metadata_is_skipped() -> None:
    manager = _manager(MemoryStore())
    assert not manager.apply_value(b"\x07\x01garbage")
    assert manager.remote_log_start_offset(TP) is None


def test_an_unfinished_copy_is_deleted_and_copied_again(plog: PartitionLog) -> None:
    store = MemoryStore()
    manager = _manager(store)
    published = Published(manager)
    first = plog.segments[0]
    dead = RemoteLogSegmentMetadata(
        RemoteLogSegmentId(TP, uuid.uuid4()), first.base_offset, plog.segments[1].base_offset - 1,
        1, BASE_TS, BASE_TS, ((0, 0),), first.size, broker_leader_epoch=0)
    orphan = segment_object_key(dead.segment_id, dead.start_offset, SegmentObject.SEGMENT)
    store.objects[orphan] = b"half a segment"
    assert manager.apply(dead)
    manager.run_copies([TieredReplica(TP, plog, 0)], published, BASE_TS)
    assert orphan not in store.objects
    states = [r.state for r in published[:2] if isinstance(r, RemoteLogSegmentMetadataUpdate)]
    assert states == [RemoteLogSegmentState.DELETE_SEGMENT_STARTED,
                      RemoteLogSegmentState.DELETE_SEGMENT_FINISHED]
    assert manager.remote_segments(TP)[0].start_offset == first.base_offset
    assert len([k for k in store.objects if k.endswith(".log")]) == len(plog.segments) - 1


def test_cleaning_up_an_unfinished_copy_backs_off_while_the_store_is_down(plog: PartitionLog) -> None:
    """A store outage must not be hammered by the clean-up of abandoned copies at every task
    run: it waits out the same backoff as the copies, then deletes and copies again."""
    store = MemoryStore()
    manager = _manager(store)
    first = plog.segments[0]
    dead = RemoteLogSegmentMetadata(
        RemoteLogSegmentId(TP, uuid.uuid4()), first.base_offset, plog.segments[1].base_offset - 1,
        1, BASE_TS, BASE_TS, ((0, 0),), first.size, broker_leader_epoch=0)
    assert manager.apply(dead)
    replica = TieredReplica(TP, plog, 0)
    store.down = True
    manager.run_copies([replica], Published(manager), BASE_TS)
    assert manager.counters.delete_failures == 1
    manager.run_copies([replica], Published(manager), BASE_TS + 999)  # still backing off
    assert manager.counters.delete_failures == 1
    assert manager.counters.copy_failures == 0
    store.down = False
    published = Published(manager)
    assert manager.run_copies([replica], published, BASE_TS + 1000) == len(plog.segments) - 1
    assert isinstance(published[0], RemoteLogSegmentMetadataUpdate)
    assert published[0].segment_id == dead.segment_id
    assert published[0].state is RemoteLogSegmentState.DELETE_SEGMENT_FINISHED
    assert dead.segment_id not in [s.segment_id for s in manager.remote_segments(TP)]

