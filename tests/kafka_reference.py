"""Kafka's reference definitions (message and metadata record JSON, docs) for the tests that
hold kafkapy to them.

Where: `../shared/kafka-protocol` beside the repository root, as CI lays it out; from a git
worktree, beside the main checkout whose worktree it is. `KAFKAPY_KAFKA_PROTOCOL` names
another place (and lets a test point it at a missing one).

When it is missing: under `CI=true` a test that needs it fails. Some of these tests are the
only guard of `protocol_specs/` against drifting from Kafka's definitions, and a skip would
let a CI run pass with the guard silently off. Elsewhere (a laptop without the definitions)
the test skips and says where it looked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

__all__ = ["ENV", "in_ci", "kafka_protocol_dir", "kafka_reference"]

#: Environment variable naming the reference folder, overriding the layouts below.
ENV = "KAFKAPY_KAFKA_PROTOCOL"
ROOT = Path(__file__).resolve().parents[1]
_RELATIVE = Path("shared") / "kafka-protocol"


def _main_checkout(root: Path) -> Path | None:
    """The main working tree when `root` is a linked git worktree (`.git` is then a file
    naming `<main>/.git/worktrees/<name>`), else None."""
    git = root / ".git"
    if not git.is_file():
        return None
    text = git.read_text().strip()
    if not text.startswith("gitdir:"):
        return None
    gitdir = (root / text.removeprefix("gitdir:").strip()).resolve()
    commondir = gitdir / "commondir"
    if not commondir.is_file():
        return None
    return (gitdir / commondir.read_text().strip()).resolve().parent


def kafka_protocol_dir() -> Path:
    """The reference folder: `$KAFKAPY_KAFKA_PROTOCOL`, else `../shared/kafka-protocol` beside
    the repository root, else beside the main checkout of this worktree (the first that
    exists; the first candidate when none does, for the message that names it)."""
    override = os.environ.get(ENV)
    if override:
        return Path(override)
    candidates = [ROOT.parent / _RELATIVE]
    main = _main_checkout(ROOT)
    if main is not None:
        candidates.append(main.parent / _RELATIVE)
    return next((c for c in candidates if c.is_dir()), candidates[0])


def in_ci() -> bool:
    """`CI` set to anything but empty, `0` or `false` (CI services set `CI=true`)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false")


def kafka_reference(*parts: str) -> Path:
    """The path `parts` under the reference folder; when it is missing, the calling test fails
    under CI and skips elsewhere (see the module docstring for why)."""
    path = kafka_protocol_dir().joinpath(*parts)
    if path.exists():
        return path
    message = f"Kafka's reference definitions not found at {path} (set {ENV} to their folder)"
    if in_ci():
        pytest.fail(f"{message}; under CI the check they feed must run", pytrace=False)
    pytest.skip(message)
