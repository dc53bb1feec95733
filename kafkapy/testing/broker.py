"""Single test brokers: one in a thread of the test process, or one as a subprocess.

Why both: a broker in a thread starts fastest (no interpreter start-up, ~0.1 s) and its
`FaultInjector` is a plain object the test calls directly; a subprocess is what users run
(`python -m kafkapy serve`), survives a test that blocks its own thread, and can be paused
(SIGSTOP) to look like a hung broker - its faults go through the control socket
(`kafkapy.testing.faults.FaultClient`). Both listen on 127.0.0.1 on a free port, keep data in a
temporary directory (`--memory`) unless given one, and have fault injection on.

Resource handling: `stop()` (also the context manager's exit) ends the broker - a clean
shutdown, then SIGKILL for a subprocess that does not exit in time - and removes the temporary
directory (with the log, unless `log_path` puts it elsewhere). A thread broker that fails to start raises its exception from `start()`.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Self

import trio

from kafkapy.broker.faults import FaultInjector
from kafkapy.testing.faults import FaultClient
from kafkapy.testing.process import ServeOutput, serve_command, spawn_serve

__all__ = ["BrokerStartError", "SubprocessBroker", "TestBroker", "ThreadBroker"]

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
FAULT_SOCKET = "faults.sock"


class BrokerStartError(RuntimeError):
    """The broker failed or printed no ready line in time (the message says what it said)."""


class ThreadBroker:
    """A `Broker` + `Server` in a trio loop on a thread of its own."""

    def __init__(self, *, data_dir: Path | None = None, overrides: Mapping[str, str] | None = None) -> None:
        self.data_dir = data_dir
        self.overrides = dict(overrides or {})
        self.faults = FaultInjector()
        self.host = ""
        self.port = 0
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._trio_token: trio.lowlevel.TrioToken | None = None
        self._shutdown: Callable[[], None] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> Self:
        self._thread = threading.Thread(target=self._main, name="kafkapy-test-broker", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise BrokerStartError(f"in-process broker not ready within {timeout_s:.0f} s")
        if self._error is not None:
            raise BrokerStartError(f"in-process broker failed: {self._error!r}") from self._error
        return self

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as e:
            self._error = e
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        from kafkapy.broker.config import BrokerConfig
        from kafkapy.server.app import Server
        from kafkapy.server.broker import Broker

        settings = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "advertised.listeners": "",
            **({"log.dirs": str(self.data_dir)} if self.data_dir is not None else {}),
            **self.overrides,
        }
        broker = Broker(BrokerConfig(settings), memory=self.data_dir is None, fault_injector=self.faults)
        server = Server(broker)
        async with trio.open_nursery() as nursery:
            bound = await nursery.start(server.run)
            self.host, self.port = bound[0].host, bound[0].port
            self._trio_token = trio.lowlevel.current_trio_token()
            self._shutdown = server.request_shutdown
            self._ready.set()
            await server.stopped.wait()

    def stop(self) -> None:
        thread = self._thread
        if thread is None or not thread.is_alive():
            return
        if self._trio_token is not None and self._shutdown is not None:
            with contextlib.suppress(trio.RunFinishedError):  # it stopped on its own meanwhile
                trio.from_thread.run_sync(self._shutdown, trio_token=self._trio_token)
        thread.join(STOP_TIMEOUT_S)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


class SubprocessBroker:
    """`python -m kafkapy serve` on a free port, with its fault control socket."""

    def __init__(
        self,
        *,
        data_dir: Path | None = None,
        overrides: Mapping[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.overrides = dict(overrides or {})
        # a short directory of its own: a Unix socket path must stay under ~100 bytes
        self._work = Path(tempfile.mkdtemp(prefix="kafkapy-broker-"))
        self.log_path = log_path or self._work / "broker.log"
        self.output = ServeOutput(self.log_path)
        self.faults = FaultClient(self._work / FAULT_SOCKET)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return self.output.host

    @property
    def port(self) -> int:
        return self.output.port

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self) -> list[str]:
        cmd = serve_command("--listeners", "PLAINTEXT://127.0.0.1:0")
        cmd += ["--memory"] if self.data_dir is None else ["--data-dir", str(self.data_dir)]
        settings = {"kafkapy.test.fault.control.socket": str(self.faults.path), **self.overrides}
        for key, value in settings.items():
            cmd += ["--override", f"{key}={value}"]
        return cmd

    def start(self, timeout_s: float = READY_TIMEOUT_S) -> Self:
        self.proc = spawn_serve(self.command())
        self.output.follow(self.proc)
        deadline = time.monotonic() + timeout_s
        while not self.output.ready.wait(0.05):
            if self.proc.poll() is not None:
                self._join()
                raise BrokerStartError(f"broker exited with code {self.proc.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerStartError(f"broker printed no ready line in {timeout_s:.0f} s:\n{self.log_tail()}")
        return self

    def log_tail(self, lines: int = 40) -> str:
        return self.output.tail(lines)

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP: the broker keeps its connections but answers nothing (a hung broker)."""
        if self.proc is not None and self.is_running():
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.proc is not None and self.is_running():
            self.proc.send_signal(signal.SIGCONT)

    def stop(self) -> None:
        """SIGTERM (after SIGCONT, in case it is paused), SIGKILL after the timeout."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT_S)
        self._join()
        shutil.rmtree(self._work, ignore_errors=True)

    def _join(self) -> None:
        self.output.join()

    def __enter__(self) -> Self:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


#: what `kafka_broker_instance` hands out
TestBroker = ThreadBroker | SubprocessBroker
