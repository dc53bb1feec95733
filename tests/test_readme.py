"""The README's commands, run: every `sh` block against a real broker on free ports.

Why: the README is the first thing a user runs, and a command that drifted from the code (a
renamed flag, a removed subcommand) fails there first. Each `sh` block runs in bash with
`set -euo pipefail`, in order, against one `kafkapy serve` subprocess with its HTTP listener;
`127.0.0.1:9092` and `127.0.0.1:9644` in a block stand for that broker's Kafka and HTTP
addresses (so the README stays copy-pasteable for `make run`'s broker), and `kafkapy` is this
checkout's command. A block that cannot run here (it blocks until Ctrl-C, needs Docker, root or a
certificate) is preceded by `<!-- docs-test: skip covered-by=PATH ... -->`, and PATH must be a
test file that exists. The links and the table of contents are checked too: a link to a page
that is gone is as broken as a command.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kafkapy.testing.broker import SubprocessBroker
from kafkapy.testing.cluster import free_ports

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK_TIMEOUT_S = 120
FENCE = re.compile(r"^```(\S*)\s*$")
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s+covered-by=(\S+)")


@dataclass(frozen=True)
class Block:
    line: int
    language: str
    text: str
    covered_by: str | None


def blocks(text: str) -> list[Block]:
    """Every fenced block of `text`, with the skip tag of the line before it."""
    found: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        start = i
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            i += 1
        tag = SKIP.search(lines[start - 1]) if start else None
        body = "\n".join(lines[start + 1:i])
        found.append(Block(start + 1, opening.group(1), body, tag.group(1) if tag else None))
        i += 1
    return found


SH_BLOCKS = [b for b in blocks(README.read_text()) if b.language == "sh"]


def test_every_block_names_its_language() -> None:
    """An unlabelled block could be a shell block this test never runs."""
    assert [b.line for b in blocks(README.read_text()) if not b.language] == []


def test_there_are_blocks_to_run() -> None:
    assert len([b for b in SH_BLOCKS if b.covered_by is None]) >= 4


@pytest.mark.parametrize("block", [b for b in SH_BLOCKS if b.covered_by], ids=lambda b: f"line{b.line}")
def test_a_skipped_block_names_a_test_that_exists(block: Block) -> None:
    assert block.covered_by is not None
    path = ROOT / block.covered_by
    assert path.is_file(), f"README line {block.line}: covered-by={block.covered_by} does not exist"
    assert path.name.startswith("test_"), f"README line {block.line}: {block.covered_by} is not a test file"


@pytest.fixture(scope="module")
def broker() -> Iterator[tuple[str, str]]:
    (http_port,) = free_ports(1)
    http = f"127.0.0.1:{http_port}"
    with SubprocessBroker(overrides={"kafkapy.http.listener": http}) as running:
        yield running.bootstrap, http


@pytest.fixture(scope="module")
def shell_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PATH with this checkout's `kafkapy` first (whatever `kafkapy` is installed elsewhere), and
    a HOME of its own, so no client profile of the user changes what the blocks do."""
    bin_dir = tmp_path_factory.mktemp("bin")
    shim = bin_dir / "kafkapy"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kafkapy "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    path = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT), "HOME": str(bin_dir)}  # no user profile


RUN_BLOCKS = [b for b in SH_BLOCKS if b.covered_by is None]


NO_KCAT = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (apt-get install kcat)")


@pytest.mark.parametrize(
    "block", [pytest.param(b, marks=[NO_KCAT] if "kcat" in b.text else []) for b in RUN_BLOCKS], ids=lambda b: f"line{b.line}"
)
def test_block_runs(block: Block, broker: tuple[str, str], shell_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> None:
    bootstrap, http = broker
    script = block.text.replace("127.0.0.1:9092", bootstrap).replace("127.0.0.1:9644", http)
    env = {**shell_env, "KAFKAPY_BOOTSTRAP_SERVERS": bootstrap}
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=tmp_path_factory.mktemp("cwd"), env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S,
    )
    assert done.returncode == 0, (
        f"README line {block.line} failed ({done.returncode}):\n{script}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )


@NO_KCAT
def test_first_consume_prints_what_was_produced(broker: tuple[str, str], shell_env: dict[str, str]) -> None:
    """The records the quick start's kafkapy and kcat blocks produced are all there to read
    (this runs after `test_block_runs`, on the same broker)."""
    bootstrap, _ = broker
    done = subprocess.run(
        ["kafkapy", "consume", "demo", "--bootstrap-server", bootstrap, "--from-beginning", "--exit-at-end", "-f", "%k %s\n"],
        env=shell_env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S, check=True,
    )
    assert sorted(done.stdout.splitlines()) == ["k1 hello", "k2 world", "k3 from kcat"]


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_contents_lists_every_section() -> None:
    text = README.read_text()
    headings = [h for h in re.findall(r"^## (.+)$", text, re.M) if h != "Contents"]
    contents = text.split("## Contents", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"\]\(#([^)]+)\)", contents) == [_anchor(h) for h in headings]


def test_every_link_and_path_resolves() -> None:
    """Relative links of the README and of docs/ pages it links, and kafkapy/ paths they name."""
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    missing: list[str] = []
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if "://" not in target and not (page.parent / target).exists():
                missing.append(f"{page.relative_to(ROOT)}: link {target}")
    for target in re.findall(r"`(kafkapy/[\w/]+\.py)`", README.read_text()):
        if not (ROOT / target).exists():
            missing.append(f"README.md: path {target}")
    assert missing == []
