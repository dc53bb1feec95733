"""QuorumController: the active controller's decisions as a plain state machine.

Why plain: the server runs it only on the Raft leader, proposes the records of each operation
to the metadata log and answers once they are committed. Every operation returns
`ControllerResult(records, response)` and has already applied its records to the controller's
own (uncommitted) image, so the next operation sees them. When leadership changes, the server
throws the controller away and builds a new one from the committed image: nothing here needs
to survive a failover except what the records say (broker sessions restart, as in Kafka).

The decisions live in `brokers.py` (registration, heartbeats, fencing, controlled shutdown,
producer id blocks), `topics.py` (creation, deletion, partitions, AlterPartition, elections,
reassignments),
`configs.py`, `scram.py` (SCRAM credentials), `quotas.py` (client quotas), `acls.py` (ACLs) and
`features.py` (finalized feature levels), `balance.py` (leader-imbalance checks), with
`placement.py` (rack-aware placement) and `budgets.py` (partition budgets) used by topics.py;
this class is their one entry point.

Start-up: a single node is its own active controller, and before its first request it needs
only registration, heartbeats, sessions, features and the leader-balance check. The other
decision modules (topics, configs, scram, quotas, acls: tens of dataclasses) load on the first
operation that uses them, and their result types re-exported here on first access (PEP 562).
"""

from __future__ import annotations

import importlib
import random
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from kafkapy.controller import balance, brokers, features
from kafkapy.controller.balance import LeaderMove, RebalanceReply
from kafkapy.controller.brokers import HeartbeatReply, ProducerIdsReply, RegistrationReply
from kafkapy.controller.image import MetadataImage
from kafkapy.controller.records import Endpoint, MetadataRecord
from kafkapy.controller.state import ControllerConfig, ControllerResult, ControllerState

if TYPE_CHECKING:
    from kafkapy.authorizer.acl import AclBinding, AclBindingFilter
    from kafkapy.controller.acls import AclCreateResult, AclDeleteResult
    from kafkapy.controller.configs import ConfigChange, ConfigOp, ConfigResult
    from kafkapy.controller.quotas import QuotaAlteration, QuotaAlterationResult, QuotaOp
    from kafkapy.controller.scram import ScramDeletion, ScramResult, ScramUpsertion
    from kafkapy.controller.topics import (
        AlterPartitionItem,
        AlterPartitionReply,
        AlterPartitionResult,
        CreatePartitionsResult,
        CreateTopicResult,
        DeleteTopicResult,
        ElectionResult,
        NewPartitions,
        NewTopic,
        Reassignment,
        ReassignmentResult,
    )

#: the election type `elect_leaders` runs by default (topics.PREFERRED)
PREFERRED_ELECTION = 0

#: re-exported name -> the decision module defining it, loaded on first use (PEP 562)
_LAZY_NAMES: dict[str, str] = {
    **dict.fromkeys(("AclCreateResult", "AclDeleteResult"), "acls"),
    **dict.fromkeys(("ConfigChange", "ConfigOp", "ConfigResult"), "configs"),
    **dict.fromkeys(("QuotaAlteration", "QuotaAlterationResult", "QuotaOp"), "quotas"),
    **dict.fromkeys(("ScramDeletion", "ScramResult", "ScramUpsertion"), "scram"),
    **dict.fromkeys(
        (
            "AlterPartitionItem", "AlterPartitionReply", "AlterPartitionResult",
            "CreatePartitionsResult", "CreateTopicResult", "DeleteTopicResult", "ElectionResult",
            "NewPartitions", "NewTopic", "Reassignment", "ReassignmentResult",
        ),
        "topics",
    ),
}


def __getattr__(name: str) -> object:
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"kafkapy.controller.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "AclCreateResult",
    "AclDeleteResult",
    "AlterPartitionItem",
    "AlterPartitionReply",
    "AlterPartitionResult",
    "ConfigChange",
    "ConfigOp",
    "ConfigResult",
    "ControllerConfig",
    "ControllerResult",
    "CreatePartitionsResult",
    "CreateTopicResult",
    "DeleteTopicResult",
    "ElectionResult",
    "HeartbeatReply",
    "LeaderMove",
    "NewPartitions",
    "NewTopic",
    "ProducerIdsReply",
    "QuorumController",
    "QuotaAlteration",
    "QuotaAlterationResult",
    "QuotaOp",
    "Reassignment",
    "ReassignmentResult",
    "RebalanceReply",
    "RegistrationReply",
    "ScramDeletion",
    "ScramResult",
    "ScramUpsertion",
]


class QuorumController:
    """See the module docstring. `next_offset` is the metadata-log offset the first emitted
    record will get (default: right after the image); `now_ms` starts the sessions of the
    brokers that are active in `image`."""

    def __init__(
        self,
        config: ControllerConfig,
        image: MetadataImage,
        *,
        now_ms: int = 0,
        next_offset: int | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self._st = ControllerState(config, image, now_ms=now_ms, next_offset=next_offset, rng=rng)

    @property
    def config(self) -> ControllerConfig:
        return self._st.config

    @property
    def image(self) -> MetadataImage:
        """The controller's image, including records not yet committed (do not mutate)."""
        return self._st.image

    @property
    def next_offset(self) -> int:
        """The offset the next emitted record will get."""
        return self._st.next_offset

    # -- features --------------------------------------------------------------------------

    @property
    def needs_bootstrap(self) -> bool:
        """The metadata log has no finalized metadata.version yet (see `bootstrap_features`)."""
        return features.needs_bootstrap(self._st.image.features)

    def bootstrap_features(self) -> ControllerResult[None]:
        """The bootstrap FeatureLevelRecords (features.py) when the image lacks them, else none:
        the server runs this before any other operation of a new active controller."""
        return features.bootstrap_features(self._st)

    # -- brokers ---------------------------------------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        *,
        cluster_id: str,
        incarnation_id: uuid.UUID,
        endpoints: Sequence[Endpoint],
        rack: str | None = None,
        now_ms: int,
        previous_broker_epoch: int = -1,
    ) -> ControllerResult[RegistrationReply]:
        return brokers.register_broker(
            self._st,
            broker_id,
            cluster_id=cluster_id,
            incarnation_id=incarnation_id,
            endpoints=endpoints,
            rack=rack,
            now_ms=now_ms,
            previous_broker_epoch=previous_broker_epoch,
        )

    def broker_heartbeat(
        self,
        broker_id: int,
        broker_epoch: int,
        *,
        current_metadata_offset: int,
        want_fence: bool = False,
        want_shutdown: bool = False,
        now_ms: int,
    ) -> ControllerResult[HeartbeatReply]:
        return brokers.broker_heartbeat(
            self._st,
            broker_id,
            broker_epoch,
            current_metadata_offset=current_metadata_offset,
            want_fence=want_fence,
            want_shutdown=want_shutdown,
            now_ms=now_ms,
        )

    def touch_session(self, broker_id: int, broker_epoch: int, now_ms: int) -> None:
        """A heartbeat of `broker_id` reached the controller (no records: answered later)."""
        brokers.touch_session(self._st, broker_id, broker_epoch, now_ms)

    def extend_sessions(self, stalled_ms: int) -> None:
        """The controller was stalled for `stalled_ms`: it does not count against sessions."""
        brokers.extend_sessions(self._st, stalled_ms)

    def fence_gone(self, broker_id: int, broker_epoch: int) -> ControllerResult[bool]:
        """Fence a broker whose process is known to be gone (see `brokers.fence_gone`)."""
        return brokers.fence_gone(self._st, broker_id, broker_epoch)

    def last_contact_ms(self, broker_id: int) -> int | None:
        """When the session of active broker `broker_id` was last touched (None: no session)."""
        return self._st.last_contact_ms.get(broker_id)

    def tick(self, now_ms: int) -> ControllerResult[list[int]]:
        """Fence brokers whose session expired (their partitions get new leaders) and continue
        the departures of fenced or shutting-down brokers (bounded per operation)."""
        return brokers.tick(self._st, now_ms)

    def next_deadline_ms(self) -> int | None:
        """When `tick` next has work (a session may expire, a departure is unfinished: now),
        or None."""
        return brokers.next_session_deadline_ms(self._st)

    def departing(self) -> list[int]:
        """Fenced or shutting-down brokers whose partitions still have to move off them: the
        server runs `continue_departures` until this is empty."""
        return list(self._st.departing)

    def continue_departures(self) -> ControllerResult[list[int]]:
        """The next bounded batch of partition changes for departing brokers (brokers.py);
        answers the brokers still departing after it."""
        records: list[MetadataRecord] = []
        remaining = brokers.continue_departures(self._st, records)
        return ControllerResult(records, remaining)

    def allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> ControllerResult[ProducerIdsReply]:
        return brokers.allocate_producer_ids(self._st, broker_id, broker_epoch)

    # -- topics ----------------------------------------------------------------------------

    def create_topics(
        self, new_topics: Sequence[NewTopic], *, validate_only: bool = False
    ) -> ControllerResult[list[CreateTopicResult]]:
        from kafkapy.controller import topics
        return topics.create_topics(self._st, new_topics, validate_only=validate_only)

    def delete_topics(
        self, names: Sequence[str] = (), topic_ids: Sequence[uuid.UUID] = ()
    ) -> ControllerResult[list[DeleteTopicResult]]:
        from kafkapy.controller import topics
        return topics.delete_topics(self._st, names, topic_ids)

    def create_partitions(
        self, items: Sequence[NewPartitions], *, validate_only: bool = False
    ) -> ControllerResult[list[CreatePartitionsResult]]:
        from kafkapy.controller import topics
        return topics.create_partitions(self._st, items, validate_only=validate_only)

    def alter_partition(
        self, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem]
    ) -> ControllerResult[AlterPartitionReply]:
        from kafkapy.controller import topics
        return topics.alter_partition(self._st, broker_id, broker_epoch, items)

    def elect_leaders(
        self,
        election_type: int = PREFERRED_ELECTION,
        partitions: Sequence[tuple[str, int]] | None = None,
    ) -> ControllerResult[list[ElectionResult]]:
        from kafkapy.controller import topics
        return topics.elect_leaders(self._st, election_type, partitions)

    def alter_partition_reassignments(
        self, items: Sequence[Reassignment]
    ) -> ControllerResult[list[ReassignmentResult]]:
        from kafkapy.controller import topics
        return topics.alter_partition_reassignments(self._st, items)

    # -- leader balance --------------------------------------------------------------------

    def next_rebalance_ms(self) -> int | None:
        """When the next leader-imbalance check is due (None: `auto.leader.rebalance.enable`
        is off)."""
        return self._st.next_rebalance_ms

    def rebalance_leaders(self, now_ms: int) -> ControllerResult[RebalanceReply]:
        """The leader-imbalance check if due at `now_ms`: preferred elections for imbalanced
        partitions, bounded per operation (balance.py); nothing when not due."""
        return balance.rebalance_leaders(self._st, now_ms)

    # -- configs ---------------------------------------------------------------------------

    def incremental_alter_configs(
        self, changes: Sequence[ConfigChange], *, validate_only: bool = False
    ) -> ControllerResult[list[ConfigResult]]:
        from kafkapy.controller import configs
        return configs.incremental_alter_configs(self._st, changes, validate_only=validate_only)

    # -- SCRAM credentials -----------------------------------------------------------------

    def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> ControllerResult[list[ScramResult]]:
        from kafkapy.controller import scram
        return scram.alter_user_scram_credentials(self._st, deletions, upsertions)

    # -- client quotas ---------------------------------------------------------------------

    def alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], *, validate_only: bool = False
    ) -> ControllerResult[list[QuotaAlterationResult]]:
        from kafkapy.controller import quotas
        return quotas.alter_client_quotas(self._st, alterations, validate_only=validate_only)

    # -- ACLs ------------------------------------------------------------------------------

    def create_acls(self, bindings: Sequence[AclBinding]) -> ControllerResult[list[AclCreateResult]]:
        from kafkapy.controller import acls
        return acls.create_acls(self._st, bindings)

    def delete_acls(
        self, filters: Sequence[AclBindingFilter]
    ) -> ControllerResult[list[AclDeleteResult]]:
        from kafkapy.controller import acls
        return acls.delete_acls(self._st, filters)
