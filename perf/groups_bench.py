"""Consumer-group benchmarks against a real `kafkapy serve` subprocess.

Figures (printed, and written to perf/results/groups_bench.json):

- `commits_per_s`: OffsetCommit round trips per second from one client (kafkapy's own codec over
  one socket, one request at a time), committing 1 partition and 10 partitions per request.
- `first_record_s`: a lone confluent-kafka consumer, from `subscribe()` to its first record
  (fresh group; `group.initial.rebalance.delay.ms` 0 as in `kafkapy serve`).
- `takeover_s`: a 6-partition group of 3 consumer processes; one is SIGKILLed; time until the
  survivors consume messages from every partition the dead member owned. Dominated by the
  session timeout (`session.timeout.ms`, reported alongside), as in Kafka.

Run: .venv/bin/python perf/groups_bench.py [--commits N] [--session-ms MS]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kafkapy.cli.groups import KafkaWireClient
from kafkapy.protocol import ApiKey, ErrorCode
from kafkapy.protocol.messages import CreateTopicsRequest, OffsetCommitRequest

RESULTS = Path(__file__).parent / "results" / "groups_bench.json"
READY = re.compile(r"kafkapy ready: listening on [^\s:]+:(\d+)")


def start_broker(log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    log = log_path.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
         "--memory"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        m = READY.search(log_path.read_text(errors="replace"))
        if m:
            return proc, f"127.0.0.1:{m.group(1)}"
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("broker did not start:\n" + log_path.read_text(errors="replace"))


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with KafkaWireClient(bootstrap) as client:
        r = client.call(ApiKey.CREATE_TOPICS, CreateTopicsRequest(
            topics=[CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=1)],
            timeout_ms=10_000), cap=5)
        assert r.topics[0].error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS)


def bench_commits(bootstrap: str, n: int, partitions: int) -> float:
    topic = f"commit-bench-{partitions}"
    create_topic(bootstrap, topic, partitions)
    with KafkaWireClient(bootstrap) as client:
        version = client.version(ApiKey.OFFSET_COMMIT, 8)

        def request(i: int) -> OffsetCommitRequest:
            return OffsetCommitRequest(
                group_id=f"bench-{partitions}", generation_id_or_member_epoch=-1, member_id="",
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(
                        partition_index=p, committed_offset=i, committed_metadata="")
                    for p in range(partitions)])])

        for i in range(50):  # warm-up
            client.send(ApiKey.OFFSET_COMMIT, version, request(i))
        start = time.perf_counter()
        for i in range(n):
            r = client.send(ApiKey.OFFSET_COMMIT, version, request(i))
            assert r.topics[0].partitions[0].error_code == ErrorCode.NONE
        return n / (time.perf_counter() - start)


def bench_first_record(bootstrap: str) -> float:
    from confluent_kafka import Consumer, Producer

    topic = "first-record"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"hello")
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "first-record",
                         "auto.offset.reset": "earliest"})
    try:
        start = time.perf_counter()
        consumer.subscribe([topic])
        deadline = start + 30
        while time.perf_counter() < deadline:
            msg = consumer.poll(0.01)
            if msg is not None and msg.error() is None:
                return time.perf_counter() - start
        raise SystemExit("no record within 30 s")
    finally:
        consumer.close()


def worker(bootstrap: str, topic: str, out_path: str, session_ms: int) -> None:
    """A group member: logs `A partitions` on assignment and `M partition time` per record."""
    from confluent_kafka import Consumer

    out = open(out_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - lives until killed

    def on_assign(_: object, parts: list[object]) -> None:
        out.write("A " + ",".join(str(p.partition) for p in parts) + "\n")  # type: ignore[attr-defined]

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "takeover",
                         "auto.offset.reset": "latest", "session.timeout.ms": session_ms,
                         "heartbeat.interval.ms": 500})
    consumer.subscribe([topic], on_assign=on_assign)
    while True:
        msg = consumer.poll(0.05)
        if msg is not None and msg.error() is None:
            out.write(f"M {msg.partition()} {time.time():.6f}\n")


def bench_takeover(bootstrap: str, session_ms: int, tmp: Path) -> float:
    from confluent_kafka import Producer

    topic = "takeover"
    create_topic(bootstrap, topic, 6)
    logs = [tmp / f"member{i}.log" for i in range(3)]
    procs = [subprocess.Popen([sys.executable, __file__, "worker", bootstrap, topic, str(log),
                               str(session_ms)], stdin=subprocess.DEVNULL)
             for log in logs]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})

    def last_assignment(log: Path) -> set[int]:
        lines = [x for x in log.read_text().splitlines() if x.startswith("A ")] if log.exists() else []
        return {int(p) for p in lines[-1][2:].split(",") if p} if lines else set()

    try:
        deadline = time.monotonic() + 60
        while not all(len(last_assignment(log)) == 2 for log in logs):
            if time.monotonic() > deadline:
                raise SystemExit("group did not form")
            time.sleep(0.1)
        time.sleep(1.0)  # let everyone reach its fetch position
        victim = last_assignment(logs[0])
        procs[0].send_signal(signal.SIGKILL)
        killed_at = time.time()
        procs[0].wait()
        resumed: dict[int, float] = {}
        deadline = time.monotonic() + 5 * session_ms / 1000 + 30
        while len(resumed) < len(victim):
            if time.monotonic() > deadline:
                raise SystemExit(f"survivors did not take over partitions {victim - set(resumed)}")
            for p in victim:
                producer.produce(topic, b"x", partition=p)
            producer.poll(0)
            time.sleep(0.05)
            for log in logs[1:]:
                for line in log.read_text().splitlines():
                    if line.startswith("M "):
                        _, part, ts = line.split()
                        if int(part) in victim and float(ts) > killed_at:
                            resumed.setdefault(int(part), float(ts))
        return max(resumed.values()) - killed_at
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=3000)
    parser.add_argument("--session-ms", type=int, default=6000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="groups-bench-") as tmp_name:
        tmp = Path(tmp_name)
        proc, bootstrap = start_broker(tmp / "broker.log")
        try:
            first_record_cold = bench_first_record(bootstrap)
            c1 = bench_commits(bootstrap, args.commits, 1)
            c10 = bench_commits(bootstrap, args.commits, 10)
            takeover = bench_takeover(bootstrap, args.session_ms, tmp)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
    results = {
        "commits_per_s_1_partition": round(c1, 1),
        "commits_per_s_10_partitions": round(c10, 1),
        "first_record_s": round(first_record_cold, 3),
        "takeover_s": round(takeover, 3),
        "session_timeout_ms": args.session_ms,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
    }
    for key, value in results.items():
        print(f"{key:32} {value}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
