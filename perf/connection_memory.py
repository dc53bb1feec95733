"""Broker memory held for connections that sent (almost) nothing: a real `kafkapy serve`'s RSS
before and after N idle connections, then after M connections each sending a bare size prefix
announcing a 100 MiB frame.

Why: a connection's memory should follow what its peer has sent (kafkapy.server.frames); an idle
connection or a size prefix alone must not cost the broker a receive buffer or the announced
frame. `--vs ROOT` runs the same steps on another source tree (e.g. a `git worktree` of an older
commit) right after, for an A/B in one run.

    perf/connection_memory.py                                  # this tree
    perf/connection_memory.py --vs /tmp/old-tree               # and another, for A/B
    perf/connection_memory.py --idle 500 --announce 5 --json out.json

Prints MiB added at each step and writes JSON (`--json`, default perf/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
READY_RE = re.compile(r"kafkapy ready: listening on (?P<host>[^\s:]+):(?P<port>\d+)")
ANNOUNCED_BYTES = 100 * 1024 * 1024


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def launch(root: Path, data_dir: str) -> tuple[subprocess.Popen[bytes], int]:
    """`python -m kafkapy serve` from `root`; its process and port once it printed ready."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", "--listeners", "PLAINTEXT://127.0.0.1:0",
         "--data-dir", data_dir],
        cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode(errors="replace")
        if not line:
            break
        match = READY_RE.search(line)
        if match:
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # drain the log
            return proc, int(match["port"])
    proc.kill()
    raise SystemExit(f"kafkapy from {root} did not print its ready line")


def settle(pid: int, fds_at_least: int) -> float:
    """RSS once the broker holds the expected sockets and has had a moment to react."""
    deadline = time.monotonic() + 30
    while open_fds(pid) < fds_at_least and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(2.0)
    return rss_mib(pid)


def measure(root: Path, idle: int, announce: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as data_dir:
        proc, port = launch(root, data_dir)
        sockets: list[socket.socket] = []
        try:
            time.sleep(2.0)
            base_fds = open_fds(proc.pid)
            before = rss_mib(proc.pid)
            for _ in range(idle):
                sockets.append(socket.create_connection(("127.0.0.1", port)))
            after_idle = settle(proc.pid, base_fds + idle)
            for _ in range(announce):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(struct.pack(">i", ANNOUNCED_BYTES))
                sockets.append(sock)
            after_announce = settle(proc.pid, base_fds + idle + announce)
        finally:
            for sock in sockets:
                sock.close()
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {
        "root": str(root),
        "idle_connections": idle,
        "announcing_connections": announce,
        "rss_before_mib": round(before, 1),
        "idle_added_mib": round(after_idle - before, 1),
        "announce_added_mib": round(after_announce - after_idle, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=int, default=500, help="idle connections (sending nothing)")
    parser.add_argument("--announce", type=int, default=5, help="connections sending a bare 100 MiB prefix")
    parser.add_argument("--vs", type=Path, help="another source tree, measured after this one")
    parser.add_argument("--json", type=Path, default=ROOT / "perf" / "results" / "connection_memory.json")
    args = parser.parse_args()
    results = [measure(root, args.idle, args.announce) for root in [ROOT, *([args.vs] if args.vs else [])]]
    print(f"{'tree':<40} {'RSS before':>10} {'+idle':>8} {'+announce':>10}  (MiB)")
    for r in results:
        print(
            f"{r['root']:<40} {r['rss_before_mib']:>10.1f} {r['idle_added_mib']:>8.1f}"
            f" {r['announce_added_mib']:>10.1f}"
        )
    print(f"idle: {args.idle} connections; announce: {args.announce} connections x 100 MiB size prefix")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
