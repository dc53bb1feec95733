"""Follower fetching (KIP-392): which replica a consumer should read a partition from.

Why: consumers spread over racks (zones) read every byte from the leader, across the zone
boundary, while an in-sync copy sits in their own rack. With `replica.selector.class` set to
Kafka's `RackAwareReplicaSelector`, the leader answers a consumer's Fetch (v11+, carrying the
client's `rack_id` - `client.rack`) with `preferred_read_replica` instead of data, and the
consumer fetches from that replica until it errs or its metadata ages out.

Rules (Kafka's ReplicaManager.findPreferredReadReplica and RackAwareReplicaSelector.select):
- Only the leader names a replica, only for consumers (never for a follower's fetch), and only
  with the selector configured and a non-empty client rack.
- Candidates: the leader, and every follower in the ISR whose log covers the fetch offset
  (log start <= offset <= log end, as the leader last saw it) and that is registered, unfenced
  and reachable on the client's listener. A follower out of the ISR is never named, so a
  consumer returns to the leader when its follower falls behind.
- No candidate in the client's rack, or the leader in it: the leader (answered as -1, no
  redirect). Otherwise the same-rack candidate with the highest log end offset (ties: the
  lowest broker id, so the answer is stable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["NO_PREFERRED_REPLICA", "RACK_AWARE_SELECTOR", "ReplicaView", "select_read_replica", "selector_enabled"]

#: Kafka's class name for the rack-aware selector, the one `replica.selector.class` accepts
RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
#: `preferred_read_replica` when the consumer should stay on the leader
NO_PREFERRED_REPLICA = -1


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as the leader sees it when choosing: its broker, rack and log end offset."""

    broker_id: int
    rack: str | None
    log_end_offset: int


def selector_enabled(replica_selector_class: str | None) -> bool:
    """Is `replica.selector.class` Kafka's rack-aware selector (empty: leaders only)? Any other
    name is refused at start-up (config_rules), so this is a plain comparison."""
    return (replica_selector_class or "").strip() == RACK_AWARE_SELECTOR


def select_read_replica(leader: ReplicaView, followers: Sequence[ReplicaView], client_rack: str) -> int:
    """The broker id a consumer in `client_rack` should read from, or NO_PREFERRED_REPLICA
    (the leader). `followers`: the eligible ones only (see the module rules)."""
    if not client_rack or leader.rack == client_rack:
        return NO_PREFERRED_REPLICA
    same_rack = [f for f in followers if f.rack == client_rack]
    if not same_rack:
        return NO_PREFERRED_REPLICA
    best = max(same_rack, key=lambda f: (f.log_end_offset, -f.broker_id))
    return best.broker_id
