"""`python -m kafkapy serve` as a child process: spawning it and following its output.

Why one module: the subprocess test broker (`kafkapy.testing.broker`), the cluster harness
(`kafkapy.testing.cluster`) and the real-client compat fixtures all run the command users run and
must agree on what "ready" means - the one line `kafkapy ready: listening on HOST:PORT` the CLI
prints once the node serves clients (docs/architecture.md, "Contract: server process").

Resource handling: `ServeOutput.follow()` starts a daemon thread that copies the child's output
(stdout and stderr together) to a log file until the child closes it; `join()` waits for that
thread, which ends once the child has exited. Stopping the child is the caller's job.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

__all__ = ["READY_RE", "ServeOutput", "serve_command", "spawn_serve"]

#: the ready line; the first address is the first broker listener's
READY_RE = re.compile(r"kafkapy ready: listening on (?P<host>[^\s:,]+|\[[^\]]+\]):(?P<port>\d+)")


def serve_command(*args: str) -> list[str]:
    """`python -m kafkapy serve ARGS` with this interpreter (the test run's virtualenv)."""
    return [sys.executable, "-m", "kafkapy", "serve", *args]


def spawn_serve(command: Sequence[str]) -> subprocess.Popen[bytes]:
    """Start `command` with its output on one pipe and unbuffered, so log lines arrive as written."""
    return subprocess.Popen(
        list(command),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=dict(os.environ, PYTHONUNBUFFERED="1"),
    )


class ServeOutput:
    """The log of one serve process (across restarts: the file is appended to) and its readiness.

    `ready` is set, and `host`/`port` filled in, when the current run prints its ready line;
    `note()` writes a marker line (e.g. the command of a restart) into the log."""

    def __init__(self, log_path: Path) -> None:
        self.log_path = log_path
        self.ready = threading.Event()
        self.host = ""
        self.port = 0
        self._reader: threading.Thread | None = None

    def note(self, line: str) -> None:
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(line.rstrip("\n") + "\n")

    def follow(self, proc: subprocess.Popen[bytes]) -> None:
        """Start copying `proc`'s output; readiness is cleared until this run says it is ready."""
        self.ready.clear()
        self.host, self.port = "", 0
        self._reader = threading.Thread(target=self._copy, args=(proc,), daemon=True)
        self._reader.start()

    def _copy(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        with self.log_path.open("a", encoding="utf-8", errors="replace") as log:
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace")
                log.write(line)
                log.flush()
                match = None if self.ready.is_set() else READY_RE.search(line)
                if match:
                    self.host, self.port = match["host"].strip("[]"), int(match["port"])
                    self.ready.set()

    def join(self, timeout_s: float = 2.0) -> None:
        if self._reader is not None:
            self._reader.join(timeout_s)

    def text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 40) -> str:
        return "".join(self.text().splitlines(keepends=True)[-lines:])
