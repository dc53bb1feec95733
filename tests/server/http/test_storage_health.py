"""Storage health on the status page and in /metrics: partition logs that could not be opened
(offline) and partitions the log cleaner gave up on (uncleanable), per data dir."""

from __future__ import annotations

import time
from pathlib import Path

from kafkapy.server.http.metrics import BrokerCollector
from kafkapy.server.http.page import render_tables
from kafkapy.server.http.status import History, status_json
from tests.server.helpers import create_topic, running_broker


def _damage(data_dir: Path, name: str) -> None:
    """A directory where the log's first segment should be: it cannot be opened at start-up."""
    segment = data_dir / name / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()


async def test_offline_and_uncleanable_partitions_are_shown_and_counted(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, _server, port):
        await create_topic(port, "broken", 1)
        await create_topic(port, "compacted", 1, {"cleanup.policy": "compact"})
    _damage(tmp_path, "broken-0")
    async with running_broker(tmp_path) as (broker, server, port):
        plog = broker.logs.get("compacted", 0)
        assert plog is not None
        since = int(time.time() * 1000)
        broker.logs.uncleanable.mark(("compacted", 0), plog, ValueError("corrupt batch"), since)

        storage = status_json(server, History(server))["storage"]
        assert storage["offline"] == [
            {"topic": "broken", "partition": 0, "data_dir": str(tmp_path),
             "reason": storage["offline"][0]["reason"]}
        ]
        assert "Is a directory" in storage["offline"][0]["reason"]
        assert storage["uncleanable"] == [
            {"topic": "compacted", "partition": 0, "data_dir": str(tmp_path),
             "reason": "ValueError: corrupt batch", "since_ms": since}
        ]
        html = render_tables(status_json(server, History(server)))
        assert 'class="offline-logs"' in html
        assert "<td>broken</td>" in html
        assert 'class="uncleanable"' in html
        assert "ValueError: corrupt batch" in html
        assert 'id="storage-ok"' not in html

        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in BrokerCollector(server).collect()
            for s in family.samples
        }
        label = (("logDirectory", str(tmp_path)),)
        assert samples[("kafka_log_logcleanermanager_uncleanable_partitions_count", label)] == 1
        assert samples[("kafka_log_logcleanermanager_uncleanable_bytes", label)] >= 0
        assert samples[("kafkapy_log_offline_partition_logs", label)] == 1


async def test_healthy_storage_says_so_and_counts_zero(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as (_, server, _port):
        status = status_json(server, History(server))
        assert status["storage"] == {"uncleanable": [], "offline": []}
        assert 'id="storage-ok"' in render_tables(status)
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in BrokerCollector(server).collect()
            for s in family.samples
        }
        label = (("logDirectory", str(tmp_path)),)
        assert samples[("kafka_log_logcleanermanager_uncleanable_partitions_count", label)] == 0
        assert samples[("kafkapy_log_offline_partition_logs", label)] == 0
