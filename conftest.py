"""Suite-wide test settings.

Hypothesis: no per-example deadline (this project's machines are shared 2-core boxes and a
deadline would turn load into failures), and in CI (`CI=true`) a derandomized profile, so a CI
run is reproducible: exploration with fresh random seeds happens on developers' runs, where a
new counterexample is printed with its reproduction blob and becomes a regression test.

Bytecode: the suite starts hundreds of `python -m kafkapy` processes (brokers, cluster nodes,
the CLI under test). Where the environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE,
as on the CI machines) each of them would compile every kafkapy module from source again -
about a third of its start-up CPU. Compiling the package once here, before any test, lets
them all load the cached bytecode, as an installed kafkapy (pip compiles it on install) does.
"""

from __future__ import annotations

import compileall
import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import kafkapy

settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

if sys.dont_write_bytecode:
    # writes kafkapy/**/__pycache__ (git-ignored); up-to-date files are skipped
    compileall.compile_dir(Path(kafkapy.__file__).parent, quiet=1)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`make test`: `-n 2 --dist loadfile`), the files holding a test marked
    `slow` come first.

    Why: xdist hands whole files to the workers in collection order (with
    `--no-loadscope-reorder`), and the longest pieces should start first - a several-minute file
    handed out last would finish alone while the other worker sits idle. The order within a file,
    and the whole order of a run without xdist, stay as they were.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)
