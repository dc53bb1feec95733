"""Classic consumer-group state: the five states, their legal predecessors, members and groups.

Rules (as h11 puts its rules first):

1. Every state change goes through `ClassicGroup.transition_to`, which checks `VALID_PREVIOUS`;
   an illegal transition is a bug in the coordinator and raises `IllegalStateTransition`.
2. This module holds data and pure decisions (protocol selection, "has everyone joined?"); it
   never schedules timers or writes records - the coordinator does, so all side effects are in
   one place.
3. Durable fields (generation, protocol, leader, members and their assignments) are changed only
   by `GroupCoordinator.replay`; the volatile fields (who is waiting for a Join/SyncGroup
   response, heartbeat deadlines) live here too but are never persisted, exactly as in Kafka: a
   restarted coordinator forgets them and clients simply rejoin.

Transitions (after Kafka's classic group coordinator):

- Empty -> PreparingRebalance: the first member joins.
- PreparingRebalance -> CompletingRebalance: every member rejoined (or the rebalance timeout
  expired); a new generation is formed and the leader must send the assignment.
- PreparingRebalance -> Empty: the rebalance completed with no members left.
- CompletingRebalance -> Stable: the leader's SyncGroup assignment was stored.
- CompletingRebalance / Stable -> PreparingRebalance: a member joined, left, changed its
  protocols or its session expired.
- Empty / Stable / ... -> Dead: the group was deleted (DeleteGroups, or expiry of an empty group's
  last offsets); a Dead group is removed from the coordinator.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field

__all__ = [
    "VALID_PREVIOUS",
    "ClassicGroup",
    "GroupState",
    "IllegalStateTransition",
    "Member",
]


class GroupState(enum.Enum):
    """Kafka's classic group states; `.value` is the name DescribeGroups/ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.EMPTY,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.STABLE,
            GroupState.DEAD,
        }
    ),
}


class IllegalStateTransition(RuntimeError):
    """A coordinator bug: a transition that `VALID_PREVIOUS` does not allow."""


@dataclass(slots=True)
class Member:
    """One member of a classic group.

    `protocols` is the member's ordered preference list of (name, metadata); after a load from
    the log only the selected protocol's metadata is known, as in Kafka.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # volatile: the request ids of a JoinGroup / SyncGroup waiting for this member's answer
    awaiting_join: int | None = None
    awaiting_sync: int | None = None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass(slots=True)
class ClassicGroup:
    """A classic (JoinGroup/SyncGroup) group: membership, generation and its state."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    state_timestamp_ms: int = 0
    protocol_type: str = ""
    generation: int = 0
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    # group.instance.id -> member id, for static membership
    static_members: dict[str, str] = field(default_factory=dict)
    # member ids handed out with MEMBER_ID_REQUIRED that have not joined yet
    pending_members: set[str] = field(default_factory=set)
    # members of the current generation that have not sent SyncGroup yet
    pending_sync: set[str] = field(default_factory=set)
    new_member_added: bool = False
    # the deadline of the running rebalance (initial delay or rebalance timeout)
    rebalance_deadline_ms: int | None = None
    initial_delay_remaining_ms: int = 0

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalStateTransition(
                f"group {self.group_id!r}: {self.state.value} -> {target.value} is not allowed"
            )
        self.state = target
        self.state_timestamp_ms = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_members_joined(self) -> bool:
        """Kafka's `hasAllMembersJoined`: everyone has a JoinGroup waiting, nobody is pending."""
        return not self.pending_members and all(
            m.awaiting_join is not None for m in self.members.values()
        )

    def candidate_protocols(self) -> set[str]:
        """Protocols every member supports (the only ones the group may select)."""
        names: set[str] | None = None
        for m in self.members.values():
            mine = set(m.protocol_names())
            names = mine if names is None else names & mine
        return names or set()

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Could a member with these protocols join? (INCONSISTENT_GROUP_PROTOCOL if not.)"""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & {name for name, _ in protocols})

    def select_protocol(self) -> str:
        """Each member votes for its most preferred candidate; the most votes win.

        Ties go to the candidate voted first in member order, which keeps the choice
        deterministic for tests and replays.
        """
        candidates = self.candidate_protocols()
        votes: Counter[str] = Counter()
        for m in self.members.values():
            for name in m.protocol_names():
                if name in candidates:
                    votes[name] += 1
                    break
        return votes.most_common(1)[0][0]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to under the `consumer` protocol, None if unknowable.

        Parses the consumer protocol's Subscription (int16 version, array of topics); any
        other protocol type or undecodable metadata gives None, meaning "assume all topics".
        """
        if self.protocol_type != "consumer":
            return None
        topics: set[str] = set()
        for m in self.members.values():
            parsed = _subscription_topics(m.metadata_for(self.protocol))
            if parsed is None:
                return None
            topics |= parsed
        return topics


def _subscription_topics(meta: bytes) -> set[str] | None:
    if len(meta) < 6:
        return None
    count = int.from_bytes(meta[2:6], "big", signed=True)
    pos = 6
    out: set[str] = set()
    if count < 0 or count > len(meta):
        return None
    for _ in range(count):
        if pos + 2 > len(meta):
            return None
        n = int.from_bytes(meta[pos : pos + 2], "big", signed=True)
        pos += 2
        if n < 0 or pos + n > len(meta):
            return None
        try:
            out.add(meta[pos : pos + n].decode("utf-8"))
        except UnicodeDecodeError:
            return None
        pos += n
    return out
