"""Fixtures that run a real kafkapy broker as a subprocess for the real-client compat tests.

Why a subprocess and not an in-process broker: these tests check exactly what a user gets from
`python -m kafkapy serve` - the CLI, the readiness line, signal handling and the wire protocol as
unmodified clients see it. Nothing is mocked.

Process contract (docs/architecture.md, "Contract: server process"): the broker prints one line
containing `kafkapy ready: listening on HOST:PORT` on stderr when it accepts connections, and stops
cleanly on SIGTERM within about two seconds.

Resource handling: every `BrokerProcess` is stopped by the fixture that started it (SIGTERM, then
SIGKILL as a fallback so a hung broker never outlives the test run). Its output (stdout and
stderr) is copied to a log file by a reader thread; the tail of that log is attached to the
report of any failing test that used the broker.
"""

from __future__ import annotations

import os
import re
import signal
import struct
import subprocess
import time
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest

from kafkapy.testing.process import ServeOutput, serve_command, spawn_serve

READY_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 5.0
LOG_TAIL_LINES = 60


class BrokerStartError(RuntimeError):
    """The broker exited or stayed silent instead of printing its readiness line."""


class BrokerProcess:
    """One `python -m kafkapy serve` subprocess on a free port (port 0).

    `start()` blocks until the readiness line appears (or raises `BrokerStartError` with the log);
    `stop()` sends SIGTERM and reports whether the broker exited within `STOP_TIMEOUT_S`;
    `kill()` is the crash simulation (SIGKILL, no flush, no clean-shutdown marker).
    """

    def __init__(
        self,
        log_path: Path,
        *,
        data_dir: Path | None,
        extra_args: list[str] | None = None,
        dir_from_config: bool = False,
    ) -> None:
        self.log_path = log_path
        self.output = ServeOutput(log_path)
        self.data_dir = data_dir
        self.extra_args = list(extra_args or [])
        # True: pass neither --data-dir nor --memory, so log.dirs comes from --config.
        self.dir_from_config = dir_from_config
        self.proc: subprocess.Popen[bytes] | None = None
        self.startup_s = 0.0

    @property
    def host(self) -> str:
        return self.output.host

    @property
    def port(self) -> int:
        return self.output.port

    @property
    def bootstrap(self) -> str:
        """`host:port` for a client's bootstrap servers setting."""
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = serve_command("--listeners", "PLAINTEXT://127.0.0.1:0")
        if self.dir_from_config:
            pass
        elif self.data_dir is None:
            cmd.append("--memory")
        else:
            cmd += ["--data-dir", str(self.data_dir)]
        return cmd + self.extra_args

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        self.output.note(f"--- start: {' '.join(self.command())}")
        started = time.monotonic()
        self.proc = spawn_serve(self.command())
        self.output.follow(self.proc)
        deadline = started + timeout_s
        while not self.output.ready.wait(0.05):
            if self.proc.poll() is not None:
                self.output.join()
                raise BrokerStartError(
                    f"broker exited with code {self.proc.returncode} before it was ready:\n"
                    + self.log_tail()
                )
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerStartError(
                    f"broker printed no readiness line within {timeout_s:.0f}s:\n" + self.log_tail()
                )
        self.startup_s = time.monotonic() - started

    def log_text(self) -> str:
        return self.output.text()

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return self.output.tail(lines)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> float | None:
        """SIGTERM; returns seconds to exit, or None if SIGKILL had to finish the job."""
        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None
        finally:
            self.output.join()
        return time.monotonic() - started

    def kill(self) -> None:
        """SIGKILL: the crash the persistence tests simulate."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.output.join()


class BrokerFactory:
    """Starts brokers for one test (or module) and guarantees they are all stopped."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.brokers: list[BrokerProcess] = []

    def start(
        self,
        *,
        memory: bool = False,
        data_dir: Path | None = None,
        extra_args: list[str] | None = None,
        dir_from_config: bool = False,
    ) -> BrokerProcess:
        index = len(self.brokers)
        if not memory and data_dir is None and not dir_from_config:
            data_dir = self.base / f"data{index}"
            data_dir.mkdir(parents=True, exist_ok=True)
        broker = BrokerProcess(
            self.base / f"broker{index}.log",
            data_dir=None if memory else data_dir,
            extra_args=extra_args,
            dir_from_config=dir_from_config,
        )
        self.brokers.append(broker)
        broker.start()
        return broker

    def close(self) -> list[str]:
        """Stop every broker; returns a description of each one that ignored SIGTERM."""
        problems = []
        for broker in self.brokers:
            if broker.is_running() and broker.stop() is None:
                problems.append(
                    f"broker on {broker.bootstrap} ignored SIGTERM for {STOP_TIMEOUT_S}s"
                )
        return problems


def _stop_all(factory: BrokerFactory) -> None:
    problems = factory.close()
    assert not problems, "; ".join(problems)


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[BrokerFactory]:
    """Function-scoped: for tests that kill, restart or reconfigure their own broker."""
    factory = BrokerFactory(tmp_path)
    try:
        yield factory
    finally:
        _stop_all(factory)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Module-scoped broker with a data dir: one startup shared by a client's whole test file."""
    factory = BrokerFactory(tmp_path_factory.mktemp("broker"))
    try:
        yield factory.start()
    finally:
        _stop_all(factory)


@pytest.fixture(autouse=True)
def _broker_still_up(request: pytest.FixtureRequest) -> Iterator[None]:
    """A client test must never crash the broker: check it after every test that used one."""
    yield
    if "broker" in request.fixturenames:
        shared: BrokerProcess = request.getfixturevalue("broker")
        assert shared.is_running(), (
            f"broker process died during the test (exit code {shared.proc and shared.proc.returncode}):\n"
            + shared.log_tail()
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Attach the broker log tail to failing reports: the first thing anyone debugging asks for."""
    report = yield
    if report.failed and not getattr(report, "wasxfail", None):
        funcargs = getattr(item, "funcargs", {})
        brokers: list[BrokerProcess] = []
        if isinstance(funcargs.get("broker"), BrokerProcess):
            brokers.append(funcargs["broker"])
        factory = funcargs.get("broker_factory")
        if isinstance(factory, BrokerFactory):
            brokers.extend(factory.brokers)
        for broker in brokers:
            report.sections.append((f"broker log {broker.log_path.name} (tail)", broker.log_tail()))
    return report


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique to this test (legal Kafka characters, short enough for any client)."""
    return unique_topic(request.node.name)


def unique_topic(prefix: str) -> str:
    """For tests that need several topics."""
    safe = re.sub(r"[^a-zA-Z0-9._-]+", "-", prefix).strip("-")[:60]
    return f"{safe}-{uuid.uuid4().hex[:8]}"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def stored_codecs(broker: BrokerProcess, topic: str, partition: int = 0) -> list[int]:
    """Compression codec (attributes & 7) of every batch the broker stored for a partition.

    Why read the segment files: a client that silently falls back to uncompressed batches still
    round-trips every message, so only the stored bytes show whether a codec was exercised.
    Parsed by hand from Kafka's batch layout (baseOffset i64, batchLength i32, then attributes
    at byte 21), not with kafkapy's own record code.
    """
    assert broker.data_dir is not None, "needs a broker with a data dir"
    codecs: list[int] = []
    for segment in sorted((broker.data_dir / f"{topic}-{partition}").glob("*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 23 <= len(data):
            (batch_length,) = struct.unpack_from(">i", data, pos + 8)
            if batch_length <= 0:
                break
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            codecs.append(attributes & 0x7)
            pos += 12 + batch_length
    return codecs


CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
