"""The object store stopped and started again (a real SeaweedFS process): the remote tier
answers retriable errors meanwhile, loses nothing, and the copier catches up afterwards."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from kafkapy.storage.remote.copier import RemoteLogSegmentCopier, copier_lag
from kafkapy.storage.remote.metadata_cache import RemoteLogMetadataCache
from kafkapy.storage.remote.object_store import ObjectStoreUnavailableError
from kafkapy.storage.remote.reader import RemoteLogReader
from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.testing.object_store import S3Server
from tests.storage.helpers import BASE_TS
from tests.storage.remote.test_copier_reader import TP, _rolled, _write_log

T = TypeVar("T")
pytestmark = [
    pytest.mark.slow,  # about 40 s: a SeaweedFS start, a stop and a restart
    pytest.mark.skipif(os.environ.get("KAFKAPY_TEST_S3") == "moto",
                       reason="moto keeps no objects across a restart"),
]


def _retrying(call: Callable[[], T], timeout_s: float = 60.0) -> T:
    """What a caller does with a retriable error: back off and try again (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except ObjectStoreUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.fixture
def own_server() -> Iterator[S3Server]:
    with S3Server("seaweedfs", bucket="kafkapy-outage") as server:
        yield server


def test_copies_and_reads_fail_retriably_while_the_store_is_down_and_resume_after(
        tmp_path: Path, own_server: S3Server) -> None:
    store = S3ObjectStore(own_server.config(
        key_prefix=f"t-{uuid.uuid4().hex[:8]}", connect_timeout_s=0.5, max_attempts=1))
    plog = _write_log(tmp_path / "orders-0")
    rolled = _rolled(plog)
    cache = RemoteLogMetadataCache(TP)
    copier = RemoteLogSegmentCopier(store, broker_id=1)
    copier.copy(TP, rolled[0], leader_epoch=0, publish=cache.apply, now_ms=BASE_TS)
    first = cache.segment_for_offset(0)
    assert first is not None
    reader = RemoteLogReader(store, chunk_bytes=512, cache_bytes=0)  # no cache: every read GETs

    own_server.stop(keep_data=True)
    with pytest.raises(ObjectStoreUnavailableError):
        reader.read(first, 0, 1 << 20)
    with pytest.raises(ObjectStoreUnavailableError):
        copier.copy(TP, rolled[1], leader_epoch=0, publish=cache.apply, now_ms=BASE_TS)
    sizes = [(f.base_offset, f.end_offset, f.log.stat().st_size) for f in rolled]
    assert copier_lag(sizes, cache.highest_copied_offset()).segments == len(rolled) - 1

    own_server.start()
    # the S3 gateway answers before its volume server is back: still retriable, then served
    result = _retrying(lambda: reader.read(first, 0, 1 << 20))
    assert result.records == plog.read_bytes(0, 1 << 20, max_offset=first.end_offset + 1)
    abandoned = [s for s in cache.segments() if s.start_offset == rolled[1].base_offset]
    for segment in abandoned:  # the attempt that failed is cleaned up, then copied afresh
        copier.delete(segment, publish=cache.apply, now_ms=BASE_TS)
    for files in rolled[1:]:
        copier.copy(TP, files, leader_epoch=0, publish=cache.apply, now_ms=BASE_TS)
    assert copier_lag(sizes, cache.highest_copied_offset()).segments == 0
    assert cache.highest_copied_offset() == rolled[-1].end_offset
