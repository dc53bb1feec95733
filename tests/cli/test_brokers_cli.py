"""`kafkapy log-dirs --describe` and `kafkapy broker-api-versions` against a real broker."""

from __future__ import annotations

import json
import re

from tests.cli.conftest import kafkapy


def test_log_dirs_describe_prints_kafkas_document(bootstrap: str) -> None:
    assert kafkapy("topics", "create", "ld", "--partitions", "2", bootstrap=bootstrap).code == 0
    assert kafkapy("produce", "ld", "--partition", "1", stdin="abc\n", bootstrap=bootstrap).code == 0
    r = kafkapy("log-dirs", "--describe", "--topic-list", "ld", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert "Received log directory information from brokers 1" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["version"] == 1
    ((broker,),) = [doc["brokers"]]
    assert broker["broker"] == 1
    parts = {p["partition"]: p for d in broker["logDirs"] for p in d["partitions"]}
    assert sorted(parts) == ["ld-0", "ld-1"]
    assert parts["ld-0"]["size"] == 0
    assert parts["ld-1"]["size"] > 0
    assert parts["ld-1"]["isFuture"] is False
    missing = kafkapy("log-dirs", "--describe", "--broker-list", "7", bootstrap=bootstrap)
    assert missing.code == 1
    assert "not in the cluster" in missing.stderr


def test_broker_api_versions_lists_ranges_and_the_usable_version(bootstrap: str) -> None:
    r = kafkapy("broker-api-versions", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert r.stdout.startswith(f"{bootstrap} (id: 1) -> (\n")
    assert re.search(r"^\tProduce\(0\): \d+ to \d+ \[usable: \d+\],$", r.stdout, re.MULTILINE), r.stdout
    assert re.search(r"^\tApiVersions\(18\): 0 to \d+ \[usable: \d+\]", r.stdout, re.MULTILINE)
    (doc,) = kafkapy("broker-api-versions", "--json", bootstrap=bootstrap).json()
    fetch = next(a for a in doc["apis"] if a["api"] == "Fetch")
    assert fetch["min"] <= fetch["usable"] <= fetch["max"]
