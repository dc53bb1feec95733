"""kafkajs (Node.js) against a real kafkapy broker subprocess.

Why kafkajs: it is a pure-JavaScript client with its own hand-written protocol code and its own
choice of API versions (Produce v7, Fetch v11, legacy AlterConfigs, transactions with
`idempotent: true`), so it exercises paths neither librdkafka nor the Python clients take.

How: the small Node scripts in `compat_tests/kafkajs/` (admin, produce, consume, transaction)
each read one JSON object on stdin, do one job with kafkajs 2.x (pinned in its package-lock)
and print one JSON line; this file runs them as subprocesses and asserts on that output. Every
script carries its own hard timeout and every subprocess call a larger one, so nothing here can
hang.

Installation: `npm ci` runs in `compat_tests/kafkajs/` when `node_modules` lacks the locked
kafkajs version (the directory is git-ignored and reused between runs). Without node/npm the
module skips with a visible reason, except under CI=true, where that is a failure (`.ci/run`
installs nodejs and npm when node is absent).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from compat_tests.conftest import (
    BrokerFactory,
    BrokerProcess,
    in_ci,
    stored_codecs,
    unique_topic,
)

pytestmark = pytest.mark.timeout(120)

KAFKAJS_DIR = Path(__file__).parent / "kafkajs"
NODE_TIMEOUT_S = 40.0
NPM_TIMEOUT_S = 180.0
N_MESSAGES = 1000
N_PARTITIONS = 3
N_KEYS = 37
CHUNK = 100  # messages per producer.send: several record batches per partition
TS_STEP_MS = 10
DYNAMIC_TOPIC_CONFIG = 1  # DescribeConfigs ConfigSource codes
DEFAULT_CONFIG = 5
GZIP = 1


def _locked_kafkajs_version() -> str:
    lock = json.loads((KAFKAJS_DIR / "package-lock.json").read_text())
    return str(lock["packages"]["node_modules/kafkajs"]["version"])


def _installed_kafkajs_version() -> str | None:
    manifest = KAFKAJS_DIR / "node_modules" / "kafkajs" / "package.json"
    if not manifest.exists():
        return None
    return str(json.loads(manifest.read_text()).get("version"))


class KafkaJs:
    """Runs the Node scripts; `run` returns the script's JSON or fails with its stderr."""

    def __init__(self, node: str, bootstrap: str) -> None:
        self.node = node
        self.bootstrap = bootstrap

    def run(self, script: str, timeout_s: float = NODE_TIMEOUT_S, **args: Any) -> Any:
        payload = dict(args, bootstrap=self.bootstrap, timeoutMs=int(timeout_s * 1000))
        try:
            proc = subprocess.run(
                [self.node, str(KAFKAJS_DIR / script), "-"],
                input=json.dumps(payload).encode(),
                capture_output=True,
                cwd=KAFKAJS_DIR,
                timeout=timeout_s + 10,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            stderr = (exc.stderr or b"").decode("utf-8", "replace")
            pytest.fail(f"{script} ignored its own {timeout_s}s timeout; stderr:\n{stderr[-4000:]}")
        stderr = proc.stderr.decode("utf-8", "replace")
        assert proc.returncode == 0, (
            f"{script} exited {proc.returncode} (3 = its timeout); stderr:\n{stderr[-4000:]}"
        )
        return json.loads(proc.stdout)

    def admin(self, *actions: dict[str, Any]) -> list[Any]:
        results: list[Any] = self.run("admin.js", actions=list(actions))["results"]
        return results

    def create_topic(self, topic: str, partitions: int = N_PARTITIONS, **configs: str) -> None:
        created = self.admin(
            {
                "op": "createTopics",
                "topics": [{"topic": topic, "numPartitions": partitions, "configs": configs}],
            }
        )
        assert created == [True], f"createTopics({topic}) answered {created}"

    def consume(
        self, topic: str, group_id: str, expected: int, **extra: Any
    ) -> list[dict[str, Any]]:
        """Group consumer from the beginning; fails unless exactly `expected` messages arrive."""
        out = self.run("consume.js", topic=topic, groupId=group_id, expected=expected, **extra)
        got: list[dict[str, Any]] = out["messages"]
        assert len(got) == expected, f"consumed {len(got)} of {expected} messages from {topic}"
        return got


@pytest.fixture(scope="module")
def node() -> str:
    node_bin, npm_bin = shutil.which("node"), shutil.which("npm")
    if node_bin is None or npm_bin is None:
        missing = "node" if node_bin is None else "npm"
        if in_ci():
            pytest.fail(f"{missing} is not installed, but CI=true: .ci/run must install nodejs npm")
        pytest.skip(f"{missing} not installed (apt-get install nodejs npm); required in CI")
    wanted = _locked_kafkajs_version()
    if _installed_kafkajs_version() != wanted:
        proc = subprocess.run(
            [npm_bin, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=KAFKAJS_DIR,
            capture_output=True,
            timeout=NPM_TIMEOUT_S,
            check=False,
        )
        assert proc.returncode == 0, f"npm ci failed:\n{proc.stderr.decode(errors='replace')}"
        assert _installed_kafkajs_version() == wanted, "npm ci did not install the locked kafkajs"
    return node_bin


@pytest.fixture(scope="module")
def kafkajs(node: str, broker: BrokerProcess) -> KafkaJs:
    return KafkaJs(node, broker.bootstrap)


def keyed_messages(n: int, tag: str, base_ts: int | None = None) -> list[dict[str, Any]]:
    """Message i: key `key-(i % N_KEYS)`, a value naming i, headers `seq` and `client`."""
    msgs: list[dict[str, Any]] = []
    for i in range(n):
        msg: dict[str, Any] = {
            "key": f"key-{i % N_KEYS}",
            "value": f"{tag}-value-{i:05d}-" * 3,
            "headers": {"seq": str(i), "client": "kafkajs"},
        }
        if base_ts is not None:
            msg["timestamp"] = base_ts + i * TS_STEP_MS
        msgs.append(msg)
    return msgs


def seq_of(msg: dict[str, Any]) -> int:
    return int(msg["headers"]["seq"][0])


def by_partition(got: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    parts: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for msg in got:
        parts[msg["partition"]].append(msg)
    return parts


@dataclass(frozen=True)
class KeyedTopic:
    """The shared 1,000-message topic: what was sent, what kafkajs acked, what it consumed."""

    name: str
    group_id: str
    sent: list[dict[str, Any]]
    sends: list[list[dict[str, Any]]]
    got: list[dict[str, Any]]
    base_ts: int


@pytest.fixture(scope="module")
def keyed_topic(kafkajs: KafkaJs) -> KeyedTopic:
    """Create a 3-partition topic, produce 1,000 keyed messages with headers (acks=-1, 10 sends
    of 100), consume them all with a consumer group. Several tests read this one topic, so the
    whole module stays one produce and one group join long."""
    name = unique_topic("kafkajs-keyed")
    kafkajs.create_topic(name)
    base_ts = (int(time.time()) - 3600) * 1000  # explicit, distinct, inside retention
    sent = keyed_messages(N_MESSAGES, "keyed", base_ts)
    sends = kafkajs.run("produce.js", topic=name, messages=sent, acks=-1, chunkSize=CHUNK)["sends"]
    group_id = unique_topic("kafkajs-group")
    got = kafkajs.consume(name, group_id, N_MESSAGES)
    return KeyedTopic(name, group_id, sent, sends, got, base_ts)


def test_create_topic_metadata(kafkajs: KafkaJs, keyed_topic: KeyedTopic) -> None:
    topics, metadata = kafkajs.admin(
        {"op": "listTopics"}, {"op": "fetchTopicMetadata", "topics": [keyed_topic.name]}
    )
    assert keyed_topic.name in topics
    (topic,) = metadata["topics"]
    partitions = sorted(topic["partitions"], key=lambda p: p["partitionId"])
    assert [p["partitionId"] for p in partitions] == list(range(N_PARTITIONS))
    assert all(p["partitionErrorCode"] == 0 and p["leader"] >= 0 for p in partitions)
    assert all(p["replicas"] == [p["leader"]] == p["isr"] for p in partitions)


def test_keyed_produce_consume_1000(keyed_topic: KeyedTopic) -> None:
    got = keyed_topic.got
    seqs = sorted(seq_of(m) for m in got)
    assert seqs == list(range(N_MESSAGES)), "messages lost or delivered twice"
    for msg in got:
        sent = keyed_topic.sent[seq_of(msg)]
        assert msg["key"] == sent["key"]
        assert msg["value"] == sent["value"]
        assert msg["headers"] == {name: [v] for name, v in sent["headers"].items()}
        assert msg["timestamp"] == sent["timestamp"], "CreateTime not kept"
    partitions_of_key: dict[str, set[int]] = defaultdict(set)
    for msg in got:
        partitions_of_key[msg["key"]].add(msg["partition"])
    assert len(partitions_of_key) == N_KEYS
    assert all(len(p) == 1 for p in partitions_of_key.values()), "a key landed on two partitions"
    parts = by_partition(got)
    assert set(parts) == set(range(N_PARTITIONS)), "the partitioner did not see 3 partitions"
    for partition, msgs in parts.items():
        assert [m["offset"] for m in msgs] == list(range(len(msgs))), f"partition {partition}"
        order = [seq_of(m) for m in msgs]
        assert order == sorted(order), f"partition {partition}: produce order not kept"


def test_produce_acks_report_base_offsets(keyed_topic: KeyedTopic) -> None:
    """Each acks=-1 send's RecordMetadata names the offset its first message got."""
    first_offset: dict[tuple[int, int], int] = {}  # (send index, partition) -> offset
    for msg in keyed_topic.got:
        key = (seq_of(msg) // CHUNK, msg["partition"])
        first_offset[key] = min(first_offset.get(key, msg["offset"]), msg["offset"])
    assert len(keyed_topic.sends) == N_MESSAGES // CHUNK
    for index, send in enumerate(keyed_topic.sends):
        acked = {m["partition"]: int(m["baseOffset"]) for m in send}
        assert all(m["errorCode"] == 0 for m in send)
        expected = {p: off for (i, p), off in first_offset.items() if i == index}
        assert acked == expected, f"send {index}"


def test_group_commits_and_resumes(kafkajs: KafkaJs, topic_name: str) -> None:
    """kafkajs auto-commits per batch; a restarted member of the group resumes after them."""
    kafkajs.create_topic(topic_name)
    group_id = unique_topic("kafkajs-resume")
    kafkajs.run("produce.js", topic=topic_name, messages=keyed_messages(60, "first"))
    kafkajs.consume(topic_name, group_id, 60)
    committed, offsets = kafkajs.admin(
        {"op": "fetchOffsets", "groupId": group_id, "topics": [topic_name]},
        {"op": "fetchTopicOffsets", "topic": topic_name},
    )
    high = {o["partition"]: o["high"] for o in offsets}
    assert {p["partition"]: p["offset"] for p in committed[0]["partitions"]} == high
    kafkajs.run("produce.js", topic=topic_name, messages=keyed_messages(30, "second"))
    again = kafkajs.consume(topic_name, group_id, 30)
    assert sorted(m["value"] for m in again) == sorted(
        m["value"] for m in keyed_messages(30, "second")
    ), "the group re-read committed messages or skipped new ones"


def test_seek_to_offset(kafkajs: KafkaJs, keyed_topic: KeyedTopic) -> None:
    parts = by_partition(keyed_topic.got)
    target = len(parts[1]) // 2
    expected = N_MESSAGES - target  # partition 1 from `target`, the others from the beginning
    got = kafkajs.consume(
        keyed_topic.name,
        unique_topic("kafkajs-seek"),
        expected,
        seek=[{"partition": 1, "offset": target}],
    )
    after_seek = by_partition(got)[1]
    assert [m["offset"] for m in after_seek] == list(range(target, len(parts[1])))
    assert [m["value"] for m in after_seek] == [m["value"] for m in parts[1][target:]]


def test_fetch_topic_offsets(kafkajs: KafkaJs, keyed_topic: KeyedTopic) -> None:
    parts = by_partition(keyed_topic.got)
    middle_ts = keyed_topic.base_ts + (N_MESSAGES // 2) * TS_STEP_MS + 1
    after_all_ts = keyed_topic.base_ts + N_MESSAGES * TS_STEP_MS + 60_000
    offsets, earliest, middle, after_all = kafkajs.admin(
        {"op": "fetchTopicOffsets", "topic": keyed_topic.name},
        {"op": "fetchTopicOffsetsByTimestamp", "topic": keyed_topic.name, "timestamp": 0},
        {"op": "fetchTopicOffsetsByTimestamp", "topic": keyed_topic.name, "timestamp": middle_ts},
        {
            "op": "fetchTopicOffsetsByTimestamp",
            "topic": keyed_topic.name,
            "timestamp": after_all_ts,
        },
    )
    sizes = {p: len(msgs) for p, msgs in parts.items()}
    assert {o["partition"]: (o["low"], o["high"], o["offset"]) for o in offsets} == {
        p: ("0", str(n), str(n)) for p, n in sizes.items()
    }
    assert {o["partition"]: o["offset"] for o in earliest} == {p: "0" for p in sizes}
    # First message at or after the timestamp; kafkajs maps Kafka's "none" (-1) to the high mark.
    expect_middle = {
        p: str(next((m["offset"] for m in msgs if m["timestamp"] >= middle_ts), sizes[p]))
        for p, msgs in parts.items()
    }
    assert {o["partition"]: o["offset"] for o in middle} == expect_middle
    assert all(0 < int(v) < sizes[p] for p, v in expect_middle.items()), "query not mid-log"
    assert {o["partition"]: o["offset"] for o in after_all} == {p: str(n) for p, n in sizes.items()}


def test_gzip_compression(kafkajs: KafkaJs, broker: BrokerProcess, topic_name: str) -> None:
    kafkajs.create_topic(topic_name, partitions=1)
    sent = keyed_messages(300, "gzip")
    kafkajs.run("produce.js", topic=topic_name, messages=sent, compression="gzip", chunkSize=100)
    got = kafkajs.consume(topic_name, unique_topic("kafkajs-gzip"), len(sent))
    assert [(m["key"], m["value"]) for m in got] == [(s["key"], s["value"]) for s in sent]
    assert [m["offset"] for m in got] == list(range(len(sent)))
    codecs = stored_codecs(broker, topic_name)
    assert codecs, "no stored batches found"
    assert set(codecs) == {GZIP}, f"stored batch codecs {codecs}, expected gzip only"


def _entries(described: dict[str, Any]) -> dict[str, tuple[str, bool, int]]:
    (resource,) = described["resources"]
    assert resource["errorCode"] == 0, resource
    return {
        e["configName"]: (e["configValue"], e["isDefault"], e["configSource"])
        for e in resource["configEntries"]
    }


def test_describe_and_alter_topic_config(kafkajs: KafkaJs, topic_name: str) -> None:
    kafkajs.create_topic(topic_name, partitions=1, **{"cleanup.policy": "compact"})
    names = ["cleanup.policy", "retention.ms"]
    describe = {"op": "describeConfigs", "name": topic_name, "configNames": names}
    before, altered, after, bad = kafkajs.admin(
        describe,
        {"op": "alterConfigs", "name": topic_name, "configs": {"retention.ms": "3600000"}},
        describe,
        {
            "op": "alterConfigs",
            "name": topic_name,
            "configs": {"retention.ms": "not-a-number"},
            "expectError": True,
        },
    )
    assert _entries(before) == {
        "cleanup.policy": ("compact", False, DYNAMIC_TOPIC_CONFIG),
        "retention.ms": ("604800000", True, DEFAULT_CONFIG),
    }
    assert [r["errorCode"] for r in altered["resources"]] == [0]
    # Legacy AlterConfigs replaces the topic's whole override set, as Kafka does: the
    # cleanup.policy set at creation goes back to its default.
    assert _entries(after) == {
        "cleanup.policy": ("delete", True, DEFAULT_CONFIG),
        "retention.ms": ("3600000", False, DYNAMIC_TOPIC_CONFIG),
    }
    assert bad["error"]["type"] == "INVALID_CONFIG", bad


def test_delete_topic(kafkajs: KafkaJs, topic_name: str) -> None:
    kafkajs.create_topic(topic_name, partitions=2)
    kafkajs.run("produce.js", topic=topic_name, messages=keyed_messages(20, "doomed"))
    deleted, listed = kafkajs.admin(
        {"op": "deleteTopics", "topics": [topic_name]}, {"op": "listTopics"}
    )
    assert deleted is None
    assert topic_name not in listed
    # The name is free again, with nothing of the old topic left in it.
    kafkajs.create_topic(topic_name, partitions=1)
    metadata, offsets = kafkajs.admin(
        {"op": "fetchTopicMetadata", "topics": [topic_name]},
        {"op": "fetchTopicOffsets", "topic": topic_name},
    )
    assert [p["partitionId"] for p in metadata["topics"][0]["partitions"]] == [0]
    assert offsets == [{"partition": 0, "offset": "0", "high": "0", "low": "0"}]


def test_transactions_commit_and_abort(kafkajs: KafkaJs, topic_name: str) -> None:
    """Commit, abort, commit on one transactional producer; read_committed sees the commits."""
    kafkajs.create_topic(topic_name)

    def batch(tag: str) -> list[dict[str, Any]]:
        return [{"key": f"k{i}", "value": f"{tag}-{i}"} for i in range(12)]

    steps = [("commit", "c1"), ("abort", "a1"), ("commit", "c2")]
    out = kafkajs.run(
        "transaction.js",
        topic=topic_name,
        transactionalId=unique_topic("kafkajs-txn"),
        steps=[{"action": action, "messages": batch(tag)} for action, tag in steps],
    )
    assert [s["action"] for s in out["steps"]] == ["commit", "abort", "commit"]
    committed = kafkajs.consume(topic_name, unique_topic("kafkajs-rc"), 24, readUncommitted=False)
    assert sorted(m["value"] for m in committed) == sorted(
        m["value"] for m in batch("c1") + batch("c2")
    )
    for partition, msgs in by_partition(committed).items():
        offsets = [m["offset"] for m in msgs]
        assert offsets == sorted(offsets), f"partition {partition}"
    # The aborted messages were written (read_uncommitted sees them); only the markers hide them.
    everything = kafkajs.consume(topic_name, unique_topic("kafkajs-ru"), 36, readUncommitted=True)
    assert sorted(m["value"] for m in everything) == sorted(
        m["value"] for m in batch("c1") + batch("a1") + batch("c2")
    )
    # Control records take offsets: the commit markers sit between the data, never delivered.
    (offsets,) = kafkajs.admin({"op": "fetchTopicOffsets", "topic": topic_name})
    per_partition = by_partition(everything)
    for o in offsets:
        data = len(per_partition.get(o["partition"], []))
        markers = int(o["high"]) - data
        assert markers == (3 if data else 0), f"partition {o['partition']}: {markers} markers"


def test_transaction_send_offsets(kafkajs: KafkaJs, topic_name: str) -> None:
    """Consume-transform-produce: offsets sent in a transaction follow its commit or abort."""
    kafkajs.create_topic(topic_name, partitions=2)
    group_id = unique_topic("kafkajs-eos")
    source = unique_topic("kafkajs-eos-source")
    kafkajs.create_topic(source, partitions=2)

    def step(action: str, value: str, offsets: dict[int, int]) -> dict[str, Any]:
        return {
            "action": action,
            "messages": [{"key": "k", "value": value}],
            "sendOffsets": {
                "groupId": group_id,
                "topic": source,
                "partitions": [{"partition": p, "offset": str(o)} for p, o in offsets.items()],
            },
        }

    kafkajs.run(
        "transaction.js",
        topic=topic_name,
        transactionalId=unique_topic("kafkajs-eos-txn"),
        steps=[step("commit", "kept", {0: 45, 1: 7}), step("abort", "dropped", {0: 70, 1: 9})],
    )
    (committed,) = kafkajs.admin({"op": "fetchOffsets", "groupId": group_id, "topics": [source]})
    assert {p["partition"]: p["offset"] for p in committed[0]["partitions"]} == {0: "45", 1: "7"}
    got = kafkajs.consume(topic_name, unique_topic("kafkajs-eos-read"), 1)
    assert [m["value"] for m in got] == ["kept"]


def test_group_members_share_and_rebalance(kafkajs: KafkaJs, topic_name: str) -> None:
    """Two members split 4 partitions; when one leaves, the other takes them all over."""
    partitions = 4
    kafkajs.create_topic(topic_name, partitions=partitions)
    messages = [{"key": f"k{i % 23}", "value": f"v{i}"} for i in range(200)]
    out = kafkajs.run(
        "group.js",
        topic=topic_name,
        groupId=unique_topic("kafkajs-members"),
        partitions=partitions,
        messages=messages,
    )
    leaver, stayer = out["members"]
    # The shared generation: the leaver's last assignment, the one before the stayer's takeover.
    assert len(stayer["assignments"]) >= 2, stayer["assignments"]
    leaver_share, stayer_share = set(leaver["assignments"][-1]), set(stayer["assignments"][-2])
    assert leaver_share, "the first member never got a partition in the shared generation"
    assert stayer_share, "the second member never got a partition in the shared generation"
    assert leaver_share.isdisjoint(stayer_share)
    assert leaver_share | stayer_share == set(range(partitions))
    assert sorted(stayer["assignments"][-1]) == list(range(partitions)), "no takeover on leave"
    phase1 = [m for member in (leaver, stayer) for m in member["messages"] if m["phase"] == 1]
    assert sorted(m["value"] for m in phase1) == sorted(m["value"] for m in messages)
    assert {m["partition"] for m in leaver["messages"]} <= leaver_share
    assert {m["partition"] for m in stayer["messages"] if m["phase"] == 1} <= stayer_share
    phase2 = [m for m in stayer["messages"] if m["phase"] == 2]
    assert sorted(m["value"] for m in phase2) == sorted(m["value"] for m in messages)
    assert not [m for m in leaver["messages"] if m["phase"] == 2]


def test_idempotent_producer_edge_values(kafkajs: KafkaJs, topic_name: str) -> None:
    """Null key, null value (a tombstone), empty value, multi-valued and non-ASCII headers."""
    kafkajs.create_topic(topic_name, partitions=1)
    sent: list[dict[str, Any]] = [
        {"key": None, "value": "no key"},
        {"key": "gone", "value": None},
        {"key": "empty", "value": ""},
        {"key": "hdrs", "value": "x", "headers": {"multi": ["a", "b"], "名前": "値"}},
    ]
    kafkajs.run("produce.js", topic=topic_name, messages=sent, idempotent=True, chunkSize=1)
    got = kafkajs.consume(topic_name, unique_topic("kafkajs-edge"), len(sent))
    assert [(m["key"], m["value"]) for m in got] == [(s["key"], s["value"]) for s in sent]
    assert got[3]["headers"] == {"multi": ["a", "b"], "名前": ["値"]}
    assert [m["offset"] for m in got] == [0, 1, 2, 3]


def test_create_partitions_and_delete_records(kafkajs: KafkaJs, topic_name: str) -> None:
    kafkajs.create_topic(topic_name, partitions=1)
    kafkajs.run("produce.js", topic=topic_name, messages=keyed_messages(50, "trim"))
    again, grown, metadata, _, trimmed = kafkajs.admin(
        {"op": "createTopics", "topics": [{"topic": topic_name, "numPartitions": 1}]},
        {"op": "createPartitions", "topic": topic_name, "count": 3},
        {"op": "fetchTopicMetadata", "topics": [topic_name]},
        {
            "op": "deleteTopicRecords",
            "topic": topic_name,
            "partitions": [{"partition": 0, "offset": "20"}],
        },
        {"op": "fetchTopicOffsets", "topic": topic_name},
    )
    assert again is False, "createTopics of an existing topic must report it was not created"
    assert grown is None
    assert sorted(p["partitionId"] for p in metadata["topics"][0]["partitions"]) == [0, 1, 2]
    assert {o["partition"]: (o["low"], o["high"]) for o in trimmed} == {
        0: ("20", "50"),
        1: ("0", "0"),
        2: ("0", "0"),
    }
    got = kafkajs.consume(topic_name, unique_topic("kafkajs-trimmed"), 30)
    assert [m["offset"] for m in got] == list(range(20, 50))
    # A seek below the new log start gets OFFSET_OUT_OF_RANGE and kafkajs resets to earliest.
    below = kafkajs.consume(
        topic_name, unique_topic("kafkajs-below"), 30, seek=[{"partition": 0, "offset": 3}]
    )
    assert [m["offset"] for m in below] == list(range(20, 50))


def test_group_admin(kafkajs: KafkaJs, topic_name: str) -> None:
    """listGroups / describeGroups / setOffsets / deleteGroups on a group kafkajs made."""
    kafkajs.create_topic(topic_name, partitions=1)
    kafkajs.run("produce.js", topic=topic_name, messages=keyed_messages(40, "admin"))
    group_id = unique_topic("kafkajs-admin-group")
    kafkajs.consume(topic_name, group_id, 40)
    listed, described, _, committed, deleted, after = kafkajs.admin(
        {"op": "listGroups"},
        {"op": "describeGroups", "groupIds": [group_id]},
        {
            "op": "setOffsets",
            "groupId": group_id,
            "topic": topic_name,
            "partitions": [{"partition": 0, "offset": "25"}],
        },
        {"op": "fetchOffsets", "groupId": group_id, "topics": [topic_name]},
        {"op": "deleteGroups", "groupIds": [group_id]},
        {"op": "listGroups"},
    )
    assert {"groupId": group_id, "protocolType": "consumer"} in listed["groups"]
    (group,) = described["groups"]
    assert (group["errorCode"], group["state"], group["members"]) == (0, "Empty", [])
    assert committed[0]["partitions"] == [{"partition": 0, "offset": "25", "metadata": None}]
    assert deleted == [{"groupId": group_id, "errorCode": 0}]
    assert group_id not in [g["groupId"] for g in after["groups"]]


def test_open_transaction_blocks_read_committed_until_fenced(
    kafkajs: KafkaJs, topic_name: str
) -> None:
    """A producer dies mid-transaction: read_committed stops at it (later plain writes too)
    until a new producer with the same transactionalId fences and aborts it."""
    kafkajs.create_topic(topic_name, partitions=1)
    txn_id = unique_topic("kafkajs-fenced")

    def txn(action: str, value: str) -> dict[str, Any]:
        return {"action": action, "messages": [{"key": "k", "value": value}]}

    kafkajs.run(
        "transaction.js",
        topic=topic_name,
        transactionalId=txn_id,
        transactionTimeoutMs=60_000,
        steps=[txn("commit", "c1"), txn("leave-open", "open")],
    )
    kafkajs.run("produce.js", topic=topic_name, messages=[{"key": "k", "value": "plain"}])
    blocked = kafkajs.consume(topic_name, unique_topic("kafkajs-lso"), 1, settleMs=500)
    assert [m["value"] for m in blocked] == ["c1"], "read_committed read past an open transaction"
    kafkajs.run(
        "transaction.js", topic=topic_name, transactionalId=txn_id, steps=[txn("commit", "c2")]
    )
    got = kafkajs.consume(topic_name, unique_topic("kafkajs-lso2"), 3)
    assert [m["value"] for m in got] == ["c1", "plain", "c2"]


def test_transaction_timeout_aborts(kafkajs: KafkaJs, topic_name: str) -> None:
    """Nobody ends the transaction: the broker aborts it after transactionTimeout."""
    kafkajs.create_topic(topic_name, partitions=1)
    kafkajs.run(
        "transaction.js",
        topic=topic_name,
        transactionalId=unique_topic("kafkajs-timeout"),
        transactionTimeoutMs=1500,
        steps=[{"action": "leave-open", "messages": [{"key": "k", "value": "open"}]}],
    )
    kafkajs.run("produce.js", topic=topic_name, messages=[{"key": "k", "value": "plain"}])
    got = kafkajs.consume(topic_name, unique_topic("kafkajs-timeout-read"), 1)
    # The broker wrote the abort marker itself, before or after the plain record (offset 1 or
    # 2) depending on whether the 1.5 s timeout passed while the second node process started:
    # either way the aborted record is never read, and the log holds open, plain and marker.
    assert [m["value"] for m in got] == ["plain"]
    assert got[0]["offset"] in (1, 2)
    (offsets,) = kafkajs.admin({"op": "fetchTopicOffsets", "topic": topic_name})
    assert [o["high"] for o in offsets] == ["3"]


def test_tiny_fetch_limits_still_progress(kafkajs: KafkaJs, keyed_topic: KeyedTopic) -> None:
    """maxBytes far below one batch: the broker must still return a whole batch (KIP-74)."""
    got = kafkajs.consume(
        keyed_topic.name,
        unique_topic("kafkajs-tiny"),
        N_MESSAGES,
        maxBytesPerPartition=64,
        maxBytes=128,
    )
    assert sorted((m["partition"], m["offset"]) for m in got) == sorted(
        (m["partition"], m["offset"]) for m in keyed_topic.got
    )


def test_auto_create_on_produce(kafkajs: KafkaJs, topic_name: str) -> None:
    """kafkajs' default allowAutoTopicCreation: producing to a new name creates the topic."""
    out = kafkajs.run(
        "produce.js", topic=topic_name, messages=keyed_messages(5, "auto"), autoCreate=True
    )
    codes = [m["errorCode"] for send in out["sends"] for m in send]
    assert codes, "no RecordMetadata for the send"
    assert set(codes) == {0}, codes
    topics, metadata = kafkajs.admin(
        {"op": "listTopics"}, {"op": "fetchTopicMetadata", "topics": [topic_name]}
    )
    assert topic_name in topics
    assert len(metadata["topics"][0]["partitions"]) >= 1
    got = kafkajs.consume(topic_name, unique_topic("kafkajs-auto"), 5)
    assert sorted(m["value"] for m in got) == sorted(m["value"] for m in keyed_messages(5, "auto"))


def test_admin_errors_are_clear(kafkajs: KafkaJs, broker: BrokerProcess, topic_name: str) -> None:
    """Bad admin input gets Kafka's error code (not a closed connection or a hang), and the
    cluster/ACL probes admin tools make get Kafka's answers for a single node without an
    authorizer."""

    def create(
        name: str, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> dict[str, Any]:
        topic = {"topic": name, "numPartitions": partitions, "configs": configs or {}}
        return {"op": "createTopics", "topics": [topic], "expectError": True}

    bad_name, bad_value, bad_count, unknown, acls, cluster = kafkajs.admin(
        create("bad name!"),
        create(topic_name, configs={"retention.ms": "soon"}),
        create(topic_name, partitions=0),
        create(topic_name, configs={"no.such.config": "1"}),
        {"op": "describeAcls", "topic": topic_name, "expectError": True},
        {"op": "describeCluster"},
    )

    def create_error(result: dict[str, Any]) -> str:
        (err,) = result["error"]["errors"]
        return str(err["type"])

    assert create_error(bad_name) == "INVALID_TOPIC_EXCEPTION"
    assert create_error(bad_value) == "INVALID_CONFIG"
    assert create_error(bad_count) == "INVALID_PARTITIONS"
    assert create_error(unknown) == "INVALID_CONFIG"
    assert acls["error"]["type"] == "SECURITY_DISABLED"
    (node,) = cluster["brokers"]
    assert (node["host"], node["port"]) == (broker.host, broker.port)
    assert cluster["controller"] == node["nodeId"]
    assert topic_name not in kafkajs.admin({"op": "listTopics"})[0], "a failed create left a topic"


def test_pipelined_sends_get_their_own_offsets(kafkajs: KafkaJs, topic_name: str) -> None:
    """50 sends in flight at once on one connection: each acked baseOffset must be where that
    send's messages really are (contiguous per partition), nothing lost or doubled.

    Order *between* concurrent sends is not asserted: kafkajs itself may put them on the wire in
    another order than they were called (it does, occasionally, for the last one)."""
    kafkajs.create_topic(topic_name)
    chunk, sent = 20, keyed_messages(N_MESSAGES, "pipelined")
    out = kafkajs.run(
        "produce.js", topic=topic_name, messages=sent, chunkSize=chunk, concurrent=True
    )
    got = kafkajs.consume(topic_name, unique_topic("kafkajs-pipelined"), N_MESSAGES)
    where = {seq_of(m): (m["partition"], m["offset"]) for m in got}
    assert sorted(where) == list(range(N_MESSAGES)), "messages lost or delivered twice"
    assert len(out["sends"]) == N_MESSAGES // chunk
    for index, send in enumerate(out["sends"]):
        placed: dict[int, list[int]] = defaultdict(list)
        for seq in range(index * chunk, (index + 1) * chunk):
            partition, offset = where[seq]
            placed[partition].append(offset)
        acked = {m["partition"]: int(m["baseOffset"]) for m in send}
        assert set(acked) == set(placed), f"send {index}: partitions"
        for partition, offsets in placed.items():
            base = acked[partition]
            assert offsets == list(range(base, base + len(offsets))), f"send {index} p{partition}"


def test_restart_keeps_data_and_group_offsets(
    node: str, broker_factory: BrokerFactory, topic_name: str
) -> None:
    """SIGTERM and restart on the same data dir: kafkajs finds its messages, its group resumes
    after the offsets it committed, and a transactionalId carries on."""
    first = broker_factory.start()
    before = KafkaJs(node, first.bootstrap)
    before.create_topic(topic_name)
    group_id, txn_id = unique_topic("kafkajs-restart"), unique_topic("kafkajs-restart-txn")
    before.run("produce.js", topic=topic_name, messages=keyed_messages(90, "before"))
    before.consume(topic_name, group_id, 90)
    commit = {"action": "commit", "messages": [{"key": "t", "value": "txn-before"}]}
    before.run("transaction.js", topic=topic_name, transactionalId=txn_id, steps=[commit])
    assert first.stop() is not None, "the broker ignored SIGTERM"

    second = broker_factory.start(data_dir=first.data_dir)
    after = KafkaJs(node, second.bootstrap)
    commit = {"action": "commit", "messages": [{"key": "t", "value": "txn-after"}]}
    after.run("transaction.js", topic=topic_name, transactionalId=txn_id, steps=[commit])
    after.run("produce.js", topic=topic_name, messages=keyed_messages(30, "after"))
    resumed = after.consume(topic_name, group_id, 32)
    assert sorted(m["value"] for m in resumed) == sorted(
        [m["value"] for m in keyed_messages(30, "after")] + ["txn-before", "txn-after"]
    ), "the group re-read or skipped messages across the restart"
    everything = after.consume(topic_name, unique_topic("kafkajs-restart-all"), 122)
    assert {m["value"] for m in keyed_messages(90, "before")} <= {m["value"] for m in everything}


def test_send_batch_across_topics(kafkajs: KafkaJs) -> None:
    """producer.sendBatch puts two topics in one Produce request; one consumer reads both."""
    topics = {unique_topic("kafkajs-batch-a"): 2, unique_topic("kafkajs-batch-b"): 3}
    for name, partitions in topics.items():
        kafkajs.create_topic(name, partitions=partitions)
    sent = {name: keyed_messages(40, name) for name in topics}
    out = kafkajs.run(
        "produce.js",
        topic="",
        topicMessages=[{"topic": name, "messages": msgs} for name, msgs in sent.items()],
    )
    (metadata,) = out["sends"]
    assert {(m["topicName"], m["partition"]) for m in metadata} == {
        (name, p) for name, n in topics.items() for p in range(n)
    }
    assert {m["errorCode"] for m in metadata} == {0}
    got = kafkajs.consume("", unique_topic("kafkajs-batch"), 80, topics=list(topics))
    for name, msgs in sent.items():
        assert sorted(m["value"] for m in got if m["topic"] == name) == sorted(
            m["value"] for m in msgs
        ), name


def test_acl_admin_with_an_authorizer(node: str, broker_factory: BrokerFactory, topic_name: str) -> None:
    """kafkajs' createAcls / describeAcls / deleteAcls against a broker with StandardAuthorizer
    (this plaintext client is `User:ANONYMOUS`, a super user there)."""
    secured = broker_factory.start(memory=True, extra_args=[
        "--override", "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "--override", "super.users=User:ANONYMOUS",
    ])  # fmt: skip
    created, described, deleted, after = KafkaJs(node, secured.bootstrap).admin(
        {"op": "createAcls", "topic": topic_name},
        {"op": "describeAcls", "topic": topic_name},
        {"op": "deleteAcls", "topic": topic_name},
        {"op": "describeAcls", "topic": topic_name},
    )
    assert created is True
    ((resource,),) = [described["resources"]]
    assert resource["resourceName"] == topic_name
    assert [(a["principal"], a["host"], a["operation"], a["permissionType"]) for a in resource["acls"]] == [
        ("User:kafkajs", "*", 3, 3)
    ]
    ((matched,),) = [deleted["filterResponses"]]
    assert matched["errorCode"] == 0
    assert [m["resourceName"] for m in matched["matchingAcls"]] == [topic_name]
    assert after["resources"] == []
