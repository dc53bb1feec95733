"""Partition reassignment: AlterPartitionReassignments (key 45) v0, ListPartitionReassignments
(key 46) v0.

Behaviour:
- AlterPartitionReassignments is forwarded as it is to the active controller
  (`ControllerChannel.alter_partition_reassignments`; in-process on a quorum of one, whose
  only broker holds every partition), which decides per partition
  (`kafkapy.controller.topics.alter_partition_reassignments`): a target replica list adds the
  new replicas (they start fetching at once), they join the ISR through the leader once caught
  up, and the same ISR change completes the move - the replicas not in the target are removed
  (and delete their logs), a target replica takes over if the leader left. Null replicas cancel
  an ongoing reassignment (NO_REASSIGNMENT_IN_PROGRESS when there is none); unknown partitions
  -> UNKNOWN_TOPIC_OR_PARTITION; a target with unregistered brokers, duplicates or no replicas
  -> INVALID_REPLICA_ASSIGNMENT. The answer comes once this broker's image holds the change
  (the reassignment started or finished, not the data copied). No active controller within the
  request timeout -> NOT_CONTROLLER / REQUEST_TIMED_OUT at the top and on every partition.
- ListPartitionReassignments answers from this broker's metadata image: every partition with
  an ongoing reassignment (its replicas, adding and removing replicas); a null topic list means
  all topics, unknown topics are left out (as Kafka's controller does).

Not yet: KIP-860's AllowReplicationFactorChange (v1), replication throttles during the copy,
authorization.

Authorization: Alter needs ALTER, List DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED).

Controller listener (`@controller_handler`, the request a broker forwards to the active
controller): AlterPartitionReassignments (45) v0.
"""

from __future__ import annotations

from kafkapy.authorizer import AclOperation
from kafkapy.broker.context import RequestContext
from kafkapy.broker.controller_tags import set_metadata_offset
from kafkapy.broker.errors import PeerError
from kafkapy.broker.handlers.registry import controller_handler, handler
from kafkapy.broker.handlers.shared.controller import (
    run_on_controller,
)
from kafkapy.broker.handlers.shared.partition_results import (
    alter_reassignments_response,
)
from kafkapy.controller.controller import (
    Reassignment,
)
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

__all__ = ["handle_alter_partition_reassignments", "handle_list_partition_reassignments"]


def _requested(req: AlterPartitionReassignmentsRequest) -> list[tuple[str, int]]:
    return [(t.name, p.partition_index) for t in req.topics for p in t.partitions]


@handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, min_version=0, max_version=0)
async def handle_alter_partition_reassignments(
    ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    if not ctx.authorize_cluster(AclOperation.ALTER):
        return AlterPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    ctx.release_turn()
    try:
        response: AlterPartitionReassignmentsResponse = (
            await ctx.controller.alter_partition_reassignments(req)
        )
    except PeerError as exc:
        code = ErrorCode(getattr(exc, "error_code", ErrorCode.NOT_CONTROLLER))
        failed = alter_reassignments_response(
            [(t, p, code, str(exc)) for t, p in _requested(req)]
        )
        failed.error_code = code
        failed.error_message = str(exc)
        return failed
    return response


@handler(ApiKey.LIST_PARTITION_REASSIGNMENTS, min_version=0, max_version=0)
async def handle_list_partition_reassignments(
    ctx: RequestContext, req: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    response = ListPartitionReassignmentsResponse()
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        response.error_code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return response
    image = ctx.metadata.image
    if req.topics is None:
        wanted = [(name, sorted(t.partitions)) for name, t in sorted(image.topics.items())]
    else:
        wanted = [(t.name, list(t.partition_indexes)) for t in req.topics if t.name in image.topics]
    for name, indexes in wanted:
        topic = image.topics[name]
        ongoing = [
            ListPartitionReassignmentsResponse.OngoingPartitionReassignment(
                partition_index=p,
                replicas=list(part.replicas),
                adding_replicas=list(part.adding_replicas),
                removing_replicas=list(part.removing_replicas),
            )
            for p in indexes
            if (part := topic.partitions.get(p)) is not None
            and (part.adding_replicas or part.removing_replicas)
        ]
        if ongoing:
            response.topics.append(
                ListPartitionReassignmentsResponse.OngoingTopicReassignment(
                    name=name, partitions=ongoing
                )
            )
    return response


@controller_handler(ApiKey.ALTER_PARTITION_REASSIGNMENTS, min_version=0, max_version=0)
async def handle_alter_partition_reassignments_on_controller(
    ctx: RequestContext, req: AlterPartitionReassignmentsRequest
) -> AlterPartitionReassignmentsResponse:
    items = [
        Reassignment(t.name, p.partition_index, p.replicas)  # None: cancel
        for t in req.topics
        for p in t.partitions
    ]
    outcome = await run_on_controller(
        ctx, lambda c: c.alter_partition_reassignments(items), timeout_ms=req.timeout_ms
    )
    if outcome is None:
        response = alter_reassignments_response(
            [(i.topic, i.partition, ErrorCode.NOT_CONTROLLER, None) for i in items]
        )
        response.error_code = ErrorCode.NOT_CONTROLLER
        return response
    results, offset = outcome
    response = alter_reassignments_response(
        [(r.topic, r.partition, r.error, r.message) for r in results]
    )
    set_metadata_offset(response, offset)
    return response
