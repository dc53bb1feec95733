"""A real `kafkapy serve` subprocess on a free port, and `kafkapy ...` run as a user runs it.

A command that outlives its timeout fails the test with what it was doing (`communicate`): its
process state (T: stopped by a signal, D: waiting on the disk, R: running or starved, S:
sleeping), its kernel wait channel, its children, the machine's load and its Python stack
(py-spy), so a hang seen once under CI load can be told from a slow machine. Every command gets
stdin from /dev/null unless the test feeds it: none may wait on the test run's terminal.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AnyStr

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
    proc = run_command(cmd, input=data, timeout=timeout,
                       env={**os.environ, "KAFKAPY_PROFILE": os.devnull, **(env or {})})
    return Result(proc.returncode, proc.stdout, proc.stderr)


def run_command(
    cmd: Sequence[str], *, input: bytes | None = None, timeout: float = 30, env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(cmd, capture_output=True)` with stdin from /dev/null unless `input` is
    given, output decoded; a child still running after `timeout` fails the test (`communicate`)."""
    proc = subprocess.Popen(
        list(cmd), stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
    )
    out, err = communicate(proc, input, timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(errors="replace"),
                                       err.decode(errors="replace"))


def communicate(proc: subprocess.Popen[AnyStr], input: AnyStr | None = None, timeout: float = 30
                ) -> tuple[AnyStr, AnyStr]:
    """`proc.communicate(input, timeout)`; a child still running after `timeout` is described
    (`hang_report`), killed, and the test fails with the description and what it printed."""
    try:
        return proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        report = hang_report(proc.pid)
        proc.kill()
        printed: tuple[AnyStr, AnyStr] | str
        try:
            printed = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            printed = "(nothing: a grandchild still holds its pipes)"
        args = proc.args if isinstance(proc.args, (list, tuple)) else [proc.args]
        pytest.fail(f"`{shlex.join(map(str, args))}` still ran after {timeout:.0f} s; it was killed.\n"
                    f"{report}\nits stdout and stderr: {printed!r}")


def hang_report(pid: int) -> str:
    """What process `pid` is doing, read from /proc and py-spy (`--nonblocking`: it also reads
    a stopped process, and never pauses a running one)."""
    proc_dir = Path(f"/proc/{pid}")
    lines = [f"pid {pid}:"]
    try:
        status = (proc_dir / "status").read_text().splitlines()
        lines += [line for line in status if line.startswith(("State:", "Threads:"))]
        lines.append(f"kernel wait channel: {(proc_dir / 'wchan').read_text() or '-'}")
        children = " ".join((task / "children").read_text().strip() for task in (proc_dir / "task").iterdir())
        lines.append(f"children: {children.strip() or 'none'}")
        lines.append(f"load average: {Path('/proc/loadavg').read_text().strip()}")
    except OSError as e:
        lines.append(f"/proc: {e}")
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    try:
        dump = subprocess.run([spy, "dump", "--nonblocking", "--pid", str(pid)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=15)
        lines.append(f"py-spy dump (exit {dump.returncode}):\n{dump.stdout}{dump.stderr}")
    except (OSError, subprocess.TimeoutExpired) as e:
        lines.append(f"py-spy dump failed: {e!r}")
    return "\n".join(lines)


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
