"""The text report of a chaos run: the table by fault kind, the other workloads, the faults.

rich renders the tables (aligned columns that stay readable in a CI log as well as a terminal).
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from kafkapy.chaos.history import PROGRESS_KINDS

__all__ = ["LEADER_KILL_GOAL_S", "LEADER_KILL_MAX_S", "render"]

#: the issue's goal for a leader SIGKILL: acknowledgements resume within 3 s (median), 5 s at most
LEADER_KILL_GOAL_S = 3.0
LEADER_KILL_MAX_S = 5.0


def _s(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def render(report: dict[str, Any], console: Console) -> None:
    """Print `report` (the JSON form, see runner.outcome_json) to `console`: the table by fault
    kind, the other workloads, the faults one by one, then the verdicts a reader looks for
    first in a CI log - stalls, the leader-kill goal, anomalies."""
    console.print(_kinds_table(report))
    console.print(_workloads_table(report))
    console.print(_faults_table(report))
    _print_stalled(report, console)
    _print_leader_kill_goal(report, console)
    for kind, reason in report["skipped_kinds"].items():
        console.print(f"skipped {kind}: {reason}")
    if report["stuck_workloads"]:
        console.print(f"workloads that did not stop in time: {', '.join(report['stuck_workloads'])}")
    _print_anomalies(report, console)


def _kinds_table(report: dict[str, Any]) -> Table:
    """The acks=all idempotent producer's figures by fault kind: the run's headline."""
    table = Table(title=f"kafkapy chaos - seed {report['seed']}, {report['nodes']} nodes, "
                        f"{report['faults_injected']} faults; acks=all idempotent producer, "
                        "unavailability in s")
    for name in ("fault kind", "faults", "acked", "lost", "dup", "reordered", "unavail p50", "unavail max"):
        table.add_column(name, justify="left" if name == "fault kind" else "right", no_wrap=True)
    for row in report["kinds"]:
        table.add_row(
            row["kind"], str(row["faults"]), str(row["acked"]), str(row["lost"]), str(row["duplicated"]),
            str(row["reordered"]), _s(row["unavailability_p50_s"]), _s(row["unavailability_max_s"]),
        )
    return table


def _workloads_table(report: dict[str, Any]) -> Table:
    """The workloads beside the acks=all producer, each with its own notion of an anomaly."""
    others = Table(title="other workloads")
    for name in ("workload", "figures", "anomalies"):
        others.add_column(name)
    a1, txn, group, idem = report["acks1"], report["txn"], report["group"], report["idempotent"]
    others.add_row(
        "acks=1 producer (counted apart)",
        f"sent {a1['sent']}, acked {a1['acked']}, failed {a1['failed']}",
        f"lost {a1['lost']}, dup {a1['duplicated']}, reordered {a1['reordered']} (not anomalies)",
    )
    others.add_row(
        "idempotent acks=all producer",
        f"sent {idem['sent']}, acked {idem['acked']}, failed {idem['failed']}",
        f"lost {idem['lost']}, dup {idem['duplicated']}, reordered {idem['reordered']}, "
        f"inconsistent {idem['inconsistent']}",
    )
    others.add_row(
        "transactional read-process-write",
        f"txns committed {txn['committed']}, aborted {txn['aborted']}, unknown {txn['unknown']}; "
        f"{txn['processed']} of {idem['sent']} values through; longest stall {txn['stall_s']:.1f} s",
        f"aborted reads {txn['aborted_reads']}, dup {txn['duplicated']}, lost {txn['lost']}",
    )
    others.add_row(
        "consumer group (commit after processing)",
        f"commits {group['commits']}, {group['distinct']} of {idem['sent']} records processed; "
        f"longest stall {group['stall_s']:.1f} s",
        f"offsets backwards {group['offsets_backwards']}, lost {group['lost']}, "
        f"inconsistent {group['inconsistent']}",
    )
    return others


def _faults_table(report: dict[str, Any]) -> Table:
    """One row per injected fault, so an anomaly can be placed against what was done when."""
    faults = Table(title="faults injected")
    columns = ("#", "kind", "nodes", "led", "at s", "healed s", "whole s", "unavail s",
               "resumed s acks/txn/group", "detail")  # fmt: skip
    for name in columns:
        faults.add_column(name, no_wrap=name != "detail")
    unavail = report["unavailability_s"]
    for f in report["faults"]:
        resumed = f.get("resumed_s") or {}
        faults.add_row(
            str(f["index"]), f["kind"], ",".join(map(str, f["nodes"])), ",".join(map(str, f["partitions"])),
            f"{f['injected_at']:.1f}", f"{f['healed_at']:.1f}", f"{f['recovered_at']:.1f}",
            _s(unavail.get(str(f["index"]))) if f["skipped"] is None else "-",
            "/".join(_s(resumed.get(k)) for k in PROGRESS_KINDS) if f["skipped"] is None else "-",
            f["detail"] if f["skipped"] is None else f"skipped: {f['skipped']}",
        )
    return faults


def _print_stalled(report: dict[str, Any], console: Console) -> None:
    """Each workload that made no progress within the progress timeout after a fault healed."""
    stalled = [
        f"fault {f['index']} ({f['kind']}): {k}"
        for f in report["faults"]
        for k, v in (f.get("resumed_s") or {}).items()
        if f["skipped"] is None and v is None
    ]
    if stalled:
        console.print(f"[bold red]no progress within {report.get('progress_timeout_s', 0):.0f} s of the heal:[/] "
                      + ", ".join(stalled))


def _print_leader_kill_goal(report: dict[str, Any], console: Console) -> None:
    """The leader-SIGKILL unavailability against its goal, when the run killed a leader."""
    kill = next((r for r in report["kinds"] if r["kind"] == "kill"), None)
    if kill is not None and kill["unavailability_max_s"] is not None:
        met = (
            kill["unavailability_p50_s"] <= LEADER_KILL_GOAL_S
            and kill["unavailability_max_s"] <= LEADER_KILL_MAX_S
        )
        console.print(
            f"leader SIGKILL: unavailability p50 {_s(kill['unavailability_p50_s'])} s, "
            f"max {_s(kill['unavailability_max_s'])} s against a goal of {LEADER_KILL_GOAL_S:.0f} s "
            f"(median), {LEADER_KILL_MAX_S:.0f} s at most: {'met' if met else 'NOT met'}"
        )


def _print_anomalies(report: dict[str, Any], console: Console) -> None:
    """The verdict, last so it ends the log: anomalies with a few examples each, or none."""
    anomalies = {k: v for k, v in report["anomalies"].items() if v}
    if anomalies:
        console.print(f"[bold red]ANOMALIES: {anomalies}[/] (all examples in --json; logs in {report['data_dir']})")
        for workload in ("idempotent", "txn", "group"):
            for kind, examples in report[workload]["examples"].items():
                for example in examples[:3]:
                    console.print(f"  {workload} {kind}: {example}", highlight=False)
        for line in report["unreadable"]:
            console.print(f"  unreadable: {line}", highlight=False)
    else:
        console.print("[bold green]no anomalies[/]")
