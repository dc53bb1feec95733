"""A real `kafkapy serve` subprocess on a free port, and `kafkapy ...` run as a user runs it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

READY = re.compile(r"kafkapy ready: listening on (127\.0\.0\.1):(\d+)")
START_TIMEOUT_S = 30


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def kafkapy(
    *args: str, bootstrap: str | None = None, stdin: str | bytes | None = None, timeout: float = 60,
    env: dict[str, str] | None = None,
) -> Result:
    """Run `python -m kafkapy ARGS` (with --bootstrap-server when given) and collect its output."""
    cmd = [sys.executable, "-m", "kafkapy", *args]
    if bootstrap is not None:
        cmd += ["--bootstrap-server", bootstrap]
    data = stdin.encode() if isinstance(stdin, str) else stdin
    proc = subprocess.run(
        cmd, input=data, capture_output=True, timeout=timeout,
        env={**os.environ, "KAFKAPY_PROFILE": os.devnull, **(env or {})},
    )
    return Result(proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"))


@contextlib.contextmanager
def broker(*overrides: str) -> Iterator[str]:
    """An in-memory `kafkapy serve` subprocess on a free port (overrides: KEY=VALUE); its address."""
    flags = [arg for item in overrides for arg in ("--override", item)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "serve", "--memory", "--listeners", "PLAINTEXT://127.0.0.1:0",
         "--log-level", "WARNING", "--override", "group.initial.rebalance.delay.ms=0", *flags],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT_S
    address = None
    for line in proc.stderr:
        m = READY.search(line)
        if m:
            address = f"{m.group(1)}:{m.group(2)}"
            break
        if time.monotonic() > deadline:
            break
    if address is None:
        proc.kill()
        proc.wait(5)
        raise AssertionError("the broker did not become ready")
    # keep draining stderr so the broker never blocks on a full pipe
    threading.Thread(target=proc.stderr.read, daemon=True).start()
    try:
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="module")
def bootstrap() -> Iterator[str]:
    """One in-memory broker per test module (auto-creation on, 1 partition by default)."""
    with broker() as address:
        yield address
