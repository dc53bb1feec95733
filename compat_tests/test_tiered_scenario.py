"""Issue 25's tiered-storage scenario at suite size (about 50 MB; `perf/tiered_scenario.py` runs
it at 1 GB with the same ratios): a three-node cluster with a real S3 server, an aborted
transaction in the tiered range, an object-store outage during production, a leader SIGKILLed
mid-read, a restart of every node, and retention deleting remote objects.

What users rely on: nothing acknowledged is lost, both clients read every committed record from
offset 0 byte-exact and in order through failures, a remote read with the store down answers a
retriable error instead of hanging or failing the partition, the disk stays bounded once the
copier caught up, and lowering retention empties the bucket of expired segments.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from compat_tests.tiered_scenario import UNKNOWN_SERVER_ERROR, Scenario, run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_tiered_storage_scenario(tmp_path: Path) -> None:
    sc = Scenario(total_bytes=50 << 20, outage_s=10,
                  s3_kind=os.environ.get("KAFKAPY_TEST_S3", "seaweedfs"))  # type: ignore[arg-type]
    figures = run(sc, tmp_path)
    assert figures["failed_records"] == 0
    assert figures["outage_fetch_error_code"] == UNKNOWN_SERVER_ERROR
    assert figures["outage_confluent"]["records"] == 0
    assert all(b < sc.disk_bound for b in figures["disk_bytes_per_node"].values())
    assert figures["confluent_read"]["records"] == figures["acked_records"]
    assert figures["kafka_python_read_after_restart"]["records"] == figures["acked_records"]
    assert figures["retention"]["objects_after"] < figures["retention"]["objects_before"]
