"""DescribeCluster (key 60) v0-1 on the broker listeners.

Behaviour: one broker per unfenced broker of the metadata image, with its endpoint for the
request's listener, and the same controller id as Metadata. A broker listener answers the BROKERS
endpoint type (1) only, as Kafka's brokers do: v1 with endpoint_type 2 (controllers) or anything
else is UNSUPPORTED_ENDPOINT_TYPE (a quorum of one too: its controller listener, if it has
one, answers the controllers).

Authorized operations (KIP-430): every supported cluster operation without an authorizer; with
one, the principal's (0 without DESCRIBE on the cluster, as Kafka answers).
"""

from __future__ import annotations

from kafkapy.authorizer import CLUSTER_NAME, AclOperation, ResourceType
from kafkapy.broker.context import RequestContext
from kafkapy.broker.handlers.registry import handler
from kafkapy.broker.handlers.shared.brokers import alive_brokers, controller_id_for_clients
from kafkapy.broker.request_ports import ClusterMetadata
from kafkapy.protocol import ApiKey
from kafkapy.protocol.acl_operations import CLUSTER_OPERATIONS
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import DescribeClusterRequest, DescribeClusterResponse

__all__ = ["handle_describe_cluster"]

BROKERS_ENDPOINT, CONTROLLERS_ENDPOINT = 1, 2


@handler(ApiKey.DESCRIBE_CLUSTER, min_version=0, max_version=1)
async def handle_describe_cluster(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    ports = ctx.ports
    response = _describe_cluster_from_image(ctx, req, ports.metadata)
    if req.include_cluster_authorized_operations:
        # KIP-430: no authorizer, every operation; else the principal's, 0 without DESCRIBE
        response.cluster_authorized_operations = (
            ctx.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
            if ctx.authorize_cluster(AclOperation.DESCRIBE)
            else 0
        )
    return response


def _describe_cluster_from_image(
    ctx: RequestContext, req: DescribeClusterRequest, cluster: ClusterMetadata
) -> DescribeClusterResponse:
    ports = ctx.ports
    listed = alive_brokers(cluster.image, ctx.connection.listener_name)
    response = DescribeClusterResponse(
        cluster_id=ports.local.cluster_id,
        controller_id=controller_id_for_clients(cluster, [b[0] for b in listed]),
        endpoint_type=req.endpoint_type if ctx.api_version >= 1 else BROKERS_ENDPOINT,
        brokers=[
            DescribeClusterResponse.DescribeClusterBroker(broker_id=i, host=host, port=port, rack=rack)
            for i, host, port, rack in listed
        ],
    )
    if ctx.api_version >= 1 and req.endpoint_type != BROKERS_ENDPOINT:
        response.error_code = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        response.error_message = "The broker listeners serve the BROKERS endpoint type only"
        response.brokers = []
    return response
