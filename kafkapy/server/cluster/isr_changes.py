"""The AlterPartition request a leader sends for its batch of ISR changes (Kafka's
AlterPartitionManager batches what is pending the same way), for
`partition_roles.ReplicaManager`: one request per batch, partitions grouped by topic id, each
proposed ISR member named with its broker epoch (KIP-903) so the controller can refuse a
member that restarted meanwhile.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kafkapy.broker.partition_role import PartitionRole
    from kafkapy.controller.image import BrokerRegistration
    from kafkapy.protocol.messages import AlterPartitionRequest
    from kafkapy.protocol.messages.alter_partition import AlterPartitionRequest_TopicData
    from kafkapy.replication.partition import IsrProposal

__all__ = ["alter_request"]


def alter_request(
    batch: list[tuple[PartitionRole, IsrProposal]], brokers: Mapping[int, BrokerRegistration], node_id: int
) -> AlterPartitionRequest:
    """The AlterPartition of `batch` from broker `node_id` (`brokers`: the published image's).
    Its message classes load with the first ISR change a broker proposes (not before ready)."""
    from kafkapy.protocol.messages import AlterPartitionRequest

    def epoch_of(r: int) -> int:
        reg = brokers.get(r)
        return int(reg.epoch) if reg is not None else -1

    topics: dict[uuid.UUID, AlterPartitionRequest_TopicData] = {}
    for role, proposal in batch:
        data = topics.get(role.topic_id)
        if data is None:
            data = topics[role.topic_id] = AlterPartitionRequest.TopicData(
                topic_name=role.topic, topic_id=role.topic_id)
        data.partitions.append(AlterPartitionRequest.PartitionData(
            partition_index=role.partition,
            leader_epoch=proposal.leader_epoch,
            new_isr=list(proposal.new_isr),
            new_isr_with_epochs=[
                AlterPartitionRequest.BrokerState(broker_id=r, broker_epoch=epoch_of(r))
                for r in proposal.new_isr
            ],
            partition_epoch=proposal.partition_epoch,
        ))
    return AlterPartitionRequest(broker_id=node_id, broker_epoch=epoch_of(node_id), topics=list(topics.values()))
