"""One real S3 server per test session (SeaweedFS; KAFKAPY_TEST_S3=moto for moto_server).

Each test gets its own key prefix in the shared bucket, so tests never see each other's objects.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.testing.object_store import S3Server


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    kind = os.environ.get("KAFKAPY_TEST_S3", "seaweedfs")
    assert kind in ("seaweedfs", "moto")
    with S3Server(kind) as server:  # type: ignore[arg-type]
        yield server


@pytest.fixture
def s3_store(s3_server: S3Server) -> S3ObjectStore:
    return S3ObjectStore(s3_server.config(key_prefix=f"t-{uuid.uuid4().hex[:12]}"))
