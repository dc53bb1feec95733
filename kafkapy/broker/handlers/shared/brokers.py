"""The brokers and the controller id that clients are told, from the metadata image: Metadata
(`metadata.py`) and DescribeCluster (`describe_cluster.py`) answer the same."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kafkapy.broker.errors import PeerError

if TYPE_CHECKING:
    from kafkapy.broker.request_ports import ClusterMetadata
    from kafkapy.controller.image import MetadataImage

__all__ = ["alive_brokers", "controller_id_for_clients"]


def alive_brokers(image: MetadataImage, listener: str) -> list[tuple[int, str, int, str | None]]:
    """Cluster mode: (id, host, port, rack) of the unfenced brokers advertising `listener`."""
    out = []
    for b in sorted(image.brokers.values(), key=lambda b: b.id):
        ep = b.endpoint(listener) if not b.fenced else None
        if ep is not None:
            out.append((b.id, ep.host, ep.port, b.rack))
    return out


def controller_id_for_clients(cluster: ClusterMetadata, listed: list[int]) -> int:
    """The controller id clients are told (Metadata, DescribeCluster): where they send admin
    requests (CreateTopics, DeleteTopics, CreatePartitions, configs, ...).

    The Raft leader when it is a listed broker and this node is it or still connected to it;
    otherwise this broker when listed (it forwards to whichever controller is active, as KRaft
    brokers do - Kafka names a random live ports), else the lowest listed one (clients cannot
    talk to controller-only nodes).

    Why not simply the Raft leader: right after the active controller dies, every node still
    names it for an election timeout, yet the broker unfencing lasts a session timeout longer,
    so it stays listed. librdkafka sends admin requests only to the controller of its last
    Metadata answer and refreshes Metadata on a new connection, not on the controller's
    failures - told the dead node once, its CreateTopics waited for that node to come back
    (over 100 s). A node whose Raft connection to the leader broke names itself instead: it
    is alive, since it is answering."""
    me = cluster.node_id
    raft_leader = cluster.raft.leader_id
    if raft_leader is not None and raft_leader in listed and (raft_leader == me or _reaches(cluster, raft_leader)):
        return raft_leader
    if me in listed:
        return me
    return listed[0] if listed else -1


def _reaches(cluster: ClusterMetadata, node_id: int) -> bool:
    """True while this node's Raft connection to `node_id` is up (followers and observers keep
    a Fetch long-poll in flight on it, so a dead leader's closed socket is seen at once)."""
    try:
        return cluster.controller_peers.get(node_id).connected
    except PeerError:
        return False
