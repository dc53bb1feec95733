"""The group lifecycle at INFO: the lines a person follows when a consumer waits or rebalances.

Why its own module: what is worth a line (a member joined, a rebalance began and what it waits
for, a generation formed with its assignment, a member left or was removed and why) is decided
here in Kafka's words, once for the classic and the consumer protocol, and kept out of the
state machines' code paths - each of them calls one function at the point the thing happens.
Replays of `__consumer_offsets` never call these: a load is not a membership change.

All at INFO on the `kafkapy.coordinator.group` logger, one line per event, naming the group, the
member (with its client id and host, what a person recognises) and the generation or epoch.
"""

from __future__ import annotations

import logging
import struct

from kafkapy.coordinator.group.state import ClassicGroup, Member

__all__ = [
    "assigned_partitions",
    "consumer_epoch",
    "consumer_member_joined",
    "consumer_member_removed",
    "generation_formed",
    "generation_synced",
    "member_joined",
    "member_removed",
    "rebalance_started",
]

log = logging.getLogger("kafkapy.coordinator.group")

#: why a member left its group, in Kafka's terms
SESSION_TIMEOUT = "no heartbeat within session.timeout.ms"
LEFT = "LeaveGroup"
NOT_REJOINED = "did not rejoin within the rebalance timeout"
NOT_SYNCED = "did not SyncGroup within the rebalance timeout"
FENCED = "fenced: its group.instance.id joined again as a new member"
NOT_REVOKED = "fenced: did not revoke its partitions within the rebalance timeout"
#: members named in a line about the ones a rebalance waits for
MAX_NAMED = 5


def _who(member: Member) -> str:
    static = f", group.instance.id {member.group_instance_id}" if member.group_instance_id else ""
    return f"{member.member_id} (client.id {member.client_id} from {member.client_host}{static})"


def member_joined(group: ClassicGroup, member: Member) -> None:
    log.info("group %s: member %s joined (%d members)", group.group_id, _who(member),
             len(group.members))


def rebalance_started(group: ClassicGroup, wait_ms: int, *, initial_delay: bool) -> None:
    """Why the members' JoinGroup calls wait: for the others to rejoin, or for more members
    (group.initial.rebalance.delay.ms on an Empty group)."""
    if not group.members:
        log.info("group %s: no members left: generation %d will be empty", group.group_id,
                 group.generation + 1)
        return
    if initial_delay:
        why = f"waiting {wait_ms} ms (group.initial.rebalance.delay.ms) for more members to join"
    else:
        absent = [m for m in group.members.values() if m.awaiting_join is None]
        named = ", ".join(_who(m) for m in absent[:MAX_NAMED])
        more = f" and {len(absent) - MAX_NAMED} more" if len(absent) > MAX_NAMED else ""
        why = (f"waiting up to {wait_ms} ms (the rebalance timeout) for {len(absent)} of "
               f"{len(group.members)} members to rejoin" + (f": {named}{more}" if absent else ""))
    log.info("group %s: rebalancing to generation %d: %s", group.group_id, group.generation + 1, why)


def generation_formed(group: ClassicGroup) -> None:
    log.info("group %s: generation %d formed with %d members (protocol %s, leader %s); "
             "waiting for the leader's assignment", group.group_id, group.generation,
             len(group.members), group.protocol, group.leader)


def generation_synced(group: ClassicGroup, assignments: dict[str, bytes]) -> None:
    """The leader's SyncGroup: the generation is Stable with this assignment."""
    partitions = sum(assigned_partitions(a) or 0 for a in assignments.values())
    size = f"{partitions} partitions" if group.protocol_type == "consumer" else (
        f"{sum(len(a) for a in assignments.values())} bytes")
    log.info("group %s: generation %d stable: %s assigned to %d members", group.group_id,
             group.generation, size, len(assignments))


def member_removed(group: ClassicGroup, member: Member, why: str) -> None:
    log.info("group %s: member %s removed: %s%s", group.group_id, _who(member), why,
             f" ({member.session_timeout_ms} ms)" if why == SESSION_TIMEOUT else "")


def consumer_member_joined(group_id: str, member_id: str, client_id: str, client_host: str,
                           members: int) -> None:
    log.info("group %s: member %s (client.id %s from %s) joined (%d members, consumer protocol)",
             group_id, member_id, client_id, client_host, members)


def consumer_epoch(group_id: str, epoch: int, partitions: int, members: int) -> None:
    """A new group epoch of a consumer-protocol group: its target assignment."""
    log.info("group %s: epoch %d: %d partitions assigned to %d members", group_id, epoch,
             partitions, members)


def consumer_member_removed(group_id: str, member_id: str, client_id: str, why: str) -> None:
    log.info("group %s: member %s (client.id %s) removed: %s", group_id, member_id, client_id, why)


def assigned_partitions(assignment: bytes) -> int | None:
    """How many partitions a consumer-protocol Assignment holds (version, then an array of
    topic name and partition ids); None if the bytes are not one."""
    try:
        pos = 2
        (topics,) = struct.unpack_from(">i", assignment, pos)
        pos += 4
        total = 0
        for _ in range(max(topics, 0)):
            (name_len,) = struct.unpack_from(">h", assignment, pos)
            pos += 2 + max(name_len, 0)
            (count,) = struct.unpack_from(">i", assignment, pos)
            pos += 4 + 4 * max(count, 0)
            if pos > len(assignment):
                return None
            total += max(count, 0)
        return total
    except struct.error:
        return None
