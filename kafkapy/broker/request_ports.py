"""What a request handler may use of the broker it runs in: narrow ports, named as Kafka names them.

Why ports instead of the broker object: a handler that can reach everything through one object
(`ctx.broker.cluster.channel.create_topics`) depends on everything, and nobody can tell from its
signature what a request touches. Each port here is what one family of handlers uses - the
partition facade, the group and transaction coordinators, the channel to the active controller,
the metadata image - and the server-layer classes behind them (the cluster node, the controller
and Raft drivers, the SASL credential store) satisfy these Protocols structurally; mypy checks
that where the broker builds its `RequestPorts`.

`RequestPorts` is built once per broker and shared by every request context (a context holds
one reference to it), so a request costs no more than with the broker object.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from kafkapy.broker.ports import ReplicaRoles

if TYPE_CHECKING:
    from kafkapy.authorizer import StandardAuthorizer
    from kafkapy.broker.config import BrokerConfig
    from kafkapy.broker.faults import FaultInjector
    from kafkapy.broker.fetch_session import FetchSessionCache
    from kafkapy.broker.group_driver import GroupDriver
    from kafkapy.broker.idempotence import ProducerIds
    from kafkapy.broker.log_state import PartitionLogStates
    from kafkapy.broker.metadata_store import TopicStore
    from kafkapy.broker.notify import PartitionWaiters
    from kafkapy.broker.partitions import Partitions
    from kafkapy.broker.remote_fetch import RemoteTier
    from kafkapy.broker.stats import BrokerStats
    from kafkapy.broker.txn_driver import TxnDriver
    from kafkapy.broker.txn_markers import MarkerHost
    from kafkapy.controller.controller import ControllerResult, QuorumController
    from kafkapy.controller.image import MetadataImage
    from kafkapy.protocol import ApiKey
    from kafkapy.protocol.errors import ErrorCode
    from kafkapy.protocol.messages import (
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        CreateAclsRequest,
        CreateAclsResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )
    from kafkapy.quota.client_quotas import ClientQuotaManager
    from kafkapy.raft import FetchRequest, RaftRequest, RaftResponse, ReplicaProgress
    from kafkapy.storage import LogManager

__all__ = [
    "ActiveController",
    "ClusterMetadata",
    "ControllerChannel",
    "LocalBroker",
    "MetadataFollower",
    "QuorumPeer",
    "RequestPorts",
    "ScramCredentials",
]

R = TypeVar("R")
T = TypeVar("T")


class ControllerChannel(Protocol):
    """The way to the active controller (`ControllerChannel`): what a broker forwards there.
    Each call raises `PeerError` when no controller answered."""

    async def call(self, api_key: ApiKey, version: int, body: object, response_type: type[R], *,
                   timeout_s: float | None = None) -> R: ...
    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse: ...
    async def delete_topics(self, request: DeleteTopicsRequest) -> DeleteTopicsResponse: ...
    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse: ...
    async def alter_partition_reassignments(
        self, request: AlterPartitionReassignmentsRequest
    ) -> AlterPartitionReassignmentsResponse: ...
    async def elect_leaders(self, request: ElectLeadersRequest) -> ElectLeadersResponse: ...
    async def alter_client_quotas(self, request: AlterClientQuotasRequest) -> AlterClientQuotasResponse: ...
    async def incremental_alter_configs(
        self, request: IncrementalAlterConfigsRequest
    ) -> IncrementalAlterConfigsResponse: ...
    async def alter_user_scram_credentials(
        self, request: AlterUserScramCredentialsRequest
    ) -> AlterUserScramCredentialsResponse: ...
    async def create_acls(self, request: CreateAclsRequest) -> CreateAclsResponse: ...
    async def delete_acls(self, request: DeleteAclsRequest) -> DeleteAclsResponse: ...


class QuorumPeer(Protocol):
    """This node's member of the metadata quorum (`RaftDriver`): what the KRaft APIs
    (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot, DescribeQuorum) ask of it."""

    @property
    def leader_id(self) -> int | None: ...
    @property
    def epoch(self) -> int: ...
    @property
    def is_leader(self) -> bool: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def voters(self) -> Collection[int]: ...

    def replica_progress(self) -> dict[int, ReplicaProgress]: ...
    def has_quorum_contact(self) -> bool: ...
    async def handle_request(self, src: int, request: RaftRequest) -> RaftResponse: ...
    async def fetch(self, src: int, request: FetchRequest, max_wait_ms: int) -> RaftResponse: ...


class ActiveController(Protocol):
    """This node's controller (`ControllerDriver`), on a node that runs one: the controller
    listener's handlers run their `QuorumController` operations through it."""

    @property
    def raft(self) -> QuorumPeer: ...

    def active(self) -> QuorumController | None: ...
    async def submit_with_offset(
        self, op: Callable[[QuorumController], ControllerResult[T]], *, commit_timeout_s: float | None = None
    ) -> tuple[T, int]: ...
    def touch_session(self, broker_id: int, broker_epoch: int) -> None: ...
    def suspect(self, node_id: int, reason: str) -> None: ...


class _Peer(Protocol):
    @property
    def connected(self) -> bool: ...


class _Peers(Protocol):
    def get(self, node_id: int) -> _Peer: ...


class ClusterMetadata(Protocol):
    """The cluster as this node knows it (`ClusterNode`): the published metadata image, and
    who leads the quorum as far as this node can tell."""

    @property
    def node_id(self) -> int: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def raft(self) -> QuorumPeer: ...
    @property
    def controller_peers(self) -> _Peers: ...

    def has_joined(self) -> bool: ...
    def seen_gone(self, node_id: int) -> bool: ...


class MetadataFollower(Protocol):
    """The replica manager as Metadata waits on it: the next image applied to the local
    partitions."""

    async def next_apply(self) -> None: ...


class LocalReplicas(MetadataFollower, ReplicaRoles, Protocol):
    """The replica manager as handlers use it: the next image applied (Metadata), and the
    local replicas' roles and follower requests (Fetch's follower sessions)."""


class ScramCredentials(Protocol):
    """The SASL user database (`CredentialStore`) as the SCRAM admin APIs read it."""

    def scram_users(self) -> dict[str, list[tuple[str, int]]]: ...
    def configured(self, user: str) -> bool: ...


class LocalBroker(Protocol):
    """This broker's own facts and its log directories (`Broker`)."""

    @property
    def node_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def shutting_down(self) -> bool: ...
    @property
    def data_dirs(self) -> list[Path]: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def log_states(self) -> PartitionLogStates: ...

    def auto_create_allowed(self) -> bool: ...


@dataclass(slots=True)
class RequestPorts:
    """Everything a handler may use, one field per port (see the module doc). Not frozen: the
    broker swaps its authorizer and fault injector in place (tests do, on a running node), and
    every context shares this one object."""

    #: node id, cluster id, shutdown flag, log dirs
    local: LocalBroker
    config: BrokerConfig
    #: the topic table (from the metadata image)
    topics: TopicStore
    #: leader lookup, append, read and offsets of the local partitions
    partitions: Partitions
    groups: GroupDriver
    transactions: TxnDriver
    #: the coordinators' internal topics (leaders, producer id blocks) and WriteTxnMarkers'
    #: marker writer, which needs the append bookkeeping too
    internal_topics: MarkerHost
    #: create a topic with the broker's defaults (Metadata's auto-creation): the error code
    auto_create_topic: Callable[[str], Awaitable[ErrorCode]]
    #: None: no authorizer configured, every request is allowed
    authorizer: StandardAuthorizer | None
    quotas: ClientQuotaManager
    metadata: ClusterMetadata
    controller: ControllerChannel
    #: None on a broker-only node
    active_controller: ActiveController | None
    quorum: QuorumPeer
    replicas: LocalReplicas
    credentials: ScramCredentials
    producer_ids: ProducerIds
    fetch_sessions: FetchSessionCache
    waiters: PartitionWaiters
    stats: BrokerStats
    fault_injector: FaultInjector | None
    #: the remote tier's read side (KIP-405); None: `remote.log.storage.system.enable` is off
    remote_tier: RemoteTier | None = None
