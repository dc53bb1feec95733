"""Fault mechanisms of a chaos run: process signals, network isolation and a full disk.

Process faults use the cluster's own processes (`ClusterProcesses`): SIGKILL and a restart on
the same ports and data, SIGSTOP/SIGCONT.

Network isolation (`NetworkIsolation`) cuts one node off from everything - the other nodes and
the clients - with iptables rules in a chain of this run's own (`KPYCHAOS<pid>`, jumped to from
OUTPUT; every loopback packet passes OUTPUT once). Two rules per isolated node: DROP every
packet to its broker and controller ports (nobody reaches it), and DROP every packet a process
of its cgroup (cgroup v2 `kafkapy-chaos-<pid>/node<i>`, which `ChaosCluster` starts each node
in) sends (it reaches nobody, also over the connections it opened itself). Both rules only match
this run's nodes, so other processes on the machine are never affected. Healing flushes the
chain; `close()` removes the chain, its jump and the cgroups, and also runs at exit.

Full disk (`DiskFill`): each node's data dir is a size-limited tmpfs mount of its own (source
`kafkapy-chaos-<pid>`); the fault writes a file into it until the kernel answers ENOSPC, holds,
then deletes the file; `close()` unmounts (lazily when still busy).

Leftovers of a run that was SIGKILLed (chains, mounts, cgroups of a pid that no longer exists)
are removed by `remove_stale()` before a new run starts.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from kafkapy.testing.cluster import ClusterProcesses

__all__ = [
    "ChaosCluster",
    "DiskFill",
    "NetworkIsolation",
    "cgroup2_root",
    "remove_stale",
]

CHAIN_PREFIX = "KPYCHAOS"
CGROUP_PREFIX = "kafkapy-chaos-"
MOUNT_SOURCE_PREFIX = "kafkapy-chaos-"
FILL_NAME = "chaos-disk-fill"
COMMAND_TIMEOUT_S = 10.0


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False)


def _mounts() -> list[tuple[str, str, str]]:
    """(source, mount point, fs type) of every mount, from /proc/mounts."""
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        parts = line.split()
        if len(parts) >= 3:
            out.append((parts[0], parts[1].replace("\\040", " "), parts[2]))
    return out


def cgroup2_root() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (unified or hybrid), None without one."""
    for _, point, fstype in _mounts():
        if fstype == "cgroup2":
            return Path(point)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Remove chains, mounts and cgroups left by chaos runs whose process is gone; what was
    removed, for the log."""
    removed: list[str] = []
    if os.geteuid() != 0:
        return removed
    if shutil.which("iptables"):
        listing = _run("iptables", "-S").stdout
        for pid_text in sorted(set(re.findall(rf"-N {CHAIN_PREFIX}(\d+)", listing))):
            if not _pid_alive(int(pid_text)):
                _drop_chain(f"{CHAIN_PREFIX}{pid_text}")
                removed.append(f"iptables chain {CHAIN_PREFIX}{pid_text}")
    for source, point, _ in _mounts():
        match = re.fullmatch(rf"{MOUNT_SOURCE_PREFIX}(\d+)", source)
        if match and not _pid_alive(int(match.group(1))):
            _run("umount", "-l", point)
            removed.append(f"mount {point}")
    root = cgroup2_root()
    if root is not None and root.is_dir():
        for entry in root.glob(f"{CGROUP_PREFIX}*"):
            match = re.fullmatch(rf"{CGROUP_PREFIX}(\d+)", entry.name)
            if match and not _pid_alive(int(match.group(1))):
                _remove_cgroup_tree(entry, root)
                removed.append(f"cgroup {entry}")
    return removed


def _drop_chain(chain: str) -> None:
    while _run("iptables", "-D", "OUTPUT", "-j", chain).returncode == 0:
        pass
    _run("iptables", "-F", chain)
    _run("iptables", "-X", chain)


def _remove_cgroup_tree(path: Path, root: Path) -> None:
    """rmdir a cgroup and its children, moving any process left in them to the root first."""
    for child in sorted(path.glob("*/"), reverse=True):
        if (child / "cgroup.procs").exists():
            _remove_cgroup_tree(child, root)
    with contextlib.suppress(OSError):
        for pid in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (root / "cgroup.procs").write_text(pid)
    with contextlib.suppress(OSError):
        path.rmdir()


class NetworkIsolation:
    """Isolates single nodes of one cluster with iptables (see the module doc)."""

    def __init__(self) -> None:
        self.chain = f"{CHAIN_PREFIX}{os.getpid()}"
        root = cgroup2_root()
        self.cgroup_root = root
        self.cgroup = None if root is None else root / f"{CGROUP_PREFIX}{os.getpid()}"
        self.isolated: set[int] = set()
        self._set_up = False

    def unavailable(self) -> str | None:
        """Why isolation cannot work here, or None when it can (checked for real: a chain and
        a cgroup rule are created and removed)."""
        if os.geteuid() != 0:
            return "network partitions need root (iptables)"
        if shutil.which("iptables") is None:
            return "network partitions need iptables (not installed)"
        if self.cgroup_root is None:
            return "network partitions need a cgroup v2 hierarchy (none mounted)"
        probe = f"{CHAIN_PREFIX}probe{os.getpid()}"
        try:
            made = _run("iptables", "-N", probe)
            if made.returncode != 0:
                return f"iptables cannot create a chain: {made.stderr.strip()}"
            rule = _run("iptables", "-A", probe, "-m", "cgroup", "--path", "/", "-j", "RETURN")
            if rule.returncode != 0:
                return f"iptables has no cgroup match: {rule.stderr.strip()}"
        finally:
            _run("iptables", "-F", probe)
            _run("iptables", "-X", probe)
        return None

    def node_cgroup(self, node_id: int) -> Path:
        assert self.cgroup is not None
        return self.cgroup / f"node{node_id}"

    def set_up(self, node_ids: list[int]) -> None:
        """Create the chain (jumped to from OUTPUT) and one cgroup per node."""
        assert self.cgroup is not None
        for node_id in node_ids:
            self.node_cgroup(node_id).mkdir(parents=True, exist_ok=True)
        atexit.register(self.close)
        self._set_up = True
        for cmd in (("-N", self.chain), ("-I", "OUTPUT", "-j", self.chain)):
            result = _run("iptables", *cmd)
            if result.returncode != 0:
                raise OSError(f"iptables {' '.join(cmd)}: {result.stderr.strip()}")

    def isolate(self, node_id: int, ports: list[int]) -> None:
        """Nothing reaches node `node_id` (its `ports`) and nothing it sends leaves."""
        assert self.cgroup is not None
        assert self.cgroup_root is not None
        path = "/" + str(self.node_cgroup(node_id).relative_to(self.cgroup_root))
        rules = [("-m", "cgroup", "--path", path)]
        rules += [("-p", "tcp", "--dport", str(port)) for port in ports]
        for rule in rules:
            result = _run("iptables", "-A", self.chain, *rule, "-j", "DROP")
            if result.returncode != 0:
                raise OSError(f"iptables {' '.join(rule)}: {result.stderr.strip()}")
        self.isolated.add(node_id)

    def heal(self) -> None:
        """Remove every isolation rule (the chain stays, empty)."""
        _run("iptables", "-F", self.chain)
        self.isolated.clear()

    def rules(self) -> list[str]:
        """The chain's rules as `iptables -S` prints them (for tests and the log)."""
        listing = _run("iptables", "-S", self.chain)
        return [line for line in listing.stdout.splitlines() if line.startswith("-A ")]

    def close(self) -> None:
        """Remove the chain, its jump and the cgroups (idempotent; also registered atexit)."""
        if not self._set_up:
            return
        self._set_up = False
        _drop_chain(self.chain)
        self.isolated.clear()
        if self.cgroup is not None and self.cgroup_root is not None and self.cgroup.exists():
            _remove_cgroup_tree(self.cgroup, self.cgroup_root)
        atexit.unregister(self.close)


class DiskFill:
    """Size-limited tmpfs data dirs and a fault that fills one (see the module doc)."""

    def __init__(self, size_mib: int = 256) -> None:
        self.size_mib = size_mib
        self.source = f"{MOUNT_SOURCE_PREFIX}{os.getpid()}"
        self.mounted: list[Path] = []

    def unavailable(self) -> str | None:
        """Why a full disk cannot be made here (a real tmpfs mount is tried), or None."""
        if os.geteuid() != 0:
            return "disk-full needs root (to mount a size-limited tmpfs per node)"
        probe = Path(tempfile.mkdtemp(prefix="kafkapy-chaos-probe-"))
        try:
            result = _run("mount", "-t", "tmpfs", "-o", "size=1m", self.source, str(probe))
            if result.returncode != 0:
                return f"cannot mount a tmpfs: {result.stderr.strip()}"
            _run("umount", str(probe))
            return None
        finally:
            with contextlib.suppress(OSError):
                probe.rmdir()

    def mount(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        result = _run("mount", "-t", "tmpfs", "-o", f"size={self.size_mib}m,mode=0755", self.source, str(directory))
        if result.returncode != 0:
            raise OSError(f"mount tmpfs on {directory}: {result.stderr.strip()}")
        if not self.mounted:
            atexit.register(self.close)
        self.mounted.append(directory)

    @staticmethod
    def fill(directory: Path) -> int:
        """Write into `directory` until ENOSPC; the bytes written. Most of the space is taken
        at once with fallocate, the rest (and filesystems without it) by writing."""
        written = 0
        chunk = b"\0" * (1 << 20)
        with (directory / FILL_NAME).open("wb", buffering=0) as f:
            st = os.statvfs(directory)
            with contextlib.suppress(OSError):
                os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize)
                f.seek(0, os.SEEK_END)
                written = f.tell()
            while True:
                try:
                    written += f.write(chunk if len(chunk) > 4096 else chunk[:4096])
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    if len(chunk) <= 4096:
                        return written
                    chunk = chunk[:4096]
        return written

    @staticmethod
    def free(directory: Path) -> None:
        with contextlib.suppress(FileNotFoundError):
            (directory / FILL_NAME).unlink()

    def keep_copies(self) -> list[Path]:
        """Copy every mounted data dir to `<dir>.kept` beside it (the tmpfs goes with the
        unmount), so `kafkapy dump-log` can read the nodes' logs after a run; the fill file is
        left out. A copy that fails is skipped (the copy is a help, not the run's result)."""
        kept = []
        for directory in self.mounted:
            target = directory.with_name(directory.name + ".kept")
            with contextlib.suppress(OSError):
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(directory, target, ignore=shutil.ignore_patterns(FILL_NAME))
                kept.append(target)
        return kept

    def close(self) -> None:
        """Unmount every data dir mounted (idempotent; also registered atexit)."""
        for directory in self.mounted:
            if _run("umount", str(directory)).returncode != 0:
                _run("umount", "-l", str(directory))
        if self.mounted:
            atexit.unregister(self.close)
        self.mounted = []


class ChaosCluster(ClusterProcesses):
    """ClusterProcesses whose nodes start inside their own cgroup when `isolation` is given
    (the cgroup is joined before exec, so every socket the node opens belongs to it)."""

    def __init__(
        self,
        base_dir: Path,
        nodes: int,
        *,
        overrides: Mapping[str, str],
        isolation: NetworkIsolation | None,
        log_level: str = "INFO",
    ) -> None:
        super().__init__(base_dir, nodes, overrides=overrides, log_level=log_level)
        self.isolation = isolation

    def command(self, node_id: int) -> list[str]:
        cmd = super().command(node_id)
        if self.isolation is None:
            return cmd
        procs = self.isolation.node_cgroup(node_id) / "cgroup.procs"
        return ["sh", "-c", f'echo $$ > "{procs}" && exec "$@"', "sh", *cmd]

    def ports(self, node_id: int) -> list[int]:
        node = self.nodes[node_id]
        return [node.broker_port, node.controller_port]
