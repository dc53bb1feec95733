"""A group write that did not replicate in time but stays in the leader's log.

What users rely on: after `__consumer_offsets` could not reach min.insync.replicas for a while
(two nodes down, a follower paused), the members that were told "try again" rejoin with the
member ids they have and form the group; the coordinator does not forget them while its log
keeps them. The old driver reverted membership to the log below the high watermark although the
records stayed in the log: the members then met UNKNOWN_MEMBER_ID, joined under new ids, and
the next coordinator loaded the forgotten ones from the log as members that never come back
(a chaos run, seed 7, waited a whole 45 s session for them and the group made no commit), with
the same generation id written twice for different memberships.

Offset commits are still reverted: a commit the client was told failed is not served by
OffsetFetch (Kafka keeps it pending until written). Real node, real sockets, real logs; the
replication wait is the part replaced (it answers what an ISR below min.insync.replicas gives).
"""

from __future__ import annotations

import pytest
import trio

from kafkapy.coordinator.group import CONSUMER_OFFSETS_TOPIC, GroupCoordinator
from kafkapy.protocol import ErrorCode
from tests.server.cluster.test_coordinators_partitioned import (
    commit,
    fetched,
    group_in,
    join,
    lead,
    offsets_topic_made,
    partitioned_broker,
)
from tests.server.helpers import Client, create_topic

E = ErrorCode


@pytest.mark.parametrize("code", [E.REQUEST_TIMED_OUT, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND])
async def test_members_told_to_retry_keep_their_ids_and_the_log_generation(
    tmp_path: object, code: ErrorCode
) -> None:
    with trio.fail_after(60):
        async with partitioned_broker(tmp_path) as (broker, groups, _, port):  # type: ignore[arg-type]
            await create_topic(port, "t", 1)
            c = await Client.connect(port)
            group = group_in(0)
            await offsets_topic_made(c, group)
            await lead(groups, CONSUMER_OFFSETS_TOPIC, 0, 1)
            assert await commit(c, group, 10) == E.NONE
            replicated = groups.wait_replicated

            async def isr_too_small(partition: int, end: int) -> ErrorCode:
                return code

            first = await join(c, group)
            assert first.error_code == E.MEMBER_ID_REQUIRED
            member = first.member_id
            groups.wait_replicated = isr_too_small  # type: ignore[method-assign]
            told = await join(c, group, member)  # completes the join: generation 1 is written
            assert told.error_code != E.NONE
            assert await commit(c, group, 20) != E.NONE
            groups.wait_replicated = replicated  # type: ignore[method-assign]

            again = await join(c, group, member)
            assert (again.error_code, again.member_id, again.generation_id) == (E.NONE, member, 1)
            assert await fetched(c, group) == (E.NONE, 10), "a failed commit was served"

            # what the next coordinator of the partition would load: the same membership
            plog = broker.logs.get(CONSUMER_OFFSETS_TOPIC, 0)
            assert plog is not None
            from_log = GroupCoordinator()
            groups.replay_log(plog, from_log, None, None)
            live = groups.coordinator_of_partition(0)
            assert live is not None
            assert from_log.groups[group].generation == live.groups[group].generation == 1
            assert set(from_log.groups[group].members) == set(live.groups[group].members) == {member}
            await c.aclose()
