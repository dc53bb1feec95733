"""`kafkapy topics describe` on a tiered topic (KIP-405): per partition the log start over both
tiers (ListOffsets -2), the local log start (-4) and the last offset in the remote tier (-5),
asked of a real broker over the Kafka protocol; an untiered topic gets none of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from kafkapy.cli.common import ClientSettings, Output
from kafkapy.cli.topics import _partition_table, describe_partitions, tiered_topics
from kafkapy.cli.wire import Admin
from kafkapy.testing.object_store import S3Server
from tests.broker.test_remote_fetch import TOPIC, s3_server, tiered
from tests.server.helpers import create_topic

__all__ = ["s3_server"]  # the module's S3 server fixture


def _describe(port: int, topics: list[str], tiered_names: set[str]) -> list[dict[str, Any]]:
    with Admin(ClientSettings(f"127.0.0.1:{port}")) as admin:
        return describe_partitions(admin, admin.metadata(topics), tiered_names)


async def test_describe_shows_both_tiers_of_a_tiered_topic(tmp_path: Path, s3_server: S3Server) -> None:
    async with tiered(tmp_path, s3_server, 2, tier_partitions=1) as state:
        await create_topic(state.port, "plain", 1)
        rows = await trio.to_thread.run_sync(_describe, state.port, [TOPIC, "plain"], {TOPIC})
        by_tp = {(r["topic"], r["partition"]): r for r in rows}
        copied, uncopied = by_tp[(TOPIC, 0)], by_tp[(TOPIC, 1)]
        assert (copied["log_start_offset"], copied["local_log_start_offset"],
                copied["highest_tiered_offset"]) == (0, state.local_start[0], state.last_copied[0])
        assert copied["local_log_start_offset"] > 0
        assert (uncopied["log_start_offset"], uncopied["local_log_start_offset"],
                uncopied["highest_tiered_offset"]) == (0, 0, -1)
        assert "local_log_start_offset" not in by_tp[("plain", 0)]
        assert "highest_tiered_offset" not in by_tp[("plain", 0)]


def test_the_table_has_the_tier_columns_only_for_a_tiered_topic(capsys: Any) -> None:
    out = Output(ClientSettings())
    base = {"partition": 0, "leader": 1, "replicas": [1], "isr": [1], "offline_replicas": [],
            "log_start_offset": 0, "log_end_offset": 90, "size_bytes": 10}
    _partition_table(out, [{**base, "local_log_start_offset": 40, "highest_tiered_offset": 49}])
    tiered_out = capsys.readouterr().out.split("\n")
    assert tiered_out[0].split() == ["PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE", "LOG-START",
                                     "LOCAL-START", "TIERED-END", "LOG-END", "SIZE"]
    assert tiered_out[1].split() == ["0", "1", "1", "1", "-", "0", "40", "49", "90", "10"]
    _partition_table(out, [base])
    assert "LOCAL-START" not in capsys.readouterr().out


def test_tiered_topics_are_those_with_remote_storage_enabled() -> None:
    configs = {"a": [{"name": "remote.storage.enable", "value": "true"}],
               "b": [{"name": "remote.storage.enable", "value": "false"}],
               "c": [{"name": "retention.ms", "value": "1"}]}
    assert tiered_topics(configs) == {"a"}
