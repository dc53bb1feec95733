"""The S3 object store against a real S3 server (SeaweedFS, started by the session fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafkapy.storage.remote.object_store import (
    ObjectInfo,
    ObjectNotFoundError,
    ObjectStoreError,
    ObjectStoreUnavailableError,
)
from kafkapy.storage.remote.s3 import S3Config, S3ObjectStore
from kafkapy.testing.cluster import free_ports
from kafkapy.testing.object_store import TEST_SECRET_KEY, S3Server

DATA = bytes(range(256)) * 40


def test_ranged_get_returns_exactly_the_asked_bytes(s3_store: S3ObjectStore) -> None:
    s3_store.put("a/obj", DATA)
    assert s3_store.get("a/obj") == DATA
    assert s3_store.get("a/obj", 100, 356) == DATA[100:356]
    assert s3_store.get("a/obj", len(DATA) - 5) == DATA[-5:]
    # a range running past the end is cut short; one starting past it is empty
    assert s3_store.get("a/obj", len(DATA) - 3, len(DATA) + 100) == DATA[-3:]
    assert s3_store.get("a/obj", len(DATA) + 10) == b""
    assert s3_store.get("a/obj", 7, 7) == b""


def test_put_file_streams_the_whole_file(s3_store: S3ObjectStore, tmp_path: Path) -> None:
    path = tmp_path / "seg.log"
    path.write_bytes(DATA * 3)
    s3_store.put_file("f/seg.log", path)
    assert s3_store.get("f/seg.log") == DATA * 3


def test_list_by_prefix_is_sorted_and_relative_to_the_key_prefix(s3_store: S3ObjectStore) -> None:
    for key in ("t-1/0/b", "t-1/0/a", "t-1/1/a", "t-2/0/a"):
        s3_store.put(key, key.encode())
    assert s3_store.list("t-1/0/") == [ObjectInfo("t-1/0/a", 7), ObjectInfo("t-1/0/b", 7)]
    assert [o.key for o in s3_store.list("t-1/")] == ["t-1/0/a", "t-1/0/b", "t-1/1/a"]
    assert s3_store.list("nothing/") == []


def test_list_and_delete_cross_pages(s3_store: S3ObjectStore) -> None:
    store = S3ObjectStore(s3_store.config, list_page_size=3, delete_batch=2)
    keys = [f"many/{i:04d}" for i in range(7)]
    for key in keys:
        store.put(key, b"")
    assert [o.key for o in store.list("many/")] == keys
    store.delete(keys)
    assert store.list("many/") == []


def test_delete_is_idempotent(s3_store: S3ObjectStore) -> None:
    s3_store.put("d/1", b"x")
    s3_store.put("d/2", b"y")
    s3_store.delete(["d/1", "d/never-there"])
    assert [o.key for o in s3_store.list("d/")] == ["d/2"]
    s3_store.delete(["d/1"])


def test_missing_object_is_not_found(s3_store: S3ObjectStore) -> None:
    with pytest.raises(ObjectNotFoundError) as info:
        s3_store.get("no/such/key", 0, 10)
    assert info.value.key == "no/such/key"
    assert not info.value.retriable


def test_missing_bucket_is_a_permanent_error(s3_server: S3Server) -> None:
    store = S3ObjectStore(S3Config(
        bucket="kafkapy-no-such-bucket", endpoint_url=s3_server.endpoint_url, path_style=True,
        credentials_file=s3_server.credentials_file))
    with pytest.raises(ObjectStoreError) as info:
        store.get("k")
    assert not info.value.retriable


def test_store_down_is_a_retriable_error(s3_server: S3Server) -> None:
    (port,) = free_ports(1)  # nothing listens there
    store = S3ObjectStore(s3_server.config(
        endpoint_url=f"http://127.0.0.1:{port}", connect_timeout_s=0.5, max_attempts=1))
    for call in (lambda: store.get("k"), lambda: store.put("k", b"v"), lambda: store.list("")):
        with pytest.raises(ObjectStoreUnavailableError) as info:
            call()
        assert info.value.retriable


def test_config_from_rsm_properties_keeps_secrets_out_of_repr(s3_server: S3Server) -> None:
    config = S3Config.from_properties({
        "rsm.config.storage.s3.bucket.name": "b",
        "rsm.config.storage.s3.endpoint.url": "http://127.0.0.1:9000",
        "rsm.config.storage.s3.region": "eu-west-1",
        "rsm.config.key.prefix": "/kafka/tiered/",
        "rsm.config.storage.s3.path.style.access.enabled": "true",
        "rsm.config.storage.aws.credentials.file": str(s3_server.credentials_file),
        "rsm.config.storage.s3.api.call.timeout.ms": "2500",
        "rsm.config.some.plugin.key": "ignored",
        "log.dirs": "/ignored",
    })
    assert (config.bucket, config.region, config.key_prefix, config.path_style) == (
        "b", "eu-west-1", "kafka/tiered", True)
    assert config.read_timeout_s == 2.5
    store = S3ObjectStore(config)
    assert TEST_SECRET_KEY not in repr(config) + repr(store)


@pytest.mark.parametrize("props", [
    {},
    {"rsm.config.storage.s3.bucket.name": "b", "rsm.config.storage.s3.path.style.access.enabled": "yes"},
    {"rsm.config.storage.s3.bucket.name": "b", "rsm.config.storage.s3.api.max.attempts": "x"},
])
def test_config_refuses_a_missing_bucket_or_bad_values(props: dict[str, str]) -> None:
    with pytest.raises(ValueError, match=r"rsm\.config\."):
        S3Config.from_properties(props)
