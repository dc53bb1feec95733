"""DescribeQuorum (key 55) v0-2 on the broker listeners (what `kafka-metadata-quorum.sh` and
the admin clients' describeMetadataQuorum send to a ports).

It is forwarded to the active controller, as Kafka's brokers do (in-process on a quorum of
one); the controller listener's own DescribeQuorum is in `quorum.py` with the other Raft APIs.
Another topic or partition than `__cluster_metadata-0` is
INVALID_REQUEST.

Authorization: DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

Versions: all Kafka defines (v0-2).
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation
from kafkapy.broker.context import RequestContext
from kafkapy.broker.errors import PeerError
from kafkapy.broker.handlers.registry import handler
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import DescribeQuorumRequest, DescribeQuorumResponse

__all__ = ["handle_describe_quorum"]

_QUORUM_TOPIC, _QUORUM_PARTITION = "__cluster_metadata", 0


@handler(ApiKey.DESCRIBE_QUORUM, min_version=0, max_version=2)
async def handle_describe_quorum(ctx: RequestContext, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    ports = ctx.ports
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        return DescribeQuorumResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    wanted = [(t.topic_name, p.partition_index) for t in req.topics for p in t.partitions]
    if wanted != [(_QUORUM_TOPIC, _QUORUM_PARTITION)]:
        return DescribeQuorumResponse(error_code=ErrorCode.INVALID_REQUEST,
                                      error_message="only __cluster_metadata-0 has a quorum")
    ctx.release_turn()
    try:
        response = await ports.controller.call(
            ApiKey.DESCRIBE_QUORUM, ctx.api_version, req, DescribeQuorumResponse)
    except PeerError as exc:
        code = ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))
        return DescribeQuorumResponse(error_code=code, error_message=str(exc))
    return response
