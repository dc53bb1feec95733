"""Metadata (key 3): v0-12.

Behaviour (docs/cluster.md; a lone node is a quorum of one, so the same for one node and many):
everything comes from the published MetadataImage - the unfenced brokers with their endpoint
for the request's listener, controller id = the Raft leader when it is such a broker and this
node still reaches it (else this ports, which forwards admin requests to whichever controller
becomes active; see `shared/brokers.py`), each partition's leader, leader epoch, replicas, ISR
and offline replicas (not registered or fenced); leader -1 -> LEADER_NOT_AVAILABLE. A null
topic list (v1+; empty list in v0) means all topics. Unknown topics are auto-created when
`auto.create.topics.enable` and the request allows it (v4+ flag; always in v0-3), through the
controller channel; the answer waits briefly for the new topic to reach the image
(LEADER_NOT_AVAILABLE if it has not yet, and the client retries). Illegal names ->
INVALID_TOPIC_EXCEPTION; unknown topic ids (v10+) -> UNKNOWN_TOPIC_ID. A node that has not
joined since it started (`ClusterMetadata.has_joined`: its image is what it replayed from disk,
empty until a Raft leader answers) waits up to 5 s for it, then closes the connection so the
client asks another broker: an answer without the cluster's topics and brokers made librdkafka
fail every produce with "Unknown topic" until its next metadata refresh (5 min).

Authorization (an authorizer configured; Kafka's rules): listing all topics shows only those the
principal may DESCRIBE; a named topic it may not DESCRIBE is TOPIC_AUTHORIZATION_FAILED (whether
or not it exists), and an unknown one is auto-created only with CREATE on the cluster or the
topic (else TOPIC_AUTHORIZATION_FAILED).

Authorized operations (v8+, when asked): without an authorizer every operation a topic (and,
v8-10, the cluster) supports, as Kafka answers (`protocol.acl_operations`); with one, those the
principal may do.

Racks: each broker's `broker.rack` as registered. Not yet: internal topic auto-creation (the
coordinators create those).
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from collections.abc import Collection

from kafkapy.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafkapy.broker import runtime
from kafkapy.broker.context import CloseConnection, RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.handlers.shared.brokers import alive_brokers, controller_id_for_clients
from kafkapy.broker.metadata_store import INTERNAL_TOPICS
from kafkapy.broker.request_ports import ClusterMetadata, MetadataFollower
from kafkapy.controller.image import MetadataImage, TopicImage
from kafkapy.protocol import ApiKey
from kafkapy.protocol.acl_operations import CLUSTER_OPERATIONS, TOPIC_OPERATIONS
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import MetadataRequest, MetadataResponse
from kafkapy.protocol.messages.metadata import MetadataRequest_MetadataRequestTopic as WantedTopic
from kafkapy.protocol.messages.metadata import MetadataResponse_MetadataResponseTopic as TopicEntry

__all__ = ["handle_metadata"]

log = logging.getLogger(__name__)

_ZERO_ID = uuid.UUID(int=0)
Key = tuple[str, int]
_CREATE_WAIT_S = 2.0  # how long an auto-creating Metadata request waits for the new topic
_JOIN_WAIT_S = 5.0  # how long a node that has not joined yet holds a Metadata request


def _error_topic(name: str | None, code: ErrorCode, topic_id: uuid.UUID = _ZERO_ID) -> TopicEntry:
    return MetadataResponse.MetadataResponseTopic(
        error_code=code, name=name, topic_id=topic_id, is_internal=name in INTERNAL_TOPICS
    )


def _alive(image: MetadataImage, broker_id: int) -> bool:
    reg = image.brokers.get(broker_id)
    return reg is not None and not reg.fenced


def _cluster_topic(image: MetadataImage, t: TopicImage, offline_here: tuple[int, Collection[Key]]) -> TopicEntry:
    """`offline_here`: this node's id and its partitions whose log is offline, listed among
    the partition's `offline_replicas` as Kafka lists a replica in an offline log dir."""
    node_id, offline = offline_here
    partitions = []
    for p, part in sorted(t.partitions.items()):
        leader = part.leader if part.leader >= 0 and _alive(image, part.leader) else -1
        partitions.append(
            MetadataResponse.MetadataResponsePartition(
                error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
                partition_index=p,
                leader_id=leader,
                leader_epoch=part.leader_epoch,
                replica_nodes=list(part.replicas),
                isr_nodes=list(part.isr),
                offline_replicas=[
                    r for r in part.replicas
                    if not _alive(image, r) or (r == node_id and (t.name, p) in offline)
                ],
            )
        )
    return MetadataResponse.MetadataResponseTopic(
        error_code=ErrorCode.NONE,
        name=t.name,
        topic_id=t.topic_id,
        is_internal=t.name in INTERNAL_TOPICS,
        partitions=partitions,
    )


async def _joined(cluster: ClusterMetadata, replicas: MetadataFollower) -> bool:
    """`cluster.has_joined()`, waiting up to `_JOIN_WAIT_S` (image publishes) for it."""
    with runtime.get().move_on_after(_JOIN_WAIT_S):
        while not cluster.has_joined():
            await replicas.next_apply()
        return True
    return False


async def _cluster_metadata(
    ctx: RequestContext, req: MetadataRequest, cluster: ClusterMetadata, replicas: MetadataFollower
) -> MetadataResponse:
    ports = ctx.ports
    if not await _joined(cluster, replicas):
        raise CloseConnection(
            f"node {cluster.node_id} has not rejoined the cluster since it started: "
            "no metadata to give yet"
        )
    version = ctx.api_version
    image = cluster.image
    offline_here = (ports.local.node_id, ports.local.log_states.offline().keys())
    listener = ctx.connection.listener_name
    response = MetadataResponse(cluster_id=ports.local.cluster_id, controller_id=-1)
    for node_id, host, port, rack in alive_brokers(image, listener):
        response.brokers.append(
            MetadataResponse.MetadataResponseBroker(
                node_id=node_id, host=host, port=port, rack=rack
            )
        )
    response.controller_id = controller_id_for_clients(
        cluster, [b.node_id for b in response.brokers]
    )
    if req.topics is None or (version == 0 and not req.topics):
        response.topics = [_cluster_topic(image, t, offline_here) for _, t in sorted(image.topics.items())]
        return response
    allow_create = ports.local.auto_create_allowed() and (version < 4 or req.allow_auto_topic_creation)
    for wanted in req.topics:
        if wanted.name is None:
            t = image.topic_by_id(wanted.topic_id)
            response.topics.append(
                _cluster_topic(image, t, offline_here)
                if t is not None
                else _error_topic(None, ErrorCode.UNKNOWN_TOPIC_ID, wanted.topic_id)
            )
            continue
        name = wanted.name
        t = image.topics.get(name)
        if t is None and allow_create and name not in INTERNAL_TOPICS:
            code = await ports.auto_create_topic(name)
            if code is not ErrorCode.NONE:
                response.topics.append(_error_topic(name, code))
                continue
            with runtime.get().move_on_after(_CREATE_WAIT_S):
                while (t := cluster.image.topics.get(name)) is None:
                    await replicas.next_apply()
            if t is None:
                response.topics.append(_error_topic(name, ErrorCode.LEADER_NOT_AVAILABLE))
                continue
            image = cluster.image
        if t is None:
            response.topics.append(_error_topic(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        else:
            response.topics.append(_cluster_topic(image, t, offline_here))
    return response


def _authorize_named(ctx: RequestContext, req: MetadataRequest) -> tuple[MetadataRequest, list[TopicEntry]]:
    """The request narrowed to the named topics the principal may see (and create, when they
    would be auto-created), and the answers for the others."""
    assert req.topics is not None
    ports = ctx.ports
    creating = ports.local.auto_create_allowed() and (ctx.api_version < 4 or req.allow_auto_topic_creation)
    kept: list[WantedTopic] = []
    refused: list[TopicEntry] = []
    for wanted in req.topics:
        name = wanted.name
        if name is None:
            info = ports.topics.by_id(wanted.topic_id)
            if info is not None and not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
                refused.append(_error_topic(None, ErrorCode.TOPIC_AUTHORIZATION_FAILED, wanted.topic_id))
                continue
        elif not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, name) or (
            creating and ports.topics.get(name) is None and name not in INTERNAL_TOPICS
            and not ctx.may_create_topic(name)
        ):
            refused.append(_error_topic(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        kept.append(wanted)
    return dataclasses.replace(req, topics=kept), refused


async def _authorized_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    all_topics = req.topics is None or (ctx.api_version == 0 and not req.topics)
    refused: list[TopicEntry] = []
    if not all_topics:
        req, refused = _authorize_named(ctx, req)
    response = await _metadata(ctx, req)
    if all_topics:
        visible = ctx.unauthorized(AclOperation.DESCRIBE, ResourceType.TOPIC, (t.name or "" for t in response.topics))
        response.topics = [t for t in response.topics if t.name not in visible]
    response.topics.extend(refused)
    return response


async def _metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    ports = ctx.ports
    return await _cluster_metadata(ctx, req, ports.metadata, ports.replicas)


@handler(ApiKey.METADATA, min_version=0, max_version=12)
async def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    if ctx.authorizer is None:
        response = await _metadata(ctx, req)
    else:
        response = await _authorized_metadata(ctx, req)
    if ctx.api_version >= 8:
        # KIP-430, when asked for (no authorizer: every operation the resource supports)
        if req.include_topic_authorized_operations:
            for topic in response.topics:
                topic.topic_authorized_operations = ctx.authorized_operations(
                    ResourceType.TOPIC, topic.name or "", TOPIC_OPERATIONS
                )
        if req.include_cluster_authorized_operations and ctx.api_version <= 10:
            response.cluster_authorized_operations = ctx.authorized_operations(
                ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS
            )
    return response
