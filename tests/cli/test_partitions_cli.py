"""`kafkapy delete-records`, `leader-election` and `reassign-partitions` (usage) against a real broker;
reassignment across brokers is in test_local_cluster_cli.py."""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafkapy.cli.partitions import propose, read_partitions_file
from tests.cli.conftest import kafkapy

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["partitions", "topic", "partition", "offset", "replicas", "x"]), inner, max_size=4),
    max_leaves=12,
)


@given(_JSON)
def test_any_json_file_is_entries_or_a_usage_error(doc: Any) -> None:
    """Whatever a plan file holds, the tools get well-typed entries or a usage error, never a
    TypeError half-way through building requests."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plan.json"
        path.write_text(json.dumps(doc))
        try:
            entries = read_partitions_file(path, "offset", "replicas")
        except click.BadParameter:
            return
    for e in entries:
        assert isinstance(e["topic"], str)
        assert isinstance(e["partition"], int)
        assert isinstance(e["offset"], int)
        assert all(isinstance(r, int) for r in e["replicas"])


def test_a_plan_with_the_wrong_types_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"partitions": [{"topic": "t", "partition": [0], "offset": 1}]}))
    shape = 'expected {"partitions": [{"topic", "partition", "offset"}, ...]}'
    with pytest.raises(click.BadParameter, match=re.escape(shape)):
        read_partitions_file(path, "offset")


def _topic(bootstrap: str, name: str, records: int) -> None:
    assert kafkapy("topics", "create", name, bootstrap=bootstrap).code == 0
    r = kafkapy("produce", name, stdin="".join(f"r{i}\n" for i in range(records)), bootstrap=bootstrap)
    assert r.code == 0, r.stderr


def test_delete_records_with_kafkas_offset_json_file(bootstrap: str, tmp_path: Path) -> None:
    _topic(bootstrap, "dr", 5)
    plan = tmp_path / "offsets.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "dr", "partition": 0, "offset": 3}], "version": 1}))
    r = kafkapy("delete-records", "--offset-json-file", str(plan), bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert r.stdout == "Records delete operation completed:\npartition: dr-0\tlow_watermark: 3\n"
    left = kafkapy("consume", "dr", "--from-beginning", "--exit-at-end", bootstrap=bootstrap)
    assert left.stdout.split() == ["r3", "r4"]
    plan.write_text(json.dumps({"partitions": [{"topic": "dr", "partition": 0, "offset": -1}], "version": 1}))
    r = kafkapy("delete-records", "--offset-json-file", str(plan), "--json", bootstrap=bootstrap)
    assert r.json() == [{"topic": "dr", "partition": 0, "low_watermark": 5}]  # -1: the high watermark
    plan.write_text(json.dumps({"partitions": [{"topic": "dr", "partition": 7, "offset": 1}]}))
    r = kafkapy("delete-records", "--offset-json-file", str(plan), bootstrap=bootstrap)
    assert r.code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    plan.write_text(json.dumps({"partitions": [{"topic": "dr"}]}))
    assert kafkapy("delete-records", "--offset-json-file", str(plan), bootstrap=bootstrap).code == 2


def test_leader_election_of_a_partition_led_by_its_preferred_replica(bootstrap: str, tmp_path: Path) -> None:
    _topic(bootstrap, "le", 1)
    r = kafkapy("leader-election", "--election-type", "PREFERRED", "--topic", "le", "--partition", "0",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert r.stdout == "Valid replica already elected for partitions le-0\n"
    plan = tmp_path / "partitions.json"
    plan.write_text(json.dumps({"partitions": [{"topic": "le", "partition": 0}]}))
    r = kafkapy("leader-election", "--election-type", "unclean", "--path-to-json-file", str(plan), "--json",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert r.json() == [{"topic": "le", "partition": 0, "error": "ELECTION_NOT_NEEDED", "message": None}]
    r = kafkapy("leader-election", "--election-type", "PREFERRED", "--all-topic-partitions", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    usage = kafkapy("leader-election", "--election-type", "PREFERRED", bootstrap=bootstrap)
    assert usage.code == 2
    assert "--all-topic-partitions" in usage.stderr


def test_reassign_partitions_usage_and_generate(bootstrap: str, tmp_path: Path) -> None:
    _topic(bootstrap, "ra", 1)
    assert kafkapy("reassign-partitions", bootstrap=bootstrap).code == 2
    assert kafkapy("reassign-partitions", "--execute", bootstrap=bootstrap).code == 2
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"topics": [{"topic": "ra"}], "version": 1}))
    r = kafkapy("reassign-partitions", "--generate", "--topics-to-move-json-file", str(topics),
                "--broker-list", "1", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    proposed = json.loads(r.stdout.split("Proposed partition reassignment configuration\n")[1])
    assert proposed["partitions"] == [{"topic": "ra", "partition": 0, "replicas": [1], "log_dirs": ["any"]}]


@given(st.integers(1, 12), st.integers(1, 3), st.sampled_from([["a", "a", "b", "b"], ["a", "b", "c"], ["x"] * 3]))
def test_generate_spreads_every_partition_over_the_racks(count: int, rf: int, racks: list[str]) -> None:
    """`--generate` proposes the controller's rack-aware placement: a partition's replicas on
    min(rf, racks) distinct racks, leaders no more than one apart across the brokers."""
    brokers: dict[int, str | None] = {i + 1: rack for i, rack in enumerate(racks)}
    rf = min(rf, len(brokers))
    current = {("t", p): [1] * rf for p in range(count)}
    plan = propose(current, brokers)
    assert sorted(plan) == sorted(current)
    distinct = min(rf, len(set(racks)))
    for replicas in plan.values():
        assert len(replicas) == rf == len(set(replicas))
        assert len({brokers[r] for r in replicas}) == distinct
    leaders = Counter(replicas[0] for replicas in plan.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in brokers) <= 1


def test_generate_refuses_mixed_racks_unless_rack_awareness_is_off() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 1]}
    with pytest.raises(click.UsageError, match="disable-rack-aware"):
        propose(current, {1: "a", 2: None})
    assert propose(current, {1: "a", 2: None}, rack_aware=False) == {("t", 0): [1, 2], ("t", 1): [2, 1]}
