"""`kafkapy chaos` option handling (the runs themselves: compat_tests/test_chaos.py)."""

from __future__ import annotations

import re

import pytest

from kafkapy.chaos.schedule import FAULT_KINDS
from kafkapy.cli.main import main


def test_help_lists_the_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "--help"]) == 0
    out = capsys.readouterr().out
    for option in ("--nodes", "--seed", "--duration", "--faults", "--config", "--json"):
        assert option in out
    flat = re.sub(r"-\s+", "-", " ".join(out.split()))  # click wraps "disk-full" at its hyphen
    for kind in FAULT_KINDS:
        assert kind in flat


def test_top_level_help_names_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "chaos" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--faults", "kill,nuke"], "unknown fault kind(s) nuke"),
        (["--nodes", "2"], "--nodes"),
        (["--override", "novalue"], "needs KEY=VALUE"),
        (["--config", "/nonexistent/server.properties"], "does not exist"),
    ],
)
def test_bad_options_exit_2_with_a_reason(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", *argv]) == 2
    assert message in capsys.readouterr().err
