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
    assert (
        "leader SIGKILL: unavailability p50 0.50 s, max 0.50 s against a goal of 3 s (median), "
        "5 s at most: met"
    ) in text
    assert "skipped disk-full: needs root" in text
    assert "no anomalies" in text


def test_anomalies_are_listed_with_examples() -> None:
    text = rendered(history_with_kill(lose=True))
    assert "ANOMALIES: {'lost': 1}" in text
    assert "idempotent lost: 7" in text


def test_each_fault_shows_when_the_workloads_resumed_and_which_did_not() -> None:
    h = history_with_kill(lose=False)
    h.faults[0].resumed = {"acks": 0.4, "txn": 1.25, "group": None}
    report = report_of(h)
    report["progress_timeout_s"] = 60.0
    out = io.StringIO()
    render(report, Console(file=out, width=250, color_system=None))
    text = out.getvalue()
    assert "resumed s acks/txn/group" in text
    assert "0.40/1.25/-" in text
    assert "no progress within 60 s of the heal: fault 0 (kill): group" in text


def test_a_kill_median_within_3_s_with_one_slow_kill_under_5_s_meets_the_goal() -> None:
    """The issue's goal is a median within 3 s and no kill over 5 s (not every kill within 3 s)."""
    h = History(partitions=1)
    acked = [t / 10 for t in range(400) if not (20 < t < 40 or 120 < t < 140 or 220 < t < 265)]
    for v, t in enumerate(acked):
        h.add(Send(IDEMPOTENT, v, 0, t))
        h.add(Ack(IDEMPOTENT, v, 0, t, offset=v))
    for i, at in enumerate((2.05, 12.05, 22.05)):
        h.faults.append(FaultRecord(i, "kill", [1], [0], injected_at=at, healed_at=at + 1, recovered_at=at + 2))
    h.set_read(TOPIC_IDEMPOTENT, {0: [(v, str(v).encode()) for v in range(len(acked))]})
    report = {**report_of(h), **check(h, horizon=40.0).to_json()}
    out = io.StringIO()
    render(report, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "p50 1.95 s, max 4.45 s" in text
    assert "5 s at most: met" in text
