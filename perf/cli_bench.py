"""How long a `kafkapy` command takes to start, as a shell user waits for it.

Each command runs as a fresh `python -m kafkapy ...` subprocess (what the `kafkapy` script does),
timed from spawn to exit; the figures are the median and the spread (min, p90, max) of `--runs`
runs. The commands:

- `python -c pass`: the interpreter's own start, the floor under every other figure;
- `kafkapy --help`, `kafkapy --version`, `kafkapy topics --help`: no broker involved;
- `kafkapy topics list` and `kafkapy topics list --json` against a broker (a `kafkapy serve
  --memory` this script starts, or `--bootstrap-server`).

A/B in one run: `--tree LABEL=DIR` (repeatable) runs the same commands with `PYTHONPATH=DIR`,
e.g. a checkout of an older commit (`git archive REF | tar -x -C DIR`); runs of all trees are
interleaved, so machine load falls on each alike. Without `--tree` only the installed kafkapy runs.

    .venv/bin/python perf/cli_bench.py [--runs 15] [--tree base=/tmp/base] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

READY = re.compile(r"kafkapy ready: listening on (127\.0\.0\.1):(\d+)")

COMMANDS: list[tuple[str, list[str], bool]] = [
    ("python -c pass", ["-c", "pass"], False),
    ("kafkapy --help", ["-m", "kafkapy", "--help"], False),
    ("kafkapy --version", ["-m", "kafkapy", "--version"], False),
    ("kafkapy topics --help", ["-m", "kafkapy", "topics", "--help"], False),
    ("kafkapy topics list", ["-m", "kafkapy", "topics", "list"], True),
    ("kafkapy topics list --json", ["-m", "kafkapy", "topics", "list", "--json"], True),
]


def start_broker() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", "--memory", "--listeners", "PLAINTEXT://127.0.0.1:0",
         "--log-level", "WARNING"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    for line in proc.stderr:
        m = READY.search(line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()
            return proc, f"{m.group(1)}:{m.group(2)}"
    proc.kill()
    raise SystemExit("the broker did not start")


def run_once(args: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, timeout=60)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{args} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    return elapsed


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "min_ms": round(ordered[0] * 1000, 1),
        "p90_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))] * 1000, 1),
        "max_ms": round(ordered[-1] * 1000, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--bootstrap-server", help="a running broker (default: start one)")
    parser.add_argument("--tree", action="append", default=[], metavar="LABEL=DIR",
                        help="also time the kafkapy source in DIR (PYTHONPATH), e.g. an older commit")
    parser.add_argument("--json", type=Path, default=Path("perf/results/cli_bench.json"))
    args = parser.parse_args()

    base_env = {**os.environ, "KAFKAPY_PROFILE": os.devnull}
    base_env.pop("KAFKAPY_BOOTSTRAP_SERVERS", None)
    trees: list[tuple[str, dict[str, str]]] = [("this", base_env)]
    for item in args.tree:
        label, _, directory = item.partition("=")
        trees.append((label, {**base_env, "PYTHONPATH": str(Path(directory).resolve())}))

    broker = None
    bootstrap = args.bootstrap_server
    if bootstrap is None:
        broker, bootstrap = start_broker()
    samples: dict[tuple[str, str], list[float]] = {}
    # an empty working directory: `python -m` puts it first on sys.path, where a source tree
    # would shadow the --tree under test
    neutral = tempfile.TemporaryDirectory()
    try:
        for _ in range(args.runs):
            for name, cmd, needs_broker in COMMANDS:
                full = [*cmd, "--bootstrap-server", bootstrap] if needs_broker else cmd
                for label, env in trees:
                    samples.setdefault((label, name), []).append(run_once(full, env, neutral.name))
    finally:
        neutral.cleanup()
        if broker is not None:
            broker.terminate()
            broker.wait(15)

    results = []
    print(f"{'tree':<8} {'command':<28} {'median ms':>10} {'min':>8} {'p90':>8} {'max':>8}   ({args.runs} runs)")
    for name, _, _ in COMMANDS:
        for label, _ in trees:
            s = summary(samples[(label, name)])
            results.append({"tree": label, "command": name, "runs": args.runs, **s})
            print(f"{label:<8} {name:<28} {s['median_ms']:>10} {s['min_ms']:>8} {s['p90_ms']:>8} {s['max_ms']:>8}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"results": results, "cpus": os.cpu_count()}, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
