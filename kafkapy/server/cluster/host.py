"""What the cluster node and its lifecycle use of the broker they serve, as a typed interface.

Why: the node (`node`) and the broker's registration / controller channel (`lifecycle`) run
inside a broker and read its logs, producer state, configuration and listeners, but the broker
facade (`kafkapy.server.broker`) builds them - so they name what they use here instead of
importing it, and the import-linter contract "the cluster parts do not import the broker facade"
(directly or through another module) keeps it that way. `Broker` satisfies `BrokerHost`
structurally; mypy checks that where the broker hands itself to the node. The other parts take
narrower dependencies (partition_roles: its own `ReplicaHost`; raft, publisher, controller
driver, replica fetchers: explicit constructor arguments).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kafkapy.broker.config import BrokerConfig
    from kafkapy.broker.idempotence import ProducerStates
    from kafkapy.broker.remote_fetch import RemoteTier
    from kafkapy.broker.stats import BrokerStats
    from kafkapy.controller.image import MetadataDelta, MetadataImage
    from kafkapy.server.cluster.partition_roles import ReplicaManager
    from kafkapy.storage import LogManager

__all__ = ["BrokerHost"]


class BrokerHost(Protocol):
    """The broker as the cluster parts see it (read-only: the broker builds its node itself,
    `Broker.open_cluster()`)."""

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def data_dirs(self) -> list[Path]: ...
    @property
    def endpoints(self) -> dict[str, tuple[str, int]]: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def producer_states(self) -> ProducerStates: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def replicas(self) -> ReplicaManager: ...
    @property
    def remote_tier(self) -> RemoteTier | None: ...

    def apply_metadata(self, image: MetadataImage, delta: MetadataDelta | None) -> None: ...
