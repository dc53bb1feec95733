"""A group whose coordinator moves (its `__consumer_offsets` partition gets a new leader) resumes
under the new coordinator without a rebalance when its members come back within their session
timeout - counted from the load, not from their last heartbeat to the old coordinator (Kafka's
`completeAndScheduleNextHeartbeatExpiration` for every loaded member). The time between the
old coordinator's death and the load (failure detection, election) is not held against them.
"""

from __future__ import annotations

from kafkapy.coordinator.group import GroupConfig, GroupCoordinator, GroupState
from kafkapy.protocol.errors import ErrorCode

from .helpers import Harness
from .test_group_consumer import CH, Consumer
from .test_group_membership import stable_group

SESSION_MS = 10_000


def _moved(h: Harness | CH, fresh: GroupCoordinator) -> None:
    h.coordinator = fresh


def test_classic_members_keep_their_generation_across_a_coordinator_move() -> None:
    h = Harness()
    members = stable_group(h, 2, session_ms=SESSION_MS)
    generation = h.coordinator.groups["g"].generation
    h.advance(SESSION_MS - 1000)
    for m in members:
        assert h.heartbeat(m, generation) is ErrorCode.NONE
    # the coordinator dies; failure detection and the election take longer than a session
    h.now_ms += SESSION_MS + 2000
    _moved(h, h.replayed())  # the new leader of the partition loads the group now
    h.advance(SESSION_MS - 500)  # the members find it just before their restarted sessions end
    group = h.coordinator.groups["g"]
    assert (group.state, group.generation) == (GroupState.STABLE, generation)
    for m in members:
        assert h.heartbeat(m, generation) is ErrorCode.NONE
    h.advance(SESSION_MS - 500)
    for m in members:
        assert h.heartbeat(m, generation) is ErrorCode.NONE
    assert h.coordinator.groups["g"].generation == generation


def test_classic_members_that_stay_away_a_session_after_the_load_are_removed() -> None:
    h = Harness()
    leader, follower = stable_group(h, 2, session_ms=SESSION_MS)
    generation = h.coordinator.groups["g"].generation
    h.now_ms += 3000
    _moved(h, h.replayed())
    h.advance(SESSION_MS - 1)
    assert h.heartbeat(leader, generation) is ErrorCode.NONE
    h.advance(2)  # the follower never came back: its restarted session ends
    assert follower not in h.coordinator.groups["g"].members
    assert h.heartbeat(leader, generation) is ErrorCode.REBALANCE_IN_PROGRESS


def test_consumer_protocol_members_keep_their_epoch_across_a_coordinator_move() -> None:
    session = 45_000
    h = CH(GroupConfig(consumer_session_timeout_ms=session))
    a, b = Consumer(), Consumer()
    h.join(a, ["t"])
    h.join(b, ["t"])
    for _ in range(4):  # revocations and assignments settle
        h.ack(a)
        h.ack(b)
    epochs = (a.epoch, b.epoch)
    owned = (a.owned, b.owned)
    h.now_ms += session + 5000  # longer than a session without a coordinator
    fresh = GroupCoordinator(h.config)
    for r in h.records:
        fresh.replay(r)
    fresh.load_complete(h.now_ms)
    _moved(h, fresh)
    h.now_ms += session - 1000
    h.records.extend(h.coordinator.poll(h.now_ms).records)  # every timer due by now fires
    assert set(h.coordinator.consumer_groups["g"].members) == {a.member_id, b.member_id}
    for c in (a, b):
        assert h.ack(c).error is ErrorCode.NONE
    assert (a.epoch, b.epoch) == epochs
    assert (a.owned, b.owned) == owned
