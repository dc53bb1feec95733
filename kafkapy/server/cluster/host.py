"""What the cluster parts use of the broker they serve, as a typed interface.

Why: the cluster parts (`node`, `partition_roles`, `replica_fetcher`, `lifecycle`,
`controller_driver`) run inside a broker and read its logs, topics, waiters, producer state and
configuration, but the broker facade (`kafkapy.server.broker`) builds them - so they name what
they use here instead of importing it, and the import-linter contract "the cluster parts do not
import the broker facade" (directly or through another module) keeps it that way. `Broker`
satisfies `BrokerHost` structurally; mypy checks that where the broker hands itself to a part.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kafkapy.controller.image import MetadataDelta, MetadataImage
    from kafkapy.protocol.api_keys import ApiKey
    from kafkapy.server.cluster.node import ClusterNode
    from kafkapy.server.cluster.partition_roles import ReplicaManager
    from kafkapy.server.config import BrokerConfig
    from kafkapy.server.idempotence import ProducerStates
    from kafkapy.server.metadata_store import TopicInfo, TopicStore
    from kafkapy.server.notify import PartitionWaiters
    from kafkapy.server.stats import BrokerStats
    from kafkapy.storage import LogConfig, LogManager

__all__ = ["BrokerHost"]


class BrokerHost(Protocol):
    """The broker as the cluster parts see it (read-only: the broker builds its node itself,
    `Broker.open_cluster()`)."""

    @property
    def cluster(self) -> ClusterNode | None: ...

    @property
    def config(self) -> BrokerConfig: ...
    @property
    def node_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def data_dirs(self) -> list[Path]: ...
    @property
    def endpoints(self) -> dict[str, tuple[str, int]]: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def topics(self) -> TopicStore: ...
    @property
    def waiters(self) -> PartitionWaiters: ...
    @property
    def producer_states(self) -> ProducerStates: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def role_listeners(self) -> list[Any]: ...
    @property
    def default_log_config(self) -> LogConfig: ...
    @property
    def replicas(self) -> ReplicaManager | None: ...

    def log_config(self, info: TopicInfo) -> LogConfig: ...
    def topic_config_value(self, info: TopicInfo, key: str) -> str: ...
    def apply_metadata(self, image: MetadataImage, delta: MetadataDelta | None) -> None: ...
    def own_controller_call(
        self, api_key: ApiKey, version: int, client_id: str
    ) -> Callable[[Any], Awaitable[Any]] | None: ...
