"""The checker: anomalies in a recorded History, in the spirit of Jepsen's Kafka queue checker.

Pure functions over a finished `History` (no clients, no clock), so each anomaly kind has a
unit test with a hand-made history. What counts as an anomaly, by workload:

- idempotent acks=all producer: an acknowledged value missing from the final read (lost);
  a value read more than once (duplicated); within a partition a value read after a value that
  was sent later (reordered); an acknowledged value found at another offset than the one its
  acknowledgement gave (inconsistent: the log was rewritten below the high watermark).
- transactional read-process-write: a record of an aborted transaction returned by a
  read_committed read (aborted read); an input value written by two committed transactions
  (duplicated); an input value below the processor's final committed offset, or in a
  committed transaction, missing from the output (lost).
- consumer group, commit after processing: a member starting a partition below an offset
  commit acknowledged before it was assigned the partition, or acknowledged commits going
  down (offsets backwards; likewise the transactional processor rewinding below the offsets
  of a transaction whose commit was acknowledged); a record below the group's final committed offset that no member
  processed (lost); a processed record the final read holds another value at (inconsistent).
- any final read that could not reach a partition's end (unreadable, e.g. a hanging
  transaction keeps the last stable offset back).

The acks=1 producer is checked like the idempotent one but counted apart: acks=1 may lose
acknowledged writes when a leader fails, so its figures are reported, never anomalies.

Unavailability of a fault: for each partition it concerns (those its node led when it was
injected, else all), the longest stretch from the injection to the next fault without an
acknowledgement of the idempotent producer; the fault's figure is the largest of them.
"""

from __future__ import annotations

import itertools
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from kafkapy.chaos.history import (
    ACKS1,
    GROUP_CONSUMERS,
    GROUP_TXN,
    IDEMPOTENT,
    TOPIC_ACKS1,
    TOPIC_IDEMPOTENT,
    TOPIC_TXN_OUT,
    FaultRecord,
    History,
)

__all__ = [
    "ANOMALY_KINDS",
    "CheckResult",
    "GroupCheck",
    "KindRow",
    "ProducerCheck",
    "TxnCheck",
    "check",
    "check_group",
    "check_producer",
    "check_txn",
    "fault_unavailability",
]

ANOMALY_KINDS = ("lost", "duplicated", "reordered", "aborted_read", "offsets_backwards", "inconsistent", "unreadable")
#: how many examples of each anomaly a result keeps
EXAMPLES = 10


@dataclass
class ProducerCheck:
    workload: str
    sent: int = 0
    acked: int = 0
    failed: int = 0
    lost: list[int] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    reordered: list[int] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)
    unparsable: int = 0


@dataclass
class TxnCheck:
    """`processed`: distinct input values in the output; `stall_s`: the longest time without
    a committed transaction (liveness figures, not anomalies)."""

    committed: int = 0
    aborted: int = 0
    unknown: int = 0
    output_records: int = 0
    aborted_reads: list[str] = field(default_factory=list)
    duplicated: list[int] = field(default_factory=list)
    lost: list[int] = field(default_factory=list)
    processed: int = 0
    stall_s: float = 0.0


@dataclass
class GroupCheck:
    """`distinct`: distinct records processed; `stall_s`: the longest time without an
    acknowledged commit (liveness figures, not anomalies)."""

    commits: int = 0
    processed: int = 0
    distinct: int = 0
    stall_s: float = 0.0
    backwards: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    inconsistent: list[str] = field(default_factory=list)


@dataclass
class KindRow:
    """One row of the report's table: the faults of one kind and the idempotent producer's
    values sent while they were in effect (from injection to the next fault)."""

    kind: str
    faults: int = 0
    acked: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    unavailability_s: list[float] = field(default_factory=list)

    @property
    def p50_s(self) -> float | None:
        return statistics.median(self.unavailability_s) if self.unavailability_s else None

    @property
    def max_s(self) -> float | None:
        return max(self.unavailability_s) if self.unavailability_s else None


@dataclass
class CheckResult:
    idempotent: ProducerCheck
    acks1: ProducerCheck
    txn: TxnCheck
    group: GroupCheck
    unreadable: list[str]
    rows: list[KindRow]
    unavailability: dict[int, float]

    def anomalies(self) -> dict[str, int]:
        """Anomaly counts by kind (the acks=1 producer's figures are not anomalies)."""
        i, t, g = self.idempotent, self.txn, self.group
        return {
            "lost": len(i.lost) + len(t.lost) + len(g.lost),
            "duplicated": len(i.duplicated) + len(t.duplicated),
            "reordered": len(i.reordered),
            "aborted_read": len(t.aborted_reads),
            "offsets_backwards": len(g.backwards),
            "inconsistent": len(i.inconsistent) + len(g.inconsistent),
            "unreadable": len(self.unreadable),
        }

    def total_anomalies(self) -> int:
        return sum(self.anomalies().values())

    def to_json(self) -> dict[str, Any]:
        def producer(p: ProducerCheck) -> dict[str, Any]:
            return {
                "sent": p.sent, "acked": p.acked, "failed": p.failed, "lost": len(p.lost),
                "duplicated": len(p.duplicated), "reordered": len(p.reordered),
                "inconsistent": len(p.inconsistent), "examples": {
                    "lost": p.lost[:EXAMPLES], "duplicated": p.duplicated[:EXAMPLES],
                    "reordered": p.reordered[:EXAMPLES], "inconsistent": p.inconsistent[:EXAMPLES],
                },
            }

        t, g = self.txn, self.group
        return {
            "anomalies": self.anomalies(),
            "total_anomalies": self.total_anomalies(),
            "idempotent": producer(self.idempotent),
            "acks1": producer(self.acks1),
            "txn": {
                "committed": t.committed, "aborted": t.aborted, "unknown": t.unknown,
                "output_records": t.output_records, "processed": t.processed, "stall_s": round(t.stall_s, 3),
                "aborted_reads": len(t.aborted_reads),
                "duplicated": len(t.duplicated), "lost": len(t.lost),
                "examples": {"aborted_reads": t.aborted_reads[:EXAMPLES],
                             "duplicated": t.duplicated[:EXAMPLES], "lost": t.lost[:EXAMPLES]},
            },
            "group": {
                "commits": g.commits, "processed": g.processed, "distinct": g.distinct,
                "stall_s": round(g.stall_s, 3), "offsets_backwards": len(g.backwards),
                "lost": len(g.lost), "inconsistent": len(g.inconsistent),
                "examples": {"offsets_backwards": g.backwards[:EXAMPLES], "lost": g.lost[:EXAMPLES],
                             "inconsistent": g.inconsistent[:EXAMPLES]},
            },
            "unreadable": self.unreadable,
            "kinds": [
                {"kind": r.kind, "faults": r.faults, "acked": r.acked, "lost": r.lost,
                 "duplicated": r.duplicated, "reordered": r.reordered,
                 "unavailability_p50_s": _round(r.p50_s), "unavailability_max_s": _round(r.max_s)}
                for r in self.rows
            ],
            "unavailability_s": {str(k): round(v, 3) for k, v in self.unavailability.items()},
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 3)


def _int(raw: bytes) -> int | None:
    try:
        return int(raw)
    except ValueError:
        return None


def check_producer(history: History, workload: str, topic: str) -> ProducerCheck:
    """Lost, duplicated, reordered and inconsistent values of one producer workload."""
    result = ProducerCheck(workload)
    result.sent = sum(1 for s in history.sends if s.workload == workload)
    acked: dict[int, tuple[int, int]] = {}
    for a in history.acks:
        if a.workload != workload:
            continue
        if a.error is None:
            acked[a.value] = (a.partition, a.offset)
        else:
            result.failed += 1
    result.acked = len(acked)
    where: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for partition, records in sorted(history.reads.get(topic, {}).items()):
        highest = -1
        for offset, raw in records:
            value = _int(raw)
            if value is None:
                result.unparsable += 1
                continue
            first = value not in where
            where[value].append((partition, offset))
            if not first:
                continue
            if value < highest:
                result.reordered.append(value)
            highest = max(highest, value)
    for value, (partition, offset) in sorted(acked.items()):
        seen = where.get(value)
        if not seen:
            result.lost.append(value)
        elif offset >= 0 and (partition, offset) not in seen:
            # (an acknowledgement without an offset - librdkafka's idempotent producer infers
            # a batch was written when a later one is acknowledged - has nothing to compare)
            result.inconsistent.append(f"value {value} acked at {partition}@{offset}, read at {seen}")
    result.duplicated = sorted(v for v, places in where.items() if len(places) > 1)
    return result


def longest_gap(times: list[float], horizon: float) -> float:
    """The longest stretch of [0, horizon] without one of `times` (horizon when empty)."""
    points = [0.0, *sorted(t for t in times if 0.0 <= t <= horizon), horizon]
    return max(b - a for a, b in itertools.pairwise(points))


def check_txn(history: History, horizon: float = 0.0) -> TxnCheck:
    """Aborted reads, duplicates and losses of the read-process-write workload."""
    result = TxnCheck()
    outcome = {t.txn: t.outcome for t in history.txns}
    result.committed = sum(1 for o in outcome.values() if o == "committed")
    result.aborted = sum(1 for o in outcome.values() if o == "aborted")
    result.unknown = sum(1 for o in outcome.values() if o == "unknown")
    written: dict[int, list[int]] = defaultdict(list)
    for partition, records in sorted(history.reads.get(TOPIC_TXN_OUT, {}).items()):
        for offset, raw in records:
            result.output_records += 1
            txn_text, _, value_text = raw.partition(b":")
            txn, value = _int(txn_text), _int(value_text)
            if txn is None or value is None:
                continue
            if outcome.get(txn) == "aborted":
                result.aborted_reads.append(f"{partition}@{offset} value {value} of aborted txn {txn}")
                continue
            written[value].append(txn)
    result.duplicated = sorted(v for v, txns in written.items() if len(set(txns)) > 1)
    should: set[int] = set()
    for t in history.txns:
        if t.outcome == "committed":
            should.update(t.values)
    committed = history.group_committed.get(GROUP_TXN, {})
    for partition, records in history.reads.get(TOPIC_IDEMPOTENT, {}).items():
        end = committed.get(partition, -1)
        for offset, raw in records:
            value = _int(raw)
            if offset < end and value is not None:
                should.add(value)
    result.lost = sorted(should - written.keys())
    result.processed = len(written)
    result.stall_s = longest_gap([t.t for t in history.txns if t.outcome == "committed"], horizon)
    return result


def check_group(history: History, horizon: float = 0.0) -> GroupCheck:
    """Offsets going backwards, skipped and inconsistent records of the consumer group."""
    own = [c for c in history.commits if c.group == GROUP_CONSUMERS]
    result = GroupCheck(commits=len(own), processed=len(history.processed))
    result.distinct = len({(p.partition, p.offset) for p in history.processed})
    result.stall_s = longest_gap([c.t for c in own], horizon)
    events: dict[tuple[str, int], list[tuple[float, int, str, int]]] = defaultdict(list)
    for c in history.commits:
        events[(c.group, c.partition)].append((c.t, 1, c.member, c.offset))
    for r in history.resumes:
        events[(r.group, r.partition)].append((r.t, 0, r.member, r.offset))
    for (group, partition), items in sorted(events.items()):
        highest, by = -1, ""
        where = f"partition {partition}" if group == GROUP_CONSUMERS else f"{group} partition {partition}"
        for t, is_commit, member, offset in sorted(items):
            if offset < highest:
                what = "committed" if is_commit else "resumed at"
                result.backwards.append(f"{where}: {member} {what} {offset} at {t:.3f}s after {by} committed {highest}")
            if is_commit and offset > highest:
                highest, by = offset, member
    log = {
        (partition, offset): _int(raw)
        for partition, records in history.reads.get(TOPIC_IDEMPOTENT, {}).items()
        for offset, raw in records
    }
    seen: set[tuple[int, int]] = set()
    for p in history.processed:
        seen.add((p.partition, p.offset))
        if (p.partition, p.offset) in log and log[(p.partition, p.offset)] != p.value:
            result.inconsistent.append(
                f"{p.member} processed {p.partition}@{p.offset} = {p.value}, log has {log[(p.partition, p.offset)]}"
            )
    for partition, end in sorted(history.group_committed.get(GROUP_CONSUMERS, {}).items()):
        for offset, raw in history.reads.get(TOPIC_IDEMPOTENT, {}).get(partition, []):
            if offset < end and (partition, offset) not in seen:
                result.lost.append(f"{partition}@{offset} value {_int(raw)} below committed {end}, never processed")
    return result


def _fault_windows(faults: list[FaultRecord], horizon: float) -> list[tuple[FaultRecord, float, float]]:
    ran = sorted((f for f in faults if f.skipped is None), key=lambda f: f.injected_at)
    return [
        (f, f.injected_at, ran[i + 1].injected_at if i + 1 < len(ran) else horizon)
        for i, f in enumerate(ran)
    ]


def fault_unavailability(history: History, horizon: float) -> dict[int, float]:
    """Per fault index: the longest stretch without an idempotent acknowledgement on the
    partitions it concerns, from its injection to the next fault (or `horizon`)."""
    times: dict[int, list[float]] = defaultdict(list)
    for a in history.acks:
        if a.workload == IDEMPOTENT and a.error is None:
            times[a.partition].append(a.t)
    for ts in times.values():
        ts.sort()
    result: dict[int, float] = {}
    for fault, start, end in _fault_windows(history.faults, horizon):
        partitions = fault.partitions or list(range(history.partitions))
        worst = 0.0
        for partition in partitions:
            points = [start, *(t for t in times.get(partition, []) if start < t < end)]
            gaps = [b - a for a, b in itertools.pairwise(points)]
            worst = max(worst, max(gaps) if gaps else end - start)
        result[fault.index] = worst
    return result


def _rows(history: History, idem: ProducerCheck, unavailability: dict[int, float], horizon: float) -> list[KindRow]:
    windows = _fault_windows(history.faults, horizon)
    rows: dict[str, KindRow] = {"none": KindRow("none")}
    for fault, _, _ in windows:
        row = rows.setdefault(fault.kind, KindRow(fault.kind))
        row.faults += 1
        row.unavailability_s.append(unavailability[fault.index])
    sent_at = {s.value: s.t for s in history.sends if s.workload == IDEMPOTENT}

    def row_of(value: int) -> KindRow:
        t = sent_at.get(value, -1.0)
        for fault, start, end in windows:
            if start <= t < end:
                return rows[fault.kind]
        return rows["none"]

    acked = {a.value for a in history.acks if a.workload == IDEMPOTENT and a.error is None}
    for value in acked:
        row_of(value).acked += 1
    for value in idem.lost:
        row_of(value).lost += 1
    for value in idem.duplicated:
        row_of(value).duplicated += 1
    for value in idem.reordered:
        row_of(value).reordered += 1
    return list(rows.values())


def check(history: History, horizon: float) -> CheckResult:
    """Every check over a finished run; `horizon` is when the workloads stopped."""
    idem = check_producer(history, IDEMPOTENT, TOPIC_IDEMPOTENT)
    unavailability = fault_unavailability(history, horizon)
    return CheckResult(
        idempotent=idem,
        acks1=check_producer(history, ACKS1, TOPIC_ACKS1),
        txn=check_txn(history, horizon),
        group=check_group(history, horizon),
        unreadable=list(history.read_errors),
        rows=_rows(history, idem, unavailability, horizon),
        unavailability=unavailability,
    )
