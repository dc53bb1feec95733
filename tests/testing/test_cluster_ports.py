"""free_ports: ports the kernel never gives to another socket, and a slice per xdist worker; the
nodes' command lines (racks)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from kafkapy.testing import cluster
from kafkapy.testing.cluster import ClusterProcesses, free_ports, port_pool


def _listen(port: int) -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_ports_are_distinct_listenable_and_below_the_ephemeral_range() -> None:
    ports = free_ports(6)
    assert len(set(ports)) == 6
    assert all(port in port_pool() for port in ports)
    assert max(ports) < cluster._ephemeral_low()
    listeners = [_listen(port) for port in ports]
    for s in listeners:
        s.close()


def test_a_port_is_not_handed_out_again_before_the_pool_comes_round() -> None:
    seen: list[int] = []
    for _ in range(50):
        seen += free_ports(3)
    assert len(set(seen)) == len(seen)


def test_a_port_something_holds_is_skipped() -> None:
    (first,) = free_ports(1)
    pool = port_pool()
    held_port = first + 1 if first + 1 < pool.stop else pool.start
    held = _listen(held_port)
    try:
        (second,) = free_ports(1)
        assert second != held_port
        _listen(second).close()
    finally:
        held.close()


def test_each_xdist_worker_has_a_slice_of_its_own(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
    slices = []
    for index in range(3):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        slices.append(set(port_pool()))
        assert set(free_ports(4)) <= slices[-1]
    assert all(len(s) >= 256 for s in slices)
    assert not slices[0] & slices[1]
    assert not slices[0] & slices[2]
    assert not slices[1] & slices[2]
    assert max(max(s) for s in slices) < cluster._ephemeral_low()


def test_without_a_pool_the_kernel_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cluster, "_ephemeral_low", lambda: 1100)
    assert len(port_pool()) == 0
    ports = free_ports(2)
    assert len(set(ports)) == 2
    assert all(port > 0 for port in ports)


def test_racks_are_handed_to_the_nodes_in_turn(tmp_path: Path) -> None:
    """`racks=` (`kafkapy cluster start --racks`, the kafka_cluster marker): node i gets
    racks[(i - 1) % len(racks)] as its broker.rack; without racks no node has one."""
    racked = ClusterProcesses(tmp_path, 4, racks=["a", "b", "c"])
    assert [_rack(racked.command(i)) for i in (1, 2, 3, 4)] == ["a", "b", "c", "a"]
    assert _rack(ClusterProcesses(tmp_path, 1).command(1)) is None


def _rack(cmd: list[str]) -> str | None:
    racks = [arg.split("=", 1)[1] for arg in cmd if arg.startswith("broker.rack=")]
    return racks[-1] if racks else None
