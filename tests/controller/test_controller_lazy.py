"""QuorumController loads its topic, config, SCRAM, quota and ACL decisions on first use: every
name it re-exports still resolves to the object its decision module defines, and a controller
built in a fresh interpreter runs those operations."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kafkapy.controller import controller, topics

ROOT = Path(__file__).resolve().parents[2]


def test_every_reexported_name_resolves_to_its_decision_modules_object() -> None:
    assert set(controller._LAZY_NAMES) <= set(controller.__all__)
    for name, module in controller._LAZY_NAMES.items():
        defined = importlib.import_module(f"kafkapy.controller.{module}")
        assert getattr(controller, name) is getattr(defined, name), name
    for name in controller.__all__:
        assert getattr(controller, name) is not None, name
    with pytest.raises(AttributeError):
        controller.NoSuchName  # noqa: B018


def test_elect_leaders_defaults_to_a_preferred_election() -> None:
    assert controller.PREFERRED_ELECTION == topics.PREFERRED


def test_a_fresh_controller_loads_topic_decisions_on_its_first_topic_operation() -> None:
    """In a fresh interpreter: registering a broker needs no topic decisions; creating a topic
    then loads them and succeeds."""
    script = (
        "import sys\n"
        "from tests.controller.helpers import Cluster\n"
        "c = Cluster()\n"
        "c.start(1)\n"
        "print('loaded' if 'kafkapy.controller.topics' in sys.modules else 'unloaded')\n"
        "from kafkapy.controller.controller import NewTopic\n"
        "[created] = c.run(c.ctl.create_topics([NewTopic('t', 2, 1)]))\n"
        "print(created.error.name, sorted(c.ctl.image.topics))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["unloaded", "NONE", "['t']"]
