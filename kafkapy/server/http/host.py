"""What the HTTP listener's pages and metrics read of the node that serves them.

Why a Protocol: `server/app.py` builds the HTTP listener and installs its routes, so the pages
naming `Server` itself would import the app back (an import circle, if only a typing one).
They read four things, written down here; `Server` has them. The broker too is named by what
the pages read of it (`ServedBroker`): the broker module builds the cluster node and the SASL
user database, and a page importing it would close a loop between the server's packages.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from kafkapy.broker.config import BrokerConfig, Listener
    from kafkapy.broker.context import ConnectionState
    from kafkapy.broker.fetch_session import FetchSessionCache
    from kafkapy.broker.group_driver import GroupDriver
    from kafkapy.broker.log_state import PartitionLogStates
    from kafkapy.broker.metadata_store import TopicStore
    from kafkapy.broker.remote_log import RemoteLogManager
    from kafkapy.broker.stats import BrokerStats
    from kafkapy.broker.txn_driver import TxnDriver
    from kafkapy.server.cluster.node import ClusterNode
    from kafkapy.storage import LogManager

__all__ = ["BoundAddress", "ServedBroker", "ServedConnection", "ServedNode"]


class BoundAddress(Protocol):
    """A listener and the address it is bound to."""

    @property
    def listener(self) -> Listener: ...
    @property
    def host(self) -> str: ...
    @property
    def port(self) -> int: ...


class ServedConnection(Protocol):
    """An open client connection (its listener name is in `state`)."""

    @property
    def state(self) -> ConnectionState: ...


class ServedBroker(Protocol):
    """The node's broker as the pages read it (`kafkapy.server.broker.Broker`)."""

    @property
    def node_id(self) -> int: ...
    @property
    def cluster_id(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def cluster(self) -> ClusterNode: ...
    @property
    def topics(self) -> TopicStore: ...
    @property
    def logs(self) -> LogManager: ...
    @property
    def log_states(self) -> PartitionLogStates: ...
    @property
    def stats(self) -> BrokerStats: ...
    @property
    def fetch_sessions(self) -> FetchSessionCache: ...
    @property
    def group_coordinator(self) -> GroupDriver: ...
    @property
    def txn_coordinator(self) -> TxnDriver: ...
    @property
    def remote_log(self) -> RemoteLogManager | None: ...


class ServedNode(Protocol):
    """The running node as the status page and /metrics see it (`kafkapy.server.app.Server`)."""

    @property
    def broker(self) -> ServedBroker: ...
    @property
    def bound(self) -> Sequence[BoundAddress]: ...
    @property
    def connections(self) -> Collection[ServedConnection]: ...
    def readiness(self) -> tuple[bool, str]: ...
