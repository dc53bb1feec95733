"""`kafkapy produce` and `kafkapy consume` as a user runs them, against a real broker."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import broker, communicate, kafkapy


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    r = kafkapy("topics", "create", topic, "--partitions", str(partitions), bootstrap=bootstrap)
    assert r.code == 0, r.stderr


def test_json_round_trip_of_keys_headers_and_binary_values(bootstrap: str) -> None:
    create(bootstrap, "rt", 2)
    binary = bytes(range(256))
    records = [
        {"key": "k1", "value": "plain text", "headers": [["h1", "a"], ["h1", "b"]], "partition": 0},
        {"key": {"base64": base64.b64encode(b"\xff\x00key").decode()},
         "value": {"base64": base64.b64encode(binary).decode()},
         "headers": [["bin", {"base64": base64.b64encode(b"\x00\xfe").decode()}], ["null", None]],
         "partition": 1},
        {"key": None, "value": None, "headers": [], "partition": 1},
        {"key": "ü-ключ", "value": "line\nbreak", "headers": {"x": "y"}, "partition": 0},
    ]
    stdin = "".join(json.dumps(r) + "\n" for r in records)
    r = kafkapy("produce", "rt", "--format", "json", "--verbose", "--json", stdin=stdin, bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    acks = [json.loads(line) for line in r.stdout.splitlines()]
    assert sorted((a["partition"], a["offset"]) for a in acks) == [(0, 0), (0, 1), (1, 0), (1, 1)]

    r = kafkapy("consume", "rt", "--from-beginning", "--exit-at-end", "--format", "json", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    got = sorted((json.loads(line) for line in r.stdout.splitlines()), key=lambda d: (d["partition"], d["offset"]))
    assert [(g["partition"], g["offset"]) for g in got] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    by_place = {(g["partition"], g["offset"]): g for g in got}
    assert by_place[(0, 0)]["key"] == "k1"
    assert by_place[(0, 0)]["headers"] == [["h1", "a"], ["h1", "b"]]
    assert base64.b64decode(by_place[(1, 0)]["value"]["base64"]) == binary
    assert base64.b64decode(by_place[(1, 0)]["key"]["base64"]) == b"\xff\x00key"
    assert by_place[(1, 0)]["headers"] == [["bin", {"base64": base64.b64encode(b"\x00\xfe").decode()}],
                                           ["null", None]]
    assert by_place[(1, 1)]["key"] is None
    assert by_place[(1, 1)]["value"] is None
    assert by_place[(0, 1)]["key"] == "ü-ключ"
    assert by_place[(0, 1)]["value"] == "line\nbreak"
    assert by_place[(0, 1)]["timestamp_type"] == "CreateTime"
    # and back again: what consume printed produces the same records
    again = "".join(json.dumps({k: g[k] for k in ("key", "value", "headers", "partition")}) + "\n" for g in got)
    create(bootstrap, "rt2", 2)
    assert kafkapy("produce", "rt2", "--format", "json", stdin=again, bootstrap=bootstrap).code == 0
    r2 = kafkapy("consume", "rt2", "--from-beginning", "--exit-at-end", "--format", "json", bootstrap=bootstrap)
    got2 = sorted((json.loads(line) for line in r2.stdout.splitlines()), key=lambda d: (d["partition"], d["offset"]))
    assert [{k: g[k] for k in ("key", "value", "headers", "partition", "offset")} for g in got2] == [
        {k: g[k] for k in ("key", "value", "headers", "partition", "offset")} for g in got]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_text_with_key_separator_header_and_compression(bootstrap: str, codec: str) -> None:
    topic = f"text-{codec}"
    create(bootstrap, topic)
    r = kafkapy("produce", topic, "--key-separator", ":", "--header", "src=cli", "--compression", codec,
                "--acks", "1", stdin="a:1\nb:2:two\n", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    r = kafkapy("consume", topic, "--from-beginning", "--exit-at-end", "-f", "%p/%o %k=%s %h|%K|%S\\n",
                bootstrap=bootstrap)
    assert r.stdout.splitlines() == ["0/0 a=1 src=cli|1|1", "0/1 b=2:two src=cli|1|5"]
    assert "Processed a total of 2 messages" in r.stderr


def test_start_positions_and_limits(bootstrap: str) -> None:
    create(bootstrap, "pos", 1)
    assert kafkapy("produce", "pos", stdin="".join(f"v{i}\n" for i in range(10)), bootstrap=bootstrap).code == 0
    def values(*args: str) -> list[str]:
        r = kafkapy("consume", "pos", *args, bootstrap=bootstrap)
        assert r.code == 0, r.stderr
        return r.stdout.splitlines()
    assert values("--from-beginning", "--exit-at-end") == [f"v{i}" for i in range(10)]
    assert values("--offset", "7", "--exit-at-end") == ["v7", "v8", "v9"]
    assert values("--offset", "-2", "--exit-at-end") == ["v8", "v9"]
    # kafka-console-consumer's names
    assert values("--offset", "earliest", "--max-messages", "2") == ["v0", "v1"]
    assert values("--offset", "latest", "--exit-at-end") == []
    r = kafkapy("consume", "pos", "--offset", "soon", bootstrap=bootstrap)
    assert r.code == 2
    assert "not an offset (N, -N, earliest or latest)" in r.stderr
    assert values("--from-beginning", "--max-messages", "3") == ["v0", "v1", "v2"]
    assert values("--since", "1h", "--exit-at-end") == [f"v{i}" for i in range(10)]
    assert values("--timestamp", str(int(time.time() * 1000) + 3_600_000), "--exit-at-end") == []
    assert values("--exit-at-end") == []  # default: new records only
    assert values("--timeout-ms", "1500") == []
    # --topic, as kafka-console-producer / -consumer take it
    assert kafkapy("produce", "--topic", "pos", stdin="v10\n", bootstrap=bootstrap).code == 0
    assert kafkapy("consume", "--topic", "pos", "--offset", "-1", "--exit-at-end",
                   bootstrap=bootstrap).stdout.splitlines() == ["v10"]
    for command in ("produce", "consume"):
        r = kafkapy(command, bootstrap=bootstrap)
        assert (r.code, "name the topic (TOPIC or --topic TOPIC)" in r.stderr) == (2, True), r.stderr
        r = kafkapy(command, "pos", "--topic", "other", bootstrap=bootstrap)
        assert (r.code, "two topics named" in r.stderr) == (2, True), r.stderr


def test_group_consume_commits_and_shows_in_groups_describe(bootstrap: str) -> None:
    create(bootstrap, "grp", 2)
    kafkapy("produce", "grp", "--key-separator", ":", stdin="a:1\nb:2\nc:3\nd:4\n", bootstrap=bootstrap)
    r = kafkapy("consume", "grp", "--group", "cli-g", "--from-beginning", "--exit-at-end", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert sorted(r.stdout.split()) == ["1", "2", "3", "4"]
    described = kafkapy("groups", "describe", "--group", "cli-g", "--json", bootstrap=bootstrap).json()
    (group,) = described
    assert group["state"] == "Empty"
    assert sum(o["current_offset"] for o in group["offsets"]) == 4
    assert all(o["lag"] == 0 for o in group["offsets"])
    # a second run of the same group starts where the first committed: nothing new
    r = kafkapy("consume", "grp", "--group", "cli-g", "--exit-at-end", bootstrap=bootstrap)
    assert r.stdout == ""


def test_transactional_and_idempotent_produce(bootstrap: str) -> None:
    create(bootstrap, "txn", 1)
    r = kafkapy("produce", "txn", "--transactional-id", "cli-tx", stdin="t1\nt2\n", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    r = kafkapy("produce", "txn", "--idempotent", stdin="i1\n", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    r = kafkapy("consume", "txn", "--from-beginning", "--exit-at-end", "--isolation-level", "read_committed",
                "-f", "%o %s\\n", bootstrap=bootstrap)
    # offset 2 is the transaction's commit marker
    assert r.stdout.splitlines() == ["0 t1", "1 t2", "3 i1"]


def test_produce_errors(bootstrap: str) -> None:
    create(bootstrap, "perr", 1)
    r = kafkapy("produce", "perr", "--partition", "5", stdin="x\n", bootstrap=bootstrap)
    assert r.code == 1
    assert "no partition 5" in r.stderr
    r = kafkapy("produce", "perr", "--format", "json", stdin="not json\n", bootstrap=bootstrap)
    assert r.code == 1
    assert "line 1: not JSON" in r.stderr
    r = kafkapy("produce", "perr", "--key-separator", ":", stdin="nokey\n", bootstrap=bootstrap)
    assert r.code == 1
    assert "line 1 has no key separator" in r.stderr
    r = kafkapy("consume", "perr", "--offset", "1", "--since", "1m", bootstrap=bootstrap)
    assert r.code == 2
    r = kafkapy("consume", "no-such-topic", "--exit-at-end", bootstrap=bootstrap)
    assert r.code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in r.stderr


def test_unknown_topic_without_auto_creation_names_the_code() -> None:
    with broker("auto.create.topics.enable=false") as address:
        r = kafkapy("produce", "nope", stdin="x\n", bootstrap=address)
        assert r.code == 1
        assert "records to nope were not delivered: UNKNOWN_TOPIC_OR_PARTITION (error code 3)" in r.stderr
        assert "kafkapy topics list" in r.stderr
        r = kafkapy("consume", "nope", "--group", "g", "--exit-at-end", bootstrap=address)
        assert r.code == 1
        assert "nope: UNKNOWN_TOPIC_OR_PARTITION (error code 3)" in r.stderr
        assert kafkapy("topics", "list", "--exclude-internal", "--json", bootstrap=address).json() == []


def test_progress_summary_for_large_input(bootstrap: str) -> None:
    create(bootstrap, "big", 1)
    r = kafkapy("produce", "big", "--compression", "lz4", stdin="x" * 100 + "\n" * 1, bootstrap=bootstrap)
    assert "produced" not in r.stderr  # small inputs stay quiet
    assert "producing" not in r.stderr  # no bar when stderr is not a terminal
    r = kafkapy("produce", "big", "--compression", "lz4", stdin=("y" * 100 + "\n") * 20_000, bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert "produced 20000 records to big in" in r.stderr
    assert "records/s" in r.stderr


def _produce_on_a_terminal(bootstrap: str, topic: str, data: bytes, stdin_kind: str, tmp_path: Path) -> str:
    """`kafkapy produce` with stderr on a pseudo-terminal; what the terminal showed, escapes removed."""
    import pty
    import threading

    master, terminal = pty.openpty()
    stdin: Any
    if stdin_kind == "redirected file":
        (tmp_path / "input.txt").write_bytes(data)
        stdin = (tmp_path / "input.txt").open("rb")
    else:
        stdin = subprocess.PIPE if stdin_kind == "pipe" else terminal
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "produce", topic, "--bootstrap-server", bootstrap],
        stdin=stdin, stdout=subprocess.DEVNULL, stderr=terminal,
        env={**os.environ, "KAFKAPY_PROFILE": os.devnull, "COLUMNS": "120", "TERM": "xterm"},
    )
    os.close(terminal)
    shown: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    if stdin_kind == "pipe":
        assert proc.stdin is not None
        proc.stdin.write(data)
        proc.stdin.close()
    elif stdin_kind == "typed":
        os.write(master, data + b"\x04")  # Ctrl-D: end of input
    try:
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        if stdin_kind == "redirected file":
            stdin.close()
    reader.join(10)
    os.close(master)
    return re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", b"".join(shown).decode(errors="replace"))


@pytest.mark.parametrize("stdin_kind", ["redirected file", "pipe", "typed"])
def test_progress_bar_for_stdin_on_a_terminal(bootstrap: str, tmp_path: Path, stdin_kind: str) -> None:
    """A bar through the file's size for stdin redirected from a file, bytes so far for a pipe,
    none while a person types; then the rate line."""
    topic = f"bar-{stdin_kind.replace(' ', '-')}"
    create(bootstrap, topic, 1)
    lines = 2 if stdin_kind == "typed" else 30_000
    shown = _produce_on_a_terminal(bootstrap, topic, (b"z" * 100 + b"\n") * lines, stdin_kind, tmp_path)
    if stdin_kind == "typed":
        assert "producing" not in shown
    else:
        assert "producing 30,000 records" in shown
        assert ("3.0/3.0 MB" if stdin_kind == "redirected file" else "3.0/? MB") in shown
        assert f"produced 30000 records to {topic} in" in shown
    r = kafkapy("consume", topic, "--from-beginning", "--exit-at-end", "--format", "json", bootstrap=bootstrap)
    assert len(r.stdout.splitlines()) == lines


def test_ctrl_c_stops_a_following_consumer_cleanly(bootstrap: str) -> None:
    create(bootstrap, "follow", 1)
    kafkapy("produce", "follow", stdin="one\n", bootstrap=bootstrap)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "consume", "follow", "--group", "follow-g", "--from-beginning",
         "--bootstrap-server", bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"one\n"
        proc.send_signal(signal.SIGINT)
        _, err = communicate(proc, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0
    assert b"Traceback" not in err
    assert b"Processed a total of 1 messages" in err
    described = kafkapy("groups", "describe", "--group", "follow-g", "--json", bootstrap=bootstrap).json()
    assert described[0]["offsets"][0]["current_offset"] == 1  # committed on the way out


def test_sigterm_stops_a_group_consumer_that_commits_and_leaves(bootstrap: str) -> None:
    """`timeout`, `kill` or a container stop send SIGTERM: the consumer commits what it printed and
    sends LeaveGroup, so the group's next member is assigned at once, not after the session
    timeout (45 s)."""
    create(bootstrap, "term", 1)
    kafkapy("produce", "term", stdin="one\n", bootstrap=bootstrap)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "consume", "term", "--group", "term-g", "--from-beginning",
         "--bootstrap-server", bootstrap],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"one\n"
        proc.send_signal(signal.SIGTERM)
        _, err = communicate(proc, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, err
    assert b"Processed a total of 1 messages" in err
    described = kafkapy("groups", "describe", "--group", "term-g", "--json", bootstrap=bootstrap).json()
    assert described[0]["offsets"][0]["current_offset"] == 1
    kafkapy("produce", "term", stdin="two\n", bootstrap=bootstrap)
    started = time.monotonic()
    r = kafkapy("consume", "term", "--group", "term-g", "--max-messages", "1", bootstrap=bootstrap)
    assert r.code == 0, r.stderr
    assert r.stdout == "two\n"
    assert time.monotonic() - started < 15  # assigned at once: the old member left


def test_sigterm_makes_produce_deliver_what_it_read(bootstrap: str) -> None:
    """Records read but still in the producer's buffer (linger) are flushed on SIGTERM too."""
    create(bootstrap, "term-p", 1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kafkapy", "produce", "term-p", "--producer-property", "linger.ms=20000",
         "--bootstrap-server", bootstrap],
        stdin=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "KAFKAPY_PROFILE": os.devnull},
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(b"kept\n")
        proc.stdin.flush()
        time.sleep(3)  # read and handed to librdkafka, which holds it for linger.ms
        proc.send_signal(signal.SIGTERM)
        _, err = communicate(proc, timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 143, err
    assert b"Traceback" not in err
    r = kafkapy("consume", "term-p", "--from-beginning", "--exit-at-end", bootstrap=bootstrap)
    assert r.stdout == "kept\n"
