"""LeaderState: HW movement, pending ISR changes and stale controller answers."""

from __future__ import annotations

from kafkapy.replication.partition import LeaderState

LAG = 10_000


def _leader(isr: tuple[int, ...] = (1, 2, 3), now: int = 0) -> LeaderState:
    return LeaderState([1, 2, 3], isr, leader_epoch=4, partition_epoch=7, leader_id=1, now_ms=now)


def test_hw_waits_for_every_isr_member() -> None:
    s = _leader()
    assert s.on_leader_append(10) is None  # followers' progress unknown: HW holds
    assert s.on_follower_fetch(2, 10, 10, 1) is None  # 3 still unknown
    assert s.on_follower_fetch(3, 6, 10, 2) == 6
    assert s.on_follower_fetch(3, 10, 10, 3) == 10
    assert s.high_watermark == 10


def test_lone_leader_commits_on_append() -> None:
    s = _leader(isr=(1,))
    assert s.on_leader_append(5) == 5
    assert s.enough_replicas(1)
    assert not s.enough_replicas(2)


def test_shrink_then_hw_advances_when_committed() -> None:
    s = _leader()
    s.on_follower_fetch(2, 10, 10, 100)
    s.on_follower_fetch(3, 0, 10, 100)
    assert s.high_watermark == 0
    assert s.propose_isr_change(10, LAG, LAG) is None  # 3 within the lag time (leader since t=0)
    proposal = s.propose_isr_change(10, 1 + LAG, LAG)
    assert proposal is not None
    assert proposal.new_isr == (1, 2)
    assert (proposal.leader_epoch, proposal.partition_epoch) == (4, 7)
    # pending removal: 3 still counts, no second proposal while one is in flight
    assert s.high_watermark == 0
    assert s.propose_isr_change(10, 200 + LAG, LAG) is None
    assert s.isr_change_committed(proposal, [1, 2], 8, 10) == 10
    assert s.isr == (1, 2)
    assert s.partition_epoch == 8
    assert not s.enough_replicas(3)


def test_pending_expansion_counts_in_the_hw_and_failure_releases_it() -> None:
    s = _leader(isr=(1, 2))
    s.on_follower_fetch(2, 10, 10, 0)
    assert s.high_watermark == 10
    s.on_follower_fetch(3, 10, 10, 0)
    proposal = s.propose_isr_change(12, 0, LAG)
    assert proposal is not None
    assert proposal.new_isr == (1, 2, 3)
    assert s.maximal_isr == (1, 2, 3)
    assert s.isr == (1, 2)  # not committed yet: acks=all checks the committed ISR
    s.on_follower_fetch(2, 12, 12, 1)
    assert s.high_watermark == 10  # 3 (pending) holds it at 10
    assert s.isr_change_failed(proposal, 12) == 12
    assert list(s.maximal_isr) == [1, 2]


def test_stale_answers_are_ignored() -> None:
    s = _leader(isr=(1, 2))
    s.on_follower_fetch(3, 0, 0, 0)
    proposal = s.propose_isr_change(0, 0, LAG)
    assert proposal is not None
    # the controller changed the partition meanwhile (seen in the metadata image)
    s.on_metadata([1, 2, 3], [1], 9, 0, 0)
    assert s.pending is None
    assert s.isr_change_committed(proposal, [1, 2, 3], 8, 0) is None
    assert s.isr == (1,)
    assert s.partition_epoch == 9
    assert s.isr_change_failed(proposal, 0) is None


def test_metadata_with_an_older_partition_epoch_is_ignored() -> None:
    s = _leader()
    assert s.on_metadata([1, 2, 3], [1], 6, 0, 0) is None
    assert s.isr == (1, 2, 3)


def test_fetch_from_a_replica_outside_the_assignment_is_ignored() -> None:
    s = _leader(isr=(1,))
    assert s.on_follower_fetch(9, 100, 100, 0) is None
    assert s.follower_leo(9) == -1


def test_fetch_offset_past_the_leader_end_counts_as_the_end() -> None:
    s = _leader(isr=(1, 2))
    s.on_follower_fetch(2, 50, 10, 0)
    assert s.follower_leo(2) == 10
    assert s.high_watermark == 10


def test_expansion_needs_the_start_of_the_leader_epoch() -> None:
    s = LeaderState([1, 2], [1], leader_epoch=3, partition_epoch=0, leader_id=1,
                    high_watermark=0, epoch_start_offset=20)
    s.on_follower_fetch(2, 15, 15, 0)  # at the leader's end but still before its epoch start
    assert s.propose_isr_change(15, 0, LAG) is None
    s.on_follower_fetch(2, 20, 25, 1)
    s.on_follower_fetch(2, 25, 25, 2)
    proposal = s.propose_isr_change(25, 2, LAG)
    assert proposal is not None
    assert proposal.change.added == {2}


def test_an_expansion_whose_answer_was_lost_keeps_counting_until_the_outcome_is_known() -> None:
    """The controller may have committed it (and may elect the added replica): the chaos run
    where the leader forgot such an expansion and later saw it in the ISR."""
    s = _leader(isr=(1, 2))
    s.on_follower_fetch(2, 10, 10, 0)
    s.on_follower_fetch(3, 10, 10, 0)
    proposal = s.propose_isr_change(10, 0, LAG)
    assert proposal is not None
    assert proposal.new_isr == (1, 2, 3)
    assert s.isr_change_failed(proposal, 10, maybe_applied=True) is None  # no answer
    assert s.maximal_isr == (1, 2, 3)
    s.on_leader_append(20)
    assert s.on_follower_fetch(2, 20, 20, 1) is None
    assert s.high_watermark == 10  # 3, maybe in the ISR, holds only 10
    assert s.propose_isr_change(20, 2, LAG) is proposal  # sent again as it was
    assert s.propose_isr_change(20, 2, LAG) is None  # once per unanswered send
    # the resend meets the committed first send: INVALID_UPDATE_VERSION, still unknown here
    assert s.isr_change_failed(proposal, 20, maybe_applied=True) is None
    assert s.high_watermark == 10
    # the metadata image shows the outcome: committed, 3 is in the ISR
    assert s.on_metadata([1, 2, 3], [1, 2, 3], 8, 20, 3) is None
    assert s.isr == (1, 2, 3)
    assert s.pending is None
    assert s.on_follower_fetch(3, 20, 20, 4) == 20


def test_an_unanswered_expansion_that_was_not_committed_is_released_by_a_refusal() -> None:
    s = _leader(isr=(1, 2))
    s.on_follower_fetch(2, 10, 10, 0)
    s.on_follower_fetch(3, 10, 10, 0)
    proposal = s.propose_isr_change(10, 0, LAG)
    assert proposal is not None
    s.isr_change_failed(proposal, 10, maybe_applied=True)
    s.on_leader_append(20)
    s.on_follower_fetch(2, 20, 20, 1)
    assert s.propose_isr_change(20, 2, LAG) is proposal
    # INELIGIBLE_REPLICA: checked against the current partition epoch, so not applied
    assert s.isr_change_failed(proposal, 20) == 20
    assert s.maximal_isr == (1, 2)


def test_an_unanswered_shrink_is_forgotten() -> None:
    """Its removals never counted in the HW, so forgetting it cannot pass an ISR member."""
    s = _leader()
    s.on_follower_fetch(2, 10, 10, 100)
    proposal = s.propose_isr_change(10, 1 + LAG, LAG)
    assert proposal is not None
    assert proposal.new_isr == (1, 2)
    assert s.isr_change_failed(proposal, 10, maybe_applied=True) is None
    assert s.pending is None
    assert s.maximal_isr == (1, 2, 3)


def test_an_idle_follower_in_a_session_is_caught_up_until_the_next_append() -> None:
    """A follower in a fetch session reports an idle partition only when its offset moves:
    at the leader's end until an append, it counts as caught up as of its latest request, so
    the first append after a long idle spell does not make it look lagging since then."""
    s = _leader()
    s.on_follower_fetch(2, 10, 10, 100)
    s.on_follower_fetch(3, 10, 10, 100)
    s.on_leader_append(12, {2: 5 * LAG, 3: 200})  # 2 kept fetching (its session), 3 went silent
    proposal = s.propose_isr_change(12, 5 * LAG + 1, LAG)
    assert proposal is not None
    assert proposal.new_isr == (1, 2)  # 3 lags since its last request, 2 since the append
    assert s.propose_isr_change(12, 6 * LAG, LAG) is None  # one in flight


def test_a_follower_behind_before_the_append_is_not_made_caught_up() -> None:
    s = _leader()
    s.on_follower_fetch(2, 10, 10, 100)
    s.on_follower_fetch(3, 7, 10, 100)  # behind
    s.on_leader_append(12, {2: 5 * LAG, 3: 5 * LAG})
    proposal = s.propose_isr_change(12, 5 * LAG + 1, LAG)
    assert proposal is not None
    assert proposal.new_isr == (1, 2)
