"""How long a `kafkapy` command takes to start, as a shell user waits for it.

Each command runs as a fresh `python -m kafkapy ...` subprocess (what the `kafkapy` script does),
timed from spawn to exit; the figures are the median and the spread (min, p90, max) of `--runs`
runs. The commands:

- `python -c pass`: the interpreter's own start, the floor under every other figure;
- `import kafkapy.protocol.messages`: the protocol package alone (its API modules load lazily);
- `kafkapy --help`, `kafkapy --version`, `kafkapy topics --help`: no broker involved;
- `kafkapy serve` to ready: spawn to its `kafkapy ready` line, on an empty data dir (issue 13's
  "ready < 1 s"; the process is then stopped);
- `kafkapy serve --memory` to ready: the same without a data dir (issue 26's "start to ready <
  300 ms"); for both serve commands the child's CPU time (user + sys from /proc, Linux only) at
  its ready line is reported too, as it is less sensitive to a loaded machine than wall time;
- `kafkapy topics list` and `kafkapy topics list --json` against a broker (a `kafkapy serve
  --memory` this script starts, or `--bootstrap-server`);
- `kafkapy topics list` against a port nobody listens on and against one that accepts but never
  answers (the issue's "unreachable broker: a clear message in under 10 s"; exit status 1).

A/B in one run: `--tree LABEL=DIR` (repeatable) runs the same commands with `PYTHONPATH=DIR`,
e.g. a checkout of an older commit (`git archive REF | tar -x -C DIR`); runs of all trees are
interleaved, so machine load falls on each alike. Without `--tree` only the installed kafkapy runs.
`--only SUBSTRING` (repeatable) keeps the commands whose name contains one of them; the
`python -c pass` floor always runs, so every figure has its floor from the same run.

Each tree's `kafkapy` is byte-compiled first (`compileall`), as an installed package is: with
PYTHONDONTWRITEBYTECODE set (the test sandbox sets it) nothing would ever be cached and every
start would compile every module again.

    .venv/bin/python perf/cli_bench.py [--runs 15] [--tree base=/tmp/base] [--only serve] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

READY = re.compile(r"kafkapy ready: listening on (127\.0\.0\.1):(\d+)")

# name, arguments, which server (None, "broker", "refused", "silent", "ready"), expected exit
# status; "ready" times `kafkapy serve` from spawn to its ready line
COMMANDS: list[tuple[str, list[str], str | None, int]] = [
    ("python -c pass", ["-c", "pass"], None, 0),
    ("import protocol.messages", ["-c", "import kafkapy.protocol.messages"], None, 0),
    ("kafkapy --help", ["-m", "kafkapy", "--help"], None, 0),
    ("kafkapy --version", ["-m", "kafkapy", "--version"], None, 0),
    ("kafkapy topics --help", ["-m", "kafkapy", "topics", "--help"], None, 0),
    ("kafkapy topics list", ["-m", "kafkapy", "topics", "list"], "broker", 0),
    ("kafkapy topics list --json", ["-m", "kafkapy", "topics", "list", "--json"], "broker", 0),
    ("topics list, port refused", ["-m", "kafkapy", "topics", "list"], "refused", 1),
    ("topics list, port silent", ["-m", "kafkapy", "topics", "list"], "silent", 1),
    ("kafkapy serve to ready", ["-m", "kafkapy", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0"],
     "ready", 0),
    ("kafkapy serve --memory to ready",
     ["-m", "kafkapy", "serve", "--memory", "--listeners", "PLAINTEXT://127.0.0.1:0"], "ready", 0),
]
FLOOR = "python -c pass"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


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


def run_once(args: list[str], env: dict[str, str], cwd: str, expected: int) -> float:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], env=env, cwd=cwd, capture_output=True, timeout=60)
    elapsed = time.perf_counter() - start
    if proc.returncode != expected:
        raise SystemExit(f"{args} failed ({proc.returncode}): {proc.stderr.decode(errors='replace')}")
    return elapsed


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a live process has used so far (Linux /proc), else None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def serve_to_ready(args: list[str], env: dict[str, str], cwd: str) -> tuple[float, float | None]:
    """Seconds from spawning `kafkapy serve` to its ready line, and the child's CPU seconds then.

    Without `--memory` the broker gets a new empty data dir.
    """
    with tempfile.TemporaryDirectory() as data_dir:
        extra = [] if "--memory" in args else ["--data-dir", data_dir]
        start = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, *args, *extra], env=env, cwd=cwd,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        assert proc.stderr is not None
        try:
            for line in proc.stderr:
                if READY.search(line):
                    return time.perf_counter() - start, cpu_seconds(proc.pid)
            raise SystemExit(f"kafkapy serve exited ({proc.wait()}) without its ready line")
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stderr.close()


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
    parser.add_argument("--only", action="append", default=[], metavar="SUBSTRING",
                        help="run only the commands whose name contains this (repeatable)")
    parser.add_argument("--json", type=Path, default=Path("perf/results/cli_bench.json"))
    args = parser.parse_args()
    commands = [c for c in COMMANDS
                if not args.only or c[0] == FLOOR or any(o in c[0] for o in args.only)]

    base_env = {**os.environ, "KAFKAPY_PROFILE": os.devnull}
    base_env.pop("KAFKAPY_BOOTSTRAP_SERVERS", None)
    trees: list[tuple[str, dict[str, str]]] = [("this", base_env)]
    for item in args.tree:
        label, _, directory = item.partition("=")
        trees.append((label, {**base_env, "PYTHONPATH": str(Path(directory).resolve())}))
    # an empty working directory: `python -m` puts it first on sys.path, where a source tree
    # would shadow the --tree under test
    neutral = tempfile.TemporaryDirectory()
    for _label, env in trees:
        subprocess.run([sys.executable, "-c", "import compileall, kafkapy, os; compileall.compile_dir("
                        "os.path.dirname(kafkapy.__file__), quiet=1)"], env=env, cwd=neutral.name, check=True)

    broker = None
    bootstrap = args.bootstrap_server
    if bootstrap is None and any(c[2] == "broker" for c in commands):
        broker, bootstrap = start_broker()
    samples: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    refused, silent = socket.socket(), socket.socket()
    refused.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # the kernel accepts; nobody ever answers
    servers = {"broker": bootstrap or "", "refused": f"127.0.0.1:{refused.getsockname()[1]}",
               "silent": f"127.0.0.1:{silent.getsockname()[1]}"}
    try:
        for _ in range(args.runs):
            for name, cmd, server, expected in commands:
                full = [*cmd, "--bootstrap-server", servers[server]] if server in servers else cmd
                for label, env in trees:
                    if server == "ready":
                        elapsed, cpu_s = serve_to_ready(full, env, neutral.name)
                        if cpu_s is not None:
                            cpu.setdefault((label, name), []).append(cpu_s)
                    else:
                        elapsed = run_once(full, env, neutral.name, expected)
                    samples.setdefault((label, name), []).append(elapsed)
    finally:
        refused.close()
        silent.close()
        neutral.cleanup()
        if broker is not None:
            broker.terminate()
            broker.wait(15)

    results = []
    print(f"{'tree':<8} {'command':<32} {'median ms':>10} {'min':>8} {'p90':>8} {'max':>8}   ({args.runs} runs)")
    for name, *_ in commands:
        for label, _ in trees:
            s = summary(samples[(label, name)])
            results.append({"tree": label, "command": name, "runs": args.runs, **s})
            print(f"{label:<8} {name:<32} {s['median_ms']:>10} {s['min_ms']:>8} {s['p90_ms']:>8} {s['max_ms']:>8}")
            if (label, name) in cpu:
                c = summary(cpu[(label, name)])
                results.append({"tree": label, "command": f"{name} (child CPU)", "runs": args.runs, **c})
                print(f"{label:<8} {'  child CPU user+sys':<32} {c['median_ms']:>10} {c['min_ms']:>8} "
                      f"{c['p90_ms']:>8} {c['max_ms']:>8}")
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"load average after the run: {load}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"results": results, "cpus": os.cpu_count(), "loadavg": load}, indent=2))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
