"""Admin APIs: topics, partitions, records and configs, over the wire (the cluster's description:
test_describe_cluster.py, test_describe_topic_partitions.py, test_log_dirs.py in tests/broker/handlers/)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import trio

from kafkapy.broker.config import ConfigSource, ConfigType
from kafkapy.controller.state import ControllerConfig
from kafkapy.controller.topics import NewTopic
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterConfigsRequest,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteRecordsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
    MetadataRequest,
    ProduceRequest,
)
from kafkapy.server.broker import now_ms
from kafkapy.storage.topic_config import TOPIC_CONFIGS

from ..controller.helpers import CLUSTER_ID, Cluster
from .helpers import Client, batch, create_topic, list_topics, running_broker, wait_until

CT = CreateTopicsRequest


def creatable(name: str, partitions: int = 1, rf: int = 1, configs: dict[str, str | None] | None = None,
              assignments: list[tuple[int, list[int]]] | None = None) -> CT.CreatableTopic:
    return CT.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        configs=[CT.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
        assignments=[CT.CreatableReplicaAssignment(partition_index=p, broker_ids=b) for p, b in (assignments or [])],
    )


async def test_create_topics_semantics() -> None:
    async with running_broker(None, **{"num.partitions": "4"}) as (_, _, port):
        client = await Client.connect(port)
        req = CT(timeout_ms=1000, topics=[
            creatable("plain", 2, configs={"retention.ms": "1000"}),
            creatable("defaults", -1, -1),
            creatable("manual", -1, -1, assignments=[(0, [1]), (1, [1])]),
            creatable("bad name!"),
            creatable("too-replicated", 1, 3),
            creatable("zero", 0),
            creatable("badcfg", 1, configs={"retention.ms": "x"}),
            creatable("unknowncfg", 1, configs={"nope": "1"}),
            creatable("wrongbroker", -1, -1, assignments=[(0, [2])]),
            creatable("dup"), creatable("dup"),
        ])
        resp = await client.request(ApiKey.CREATE_TOPICS, 7, req)
        got = {(t.name, t.error_code) for t in resp.topics}
        assert got == {
            ("plain", 0), ("defaults", 0), ("manual", 0),
            ("bad name!", ErrorCode.INVALID_TOPIC_EXCEPTION),
            ("too-replicated", ErrorCode.INVALID_REPLICATION_FACTOR),
            ("zero", ErrorCode.INVALID_PARTITIONS),
            ("badcfg", ErrorCode.INVALID_CONFIG), ("unknowncfg", ErrorCode.INVALID_CONFIG),
            ("wrongbroker", ErrorCode.INVALID_REPLICA_ASSIGNMENT),
            ("dup", ErrorCode.INVALID_REQUEST),
        }
        by_name = {t.name: t for t in resp.topics}
        assert (by_name["defaults"].num_partitions, by_name["manual"].num_partitions) == (4, 2)
        assert by_name["plain"].topic_id == (await list_topics(port))["plain"].topic_id
        retention = next(c for c in by_name["plain"].configs if c.name == "retention.ms")
        assert (retention.value, retention.config_source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        again = await client.request(ApiKey.CREATE_TOPICS, 7, CT(topics=[creatable("plain")]))
        assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        dry = await client.request(ApiKey.CREATE_TOPICS, 7, CT(topics=[creatable("dry")], validate_only=True))
        assert dry.topics[0].error_code == 0
        assert "dry" not in await list_topics(port)


async def test_delete_topics_by_name_and_id() -> None:
    async with running_broker(None) as (_, _, port):
        a, b = await create_topic(port, "a", 1), await create_topic(port, "b", 1)
        client = await Client.connect(port)
        by_name = await client.request(ApiKey.DELETE_TOPICS, 5, DeleteTopicsRequest(topic_names=["a", "zz"]))
        assert [(r.name, r.error_code) for r in by_name.responses] == [("a", 0), ("zz", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        by_id = await client.request(ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(topics=[
            DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=b.topic_id),
            DeleteTopicsRequest.DeleteTopicState(name=None, topic_id=a.topic_id),
        ]))
        assert [(r.name, r.error_code) for r in by_id.responses] == [("b", 0), (None, ErrorCode.UNKNOWN_TOPIC_ID)]
        assert set(await list_topics(port)) <= {"__consumer_offsets"}


async def test_create_partitions_and_delete_records() -> None:
    async with running_broker(None) as (broker, _, port):
        await create_topic(port, "t", 1)
        client = await Client.connect(port)
        resp = await client.request(ApiKey.CREATE_PARTITIONS, 3, CreatePartitionsRequest(topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name="t", count=3),
            CreatePartitionsRequest.CreatePartitionsTopic(name="nope", count=3),
        ]))
        assert [r.error_code for r in resp.results] == [0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        shrink = await client.request(ApiKey.CREATE_PARTITIONS, 3, CreatePartitionsRequest(topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name="t", count=2)]))
        assert shrink.results[0].error_code == ErrorCode.INVALID_PARTITIONS
        md = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t")]))
        assert len(md.topics[0].partitions) == 3
        for i in range(3):
            await client.request(ApiKey.PRODUCE, 9, ProduceRequest(acks=1, topic_data=[ProduceRequest.TopicProduceData(
                name="t", partition_data=[ProduceRequest.PartitionProduceData(index=2, records=batch(b"%d" % i))])]))
        dr = DeleteRecordsRequest(topics=[DeleteRecordsRequest.DeleteRecordsTopic(name="t", partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=2, offset=2),
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=5),
        ])])
        out = await client.request(ApiKey.DELETE_RECORDS, 2, dr)
        assert [(p.low_watermark, p.error_code) for p in out.topics[0].partitions] == [(2, 0), (-1, ErrorCode.OFFSET_OUT_OF_RANGE)]
        plog = broker.partition_log("t", 2)
        assert plog is not None
        assert plog.log_start_offset == 2


async def test_describe_and_alter_topic_configs_live() -> None:
    async with running_broker(None, **{"log.retention.ms": "5000"}) as (broker, _, port):
        await create_topic(port, "c", 1, {"cleanup.policy": "compact"})
        client = await Client.connect(port)

        async def describe() -> dict[str, tuple[str | None, int]]:
            resp = await client.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(
                include_synonyms=True, resources=[DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="c")]))
            return {e.name: (e.value, e.config_source) for e in resp.results[0].configs}

        cfg = await describe()
        assert cfg["cleanup.policy"] == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        assert cfg["retention.ms"] == ("5000", ConfigSource.STATIC_BROKER_CONFIG)
        assert cfg["segment.bytes"] == ("1073741824", ConfigSource.DEFAULT_CONFIG)

        alter = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=2, resource_name="c", configs=[
                IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=0, value="60000"),
                IncrementalAlterConfigsRequest.AlterableConfig(name="cleanup.policy", config_operation=2, value="delete"),
            ])])
        resp = await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)
        assert resp.responses[0].error_code == 0
        cfg = await describe()
        assert cfg["retention.ms"] == ("60000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        assert cfg["cleanup.policy"] == ("compact,delete", ConfigSource.DYNAMIC_TOPIC_CONFIG)
        plog = broker.partition_log("c", 0)
        assert plog is not None
        await wait_until(lambda: plog.config.retention_ms == 60000, "retention.ms reaches the log")
        assert (plog.config.retention_ms, plog.config.compact, plog.config.delete) == (60000, True, True)

        replace = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=2, resource_name="c", configs=[AlterConfigsRequest.AlterableConfig(name="segment.bytes", value="1048576")])])
        assert (await client.request(ApiKey.ALTER_CONFIGS, 2, replace)).responses[0].error_code == 0
        cfg = await describe()
        assert cfg["cleanup.policy"] == ("delete", ConfigSource.DEFAULT_CONFIG)
        await wait_until(lambda: plog.config.segment_bytes == 1048576, "segment.bytes reaches the log")
        assert not plog.config.compact

        bad = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=2, resource_name="c", configs=[AlterConfigsRequest.AlterableConfig(name="retention.ms", value="abc")])])
        assert (await client.request(ApiKey.ALTER_CONFIGS, 2, bad)).responses[0].error_code == ErrorCode.INVALID_CONFIG
        missing = AlterConfigsRequest(resources=[AlterConfigsRequest.AlterConfigsResource(resource_type=2, resource_name="zz")])
        assert (await client.request(ApiKey.ALTER_CONFIGS, 2, missing)).responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_describe_broker_configs(tmp_path: Path) -> None:
    async with running_broker(tmp_path, **{"num.partitions": "7"}) as (_, _, port):
        client = await Client.connect(port)
        resp = await client.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=["num.partitions"])]))
        [entry] = resp.results[0].configs
        assert (entry.name, entry.value, entry.config_source, entry.read_only) == ("num.partitions", "7", ConfigSource.STATIC_BROKER_CONFIG, True)


async def test_describe_broker_configs_hides_passwords_and_flags_them_sensitive(tmp_path: Path) -> None:
    """Admin tools (kafka-configs --describe --all) show a password key as sensitive with no value,
    as Kafka does: the SASL user list set at start must never come back over the wire."""
    async with running_broker(tmp_path, **{"kafkapy.sasl.users": "alice:s3cret"}) as (_, _, port):
        client = await Client.connect(port)
        resp = await client.request(ApiKey.DESCRIBE_CONFIGS, 4, DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="1", configuration_keys=None)],
            include_synonyms=True))
        by_name = {e.name: e for e in resp.results[0].configs}
        users = by_name["kafkapy.sasl.users"]
        assert (users.value, users.is_sensitive, users.config_source) == (None, True, ConfigSource.STATIC_BROKER_CONFIG)
        assert all(s.value is None for s in users.synonyms)
        assert by_name["sasl.jaas.config"].is_sensitive
        assert not by_name["num.partitions"].is_sensitive
        assert "s3cret" not in repr(resp)

async def test_metadata_auto_create_and_unknown_topics() -> None:
    async with running_broker(None, **{"num.partitions": "2"}) as (broker, _, port):
        client = await Client.connect(port)
        req = MetadataRequest(allow_auto_topic_creation=True, topics=[
            MetadataRequest.MetadataRequestTopic(name="auto"), MetadataRequest.MetadataRequestTopic(name="in valid")])
        md = await client.request(ApiKey.METADATA, 12, req)
        got = {t.name: (t.error_code, len(t.partitions)) for t in md.topics}
        assert got == {"auto": (0, 2), "in valid": (ErrorCode.INVALID_TOPIC_EXCEPTION, 0)}
        assert md.topics[0].topic_id == (await list_topics(port))["auto"].topic_id
        assert md.topics[0].topic_id != uuid.UUID(int=0)
        assert (md.controller_id, md.cluster_id, md.brokers[0].port) == (1, broker.cluster_id, port)
        no_create = await client.request(ApiKey.METADATA, 12, MetadataRequest(
            allow_auto_topic_creation=False, topics=[MetadataRequest.MetadataRequestTopic(name="other")]))
        assert no_create.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert "other" not in await list_topics(port)


async def test_retention_change_takes_effect_in_the_background() -> None:
    settings = {"log.retention.check.interval.ms": "100", "log.segment.bytes": "1024"}
    async with running_broker(None, **settings) as (broker, _, port):
        await create_topic(port, "r", 1)
        client = await Client.connect(port)
        ten_minutes_ago = now_ms() - 600_000
        for i in range(6):
            produce = ProduceRequest(acks=1, topic_data=[ProduceRequest.TopicProduceData(
                name="r", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"v" * 600, timestamp=ten_minutes_ago + i))])])
            await client.request(ApiKey.PRODUCE, 9, produce)
        plog = broker.partition_log("r", 0)
        assert plog is not None
        await trio.sleep(0.3)
        assert plog.log_start_offset == 0  # a week of retention: nothing goes
        alter = IncrementalAlterConfigsRequest(resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=2, resource_name="r", configs=[
                IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=0, value="60000")])])
        assert (await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, alter)).responses[0].error_code == 0
        for _ in range(100):  # the background task runs every 100 ms
            if plog.log_start_offset > 0:
                break
            await trio.sleep(0.05)
        assert plog.log_start_offset > 0
        assert plog.log_end_offset == 6


async def test_concurrent_creations_of_one_name_create_it_once() -> None:
    """Two connections create one name at the same time: the controller takes the first, the
    other is TOPIC_ALREADY_EXISTS, and a Metadata request sent meanwhile sees the one topic."""
    async with running_broker(None) as (broker, _, port):
        creator, other, racer = [await Client.connect(port) for _ in range(3)]
        await creator.send(ApiKey.CREATE_TOPICS, 7, CT(topics=[creatable("slow", 3)]))
        await racer.send(ApiKey.CREATE_TOPICS, 7, CT(topics=[creatable("slow", 3)]))
        await other.send(ApiKey.METADATA, 12, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="slow")]))
        _, created = await creator.receive()
        _, dup = await racer.receive()
        assert sorted([created.topics[0].error_code, dup.topics[0].error_code]) == [
            ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS]
        _, md = await other.receive()
        assert [(t.name, t.error_code, len(t.partitions)) for t in md.topics] == [("slow", 0, 3)]
        assert broker.partition_log("slow", 2) is not None


async def test_delete_then_recreate_gets_a_fresh_empty_topic() -> None:
    async with running_broker(None) as (broker, _, port):
        old = await create_topic(port, "again", 1)
        client = await Client.connect(port)
        await client.request(ApiKey.PRODUCE, 9, ProduceRequest(acks=1, topic_data=[ProduceRequest.TopicProduceData(
            name="again", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch(b"old"))])]))
        await client.send(ApiKey.DELETE_TOPICS, 6, DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="again")]))
        await client.send(ApiKey.CREATE_TOPICS, 7, CT(topics=[creatable("again", 2)]))
        _, deleted = await client.receive()
        _, created = await client.receive()
        assert deleted.responses[0].error_code == 0
        assert created.topics[0].error_code == 0
        assert created.topics[0].topic_id != old.topic_id
        plog = broker.partition_log("again", 0)
        assert plog is not None
        assert plog.log_end_offset == 0


async def test_acl_requests_say_security_disabled() -> None:
    async with running_broker(None) as (_, _, port):
        client = await Client.connect(port)
        described = await client.request(ApiKey.DESCRIBE_ACLS, 3, DescribeAclsRequest(resource_type_filter=1, operation=1, permission_type=1))
        assert described.error_code == ErrorCode.SECURITY_DISABLED
        created = await client.request(ApiKey.CREATE_ACLS, 3, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation()]))
        assert [r.error_code for r in created.results] == [ErrorCode.SECURITY_DISABLED]
        deleted = await client.request(ApiKey.DELETE_ACLS, 3, DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter()]))
        assert [r.error_code for r in deleted.filter_results] == [ErrorCode.SECURITY_DISABLED]


async def test_metadata_advertises_the_configured_address() -> None:
    overrides = {"advertised.listeners": "PLAINTEXT://broker.example:19999"}
    async with running_broker(None, **overrides) as (_, _, port):
        client = await Client.connect(port)
        md = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        assert [(b.node_id, b.host, b.port) for b in md.brokers] == [(1, "broker.example", 19999)]
    async with running_broker(None) as (_, _, port):  # default: the real bound address
        client = await Client.connect(port)
        md = await client.request(ApiKey.METADATA, 12, MetadataRequest(topics=[]))
        assert [(b.host, b.port) for b in md.brokers] == [("127.0.0.1", port)]
        assert md.topics == []


async def test_topic_creation_failing_in_the_log_store_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A partition the disk refuses (here: a file where partition 1's directory must go): the
    topic is created - the controller commits it before any broker opens a log, as Kafka's
    does - the cause is logged with the partition's name so an operator sees more than a
    client's error code, and that partition refuses writes (a retriable code: the client
    waits for it) while the others take them."""
    async with running_broker(tmp_path) as (broker, _, port):
        (tmp_path / "blocked-1").write_text("not a directory")
        client = await Client.connect(port)
        with caplog.at_level("WARNING", logger="kafkapy.server.cluster.partition_roles"):
            resp = await client.request(ApiKey.CREATE_TOPICS, 7, CT(topics=[creatable("blocked", 3)]))
            assert resp.topics[0].error_code == ErrorCode.NONE
            await wait_until(lambda: broker.partition_log("blocked", 0) is not None, "blocked-0 opens")
        assert broker.partition_log("blocked", 1) is None
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= 30]
        assert any("blocked-1" in w for w in warnings), warnings

        def produce(partition: int) -> ProduceRequest:
            return ProduceRequest(acks=-1, timeout_ms=5000, topic_data=[ProduceRequest.TopicProduceData(
                name="blocked", partition_data=[ProduceRequest.PartitionProduceData(
                    index=partition, records=batch(b"x"))])])

        refused = await client.request(ApiKey.PRODUCE, 9, produce(1))
        assert refused.responses[0].partition_responses[0].error_code in (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR)
        taken = await client.request(ApiKey.PRODUCE, 9, produce(0))
        assert taken.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        await client.aclose()


async def test_create_topics_and_partitions_over_the_per_request_limit() -> None:
    """Kafka's controller limit, on one node: more than 10,000 partitions in one CreateTopics is
    POLICY_VIOLATION for every topic; a CreatePartitions topic that takes the request past
    10,000 new partitions is INVALID_PARTITIONS while an earlier one in it succeeds."""
    async with running_broker(None, **{"num.partitions": "2"}) as (_, _, port):
        client = await Client.connect(port)
        req = CT(topics=[creatable("a", 9_999), creatable("b", -1, -1)])  # 9,999 + 2
        resp = await client.request(ApiKey.CREATE_TOPICS, 7, req)
        assert [(t.name, t.error_code) for t in resp.topics] == [
            ("a", ErrorCode.POLICY_VIOLATION), ("b", ErrorCode.POLICY_VIOLATION),
        ]
        assert resp.topics[0].error_message == "Excessively large number of partitions per request."
        assert "a" not in await list_topics(port)
        await create_topic(port, "x", 1)
        await create_topic(port, "y", 1)
        topic = CreatePartitionsRequest.CreatePartitionsTopic
        grow = await client.request(ApiKey.CREATE_PARTITIONS, 3, CreatePartitionsRequest(topics=[
            topic(name="x", count=3), topic(name="y", count=1 + 9_999),
        ]))
        assert [r.error_code for r in grow.results] == [0, ErrorCode.INVALID_PARTITIONS]
        listed = await list_topics(port)
        assert (listed["x"].partitions, listed["y"].partitions) == (3, 1)


def _config_samples() -> list[tuple[str, str]]:
    """Every topic config with its default, a good non-default and values of the wrong shape."""
    samples = []
    for name, key in TOPIC_CONFIGS.items():
        samples += [(name, key.default), (name, "bogus"), (name, "-3"), (name, "")]
        if key.type == ConfigType.BOOLEAN:
            samples.append((name, "true"))
    return samples


async def test_single_node_and_controller_accept_the_same_topic_configs() -> None:
    """One table: a config a cluster's controller takes is taken by a single node too, and a
    config one refuses the other refuses (`preallocate=true` was refused by a single node)."""
    samples = _config_samples()
    cluster = Cluster(ControllerConfig(cluster_id=CLUSTER_ID))
    cluster.start(1)
    controller = cluster.ctl.create_topics(
        [NewTopic(f"t{i}", 1, 1, configs={k: v}) for i, (k, v) in enumerate(samples)],
        validate_only=True,
    ).response
    async with running_broker(None) as (_, _, port):
        client = await Client.connect(port)
        req = CT(validate_only=True, topics=[
            creatable(f"t{i}", configs={k: v}) for i, (k, v) in enumerate(samples)
        ])
        single = (await client.request(ApiKey.CREATE_TOPICS, 7, req)).topics
    assert [(s, t.error_code) for s, t in zip(samples, single, strict=True)] == [
        (s, r.error) for s, r in zip(samples, controller, strict=True)
    ]
    assert ("preallocate", "true") in [s for s, t in zip(samples, single, strict=True) if t.error_code == 0]
