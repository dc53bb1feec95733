"""What a test session with kafkapy's pytest fixtures costs: 100 tests, each on a fresh topic.

Generates a test file of `--tests` (100) tests; each asks for `kafka_topic` (a new topic made
with CreateTopics, deleted after the test), produces one message with confluent-kafka and reads
it back (assign + poll, no group). Runs pytest on it in a subprocess, wall clock from start to
exit, for each setting:

- `thread/session`: one broker in a thread of the test process for the whole session (default)
- `subprocess/session`: one `kafkapy serve` subprocess for the session
- `thread/function`: a fresh broker per test
- `topic only`: thread/session with tests that only ask for `kafka_topic` (the fixture's own
  cost: CreateTopics, wait for the leader, DeleteTopics)
- `baseline`: the same file with the Kafka work removed (pytest's own start-up and collection)

Settings alternate within each of `--runs` rounds; printed figures are the median and the
spread (min-max) per setting, and per test after the baseline is taken off. JSON goes to
perf/results/pytest_plugin_bench.json.

Run: .venv/bin/python perf/pytest_plugin_bench.py [--tests 100] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RESULTS = Path(__file__).parent / "results" / "pytest_plugin_bench.json"

TEST_FILE = '''
import confluent_kafka
import pytest


@pytest.mark.parametrize("i", range({tests}))
def test_fresh_topic(i, kafka_broker, kafka_topic):
    producer = confluent_kafka.Producer({{"bootstrap.servers": kafka_broker}})
    producer.produce(kafka_topic, value=b"m%d" % i)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer({{"bootstrap.servers": kafka_broker, "group.id": "bench",
                                         "enable.auto.commit": False}})
    consumer.assign([confluent_kafka.TopicPartition(kafka_topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    try:
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                assert message.value() == b"m%d" % i
                return
        raise AssertionError("no message")
    finally:
        consumer.close()
'''

TOPIC_ONLY_FILE = '''
import pytest


@pytest.mark.parametrize("i", range({tests}))
def test_fresh_topic(i, kafka_topic):
    assert kafka_topic
'''

BASELINE_FILE = '''
import pytest


@pytest.mark.parametrize("i", range({tests}))
def test_fresh_topic(i):
    assert i >= 0
'''

SETTINGS = {
    "baseline": [],
    "topic only": ["--kafka-broker-mode=thread", "--kafka-broker-scope=session"],
    "thread/session": ["--kafka-broker-mode=thread", "--kafka-broker-scope=session"],
    "subprocess/session": ["--kafka-broker-mode=subprocess", "--kafka-broker-scope=session"],
    "thread/function": ["--kafka-broker-mode=thread", "--kafka-broker-scope=function"],
}


def run_once(workdir: Path, setting: str, tests: int) -> float:
    test_file = workdir / f"test_{setting.replace('/', '_').replace(' ', '_')}.py"
    source = {"baseline": BASELINE_FILE, "topic only": TOPIC_ONLY_FILE}.get(setting, TEST_FILE)
    test_file.write_text(source.format(tests=tests))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore::DeprecationWarning",
           str(test_file), *SETTINGS[setting]]
    start = time.monotonic()
    done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, check=False)
    elapsed = time.monotonic() - start
    if done.returncode != 0 or f"{tests} passed" not in done.stdout:
        raise SystemExit(f"{setting}: pytest failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="kafkapy-pytest-bench-") as tmp:
        for _ in range(args.runs):
            for setting in SETTINGS:
                samples[setting].append(run_once(Path(tmp), setting, args.tests))
    baseline = statistics.median(samples["baseline"])
    figures = {}
    print(f"{args.tests} tests, each on a fresh topic (produce + read back one message); {args.runs} runs")
    print(f"{'setting':<20} {'median s':>9} {'min-max s':>13} {'per test ms (minus baseline)':>30}")
    for setting, values in samples.items():
        median = statistics.median(values)
        per_test_ms = None if setting == "baseline" else (median - baseline) / args.tests * 1000
        figures[setting] = {"median_s": median, "min_s": min(values), "max_s": max(values), "samples_s": values,
                            "per_test_ms_minus_baseline": per_test_ms}
        per = "" if per_test_ms is None else f"{per_test_ms:.0f}"
        print(f"{setting:<20} {median:>9.2f} {min(values):>6.2f}-{max(values):<6.2f} {per:>30}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "tests": args.tests, "runs": args.runs, "python": platform.python_version(),
        "machine": platform.machine(), "figures": figures,
    }, indent=2))
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
