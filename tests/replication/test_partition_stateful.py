"""Model-based test of a leader with two followers, a controller and acks=all producers.

Random appends, follower fetches (each follower's real log grows only by what it fetched),
time passing, ISR proposals and the controller accepting, refusing, changing or losing them
(committed or not, with the answer lost), and the metadata image catching up. After every step:
- the HW never decreases and never exceeds the leader's LEO;
- the HW never exceeds the log end of any maximal-ISR member whose progress is known;
- an acks=all request completes (HW >= its batch end) only when every member of the ISR the
  controller has committed really holds the batch (the controller may elect any of them,
  whether or not the leader has heard of the change);
- a follower in the ISR that has not fetched for longer than the lag time while behind is
  proposed for removal (when nothing else is pending);
- a proposed addition holds everything up to the HW and from the start of the leader's epoch.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from kafkapy.replication.partition import IsrProposal, LeaderState

LAG = 1_000
FOLLOWERS = (2, 3)


class LeaderMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0
        self.epoch_start = 0
        self.leader_leo = 0
        self.state = LeaderState([1, 2, 3], [1, 2, 3], leader_epoch=1, partition_epoch=0, leader_id=1)
        self.real_leo = {2: 0, 3: 0}  # what each follower's log really holds
        self.last_fetch = {2: 0, 3: 0}
        self.waiting: list[int] = []  # batch end offsets of acks=all produce requests
        self.in_flight: IsrProposal | None = None
        self.last_hw = 0
        self.controller_isr: tuple[int, ...] = (1, 2, 3)  # what the controller committed
        self.controller_epoch = 0

    @initialize(start=st.integers(0, 8), f2=st.integers(0, 8), f3=st.integers(0, 8), isr=st.sampled_from(
        [(1,), (1, 2), (1, 2, 3)]))
    def become_leader(self, start: int, f2: int, f3: int, isr: tuple[int, ...]) -> None:
        """A new leader whose log already holds `start` offsets; followers hold some prefix."""
        self.epoch_start = self.leader_leo = start
        self.real_leo = {2: min(f2, start), 3: min(f3, start)}
        self.state = LeaderState(
            [1, 2, 3], isr, leader_epoch=1, partition_epoch=0, leader_id=1, epoch_start_offset=start
        )
        self.controller_isr = isr

    def _hw_moved(self, hw: int | None) -> None:
        if hw is not None:
            assert hw > self.last_hw
        done = [end for end in self.waiting if end <= self.state.high_watermark]
        for end in done:
            for r in set(self.state.isr) | set(self.controller_isr):
                if r != 1:
                    assert self.real_leo[r] >= end, f"acked {end} but replica {r} holds {self.real_leo[r]}"
        self.waiting = [end for end in self.waiting if end > self.state.high_watermark]
        self.last_hw = self.state.high_watermark

    @rule(n=st.integers(1, 5))
    def append(self, n: int) -> None:
        self.leader_leo += n
        self.waiting.append(self.leader_leo)
        self._hw_moved(self.state.on_leader_append(self.leader_leo))

    @rule(r=st.sampled_from(FOLLOWERS), k=st.integers(0, 6))
    def fetch(self, r: int, k: int) -> None:
        hw = self.state.on_follower_fetch(r, self.real_leo[r], self.leader_leo, self.now)
        self.last_fetch[r] = self.now
        self.real_leo[r] = min(self.leader_leo, self.real_leo[r] + k)  # the response's batches
        self._hw_moved(hw)

    @rule(ms=st.integers(1, 700))
    def tick(self, ms: int) -> None:
        self.now += ms

    @precondition(lambda self: self.in_flight is None)
    @rule()
    def propose(self) -> None:
        lagging = [
            r for r in self.state.isr
            if r != 1 and self.now - self.last_fetch[r] > LAG and self.real_leo[r] < self.leader_leo
            and self.state.follower_leo(r) < self.leader_leo
        ]
        unresolved = self.state.pending if self.state.resend_pending else None
        proposal = self.state.propose_isr_change(self.leader_leo, self.now, LAG)
        if unresolved is not None:  # an unanswered expansion goes again before anything else
            assert proposal is unresolved
            self.in_flight = proposal
            return
        if lagging:
            assert proposal is not None
            assert set(lagging) <= proposal.change.removed
        if proposal is not None:
            assert 1 in proposal.new_isr
            assert not (proposal.change.added and proposal.change.removed)
            for r in proposal.change.added:
                leo = self.state.follower_leo(r)
                assert leo >= self.state.high_watermark
                assert leo >= self.epoch_start
                assert self.real_leo[r] >= leo
        self.in_flight = proposal

    def _controller_applies(self, proposal: IsrProposal) -> bool:
        """The controller's check: the proposal is against its current partition epoch."""
        if proposal.partition_epoch != self.controller_epoch:
            return False
        self.controller_isr = proposal.new_isr
        self.controller_epoch += 1
        return True

    @precondition(lambda self: self.in_flight is not None)
    @rule(outcome=st.sampled_from(["commit", "refuse", "applied-unanswered", "unanswered", "shrunk"]))
    def controller_answers(self, outcome: str) -> None:
        proposal = self.in_flight
        assert proposal is not None
        self.in_flight = None
        if outcome in ("commit", "refuse") and proposal.partition_epoch != self.controller_epoch:
            # INVALID_UPDATE_VERSION: the partition moved on, maybe by an unanswered send of it
            hw = self.state.isr_change_failed(proposal, self.leader_leo, maybe_applied=True)
        elif outcome == "commit":
            assert self._controller_applies(proposal)
            hw = self.state.isr_change_committed(
                proposal, proposal.new_isr, self.controller_epoch, self.leader_leo
            )
            assert self.state.isr == proposal.new_isr
        elif outcome == "refuse":  # e.g. INELIGIBLE_REPLICA: checked against the current epoch
            hw = self.state.isr_change_failed(proposal, self.leader_leo)
        elif outcome == "applied-unanswered":  # committed, then the controller lost leadership
            self._controller_applies(proposal)
            hw = self.state.isr_change_failed(proposal, self.leader_leo, maybe_applied=True)
        elif outcome == "unanswered":  # lost before it was committed
            hw = self.state.isr_change_failed(proposal, self.leader_leo, maybe_applied=True)
        else:  # the controller shrank the ISR to the leader itself meanwhile (metadata wins)
            self.controller_isr = (1,)
            self.controller_epoch = max(self.controller_epoch, self.state.partition_epoch) + 1
            hw = self.state.on_metadata([1, 2, 3], [1], self.controller_epoch, self.leader_leo, self.now)
            assert self.state.isr_change_committed(proposal, proposal.new_isr, 0, self.leader_leo) is None
            assert self.state.isr == (1,)
        self._hw_moved(hw)

    @precondition(lambda self: self.controller_epoch > self.state.partition_epoch)
    @rule()
    def metadata_arrives(self) -> None:
        """The leader applies the controller's committed partition state from the image."""
        hw = self.state.on_metadata(
            [1, 2, 3], self.controller_isr, self.controller_epoch, self.leader_leo, self.now
        )
        assert self.state.isr == self.controller_isr
        assert self.state.pending is None
        self._hw_moved(hw)

    @invariant()
    def hw_bounds(self) -> None:
        hw = self.state.high_watermark
        assert hw >= self.last_hw
        assert hw <= self.leader_leo
        for r in self.state.maximal_isr:
            if r != 1 and self.state.follower_leo(r) >= 0:
                assert hw <= self.state.follower_leo(r)
                assert self.state.follower_leo(r) <= self.real_leo[r]


TestLeaderMachine = LeaderMachine.TestCase
TestLeaderMachine.settings = settings(max_examples=300, stateful_step_count=40)
