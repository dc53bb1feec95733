"""What the broker layer uses of the cluster node and its replica manager, as Protocols.

The cluster node (`kafkapy.server.cluster.node.ClusterNode`) and the replica manager
(`kafkapy.server.cluster.partition_roles.ReplicaManager`) run on the network and the event loop;
the partition facade and the coordinator runtimes only read the metadata image, ask the active
controller to create topics, check the leader lease and send requests to other brokers. Naming
that here keeps the broker layer below the server layer (import-linter layers contract); the
server's classes satisfy these structurally, which mypy checks where the broker hands them over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kafkapy.broker.partition_role import PartitionRole
    from kafkapy.controller.image import MetadataImage
    from kafkapy.protocol import ApiKey
    from kafkapy.protocol.messages import CreateTopicsRequest, CreateTopicsResponse
    from kafkapy.storage import PartitionLog

__all__ = ["ClusterView", "ControllerCalls", "LeaseHolder", "PeerRequests", "ReplicaRoles"]


class ControllerCalls(Protocol):
    """The channel to the active controller (`ControllerChannel`)."""

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse: ...


class LeaseHolder(Protocol):
    """The broker's registration with the controller (`BrokerLifecycle`): its leader lease."""

    def holds_lease(self) -> bool: ...


class PeerRequests(Protocol):
    """Requests to other nodes by node id (`PeerPool`); raise `PeerError` when unreachable."""

    async def request(self, node_id: int, api_key: ApiKey, version: int, body: Any, *,
                      timeout_s: float, raw: bool = False) -> Any: ...

    async def aclose(self) -> None: ...


class ClusterView(Protocol):
    """The cluster node as the broker layer sees it."""

    @property
    def image(self) -> MetadataImage: ...
    @property
    def channel(self) -> ControllerCalls: ...
    @property
    def lifecycle(self) -> LeaseHolder | None: ...

    def seen_gone(self, node_id: int) -> bool:
        """Did a request to `node_id` just fail as if its process died?"""
        ...

    def new_broker_peers(self, client_id: str) -> PeerRequests:
        """A new pool of connections to the brokers' inter-broker listeners."""
        ...


class ReplicaRoles(Protocol):
    """The local replicas' roles (`ReplicaManager`): what Produce and Fetch consult."""

    def role(self, topic: str, partition: int) -> PartitionRole | None: ...

    def leader_role(self, topic: str, partition: int) -> PartitionRole | None: ...

    def min_insync_replicas(self, topic: str) -> int: ...

    def on_follower_fetch(self, role: PartitionRole, replica_id: int, fetch_offset: int,
                          plog: PartitionLog, log_start_offset: int = -1) -> None: ...

    def on_follower_request(self, replica_id: int) -> None: ...
