"""A consumer process dies (SIGKILL): its partitions move to the survivors, who resume from the
last committed offsets. Commit-after-processing loses nothing and redelivers only what the dead
member processed but had not committed (at-least-once); commit-before-processing never
redelivers but loses what was committed and not yet processed (at-most-once).

The consumers are separate OS processes running this file as a script (`worker`), so the kill
is a real crash: no LeaveGroup, no final commit. To make the trade visible deterministically, the
victim stalls at a chosen message exactly between processing and committing (or the reverse)
and is killed there.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from compat_tests.conftest import BrokerProcess

pytestmark = pytest.mark.timeout(150)

PARTITIONS = 6
PER_PARTITION = 30
SESSION_MS = 6000
DEADLINE_S = 60.0


# -- the worker process --------------------------------------------------------------------


def worker(bootstrap: str, topic: str, group: str, mode: str, out_path: str, stall_at: int) -> None:
    """Consume forever, logging to `out_path`: `A parts`, `P value`, `C value`, `STALL value`."""
    from confluent_kafka import Consumer, TopicPartition

    out = open(out_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives until killed

    def on_assign(consumer: Consumer, partitions: list[TopicPartition]) -> None:
        out.write("A " + ",".join(str(p.partition) for p in partitions) + "\n")

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": SESSION_MS,
        "heartbeat.interval.ms": 500,
    })
    consumer.subscribe([topic], on_assign=on_assign)
    processed = 0
    while True:
        msg = consumer.poll(0.1)
        if msg is None or msg.error() is not None:
            continue
        value = (msg.value() or b"").decode()
        processed += 1
        stall = processed == stall_at
        if mode == "after":  # at-least-once: process, then commit
            out.write(f"P {value}\n")
            if stall:
                out.write(f"STALL {value}\n")
                time.sleep(3600)
            consumer.commit(message=msg, asynchronous=False)
            out.write(f"C {value}\n")
        else:  # at-most-once: commit, then process
            consumer.commit(message=msg, asynchronous=False)
            out.write(f"C {value}\n")
            if stall:
                out.write(f"STALL {value}\n")
                time.sleep(3600)
            out.write(f"P {value}\n")


# -- the test ------------------------------------------------------------------------------


def _lines(path: Path, prefix: str) -> list[str]:
    if not path.exists():
        return []
    return [
        line[len(prefix) + 1 :]
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith(prefix + " ")
    ]


def _wait(what: str, done: object) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not done():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@pytest.mark.parametrize("mode", ["after", "before"])
def test_sigkill_moves_partitions_to_survivors(
    broker: BrokerProcess, topic_name: str, tmp_path: Path, mode: str
) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # keep: futures need the handle
    admin.create_topics(
        [NewTopic(topic_name, num_partitions=PARTITIONS, replication_factor=1)]
    )[topic_name].result(timeout=15)
    group = f"crash-{mode}-{topic_name}"
    logs = [tmp_path / f"worker{i}.log" for i in range(3)]
    procs = [
        subprocess.Popen(
            [sys.executable, __file__, broker.bootstrap, topic_name, group, mode, str(log),
             "5" if i == 0 else "-1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        for i, log in enumerate(logs)
    ]
    try:
        def assigned() -> bool:
            last = [(_lines(log, "A") or [""])[-1] for log in logs]
            return all(len(a.split(",")) == 2 for a in last if a) and all(last)

        _wait("3 workers with 2 partitions each", assigned)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        for p in range(PARTITIONS):
            for i in range(PER_PARTITION):
                producer.produce(topic_name, f"{p}-{i}".encode(), partition=p)
        assert producer.flush(15) == 0
        everything = {f"{p}-{i}" for p in range(PARTITIONS) for i in range(PER_PARTITION)}

        _wait("the victim to stall", lambda: bool(_lines(logs[0], "STALL")))
        procs[0].send_signal(signal.SIGKILL)
        procs[0].wait(10)
        [stalled] = _lines(logs[0], "STALL")

        def all_handled() -> bool:
            processed = {v for log in logs for v in _lines(log, "P")}
            expected = everything if mode == "after" else everything - {stalled}
            return processed >= expected

        _wait("the survivors to consume the victim's partitions", all_handled)
        time.sleep(0.5)  # anything still to come (a wrong redelivery) shows up now
        processed = [v for log in logs for v in _lines(log, "P")]
        duplicates = {v for v in processed if processed.count(v) > 1}
        victim_committed = set(_lines(logs[0], "C"))
        victim_partitions = {int(v.split("-")[0]) for v in _lines(logs[0], "P")}
        survivors_took = {int(v.split("-")[0]) for log in logs[1:] for v in _lines(log, "P")}
        assert victim_partitions <= survivors_took  # its partitions moved to the survivors
        if mode == "after":
            assert set(processed) == everything  # nothing lost
            assert duplicates == {stalled}  # only the processed-but-uncommitted message again
            assert not duplicates & victim_committed  # no committed message redelivered
        else:
            assert not duplicates  # never twice...
            assert everything - set(processed) == {stalled}  # ...but committed-unprocessed lost
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(10)


if __name__ == "__main__":
    worker(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
    os._exit(0)
