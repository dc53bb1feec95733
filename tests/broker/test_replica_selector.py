"""Which replica a consumer is sent to (KIP-392, Kafka's RackAwareReplicaSelector rules)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafkapy.broker.replica_selector import (
    NO_PREFERRED_REPLICA,
    RACK_AWARE_SELECTOR,
    ReplicaView,
    select_read_replica,
    selector_enabled,
)

LEADER_A = ReplicaView(1, "a", 100)


def test_a_consumer_in_a_follower_rack_is_sent_to_that_follower() -> None:
    followers = [ReplicaView(2, "b", 100), ReplicaView(3, "c", 100)]
    assert select_read_replica(LEADER_A, followers, "b") == 2
    assert select_read_replica(LEADER_A, followers, "c") == 3


def test_the_leader_stays_when_it_shares_the_rack_or_no_replica_does() -> None:
    followers = [ReplicaView(2, "a", 100), ReplicaView(3, "b", 100)]
    assert select_read_replica(LEADER_A, followers, "a") == NO_PREFERRED_REPLICA
    assert select_read_replica(LEADER_A, followers, "z") == NO_PREFERRED_REPLICA
    assert select_read_replica(LEADER_A, followers, "") == NO_PREFERRED_REPLICA


def test_the_most_caught_up_follower_of_the_rack_wins() -> None:
    followers = [ReplicaView(4, "b", 90), ReplicaView(2, "b", 95), ReplicaView(3, "b", 95)]
    assert select_read_replica(LEADER_A, followers, "b") == 2


def test_only_kafkas_rack_aware_selector_turns_it_on() -> None:
    assert selector_enabled(RACK_AWARE_SELECTOR)
    assert not selector_enabled("")
    assert not selector_enabled(None)


views = st.builds(ReplicaView, st.integers(2, 9), st.sampled_from(["a", "b", "c", None]), st.integers(0, 100))


@given(followers=st.lists(views, max_size=5), rack=st.sampled_from(["a", "b", "c", ""]))
def test_the_choice_is_a_same_rack_follower_or_the_leader(followers: list[ReplicaView], rack: str) -> None:
    chosen = select_read_replica(LEADER_A, followers, rack)
    if chosen == NO_PREFERRED_REPLICA:
        assert rack in ("", "a") or all(f.rack != rack for f in followers)
    else:
        assert rack not in ("", "a")
        assert any(f.broker_id == chosen and f.rack == rack for f in followers)
