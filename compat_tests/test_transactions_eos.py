"""Exactly-once consume-transform-produce with librdkafka: the processor (a separate OS process,
compat_tests/txn_processor.py) is SIGKILLed at random points several times and restarted; the
output then holds every input exactly once, in order, for a read_committed reader, and the
group's committed offset is N.

This is the promise transactions exist for: the output records and the consumed offsets commit
or abort together, and a restarted processor fences its dead predecessor."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from .conftest import BrokerFactory, unique_topic
from .test_transactions import SMALL, read_all

pytestmark = pytest.mark.timeout(240)

N = 300
KILLS = 3
PROCESSOR = Path(__file__).with_name("txn_processor.py")


def test_processor_killed_repeatedly_outputs_exactly_once(broker_factory: BrokerFactory) -> None:
    broker = broker_factory.start(extra_args=SMALL)
    source, sink = unique_topic("eos-in"), unique_topic("eos-out")
    group, tid = unique_topic("eos-group"), unique_topic("eos-tid")
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(N):
        p.produce(source, value=b"rec-%04d" % i, partition=0)
    assert p.flush(30) == 0
    cmd = [sys.executable, str(PROCESSOR), broker.bootstrap, source, sink, group, tid, str(N)]
    rng = random.Random()
    kills = 0
    for _ in range(KILLS):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(timeout=rng.uniform(0.8, 2.5))
        except subprocess.TimeoutExpired:
            proc.kill()  # SIGKILL: no abort, no close, possibly mid-transaction
            kills += 1
        proc.wait(timeout=10)
    final = subprocess.run(cmd, timeout=120, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert final.returncode == 0, final.stderr.decode(errors="replace")[-2000:]
    assert kills >= 1, "the processor finished before any kill; nothing was tested"
    out = read_all(broker.bootstrap, sink, "read_committed", expect=N)
    assert out == [b"REC-%04d" % i for i in range(N)]
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "isolation.level": "read_committed"})
    try:
        committed = c.committed([TopicPartition(source, 0)], timeout=15)
    finally:
        c.close()
    assert committed[0].offset == N
    # the killed incarnations' aborted output is still in the log, only hidden
    assert len(read_all(broker.bootstrap, sink, "read_uncommitted", timeout_s=5)) >= N
    time.sleep(0)  # (keeps the loop above bounded; nothing to wait for here)
