"""History.dump: the run's events as JSON lines kept next to the node logs."""

from __future__ import annotations

import json
from pathlib import Path

from kafkapy.chaos.history import (
    GROUP_TXN,
    TOPIC_IDEMPOTENT,
    Ack,
    Commit,
    FaultRecord,
    History,
    Send,
    TxnOutcome,
)


def test_dump_writes_every_event_and_the_reads(tmp_path: Path) -> None:
    h = History()
    h.add(Send("idempotent", 0, 0, 0.1))
    h.add(Ack("idempotent", 0, 0, 0.2, offset=0))
    h.add(Commit("group-a", 0, 1, 0.3))
    h.faults.append(FaultRecord(0, "kill", [1], [0], injected_at=0.15))
    h.set_read(TOPIC_IDEMPOTENT, {0: [(0, b"0")]})
    h.group_committed = {"chaos-group": {0: 1}}
    path = tmp_path / "history.jsonl"
    h.dump(path)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line["event"] for line in lines] == ["Send", "Ack", "Commit", "Fault", "Read", "GroupCommitted"]
    assert lines[1]["offset"] == 0
    assert lines[4] == {"event": "Read", "topic": TOPIC_IDEMPOTENT, "partition": 0, "records": [[0, "0"]]}
    assert lines[5]["groups"] == {"chaos-group": {"0": 1}}


def test_progress_since_a_heal_is_each_workloads_first_progress_after_it() -> None:
    """What the runner waits for after each fault: acks on every partition (the slowest
    partition counts), a committed transaction, a commit of the consumer group (not the
    transactional processor's offsets); progress before the heal does not count."""
    h = History(partitions=2)
    h.add(Ack("idempotent", 0, 0, 1.0, offset=0))
    h.add(TxnOutcome(1, "committed", (0,), 1.5))
    h.add(Commit("group-a", 0, 1, 1.8))
    assert h.progress_since(2.0) == {"acks": None, "txn": None, "group": None}
    h.add(Ack("idempotent", 1, 1, 2.5, offset=0))
    h.add(Ack("idempotent", 2, 0, 2.75, error="timed out"))
    h.add(Ack("acks1", 3, 0, 2.8, offset=0))
    h.add(TxnOutcome(2, "aborted", (1,), 2.9))
    h.add(Commit("txn", 0, 2, 3.0, group=GROUP_TXN))
    assert h.progress_since(2.0) == {"acks": None, "txn": None, "group": None}
    h.add(Ack("idempotent", 4, 0, 3.5, offset=1))
    h.add(Ack("idempotent", 5, 1, 3.75, offset=1))
    h.add(Ack("idempotent", 6, 0, 3.8, offset=2))
    h.add(TxnOutcome(3, "committed", (2,), 4.0))
    h.add(Commit("group-b", 1, 5, 4.25))
    h.add(Commit("group-a", 0, 6, 5.0))
    assert h.progress_since(2.0) == {"acks": 1.5, "txn": 2.0, "group": 2.25}
