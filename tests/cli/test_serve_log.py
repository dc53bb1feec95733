"""What `kafkapy serve --memory` logs at INFO before it is ready: a few lines a person reads
(the logs opened, the metadata this broker serves), not the Raft and registration steps a single
node takes at every start - those are at DEBUG."""

from __future__ import annotations

import queue
import threading
import time

from kafkapy.testing.process import READY_RE, serve_command, spawn_serve

#: opened logs, the metadata summary, and room for one warning a machine may add (a low open
#: files limit); the ready line itself is printed, not logged
MAX_INFO_BEFORE_READY = 4


def _lines_until_ready(timeout_s: float = 60.0) -> list[str]:
    proc = spawn_serve(serve_command("--memory", "--listeners", "PLAINTEXT://127.0.0.1:0"))
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            lines.put(raw.decode(errors="replace").rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                assert proc.poll() is None, "\n".join(seen)
                continue
            seen.append(line)
            if READY_RE.search(line):
                return seen
        raise AssertionError("no ready line:\n" + "\n".join(seen))
    finally:
        proc.terminate()
        proc.wait(15)


def test_serve_memory_says_little_before_ready() -> None:
    lines = _lines_until_ready()
    before = lines[:-1]
    infos = [line for line in before if " INFO " in line]
    assert len(infos) <= MAX_INFO_BEFORE_READY, "\n".join(before)
    assert not any(word in line for line in infos for word in ("raft", "held from the data plane", "registered", "unfenced"))
    assert any("metadata at offset" in line for line in infos), "\n".join(before)
