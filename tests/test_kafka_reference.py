"""tests/kafka_reference.py: without Kafka's definitions the tests that read them fail under CI
(one of them is the only guard of protocol_specs/ against drifting from Kafka) and skip elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import kafka_reference as ref

ROOT = Path(__file__).resolve().parents[1]

#: Every test that reads Kafka's reference definitions, each of which must not pass silently
#: without them (the whole cross-check module: it guards protocol_specs/).
READERS = [
    "tests/protocol/test_spec_crosscheck.py",
    "tests/server/test_error_versions.py::test_no_code_reaches_a_version_older_than_the_code",
    "tests/broker/handlers/test_api_versions.py::test_field_names_match_kafkas_definition",
    "tests/storage/test_topic_config.py::test_topic_configs_kafkas_design_doc_names_are_in_the_table",
    "tests/controller/test_records.py::test_records_match_kafkas_definitions",
    "tests/controller/test_quotas.py::test_client_quota_record_has_kafkas_type_id_and_fields",
]


def test_a_missing_reference_fails_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ref.ENV, str(tmp_path / "missing"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"not found at .*missing/message"):
        ref.kafka_reference("message")


@pytest.mark.parametrize("ci", [None, "", "false", "0"])
def test_a_missing_reference_skips_outside_ci(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ci: str | None
) -> None:
    monkeypatch.setenv(ref.ENV, str(tmp_path / "missing"))
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(pytest.skip.Exception, match="not found at"):
        ref.kafka_reference("metadata", "ClientQuotaRecord.json")


def test_a_present_reference_is_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "message").mkdir()
    monkeypatch.setenv(ref.ENV, str(tmp_path))
    monkeypatch.setenv("CI", "true")
    assert ref.kafka_reference("message") == tmp_path / "message"


def test_the_default_is_shared_kafka_protocol_beside_the_repository(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(ref.ENV, raising=False)
    found = ref.kafka_protocol_dir()
    assert found.parts[-2:] == ("shared", "kafka-protocol")
    main = ref._main_checkout(ROOT)
    assert found.parent.parent in {ROOT.parent, *((main.parent,) if main else ())}


def test_every_reader_fails_under_ci_without_the_definitions(tmp_path: Path) -> None:
    env = {
        **os.environ,
        ref.ENV: str(tmp_path / "missing"),
        "CI": "true",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist", *READERS],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    outcomes = [line.split()[0] for line in proc.stdout.splitlines() if line.split()[:1] in (
        ["PASSED"], ["FAILED"], ["SKIPPED"], ["ERROR"])]
    assert outcomes, proc.stdout + proc.stderr
    # a test fails, or errors in the cross-check's fixture that looks the folder up: either
    # fails the run; none passes or skips
    assert set(outcomes) <= {"FAILED", "ERROR"}, proc.stdout
    assert proc.returncode == 1
    assert len(outcomes) >= len(READERS) + 3  # the parametrized records and every cross-check
