"""The coordinator facades load each submodule on first use: every public name still resolves,
to the object its submodule defines, whether or not that submodule was imported before."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

FACADES = ["kafkapy.coordinator.group", "kafkapy.coordinator.txn"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("facade", FACADES)
def test_every_public_name_resolves_to_its_submodules_object(facade: str) -> None:
    package = importlib.import_module(facade)
    assert set(package._DEFINED_IN) == set(package.__all__)
    for name in package.__all__:
        defined = importlib.import_module(f"{facade}.{package._DEFINED_IN[name]}")
        assert getattr(package, name) is getattr(defined, name), name
    with pytest.raises(AttributeError):
        package.NoSuchName  # noqa: B018


@pytest.mark.parametrize(
    ("facade", "partitioner"),
    [("kafkapy.coordinator.group", "offsets_partition_for"), ("kafkapy.coordinator.txn", "partition_for")],
)
def test_a_broker_places_keys_without_building_the_coordinator(facade: str, partitioner: str) -> None:
    """In a fresh interpreter: the partitioner a broker's coordinator driver uses at start
    loads the partitioning module alone - no record, state, result or coordinator module."""
    script = f"import sys, {facade} as f; f.{partitioner}; print(sorted(m for m in sys.modules if m.startswith('{facade}.')))"
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"['{facade}.partitioning']"
