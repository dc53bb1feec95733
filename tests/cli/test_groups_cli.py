"""`kafkapy groups ...` against a real broker, and the Assignment parser behind `describe`."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.cli.groups import decode_assignment
from tests.cli.conftest import communicate, kafkapy


def encode_assignment(parts: dict[str, list[int]], user_data: bytes = b"") -> bytes:
    out = struct.pack(">hi", 0, len(parts))
    for topic, ps in parts.items():
        raw = topic.encode()
        out += struct.pack(">h", len(raw)) + raw + struct.pack(">i", len(ps))
        out += b"".join(struct.pack(">i", p) for p in ps)
    return out + struct.pack(">i", len(user_data)) + user_data


@given(st.dictionaries(st.text(min_size=1, max_size=10), st.lists(st.integers(0, 1000), max_size=5),
                       max_size=4), st.binary(max_size=10))
def test_round_trip(parts: dict[str, list[int]], user_data: bytes) -> None:
    decoded = decode_assignment(encode_assignment(parts, user_data))
    assert decoded == [(t, p) for t, ps in parts.items() for p in ps]


@given(st.binary(max_size=60))
def test_garbage_gives_a_list_never_an_exception(data: bytes) -> None:
    assert isinstance(decode_assignment(data), list)


def test_empty_assignment_has_no_partitions() -> None:
    assert decode_assignment(b"") == []


def _seed_group(bootstrap: str, topic: str, group: str, records: int = 6) -> None:
    assert kafkapy("topics", "create", topic, "--partitions", "2", bootstrap=bootstrap).code == 0
    stdin = "".join(f'{{"value": "v{i}", "partition": {i % 2}}}\n' for i in range(records))
    assert kafkapy("produce", topic, "--format", "json", stdin=stdin, bootstrap=bootstrap).code == 0
    r = kafkapy("consume", topic, "--group", group, "--from-beginning", "--exit-at-end", bootstrap=bootstrap)
    assert r.code == 0, r.stderr


def _committed(bootstrap: str, group: str) -> dict[int, int]:
    (g,) = kafkapy("groups", "describe", "--group", group, "--json", bootstrap=bootstrap).json()
    return {o["partition"]: o["current_offset"] for o in g["offsets"]}


def test_dry_run_with_a_typo_creates_no_topic(bootstrap: str) -> None:
    """Regression: a dry-run reset of a missing topic auto-created it (Metadata allowed it)."""
    _seed_group(bootstrap, "gt-typo", "typo-g")
    r = kafkapy("groups", "reset-offsets", "--group", "typo-g", "--topic", "typo-topic", "--to-latest",
                bootstrap=bootstrap)
    assert r.code == 1
    assert "typo-topic: UNKNOWN_TOPIC_OR_PARTITION" in r.stderr
    topics = [t["topic"] for t in kafkapy("topics", "list", "--json", bootstrap=bootstrap).json()]
    assert "typo-topic" not in topics


def test_reset_modes_dry_run_and_execute(bootstrap: str, tmp_path: Path) -> None:
    _seed_group(bootstrap, "gt-reset", "reset-g")
    assert _committed(bootstrap, "reset-g") == {0: 3, 1: 3}

    def plan(*args: str) -> dict[int, int]:
        r = kafkapy("groups", "reset-offsets", "--group", "reset-g", *args, "--json", bootstrap=bootstrap)
        assert r.code == 0, r.stderr
        return {row["partition"]: row["new_offset"] for row in r.json()}

    assert plan("--all-topics", "--to-earliest") == {0: 0, 1: 0}
    assert _committed(bootstrap, "reset-g") == {0: 3, 1: 3}  # a dry run changes nothing
    assert plan("--topic", "gt-reset:1", "--shift-by", "-2") == {1: 1}
    assert plan("--topic", "gt-reset", "--shift-by", "-10") == {0: 0, 1: 0}  # clamped to the log
    assert plan("--topic", "gt-reset", "--to-offset", "99") == {0: 3, 1: 3}
    assert plan("--all-topics", "--to-datetime", "2000-01-01T00:00:00") == {0: 0, 1: 0}
    assert plan("--all-topics", "--to-datetime", "2999-01-01T00:00:00Z") == {0: 3, 1: 3}
    assert plan("--all-topics", "--by-duration", "PT1H") == {0: 0, 1: 0}
    assert plan("--all-topics", "--to-current") == {0: 3, 1: 3}
    csv_file = tmp_path / "plan.csv"
    csv_file.write_text("gt-reset,0,1\ngt-reset,1,2\n")
    assert plan("--from-file", str(csv_file)) == {0: 1, 1: 2}

    r = kafkapy("groups", "reset-offsets", "--group", "reset-g", "--from-file", str(csv_file), "--execute",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert "offsets committed" in r.stdout
    assert _committed(bootstrap, "reset-g") == {0: 1, 1: 2}
    r = kafkapy("groups", "reset-offsets", "--all-groups", "--topic", "gt-reset", "--to-latest", "--dry-run",
                "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert {row["group"] for row in r.json()} >= {"reset-g"}

    # --export: Kafka's CSV, which --from-file takes back (several groups: the group column first)
    r = kafkapy("groups", "reset-offsets", "--group", "reset-g", "--all-topics", "--shift-by", "1", "--export",
                bootstrap=bootstrap)
    assert (r.code, r.stdout) == (0, "gt-reset,0,2\ngt-reset,1,3\n"), r.stderr
    csv_file.write_text(r.stdout)
    assert kafkapy("groups", "reset-offsets", "--group", "reset-g", "--from-file", str(csv_file), "--execute",
                   bootstrap=bootstrap).code == 0
    assert _committed(bootstrap, "reset-g") == {0: 2, 1: 3}
    csv_file.write_text("other-g,gt-reset,0,0\nreset-g,gt-reset,0,1\nother-g,gt-reset,1,0\n")
    assert plan("--from-file", str(csv_file)) == {0: 1}  # only this group's rows
    r = kafkapy("groups", "reset-offsets", "--group", "reset-g", "--all-topics", "--to-current", "--export", "--json",
                bootstrap=bootstrap)
    assert r.code == 2
    assert "choose one" in r.stderr

    r = kafkapy("groups", "reset-offsets", "--group", "reset-g", "--all-topics", bootstrap=bootstrap)
    assert r.code == 2
    assert "choose exactly one" in r.stderr
    r = kafkapy("groups", "reset-offsets", "--group", "reset-g", "--to-earliest", bootstrap=bootstrap)
    assert r.code == 2
    assert "--all-topics" in r.stderr


def test_active_group_refused_before_any_plan_and_views(bootstrap: str) -> None:
    _seed_group(bootstrap, "gt-live", "live-g")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "consume", "gt-live", "--group", "live-g", "--bootstrap-server",
         bootstrap],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            (g,) = kafkapy("groups", "describe", "--group", "live-g", "--json", bootstrap=bootstrap).json()
            if g["state"] == "Stable":
                break
            assert time.monotonic() < deadline, g
            time.sleep(0.3)
        members = kafkapy("groups", "describe", "--group", "live-g", "--members", bootstrap=bootstrap)
        assert members.code == 0
        row = next(line.split() for line in members.stdout.splitlines() if line.startswith("live-g"))
        assert row[-1] == "2"  # the one member owns both partitions
        verbose = kafkapy("groups", "describe", "--group", "live-g", "--members", "--verbose", bootstrap=bootstrap)
        row = next(line.split() for line in verbose.stdout.splitlines() if line.startswith("live-g"))
        assert row[-2:] == ["2", "gt-live(0,1)"]  # kafka-consumer-groups.sh's ASSIGNMENT column
        (doc,) = kafkapy("groups", "describe", "--group", "live-g", "--members", "--json", bootstrap=bootstrap).json()
        assert [m["assignment"] for m in doc["member_list"]] == [{"gt-live": [0, 1]}]
        state = kafkapy("groups", "describe", "--group", "live-g", "--state", bootstrap=bootstrap)
        assert any(line.split()[:1] == ["live-g"] and "Stable" in line.split() for line in state.stdout.splitlines())

        r = kafkapy("groups", "reset-offsets", "--group", "live-g", "--all-topics", "--to-earliest", "--execute",
                    bootstrap=bootstrap)
        assert r.code == 1
        assert "group live-g is inactive, but its current state is Stable" in r.stderr
        assert "stop its consumers first" in r.stderr
        assert "NEW-OFFSET" not in r.stdout
        r = kafkapy("groups", "delete-offsets", "--group", "live-g", "--topic", "gt-live", bootstrap=bootstrap)
        assert r.code == 1
        assert "GROUP_SUBSCRIBED_TO_TOPIC" in r.stderr
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    r = kafkapy("groups", "delete-offsets", "--group", "live-g", "--topic", "gt-live:0", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert _committed(bootstrap, "live-g") == {1: 3}
    listed = kafkapy("groups", "list", "--json", bootstrap=bootstrap).json()
    assert {"group": "live-g", "state": "Empty"} in [{k: g[k] for k in ("group", "state")} for g in listed]
    assert kafkapy("groups", "delete", "--group", "live-g", bootstrap=bootstrap).code == 0
    r = kafkapy("groups", "delete", "--group", "live-g", bootstrap=bootstrap)
    assert r.code == 1
    assert "GROUP_ID_NOT_FOUND" in r.stderr
    r = kafkapy("groups", "describe", "--group", "live-g", bootstrap=bootstrap)
    assert r.code == 1
    assert "does not exist" in r.stderr


def test_kip848_consumer_group_is_described_and_protected(bootstrap: str) -> None:
    """A group.protocol=consumer group: DescribeGroups does not know it (Kafka 4 answers
    GROUP_ID_NOT_FOUND), so describe and the reset's activity check use ConsumerGroupDescribe."""
    assert kafkapy("topics", "create", "gt-848", "--partitions", "2", bootstrap=bootstrap).code == 0
    assert kafkapy("produce", "gt-848", stdin="a\nb\n", bootstrap=bootstrap).code == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "consume", "gt-848", "--group", "g-848", "--from-beginning",
         "--consumer-property", "group.protocol=consumer", "--bootstrap-server", bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    try:
        assert proc.stdout is not None
        assert sorted([proc.stdout.readline(), proc.stdout.readline()]) == [b"a\n", b"b\n"]
        deadline = time.monotonic() + 30
        while True:
            (g,) = kafkapy("groups", "describe", "--group", "g-848", "--json", bootstrap=bootstrap).json()
            if g["state"] == "Stable" and g["member_list"] and g["member_list"][0]["partitions"] == 2:
                break
            assert time.monotonic() < deadline, g
            time.sleep(0.3)
        assert g["protocol_type"] == "consumer"
        assert {o["consumer_id"] for o in g["offsets"]} == {g["member_list"][0]["member_id"]}
        assert g["member_list"][0]["assignment"] == {"gt-848": [0, 1]}  # from ConsumerGroupDescribe
        r = kafkapy("groups", "reset-offsets", "--group", "g-848", "--all-topics", "--to-earliest", "--execute",
                    bootstrap=bootstrap)
        assert r.code == 1
        assert "current state is Stable" in r.stderr
        proc.send_signal(signal.SIGINT)
        _, err = communicate(proc, timeout=30)
        assert proc.returncode == 0, err
        assert b"Traceback" not in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    deadline = time.monotonic() + 30
    while kafkapy("groups", "describe", "--group", "g-848", "--json", bootstrap=bootstrap).json()[0]["state"] != "Empty":
        assert time.monotonic() < deadline
        time.sleep(0.3)
    r = kafkapy("groups", "reset-offsets", "--group", "g-848", "--all-topics", "--to-earliest", "--execute",
                bootstrap=bootstrap)
    assert r.code == 0, r.stderr


def test_describe_a_group_whose_topic_was_deleted(bootstrap: str) -> None:
    """Regression: describe failed with UNKNOWN_TOPIC_OR_PARTITION for the whole group."""
    _seed_group(bootstrap, "gt-gone", "gone-g")
    assert kafkapy("topics", "delete", "gt-gone", bootstrap=bootstrap).code == 0
    deadline = time.monotonic() + 20
    while "gt-gone" in kafkapy("topics", "list", bootstrap=bootstrap).stdout:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    r = kafkapy("groups", "describe", "--group", "gone-g", "--json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    rows = r.json()[0]["offsets"]
    # (Kafka drops a deleted topic's offsets; kafkapy keeps them: either way describe answers)
    assert all(o["current_offset"] == 3 and o["log_end_offset"] is None for o in rows)


def test_describe_and_delete_take_the_group_as_an_argument(bootstrap: str) -> None:
    """`groups describe G` as `topics describe T` (and `--group G`, Kafka's spelling)."""
    _seed_group(bootstrap, "gt-pos", "pos-g")
    positional = kafkapy("groups", "describe", "pos-g", "--json", bootstrap=bootstrap)
    assert positional.code == 0, positional.stderr
    flagged = kafkapy("groups", "describe", "--group", "pos-g", "--json", bootstrap=bootstrap)
    assert positional.json() == flagged.json()
    assert positional.json()[0]["offsets"][0]["current_offset"] == 3
    deleted = kafkapy("groups", "delete", "pos-g", bootstrap=bootstrap)
    assert deleted.code == 0, deleted.stderr
    assert "pos-g" not in kafkapy("groups", "list", bootstrap=bootstrap).stdout
