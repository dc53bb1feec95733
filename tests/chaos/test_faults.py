"""Network isolation and the full disk, for real: iptables rules and a tmpfs mount.

Both need root (and iptables with the cgroup match, cgroup v2); where that is missing the test
skips naming what is missing, as `kafkapy chaos` skips the fault - except under CI=true, where
.ci/run installs iptables and a skip would hide a broken fault: there it fails.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkapy.chaos.faults import FILL_NAME, DiskFill, NetworkIsolation, remove_stale

CONNECT = """
import socket, sys
s = socket.socket()
s.settimeout(1.5)
try:
    s.connect(("127.0.0.1", int(sys.argv[1])))
    print("connected")
except OSError as e:
    print("failed", e)
"""


def unavailable(reason: str | None) -> None:
    if reason is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true: {reason}")
    pytest.skip(reason)


@pytest.fixture
def isolation() -> Iterator[NetworkIsolation]:
    net = NetworkIsolation()
    unavailable(net.unavailable())
    net.set_up([1, 2])
    try:
        yield net
    finally:
        net.close()


@pytest.fixture
def server() -> Iterator[int]:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def connect(port: int, cgroup: Path | None = None) -> str:
    cmd = [sys.executable, "-c", CONNECT, str(port)]
    if cgroup is not None:
        cmd = ["sh", "-c", f'echo $$ > "{cgroup / "cgroup.procs"}" && exec "$@"', "sh", *cmd]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=20, check=True).stdout.strip()


def test_isolated_node_is_unreachable_and_reaches_nobody(isolation: NetworkIsolation, server: int) -> None:
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen(16)
    with other:
        other_port = other.getsockname()[1]
        assert connect(server) == "connected"
        assert connect(other_port, isolation.node_cgroup(1)) == "connected"
        isolation.isolate(1, [server])
        assert connect(server).startswith("failed"), "the isolated node's port is still reachable"
        assert connect(other_port, isolation.node_cgroup(1)).startswith("failed"), "the isolated node reaches out"
        # node 2 and everything else are untouched
        assert connect(other_port, isolation.node_cgroup(2)) == "connected"
        assert connect(other_port) == "connected"
        isolation.heal()
        assert isolation.rules() == []
        assert connect(server) == "connected"
        assert connect(other_port, isolation.node_cgroup(1)) == "connected"


def test_close_removes_chain_jump_and_cgroups(isolation: NetworkIsolation, server: int) -> None:
    isolation.isolate(1, [server])
    assert len(isolation.rules()) == 2
    cgroup = isolation.cgroup
    assert cgroup is not None
    assert cgroup.exists()
    isolation.close()
    listing = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout
    assert isolation.chain not in listing
    assert not cgroup.exists()
    assert connect(server) == "connected"


def test_stale_chain_of_a_dead_run_is_removed() -> None:
    net = NetworkIsolation()
    unavailable(net.unavailable())
    dead = subprocess.Popen(["true"])
    dead.wait()
    chain = f"KPYCHAOS{dead.pid}"
    subprocess.run(["iptables", "-N", chain], check=True)
    subprocess.run(["iptables", "-I", "OUTPUT", "-j", chain], check=True)
    removed = remove_stale()
    listing = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True).stdout
    assert f"iptables chain {chain}" in removed
    assert chain not in listing


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[tuple[DiskFill, Path]]:
    fill = DiskFill(size_mib=4)
    unavailable(fill.unavailable())
    directory = tmp_path / "node1"
    fill.mount(directory)
    try:
        yield fill, directory
    finally:
        fill.close()


def test_fill_makes_writes_fail_with_enospc_until_freed(disk: tuple[DiskFill, Path]) -> None:
    fill, directory = disk
    written = fill.fill(directory)
    assert written > 3 * (1 << 20)
    with pytest.raises(OSError, match="No space left"):
        (directory / "segment").write_bytes(b"x" * 65536)
    fill.free(directory)
    assert not (directory / FILL_NAME).exists()
    (directory / "segment").write_bytes(b"x" * 65536)


def test_close_unmounts(disk: tuple[DiskFill, Path]) -> None:
    fill, directory = disk
    assert any(point == str(directory) for point in _mount_points())
    fill.close()
    assert not any(point == str(directory) for point in _mount_points())


def _mount_points() -> list[str]:
    return [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]


def test_kept_copies_outlive_the_unmount_without_the_fill(disk: tuple[DiskFill, Path]) -> None:
    """A run that keeps its data (`--keep`, or an anomaly) copies each tmpfs data dir out
    before the unmount, so the node logs can still be read with `kafkapy dump-log`."""
    fill, directory = disk
    (directory / "t-0").mkdir()
    (directory / "t-0" / "00000000000000000000.log").write_bytes(b"batch")
    fill.fill(directory)
    assert fill.keep_copies() == [directory.with_name("node1.kept")]
    fill.close()
    kept = directory.with_name("node1.kept")
    assert (kept / "t-0" / "00000000000000000000.log").read_bytes() == b"batch"
    assert not (kept / FILL_NAME).exists()
    assert not (directory / "t-0").exists(), "the tmpfs is gone"
