"""The containers as users run them: the Dockerfile's image and docker-compose.yml's single node
and 3-node cluster under a real Docker engine, produce/consume through kcat from the host, with
both compose implementations (docker-compose 1.29 and compose v2); and docker-compose.tiered.yml's
object store beside the single node, with tiered storage's segments landing in its bucket.

Run through `make docker-test` (README "Docker"): it starts the engine, builds the images
(`KAFKAPY_IMAGE`, default kafkapy:local; `KAFKAPY_OBJECT_STORE_IMAGE`, default
kafkapy-object-store:local) from a host wheelhouse and finds or installs compose v2
(`KAFKAPY_COMPOSE_V2`: the command to run it). Every compose project has a unique name and
free host ports, and is taken down with its volumes (`down -v`) whatever the test's outcome.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkapy.storage.remote.s3 import S3Config, S3ObjectStore
from kafkapy.testing.admin import KafkaAdmin
from kafkapy.testing.cluster import free_ports

ROOT = Path(__file__).resolve().parents[1]
IMAGE = os.environ.get("KAFKAPY_IMAGE", "kafkapy:local")
OBJECT_STORE_IMAGE = os.environ.get("KAFKAPY_OBJECT_STORE_IMAGE", "kafkapy-object-store:local")
TIERED_FILES = ("docker-compose.yml", "docker-compose.tiered.yml")
HEALTHY_TIMEOUT_S = 180.0
COMMAND_TIMEOUT_S = 300.0
MESSAGES = 20


def _missing(what: str) -> None:
    reason = f"{what} (make docker-test provides it)"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def _compose_v2() -> list[str] | None:
    given = os.environ.get("KAFKAPY_COMPOSE_V2")
    if given:
        return shlex.split(given)
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, check=False)
    return ["docker", "compose"] if probe.returncode == 0 else None


@pytest.fixture(scope="module", autouse=True)
def _engine_and_image() -> None:
    if shutil.which("docker") is None or shutil.which("kcat") is None:
        _missing("docker and kcat are needed")
    if subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0:
        _missing("no Docker engine answers")
    if not _image_built(IMAGE):
        _missing(f"image {IMAGE} is not built")


def _image_built(image: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True, check=False).returncode == 0


@pytest.fixture(params=["v1", "v2"])
def compose_cmd(request: pytest.FixtureRequest) -> list[str]:
    if request.param == "v1":
        if shutil.which("docker-compose") is None:
            _missing("docker-compose 1.29 is not installed")
        return ["docker-compose"]
    v2 = _compose_v2()
    if v2 is None:
        _missing("compose v2 is not installed")
    assert v2 is not None
    return v2


class Project:
    """One compose project: a unique name, its compose files (`use`), its environment (ports),
    and helpers around it."""

    def __init__(self, cmd: list[str], env: dict[str, str]) -> None:
        self.cmd = cmd
        self.files: tuple[str, ...] = ("docker-compose.yml",)
        self.name = f"kafkapytest{uuid.uuid4().hex[:10]}"
        self.env = {**os.environ, "KAFKAPY_IMAGE": IMAGE, "KAFKAPY_OBJECT_STORE_IMAGE": OBJECT_STORE_IMAGE, **env}

    def use(self, *files: str) -> None:
        """Run every later command on these files (`-f` each, later files overlaying earlier)."""
        self.files = files

    def _base(self) -> list[str]:
        return [*self.cmd, *(a for f in self.files for a in ("-f", f)), "-p", self.name, "--profile", "cluster"]

    def compose(self, *args: str, timeout_s: float = COMMAND_TIMEOUT_S) -> str:
        full = [*self._base(), *args]
        done = subprocess.run(full, cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=timeout_s, check=False)
        if done.returncode != 0:
            raise AssertionError(f"{shlex.join(full)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}\n{self.logs()}")
        return done.stdout

    def container(self, service: str) -> str:
        found = self.compose("ps", "-q", service).split()
        assert len(found) == 1, f"{service}: containers {found}"
        return found[0]

    def inspect(self, service: str) -> dict[str, object]:
        out = _run(["docker", "inspect", self.container(service)])
        data: dict[str, object] = json.loads(out)[0]
        return data

    def health(self, service: str) -> str:
        state = self.inspect(service)["State"]
        assert isinstance(state, dict)
        return str(state.get("Health", {}).get("Status", "none"))

    def wait_healthy(self, *services: str) -> None:
        deadline = time.monotonic() + HEALTHY_TIMEOUT_S
        for service in services:
            while (status := self.health(service)) != "healthy":
                if status == "unhealthy" or time.monotonic() > deadline:
                    raise AssertionError(f"{service} is {status}\n{self.logs()}")
                time.sleep(1)

    def logs(self) -> str:
        done = subprocess.run([*self._base(), "logs", "--tail", "40"],
                              cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=60, check=False)
        return done.stdout[-6000:]

    def down(self) -> None:
        subprocess.run([*self._base(), "down", "-v", "--remove-orphans"],
                       cwd=ROOT, env=self.env, capture_output=True, timeout=COMMAND_TIMEOUT_S, check=False)


def _run(cmd: list[str], stdin: str | None = None, timeout_s: float = 120) -> str:
    done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False)
    if done.returncode != 0:
        raise AssertionError(f"{shlex.join(cmd)} exited {done.returncode}: {done.stderr}")
    return done.stdout


def _produce(bootstrap: str, topic: str, values: list[str], *settings: str) -> None:
    """kcat produce, one value a line; `settings` are librdkafka properties (`-X` each)."""
    extra = [a for setting in settings for a in ("-X", setting)]
    _run(["kcat", "-b", bootstrap, "-t", topic, "-P", "-X", "acks=all", *extra], stdin="".join(v + "\n" for v in values))


def _consume(bootstrap: str, topic: str, count: int) -> list[str]:
    out = _run(["kcat", "-b", bootstrap, "-t", topic, "-C", "-o", "beginning", "-c", str(count), "-e", "-q"])
    return out.splitlines()


@pytest.fixture
def project(compose_cmd: list[str]) -> Iterator[Project]:
    ports = free_ports(6)
    env = {
        "KAFKAPY_PORT": str(ports[0]),
        "KAFKAPY_HTTP_PORT": str(ports[1]),
        "KAFKAPY_CLUSTER_PORT_1": str(ports[2]),
        "KAFKAPY_CLUSTER_PORT_2": str(ports[3]),
        "KAFKAPY_CLUSTER_PORT_3": str(ports[4]),
        "KAFKAPY_S3_PORT": str(ports[5]),
    }
    proj = Project(compose_cmd, env)
    try:
        yield proj
    finally:
        proj.down()


def test_single_node_serves_kcat_keeps_data_and_publishes_on_loopback(project: Project) -> None:
    project.compose("up", "-d", "--no-build", "kafkapy")
    project.wait_healthy("kafkapy")
    bootstrap = f"127.0.0.1:{project.env['KAFKAPY_PORT']}"
    cid = project.container("kafkapy")
    published = [line.split(" -> ")[1] for line in _run(["docker", "port", cid]).splitlines()]
    assert len(published) == 2, published
    assert all(a.startswith("127.0.0.1:") for a in published), published
    assert _run(["docker", "exec", cid, "id", "-u"]).strip() == "10001"  # not root
    ready = urllib.request.urlopen(f"http://127.0.0.1:{project.env['KAFKAPY_HTTP_PORT']}/readyz", timeout=10)
    assert ready.status == 200

    values = [f"single-{i}" for i in range(MESSAGES)]
    _produce(bootstrap, "docker-single", values)
    assert _consume(bootstrap, "docker-single", MESSAGES) == values

    project.compose("restart", "kafkapy")  # same container, same /data volume
    project.wait_healthy("kafkapy")
    assert _consume(bootstrap, "docker-single", MESSAGES) == values


def test_cluster_comes_up_healthy_and_serves_an_rf3_topic(project: Project) -> None:
    # kafkapy-cluster depends on the three nodes' health: `up` returns once all are healthy
    project.compose("up", "-d", "--no-build", "kafkapy-cluster")
    assert [project.health(f"kafkapy-{i}") for i in (1, 2, 3)] == ["healthy"] * 3
    ports = [project.env[f"KAFKAPY_CLUSTER_PORT_{i}"] for i in (1, 2, 3)]
    bootstrap = ",".join(f"127.0.0.1:{p}" for p in ports)
    KafkaAdmin(bootstrap).create_topic("rf3", partitions=3, replication_factor=3)
    metadata = json.loads(_run(["kcat", "-b", bootstrap, "-L", "-J", "-t", "rf3"]))
    assert sorted(b["id"] for b in metadata["brokers"]) == [1, 2, 3]
    (topic,) = metadata["topics"]
    assert len(topic["partitions"]) == 3
    for partition in topic["partitions"]:
        assert sorted(r["id"] for r in partition["replicas"]) == [1, 2, 3]
        assert sorted(r["id"] for r in partition["isrs"]) == [1, 2, 3]

    values = [f"rf3-{i}" for i in range(MESSAGES)]
    _produce(f"127.0.0.1:{ports[0]}", "rf3", values)
    assert sorted(_consume(f"127.0.0.1:{ports[2]}", "rf3", MESSAGES)) == sorted(values)


TIERED_SEGMENT_BYTES = 16 * 1024
TIERED_MESSAGES = 200  # ~1 KB each: a dozen 16 KB segments


def _copied_segments(store: S3ObjectStore, topic: str) -> list[int]:
    """Start offsets of the segments whose log, indexes and leader-epoch checkpoint are all in
    the bucket (`<topic>-<id>/<partition>/<20-digit start offset>-<segment id>.<suffix>`); a
    segment being uploaded has only some of them."""
    suffixes: dict[int, set[str]] = {}
    for info in store.list(f"{topic}-"):
        start, _, rest = info.key.rsplit("/", 1)[1].partition("-")
        suffixes.setdefault(int(start), set()).add(rest.rsplit(".", 1)[1])
    whole = {"log", "index", "timeindex", "leader_epoch_checkpoint"}
    return sorted(start for start, found in suffixes.items() if whole <= found)


def test_tiered_compose_copies_rolled_segments_to_the_object_store_and_serves_them(
    project: Project, tmp_path: Path
) -> None:
    if not _image_built(OBJECT_STORE_IMAGE):
        _missing(f"image {OBJECT_STORE_IMAGE} is not built")
    project.use(*TIERED_FILES)
    project.env["KAFKAPY_REMOTE_LOG_INTERVAL_MS"] = "500"
    # depends_on: the broker starts once the object store is healthy (its bucket exists)
    project.compose("up", "-d", "--no-build", "kafkapy")
    project.wait_healthy("object-store", "kafkapy")
    bootstrap = f"127.0.0.1:{project.env['KAFKAPY_PORT']}"
    KafkaAdmin(bootstrap).create_topic(
        "docker-tiered", configs={"remote.storage.enable": "true", "segment.bytes": str(TIERED_SEGMENT_BYTES)})
    values = [f"tiered-{i:04d}-" + "x" * 1000 for i in range(TIERED_MESSAGES)]
    # small batches, so the log rolls into many segments
    _produce(bootstrap, "docker-tiered", values, "batch.num.messages=4", "linger.ms=0")

    # the bucket through the object store's published port, as any S3 client on the host sees it
    credentials = tmp_path / "credentials"
    credentials.write_text("[default]\naws_access_key_id = any\naws_secret_access_key = any\n")
    store = S3ObjectStore(S3Config(
        bucket="kafkapy-tiered", endpoint_url=f"http://127.0.0.1:{project.env['KAFKAPY_S3_PORT']}",
        key_prefix="single", path_style=True, credentials_file=credentials))
    deadline = time.monotonic() + HEALTHY_TIMEOUT_S
    while len(copied := _copied_segments(store, "docker-tiered")) < 5:
        if time.monotonic() > deadline:
            raise AssertionError(f"segments in the bucket: {copied}\n{project.logs()}")
        time.sleep(1)
    assert min(copied) == 0, copied  # copied from the log's start, oldest first

    # local retention is the total one (-2): every record is still served, in order
    assert _consume(bootstrap, "docker-tiered", TIERED_MESSAGES) == values
