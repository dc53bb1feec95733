"""Metadata (key 3): v0-12.

Behaviour: one broker (this node, at the address advertised for the listener the request came
in on), cluster id from meta.properties, controller = this node. Every partition: leader = this
node, leader epoch 0, replicas = ISR = [node]. A null topic list (v1+; empty list in v0) means all
topics. Unknown topics are auto-created when `auto.create.topics.enable` and the request allows
it (v4+ flag; always in v0-3) and answered with their metadata at once - a single node has no
leader election to wait for. Illegal names -> INVALID_TOPIC_EXCEPTION; unknown topic ids (v10+)
-> UNKNOWN_TOPIC_ID.

Not yet: authorized-operations bitfields (reported as "not requested"), racks, internal topic
auto-creation (the coordinators create those).
"""

from __future__ import annotations

import uuid

from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import MetadataRequest, MetadataResponse
from kafkapy.protocol.messages.metadata import MetadataResponse_MetadataResponseTopic as TopicEntry
from kafkapy.server.broker import LEADER_EPOCH, Broker, BrokerError
from kafkapy.server.context import RequestContext
from kafkapy.server.handlers.registry import handler
from kafkapy.server.metadata_store import INTERNAL_TOPICS, TopicInfo

__all__ = ["handle_metadata", "topic_metadata"]

_ZERO_ID = uuid.UUID(int=0)


def topic_metadata(broker: Broker, info: TopicInfo) -> TopicEntry:
    node = broker.node_id
    return MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=info.name,
        topic_id=info.topic_id,
        is_internal=info.internal,
        partitions=[
            MetadataResponse.MetadataResponsePartition(
                error_code=ErrorCode.NONE,
                partition_index=p,
                leader_id=node,
                leader_epoch=LEADER_EPOCH,
                replica_nodes=[node],
                isr_nodes=[node],
                offline_replicas=[],
            )
            for p in range(info.partitions)
        ],
    )


def _error_topic(name: str | None, code: ErrorCode, topic_id: uuid.UUID = _ZERO_ID) -> TopicEntry:
    return MetadataResponse.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=name in INTERNAL_TOPICS
    )


@handler(ApiKey.METADATA, min_version=0, max_version=12)
async def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.api_version
    host, port = broker.advertised(ctx.connection.listener_name)
    response = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=broker.node_id, host=host, port=port, rack=None)],
        cluster_id=broker.cluster_id,
        controller_id=broker.node_id,
    )
    all_topics = req.topics is None or (version == 0 and not req.topics)
    if all_topics:
        response.topics = [topic_metadata(broker, t) for t in broker.topics.all()]
        return response
    allow_create = broker.auto_create_allowed() and (version < 4 or req.allow_auto_topic_creation)
    assert req.topics is not None
    for wanted in req.topics:
        if wanted.name is None:
            info = broker.topics.by_id(wanted.topic_id)
            response.topics.append(
                topic_metadata(broker, info) if info is not None
                else _error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, wanted.topic_id)
            )
            continue
        name = wanted.name
        info = await broker.wait_until_created(name)
        if info is None and allow_create and name not in INTERNAL_TOPICS:
            try:
                info = await broker.auto_create(name)
            except BrokerError as e:
                response.topics.append(_error_topic(name, e.error_code))
                continue
        if info is None:
            response.topics.append(_error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            response.topics.append(topic_metadata(broker, info))
    return response
