"""History.dump: the run's events as JSON lines kept next to the node logs."""

from __future__ import annotations

import json
from pathlib import Path

from kafkapy.chaos.history import TOPIC_IDEMPOTENT, Ack, Commit, FaultRecord, History, Send


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
