"""The Java client (Apache kafka-clients 4.3.0) against a real kafkapy broker subprocess.

Why Java: kafka-clients is the reference implementation every other client copies, and the one
most Kafka users run. Its 4.x line dropped old protocol versions (Produce < v3, Fetch < v4, ...),
turns idempotence on by default, and has its own group and transaction state machines.

How: `compat_tests/java/src/` holds small Java programs (`kafkapy.compat.Main SCENARIO ...`)
that each play one user story with `KafkaProducer`, `KafkaConsumer` and `Admin` and print JSON
lines; `compat_tests/java/harness.py` fetches the jars, compiles once per session and runs them.
One JVM per story, three at a time (`run_all`), all started when the first test asks.
"""

from __future__ import annotations

import socket
import struct
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from compat_tests.conftest import (
    CODEC_IDS,
    BrokerFactory,
    BrokerProcess,
    stored_codecs,
    unique_topic,
)
from compat_tests.java.harness import Events, JavaClient, Runs, java_build, run_all
from kafkapy.protocol import ApiKey, RequestHeader
from kafkapy.protocol.codec import decode_response, encode_request
from kafkapy.protocol.messages import ApiVersionsRequest

pytestmark = pytest.mark.timeout(180)

N_PER_CODEC = 300
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
GROUP_PARTITIONS = 4

#: broker APIs the scenarios below make the Java client use
JAVA_USES = (
    "Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch",
    "FindCoordinator", "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups",
    "ListGroups", "ApiVersions", "CreateTopics", "DeleteTopics", "DeleteRecords",
    "InitProducerId", "OffsetForLeaderEpoch", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn",
    "TxnOffsetCommit", "DescribeConfigs", "IncrementalAlterConfigs", "DescribeCluster",
    "ConsumerGroupHeartbeat",
)  # fmt: skip


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """This module's broker: as conftest's, but a new group's first rebalance does not wait the
    default 3 s for more members (seven scenarios form groups; the wait is Kafka's default and
    changes nothing the tests check, since they wait for assignments, not for time), and
    consumer-protocol members heartbeat every 0.5 s."""
    factory = BrokerFactory(tmp_path_factory.mktemp("java-broker"))
    try:
        yield factory.start(
            extra_args=[
                "--override", "group.initial.rebalance.delay.ms=0",
                # KIP-848 members learn of a new assignment at their next heartbeat (Kafka's
                # default interval is 5 s); 0.5 s keeps the two consumer-protocol stories short
                "--override", "group.consumer.heartbeat.interval.ms=500",
            ]
        )  # fmt: skip
    finally:
        problems = factory.close()
        assert not problems, problems


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory, broker: BrokerProcess) -> JavaClient:
    return JavaClient(java_build(tmp_path_factory), broker.bootstrap)


@pytest.fixture(scope="module")
def runs(java: JavaClient) -> Iterator[Runs]:
    """Every scenario of this module, started together; tests wait for the one they check."""
    base: dict[str, tuple[str, ...]] = {
        "groups-range": ("groups", "java-range", "range", "classic"),
        "groups-cooperative": ("groups", "java-cooperative", "cooperative", "classic"),
        "groups-default": ("groups", "java-default", "default", "default"),
        "pending": ("pending-offsets", "java-pending"),
        "codec": ("produce-consume", "java-codec", str(N_PER_CODEC), *CODECS),
        "txn": ("transactions", "java-txn"),
        "admin": ("admin", "java-admin"),
        "admin-extra": ("admin-extra", "java-adminx"),
        "fencing": ("fencing", "java-fence"),
        "static": ("static-member", "java-static"),
        "big": ("big", "java-big"),
        "groups-kip848": ("groups", "java-kip848", "default", "consumer"),
        "groups-kip848-range": ("groups", "java-kip848r", "range", "consumer"),
        "api-versions": ("api-versions", "-"),
    }
    scenarios = {k: (v[0], unique_topic(v[1]), *v[2:]) for k, v in base.items()}
    started = run_all(java, scenarios)
    try:
        yield started
    finally:
        started.close()


def broker_api_versions(broker: BrokerProcess) -> dict[int, tuple[int, int]]:
    """What the broker advertises in ApiVersions v3: api key -> (min, max)."""
    request = encode_request(
        RequestHeader(ApiKey.API_VERSIONS, 3, 1, "java-compat"),
        ApiVersionsRequest(client_software_name="x", client_software_version="1"),
    )
    with socket.create_connection((broker.host, broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack_from(">i", data)[0]:
            chunk = sock.recv(65536)
            assert chunk, "broker closed the connection instead of answering ApiVersions"
            data += chunk
    _, response = decode_response(ApiKey.API_VERSIONS, 3, data[4:])
    return {a.api_key: (a.min_version, a.max_version) for a in response.api_keys}


def test_every_api_java_uses_has_a_common_version(runs: Runs, broker: BrokerProcess) -> None:
    """kafka-clients 4.x refuses a broker whose range for an API it needs lies below its own
    minimum (UnsupportedVersionException); each API used here must overlap."""
    client = {a["name"]: a for a in runs.get("api-versions")[1].one("api-versions")["apis"]}
    advertised = broker_api_versions(broker)
    negotiated = {}
    for name in JAVA_USES:
        api = client[name]
        assert api["key"] in advertised, f"broker does not advertise {name}"
        lo, hi = advertised[api["key"]]
        assert max(lo, api["min"]) <= min(hi, api["max"]), (
            f"{name}: broker {lo}-{hi}, kafka-clients {api['min']}-{api['max']}: no common version"
        )
        negotiated[name] = min(hi, api["max"])
    # the data path runs on the versions the 4.x client prefers with a current broker
    assert negotiated["Produce"] >= 9, negotiated
    assert negotiated["Fetch"] >= 12, negotiated


@pytest.fixture(scope="module")
def codec_run(runs: Runs) -> tuple[str, Events]:
    return runs.get("codec")


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_exactly(codec_run: tuple[str, Events], codec: str) -> None:
    """Defaults (acks=all, idempotence on) with explicit timestamps and headers: every record
    acked once and read back once, key/value/headers/CreateTime intact, offsets dense."""
    _, events = codec_run
    acks = events.all("ack", codec=codec)
    assert sorted(a["seq"] for a in acks) == list(range(N_PER_CODEC))
    got = events.all("record", codec=codec)
    seqs = [int(dict(r["headers"])["seq"]) for r in got]
    assert sorted(seqs) == list(range(N_PER_CODEC)), "records lost or delivered twice"
    ack_of = {a["seq"]: a for a in acks}
    base_ts = acks[0]["timestamp"] - acks[0]["seq"] * 10
    partitions_of_key: dict[str, set[int]] = defaultdict(set)
    for rec, seq in zip(got, seqs, strict=True):
        assert rec["key"] == f"key-{seq % 7}"
        assert rec["value"] == f"{codec}-value-{seq}" + "-x" * (seq % 50)
        assert rec["headers"] == [["seq", str(seq)], ["client", "java"]]
        assert rec["timestamp"] == base_ts + seq * 10
        assert rec["timestampType"] == "CreateTime"
        assert (rec["partition"], rec["offset"]) == (
            ack_of[seq]["partition"],
            ack_of[seq]["offset"],
        ), "consumed at another position than the producer was told"
        partitions_of_key[rec["key"]].add(rec["partition"])
    assert all(len(p) == 1 for p in partitions_of_key.values()), "a key spread over partitions"
    per_partition = Counter(r["partition"] for r in got)
    for partition, count in per_partition.items():
        offsets = sorted(r["offset"] for r in got if r["partition"] == partition)
        assert offsets == list(range(count)), f"partition {partition}: offsets not dense"


@pytest.mark.parametrize("codec", CODECS)
def test_codec_is_stored(codec_run: tuple[str, Events], broker: BrokerProcess, codec: str) -> None:
    """The batches on disk carry the codec Java was asked for (a silent fallback to
    uncompressed would still round-trip)."""
    prefix, events = codec_run
    partitions = {a["partition"] for a in events.all("ack", codec=codec)}
    for partition in partitions:
        codecs = stored_codecs(broker, f"{prefix}-{codec}", partition)
        assert codecs, f"no batches stored for partition {partition}"
        assert set(codecs) == {CODEC_IDS[codec]}, codecs


def test_record_size_limits(runs: Runs) -> None:
    """900 KiB is accepted and a 2 MiB record refused (RecordTooLargeException, the broker's
    message.max.bytes); a consumer with 1 KiB fetch limits still gets the 900 KiB record whole
    (KIP-74) and everything after it, in order."""
    _, events = runs.get("big")
    assert events.one("too-large")["error"] == "RecordTooLargeException"
    read = events.one("big-read")
    assert [(r["offset"], r["key"]) for r in read["records"]] == [
        (0, "small"),
        (1, "big"),
        (2, "small"),
        (3, "small"),
        (4, "small"),
    ], "the refused record left a trace, or a record was lost or repeated"
    assert read["bigIntact"]


def _values(records: list[dict[str, Any]]) -> list[str]:
    return sorted(r["value"] for r in records)


def _expected(tag: str, per_partition: int) -> list[str]:
    return sorted(f"{tag}-{p}-{i}" for p in range(GROUP_PARTITIONS) for i in range(per_partition))


def _check_story(events: Events) -> dict[str, list[str]]:
    """What `Groups.java`'s story promises whatever the protocol: the two members split the
    partitions, every record is read once by its owner, the survivor takes over after a leave,
    and a new member resumes exactly from the committed offsets. Returns the joined split."""
    joined: dict[str, list[str]] = events.one("phase", phase="joined")["assignment"]
    a, b = set(joined["a"]), set(joined["b"])
    assert a, joined
    assert b, joined
    assert not a & b, joined
    assert len(a | b) == GROUP_PARTITIONS, joined
    split = events.all("record", phase="split")
    assert _values(split) == _expected("first", 10), "the 40 records were not read exactly once"
    for rec in split:
        mine = joined[rec["member"]]
        assert f"{rec['topic']}-{rec['partition']}" in mine, "read a partition it did not own"
    assert len(events.one("phase", phase="after-leave")["assignment"]["a"]) == GROUP_PARTITIONS
    assert _values(events.all("record", phase="after-leave")) == _expected("second", 2)
    assert _values(events.all("record", phase="resume")) == _expected("third", 1), (
        "the new member did not resume from the committed offsets"
    )
    assert set(events.one("committed")["offsets"].values()) == {13}
    described = events.one("described")
    assert (described["state"], described["members"]) == ("STABLE", 1), described
    assert len(described["assigned"]) == GROUP_PARTITIONS, described
    assert len(events.one("phase", phase="first")["assignment"]["a"]) == GROUP_PARTITIONS
    assert not events.all("rebalance", kind="lost")
    return joined


def _revoked_while_b_joined(events: Events) -> list[dict[str, Any]]:
    lines = events.lines
    window = lines[
        lines.index(events.one("phase", phase="first")) : lines.index(
            events.one("phase", phase="joined")
        )
    ]
    return [e for e in window if e["event"] == "rebalance" and e["kind"] == "revoked"]


@pytest.mark.parametrize(
    ("assignor", "protocol"),
    [("range", "classic"), ("cooperative", "classic"), ("default", "default")],
)
def test_consumer_group_story(runs: Runs, assignor: str, protocol: str) -> None:
    """Two members split the partitions, commit, one leaves and the other takes over, and a new
    member resumes exactly from the committed offsets (see `Groups.java`)."""
    _, events = runs.get(f"groups-{assignor}")
    joined = _check_story(events)
    # "a" held all 4 partitions when "b" joined: an eager rebalance (range, and the default list
    # [range, cooperative-sticky]) revokes all of them, a cooperative one only what moves to "b"
    assert events.one("described")["type"] == "CLASSIC"
    revoked = _revoked_while_b_joined(events)
    assert [e["member"] for e in revoked] == ["a"], revoked
    if assignor in ("range", "default"):
        assert len(revoked[0]["partitions"]) == GROUP_PARTITIONS, revoked
    else:
        assert revoked[0]["partitions"] == sorted(joined["b"]), revoked


@pytest.mark.parametrize("scenario", ["groups-kip848", "groups-kip848-range"])
def test_consumer_group_protocol_kip848(runs: Runs, scenario: str) -> None:
    """group.protocol=consumer (KIP-848): the same story through ConsumerGroupHeartbeat with
    the broker's assignor (uniform by default, range when the client asks with
    group.remote.assignor). Reconciliation is incremental: when "b" joins, "a" revokes only
    the partitions that move to "b", and "b" gets them only after "a" let them go."""
    _, events = runs.get(scenario)
    joined = _check_story(events)
    described = events.one("described")  # through ConsumerGroupDescribe
    assert described["type"] == "CONSUMER", described
    assert described["assignor"] == ("range" if scenario.endswith("range") else "uniform")
    revoked = [e for e in _revoked_while_b_joined(events) if e["partitions"]]
    assert [e["member"] for e in revoked] == ["a"], revoked
    assert revoked[0]["partitions"] == sorted(joined["b"]), revoked
    if scenario.endswith("range"):
        ranges = sorted(sorted(int(tp.rsplit("-", 1)[1]) for tp in joined[m]) for m in "ab")
        assert ranges == [[0, 1], [2, 3]], joined


def test_transactions(runs: Runs) -> None:
    """commit, abort and consume-transform-produce with sendOffsetsToTransaction: read_committed
    sees only committed records, read_uncommitted also the aborted ones, and the input group's
    offsets were committed with the transaction."""
    _, events = runs.get("txn")
    assert events.one("inputs")["count"] == 6
    committed = _values(events.all("record", isolation="read_committed"))
    assert committed == sorted(
        [f"commit-{i}" for i in range(10)] + [f"xform-input-{i}" for i in range(6)]
    )
    uncommitted = _values(events.all("record", isolation="read_uncommitted"))
    assert uncommitted == sorted(committed + [f"abort-{i}" for i in range(10)])
    # 5 + 5 + 3 records per partition and three commit/abort markers
    for isolation in ("read_committed", "read_uncommitted"):
        ends = events.one("end-offsets", isolation=isolation)["offsets"]
        assert sorted(ends.values()) == [16, 16], ends
    offsets = events.one("group-offsets")["offsets"]
    assert sorted(offsets.values()) == [3, 3], offsets


@pytest.fixture(scope="module")
def admin_run(runs: Runs) -> tuple[str, Events]:
    return runs.get("admin")


def test_admin_topics(admin_run: tuple[str, Events]) -> None:
    prefix, events = admin_run
    a, b = f"{prefix}-a", f"{prefix}-b"
    assert events.one("createTopics-again")["error"] == "TopicExistsException"
    assert {a, b} <= set(events.one("listTopics")["names"])
    topics = {t["name"]: t for t in events.one("describeTopics")["topics"]}
    assert [p["partition"] for p in topics[a]["partitions"]] == [0, 1, 2]
    assert len(topics[b]["partitions"]) == 1
    for topic in topics.values():
        assert not topic["internal"]
        assert topic["topicId"] != "AAAAAAAAAAAAAAAAAAAAAA"
        for p in topic["partitions"]:
            assert p["replicas"] == [p["leader"]] == p["isr"], p
    assert a not in events.one("listTopics-after-delete")["names"]
    assert b in events.one("listTopics-after-delete")["names"]
    assert events.one("describeTopics-deleted")["error"] == "UnknownTopicOrPartitionException"


def test_admin_configs(admin_run: tuple[str, Events]) -> None:
    _, events = admin_run
    before = events.one("describeConfigs")["configs"]
    assert before["retention.ms"] == {"value": "3600000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert before["cleanup.policy"] == {"value": "compact", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert before["max.message.bytes"]["source"] == "DEFAULT_CONFIG"
    after = events.one("describeConfigs-altered")["configs"]
    assert after["retention.ms"] == {"value": "7200000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert after["max.message.bytes"] == {"value": "200000", "source": "DYNAMIC_TOPIC_CONFIG"}
    assert after["cleanup.policy"] == {"value": "delete", "source": "DEFAULT_CONFIG"}
    assert events.one("incrementalAlterConfigs-unknown")["error"] == "InvalidConfigurationException"


def test_admin_delete_records(admin_run: tuple[str, Events]) -> None:
    _, events = admin_run
    assert events.one("deleteRecords")["lowWatermark"] == 4
    # a group member starting from "earliest" begins at the new log start offset
    assert events.one("member-read")["offsets"] == [4, 5, 6, 7, 8, 9]


def test_admin_groups(admin_run: tuple[str, Events]) -> None:
    prefix, events = admin_run
    group = f"{prefix}-group"
    listed = {g["groupId"]: g for g in events.one("listGroups")["groups"]}
    assert listed[group] == {"groupId": group, "type": "CLASSIC", "state": "STABLE"}
    desc = events.one("describeConsumerGroups")["group"]
    assert (desc["groupId"], desc["state"], desc["type"]) == (group, "STABLE", "CLASSIC")
    assert desc["assignor"] == "range"
    assert desc["coordinator"] == 1
    (member,) = desc["members"]
    assert member["assignment"] == [f"{prefix}-b-0"]
    assert member["clientId"].startswith("consumer-")
    assert events.one("listConsumerGroupOffsets")["offsets"] == {f"{prefix}-b-0": 7}


def test_admin_describe_cluster(admin_run: tuple[str, Events], broker: BrokerProcess) -> None:
    _, events = admin_run
    cluster = events.one("describeCluster")["cluster"]
    assert cluster["nodes"] == [{"id": 1, "host": broker.host, "port": broker.port}]
    assert cluster["controller"] == 1
    assert cluster["clusterId"]
    assert cluster["clusterId"] in broker.log_text()


def test_admin_describe_features(admin_run: tuple[str, Events]) -> None:
    """Admin.describeFeatures (what kafka-features.sh describe prints): the finalized levels of
    a new kafkapy cluster and the ranges it supports, with an epoch."""
    _, events = admin_run
    features = events.one("describeFeatures")["features"]
    assert features["finalized"] == {"metadata.version": [25, 25], "group.version": [1, 1]}
    assert features["supported"] == {"metadata.version": [25, 25], "group.version": [0, 1]}
    assert features["epoch"] >= 0


@pytest.fixture(scope="module")
def admin_extra_run(runs: Runs) -> tuple[str, Events]:
    return runs.get("admin-extra")


def test_list_offsets_and_offsets_for_times(admin_extra_run: tuple[str, Events]) -> None:
    """Partition 0 holds 10 records with CreateTime base + 1000*i (see `AdminExtra.java`)."""
    prefix, events = admin_extra_run
    found = events.one("listOffsets")["p0"]
    assert found["earliest"]["offset"] == 0
    assert found["latest"]["offset"] == 10
    assert found["maxTimestamp"]["offset"] == 9
    assert found["forTimestamp"]["offset"] == 5  # first record at or after base + 4500
    assert found["forTimestamp"]["timestamp"] - found["maxTimestamp"]["timestamp"] == -4000
    by_time = events.one("offsetsForTimes")["offsets"]
    assert by_time == {f"{prefix}-t-0": 2, f"{prefix}-t-1": "none"}
    # partition 1: 3 transactional records and the commit marker
    assert events.one("endOffsets")["offsets"] == {f"{prefix}-t-0": 10, f"{prefix}-t-1": 4}


def test_group_offset_tools(admin_extra_run: tuple[str, Events]) -> None:
    """What kafka-consumer-groups.sh --reset-offsets, --delete-offsets and --delete do."""
    prefix, events = admin_extra_run
    t0, t1 = f"{prefix}-t-0", f"{prefix}-t-1"
    assert events.one("alterConsumerGroupOffsets")["offsets"] == {t0: 6, t1: 2}
    assert events.one("deleteConsumerGroupOffsets")["offsets"] == {t0: 6}
    # a deleted classic group describes as Dead (DescribeGroups below v6 has no not-found error)
    deleted = events.one("describe-deleted-group")
    assert deleted.get("state") == "DEAD", deleted


def test_create_partitions_and_broker_configs(admin_extra_run: tuple[str, Events]) -> None:
    _, events = admin_extra_run
    assert events.one("createPartitions")["partitions"] == 4
    configs = events.one("describeConfigs-broker")["configs"]
    assert configs["num.partitions"] == "1"
    assert configs["default.replication.factor"] == "1"
    assert configs["log.retention.hours"] == "168"


def test_default_producer_is_idempotent(admin_extra_run: tuple[str, Events]) -> None:
    """kafka-clients 4.x turns idempotence on by default: the broker tracks the plain
    producer's id and sequence numbers (10 records: last sequence 9), so retries cannot
    duplicate."""
    _, events = admin_extra_run
    (producer,) = events.one("describeProducers", partition=0)["producers"]
    assert producer["producerId"] >= 0
    assert producer["lastSequence"] == 9
    assert not producer["open"]


def test_list_config_append_subtract_and_synonyms(admin_extra_run: tuple[str, Events]) -> None:
    """kafka-configs.sh on a list config: APPEND then SUBTRACT on cleanup.policy (default
    `delete`), and describe with synonyms and documentation (`--describe --all`)."""
    _, events = admin_extra_run
    assert events.one("listConfigOps")["cleanup.policy"] == {
        "append": "delete,compact",
        "subtract": "compact",
    }
    detail = events.one("describeConfigs-synonyms")["cleanup.policy"]
    assert detail["synonyms"][0] == "cleanup.policy:DYNAMIC_TOPIC_CONFIG"
    assert "log.cleanup.policy:DEFAULT_CONFIG" in detail["synonyms"]
    assert detail["documented"]
    assert detail["type"] == "LIST"


def test_group_configs_and_broker_loggers(admin_extra_run: tuple[str, Events]) -> None:
    """kafka-configs.sh --entity-type groups (KIP-848 group configs) and broker-loggers, through
    the Java Admin's incrementalAlterConfigs / describeConfigs (GROUP 32, BROKER_LOGGER 8)."""
    _, events = admin_extra_run
    assert events.one("groupConfigs")["configs"] == {
        "consumer.heartbeat.interval.ms": "500:DEFAULT_CONFIG",  # this module's broker setting
        "consumer.session.timeout.ms": "50000:DYNAMIC_GROUP_CONFIG",
        # Kafka 4.0's share group configs (kafkapy has no share groups; stored and described)
        "share.auto.offset.reset": "latest:DEFAULT_CONFIG",
        "share.heartbeat.interval.ms": "5000:DEFAULT_CONFIG",
        "share.record.lock.duration.ms": "30000:DEFAULT_CONFIG",
        "share.session.timeout.ms": "45000:DEFAULT_CONFIG",
    }
    levels = events.one("brokerLoggers")["levels"]
    assert levels["set"] == "DEBUG:DYNAMIC_BROKER_LOGGER_CONFIG"
    # deleted: the logger follows root again
    assert levels["delete"] == f"{levels['delete-root']}:DYNAMIC_BROKER_LOGGER_CONFIG"


def test_transaction_tools(admin_extra_run: tuple[str, Events]) -> None:
    """kafka-transactions.sh list / describe / describe-producers after one committed txn."""
    prefix, events = admin_extra_run
    txn_id = f"{prefix}-txn"
    listed = {t["id"]: t for t in events.one("listTransactions")["transactions"]}
    assert listed[txn_id]["state"] == "CompleteCommit"
    desc = events.one("describeTransactions")["transaction"]
    assert desc["state"] == "CompleteCommit"
    assert desc["producerId"] == listed[txn_id]["producerId"]
    assert desc["partitions"] == []  # none in flight after the commit
    assert desc["coordinator"] == 1
    (producer,) = events.one("describeProducers", partition=1)["producers"]
    assert producer["producerId"] == desc["producerId"]
    assert producer["lastSequence"] == 2
    assert not producer["open"]


def test_static_member_restarts_without_rebalance(runs: Runs) -> None:
    """KIP-345: closing a static member does not leave the group; the restarted instance gets
    its partitions back in the same generation; Admin.removeMembersFromConsumerGroup removes it."""
    prefix, events = runs.get("static")
    first = events.one("static", round="first")
    again = events.one("static", round="restart")
    assert first["assignment"] == again["assignment"] == [f"{prefix}-t-0", f"{prefix}-t-1"]
    assert again["generation"] == first["generation"], "the restart caused a rebalance"
    for round_ in (first, again):
        (member,) = round_["members"]
        assert member["instance"] == "instance-a"
    assert first["members"][0]["memberId"] != again["members"][0]["memberId"]
    assert events.one("after-close")["members"] == 1
    removed = events.one("removed")
    assert (removed["members"], removed["state"]) == (0, "EMPTY"), removed


def test_transactional_producer_fencing(runs: Runs) -> None:
    """A new producer with the same transactional.id fences the old one (its open transaction
    is aborted, its commit raises ProducerFencedException); read_committed sees only the new."""
    _, events = runs.get("fencing")
    assert events.one("zombie-commit")["error"] == "ProducerFencedException"
    assert events.one("committed-values")["values"] == ["fresh-0", "fresh-1", "fresh-2"]


def test_member_waits_for_pending_transactional_offsets(runs: Runs) -> None:
    """KIP-447: a read_committed member starting while its group's offsets sit in an open
    transaction resumes from the transaction's offset once it commits, not from `earliest`."""
    _, events = runs.get("pending")
    assert events.one("commit")["readBefore"] == 0, "the member read before the offsets were stable"
    assert events.one("resumed")["offsets"] == [3, 4, 5]
