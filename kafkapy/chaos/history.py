"""What a chaos run recorded: client operations, faults and the final read of every topic.

The workloads append here from their threads (one lock); the checker reads a finished History
and nothing else, so every anomaly it reports can be tested with a hand-made history. Times
are seconds on the run's monotonic clock (0 = start of the workloads).

Values are integers: each producer workload numbers its messages 0, 1, 2, ... in send order,
and sends value `v` to partition `v % partitions`, so within a partition a higher value was
sent later. The transactional processor writes `"<txn>:<value>"` (the transaction's number
and the input value), which is how the checker tells an aborted transaction's record from a
committed one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "ACKS1",
    "GROUP",
    "GROUP_CONSUMERS",
    "GROUP_TXN",
    "IDEMPOTENT",
    "PROGRESS_KINDS",
    "TOPIC_ACKS1",
    "TOPIC_IDEMPOTENT",
    "TOPIC_TXN_OUT",
    "TXN",
    "Ack",
    "Commit",
    "FaultRecord",
    "History",
    "Processed",
    "Resume",
    "Send",
    "TxnOutcome",
]

#: workload names (the `workload` of Send/Ack, and the report's rows)
IDEMPOTENT = "idempotent"
ACKS1 = "acks1"
TXN = "txn"
GROUP = "group"
#: topics: the idempotent producer's (also the input of the transactional processor and of the
#: consumer group), the acks=1 producer's, and the transactional processor's output
TOPIC_IDEMPOTENT = "chaos-idempotent"
TOPIC_ACKS1 = "chaos-acks1"
TOPIC_TXN_OUT = "chaos-txn-out"
#: consumer groups: the transactional processor's and the commit-after-processing group's
GROUP_TXN = "chaos-txn"
GROUP_CONSUMERS = "chaos-group"


@dataclass(frozen=True)
class Send:
    """A producer handed value `value` for `partition` to its client at `t`."""

    workload: str
    value: int
    partition: int
    t: float


@dataclass(frozen=True)
class Ack:
    """The outcome of one send at `t`: `offset` when acknowledged, else `error` (not acked)."""

    workload: str
    value: int
    partition: int
    t: float
    offset: int = -1
    error: str | None = None


@dataclass(frozen=True)
class TxnOutcome:
    """The end of transaction `txn` of the read-process-write workload: "committed", "aborted"
    or "unknown" (the commit's answer was lost; it may have committed)."""

    txn: int
    outcome: str
    values: tuple[int, ...]
    t: float


@dataclass(frozen=True)
class Commit:
    """A group member's offset commit for `partition` acknowledged at `t` (commit-after-
    processing: everything below `offset` was processed); for `GROUP_TXN`, the offsets a
    committed transaction carried."""

    member: str
    partition: int
    offset: int
    t: float
    group: str = GROUP_CONSUMERS


@dataclass(frozen=True)
class Resume:
    """The first record a group member got from `partition` after being assigned it at `t`:
    where the group's committed offset made it start; for `GROUP_TXN`, the committed offset
    the transactional processor rewound to at `t`."""

    member: str
    partition: int
    offset: int
    t: float
    group: str = GROUP_CONSUMERS


@dataclass(frozen=True)
class Processed:
    """A group member processed the record at (`partition`, `offset`) holding `value`."""

    member: str
    partition: int
    offset: int
    value: int


@dataclass
class FaultRecord:
    """One fault as it ran: when it was injected and healed, and when the cluster was whole
    again; `skipped` gives the reason a fault could not run here (it then counts nowhere)."""

    index: int
    kind: str
    nodes: list[int]
    partitions: list[int]
    injected_at: float
    healed_at: float = 0.0
    recovered_at: float = 0.0
    detail: str = ""
    skipped: str | None = None
    #: per workload (`PROGRESS_KINDS`), seconds from the heal to its first progress after it;
    #: None: none before the runner gave up waiting (see runner.PROGRESS_TIMEOUT_S)
    resumed: dict[str, float | None] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index, "kind": self.kind, "nodes": self.nodes,
            "partitions": self.partitions, "injected_at": round(self.injected_at, 3),
            "healed_at": round(self.healed_at, 3), "recovered_at": round(self.recovered_at, 3),
            "resumed_s": {k: None if v is None else round(v, 3) for k, v in self.resumed.items()},
            "detail": self.detail, "skipped": self.skipped,
        }


@dataclass
class History:
    """Everything one run recorded. `reads[topic][partition]` is the final read: (offset, raw
    value) in offset order; `group_committed[group][partition]` the group's committed offsets
    after the run; `read_errors` whatever kept a final read from reaching a partition's end."""

    partitions: int = 3
    sends: list[Send] = field(default_factory=list)
    acks: list[Ack] = field(default_factory=list)
    txns: list[TxnOutcome] = field(default_factory=list)
    commits: list[Commit] = field(default_factory=list)
    resumes: list[Resume] = field(default_factory=list)
    processed: list[Processed] = field(default_factory=list)
    faults: list[FaultRecord] = field(default_factory=list)
    reads: dict[str, dict[int, list[tuple[int, bytes]]]] = field(default_factory=dict)
    group_committed: dict[str, dict[int, int]] = field(default_factory=dict)
    read_errors: list[str] = field(default_factory=list)
    client_errors: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, event: Send | Ack | TxnOutcome | Commit | Resume | Processed) -> None:
        with self._lock:
            if isinstance(event, Send):
                self.sends.append(event)
            elif isinstance(event, Ack):
                self.acks.append(event)
            elif isinstance(event, TxnOutcome):
                self.txns.append(event)
            elif isinstance(event, Commit):
                self.commits.append(event)
            elif isinstance(event, Resume):
                self.resumes.append(event)
            else:
                self.processed.append(event)

    def client_error(self, workload: str, error: object) -> None:
        """Count a client error by workload and text (reported, not an anomaly by itself)."""
        key = f"{workload}: {str(error)[:120]}"
        with self._lock:
            self.client_errors[key] = self.client_errors.get(key, 0) + 1

    def progress_since(self, t: float) -> dict[str, float | None]:
        """Seconds from `t` to each workload's first progress at or after it (None: none yet):
        "acks" - an acknowledged idempotent value on every partition; "txn" - a committed
        transaction; "group" - an acknowledged commit of the consumer group. Events are
        recorded in time order, so only the ones since `t` are looked at."""
        firsts: dict[int, float] = {}
        with self._lock:
            for a in _since(self.acks, t):
                if a.workload == IDEMPOTENT and a.error is None:
                    firsts.setdefault(a.partition, a.t)
            txn = [o.t for o in _since(self.txns, t) if o.outcome == "committed"]
            group = [c.t for c in _since(self.commits, t) if c.group == GROUP_CONSUMERS]
        acks = max(firsts.values()) if len(firsts) == self.partitions else None
        return {
            "acks": None if acks is None else acks - t,
            "txn": min(txn) - t if txn else None,
            "group": min(group) - t if group else None,
        }

    def set_read(self, topic: str, records: Mapping[int, list[tuple[int, bytes]]]) -> None:
        with self._lock:
            self.reads[topic] = {p: list(v) for p, v in records.items()}

    def dump(self, path: Path) -> None:
        """Every event as one JSON line (`{"event": "Send", ...}`), in recording order per kind,
        and the final reads - what a reader of an anomaly needs besides the node logs."""
        with self._lock, path.open("w", encoding="utf-8") as f:
            for events in (self.sends, self.acks, self.txns, self.commits, self.resumes, self.processed):
                for e in events:
                    f.write(json.dumps({"event": type(e).__name__, **asdict(e)}) + "\n")
            for fault in self.faults:
                f.write(json.dumps({"event": "Fault", **fault.to_json()}) + "\n")
            for topic, partitions in self.reads.items():
                for partition, records in partitions.items():
                    values = [[o, v.decode("utf-8", "replace")] for o, v in records]
                    f.write(json.dumps({"event": "Read", "topic": topic, "partition": partition, "records": values}) + "\n")
            f.write(json.dumps({"event": "GroupCommitted", "groups": self.group_committed}) + "\n")


#: the workloads whose progress the runner awaits after each fault (`History.progress_since`)
PROGRESS_KINDS = ("acks", "txn", "group")

_E = TypeVar("_E", Ack, TxnOutcome, Commit)


def _since(events: list[_E], t: float) -> list[_E]:
    """The events recorded at or after `t`, oldest first (the list is in recording order)."""
    i = len(events)
    while i > 0 and events[i - 1].t >= t:
        i -= 1
    return events[i:]
