"""The text report: the table's columns, the leader-SIGKILL verdict and anomaly examples."""

from __future__ import annotations

import io

from rich.console import Console

from kafkapy.chaos.checker import check
from kafkapy.chaos.history import IDEMPOTENT, TOPIC_IDEMPOTENT, Ack, FaultRecord, History, Send
from kafkapy.chaos.report import render


def report_of(history: History) -> dict[str, object]:
    result = check(history, horizon=10.0)
    return {
        "seed": 7, "nodes": 3, "faults_injected": 1, "faults": [f.to_json() for f in history.faults],
        "skipped_kinds": {"disk-full": "needs root"}, "stuck_workloads": [], "data_dir": "/tmp/x",
        **result.to_json(),
    }


def rendered(history: History) -> str:
    out = io.StringIO()
    render(report_of(history), Console(file=out, width=200, color_system=None))
    return out.getvalue()


def history_with_kill(lose: bool) -> History:
    h = History(partitions=1)
    for v in range(20):
        h.add(Send(IDEMPOTENT, v, 0, v * 0.5))
        h.add(Ack(IDEMPOTENT, v, 0, v * 0.5 + 0.01, offset=v))
    h.faults.append(FaultRecord(0, "kill", [1], [0], injected_at=2.0, healed_at=4.0, recovered_at=5.0))
    kept = [v for v in range(20) if not (lose and v == 7)]
    h.set_read(TOPIC_IDEMPOTENT, {0: [(v, str(v).encode()) for v in kept]})
    return h


def test_table_columns_verdict_and_skips() -> None:
    text = rendered(history_with_kill(lose=False))
    for column in ("fault kind", "faults", "acked", "lost", "dup", "reordered", "unavail p50", "unavail max"):
        assert column in text
    assert "leader SIGKILL: unavailability p50 0.50 s, max 0.50 s against a 3 s goal: met" in text
    assert "skipped disk-full: needs root" in text
    assert "no anomalies" in text


def test_anomalies_are_listed_with_examples() -> None:
    text = rendered(history_with_kill(lose=True))
    assert "ANOMALIES: {'lost': 1}" in text
    assert "idempotent lost: 7" in text
