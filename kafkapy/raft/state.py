"""The persisted quorum state and one class per role, each with the rules of that role.

Like Kafka's `QuorumState` / `EpochState` classes (and etcd's step functions): a node is in
exactly one role at a time; the role object holds what only matters in that role (deadlines,
votes, replica progress) and is thrown away on every transition. What must survive a restart
is `QuorumState` (epoch, voted-for, leader), which the core hands out to be persisted before
any message depending on it leaves the node.

Transitions (all made by `Replica`, `kafkapy.raft.replica`, as each role's step decides):
- any role -> Unattached(E') on seeing an epoch E' > E without a leader;
  -> Follower(E', L) (voters) / Observer(E', L) on seeing leader L of an epoch E' >= E.
- Unattached / Follower (voter) -> Candidate(E + 1) when the election / fetch timeout expires.
- Candidate -> Leader on a majority of granted votes; -> Candidate(E + 1) when its election
  times out.
- Leader -> Resigned(E) on `resign()` or when a majority stopped fetching (check quorum);
  Resigned -> Candidate(E + 1) after its election timeout (unless a new leader appears first).
- With pre-vote (KIP-996) each "-> Candidate(E + 1)" above goes through Prospective(E) first:
  it asks for pre-votes (no epoch bump, nothing persisted) and becomes Candidate(E + 1) only on
  a majority of them, so a node cut off from the quorum cannot bump the epoch and depose a
  working leader when it comes back; and a follower whose leader answered within the fetch
  timeout refuses a (real) Vote of a newer epoch without moving to it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kafkapy.raft.log import SnapshotId
from kafkapy.raft.messages import FetchRequest, FetchSnapshotRequest, VoteRequest

__all__ = [
    "CandidateState",
    "FollowerState",
    "LeaderState",
    "ObserverState",
    "ProspectiveState",
    "QuorumState",
    "ReplicaProgress",
    "ResignedState",
    "Role",
    "RoleState",
    "SnapshotFetch",
    "UnattachedState",
    "majority",
]


class Role(enum.Enum):
    UNATTACHED = "unattached"
    FOLLOWER = "follower"
    CANDIDATE = "candidate"
    LEADER = "leader"
    OBSERVER = "observer"
    RESIGNED = "resigned"
    PROSPECTIVE = "prospective"


@dataclass(frozen=True, slots=True)
class QuorumState:
    """What a node must remember across restarts: persisted before any message relying on it.

    A vote is persisted before it is granted (so a restarted voter cannot vote twice in one
    epoch), an epoch before any request of that epoch is sent.
    """

    epoch: int
    voted_for: int | None = None
    leader_id: int | None = None


def majority(voter_count: int) -> int:
    """The smallest number of voters that is more than half of them."""
    return voter_count // 2 + 1


@dataclass(slots=True)
class UnattachedState:
    """A voter that knows the epoch but no leader of it (maybe after voting in it).

    Rules: grants at most one vote in the epoch (`voted_for`, persisted first) and only to a
    candidate whose log is at least as up to date; becomes a candidate of the next epoch when
    `election_deadline_ms` passes; granting a vote pushes the deadline back (the candidate
    deserves its chance to win).
    """

    epoch: int
    voted_for: int | None
    election_deadline_ms: int
    role: Role = Role.UNATTACHED


@dataclass(slots=True)
class SnapshotFetch:
    """A snapshot being fetched (FetchSnapshot, chunk by chunk): what arrived so far."""

    snapshot_id: SnapshotId
    leader_id: int
    data: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class FetchingState:
    """Fetch bookkeeping shared by followers and observers: one fetch in flight at a time.

    While `snapshot` is set the fetches are FetchSnapshot requests for its next chunk (the
    leader said our fetch offset is below its log start); it is dropped on any error and the
    next Fetch asks again."""

    epoch: int
    leader_id: int | None
    fetch_deadline_ms: int
    next_fetch_ms: int
    inflight: FetchRequest | FetchSnapshotRequest | None = None
    inflight_dst: int | None = None
    inflight_sent_ms: int = 0
    snapshot: SnapshotFetch | None = None
    #: `leader_clock_ms` of the last answer accepted from `leader_id` (echoed in every fetch)
    leader_clock_ms: int = -1

    def fetch_sent(
        self, dst: int, request: FetchRequest | FetchSnapshotRequest, now_ms: int
    ) -> None:
        self.inflight, self.inflight_dst, self.inflight_sent_ms = request, dst, now_ms

    def fetch_done(self, next_fetch_ms: int) -> None:
        self.inflight, self.inflight_dst, self.next_fetch_ms = None, None, next_fetch_ms


@dataclass(slots=True)
class FollowerState(FetchingState):
    """A voter following `leader_id` in `epoch`.

    Rules: pulls from the leader with (fetch offset, last fetched epoch); appends what comes
    back, truncates on `diverging_epoch`, takes the HW as min(leader HW, own log end); grants no
    vote in its epoch (it has a leader), and with pre-vote none in a newer epoch either while
    the leader answered within the fetch timeout and did not resign; starts an election when no successful fetch answer came
    within the fetch timeout (`fetch_deadline_ms`), or sooner when the leader resigned and named
    it a preferred successor. It stands `stand_jitter_ms` after the fetch timeout (drawn once
    per leader, below an election timeout) but grants pre-votes from the fetch timeout on: the
    voters' fetch timers are all reset by the same leader answers, so without the jitter they
    stand within a round trip of each other after a crash, each votes for itself and the split
    vote costs a whole extra election timeout; with it the first to stand wins at once.
    """

    voted_for: int | None = None
    #: the leader resigned (EndQuorumEpoch): it no longer counts as alive for pre-votes
    leader_resigned: bool = False
    stand_jitter_ms: int = 0
    role: Role = Role.FOLLOWER

    def stand_at_ms(self) -> int:
        """When the fetch timeout makes this voter stand (a resigned leader's successors stand
        at their `fetch_deadline_ms`: the leader already spaced them)."""
        return self.fetch_deadline_ms + (0 if self.leader_resigned else self.stand_jitter_ms)


@dataclass(slots=True)
class ObserverState(FetchingState):
    """A non-voter (broker-only node): fetches like a follower, never votes nor stands.

    Rules: with no known leader it asks the voters in turn (`next_voter`) until an answer names
    the leader; when the leader stays silent for the fetch timeout it forgets it and asks around
    again.
    """

    next_voter: int = 0
    role: Role = Role.OBSERVER


@dataclass(slots=True)
class CandidateState:
    """A voter standing for election in `epoch` (it voted for itself, persisted).

    Rules: asks every other voter once (a failed request is retried after a backoff); wins
    with a majority of granted votes (its own included); an answer naming a leader of its epoch
    or any higher epoch ends the candidacy; when `election_deadline_ms` passes without a
    result, stands again in the next epoch with a new random timeout.
    """

    epoch: int
    election_deadline_ms: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    inflight: dict[int, VoteRequest] = field(default_factory=dict)
    retry_at_ms: dict[int, int] = field(default_factory=dict)
    role: Role = Role.CANDIDATE

    def won(self, voter_count: int) -> bool:
        return len(self.granted) >= majority(voter_count)


@dataclass(slots=True)
class ReplicaProgress:
    """The leader's view of one replica: its log end as of its last valid fetch.

    `last_fetch_ms` is when a fetch of it was read, which says nothing about when it was sent
    (it may have waited in a socket while the leader's process was paused); `confirmed_ms` is
    the leader's clock at the latest answer the replica confirmed it accepted (echoed in its
    fetches): it heard from this leader at that time or later."""

    end_offset: int = 0
    last_fetch_ms: int | None = None
    last_caught_up_ms: int | None = None
    confirmed_ms: int | None = None


@dataclass(slots=True)
class LeaderState:
    """The leader of `epoch`.

    Rules: wrote a no-op entry at the start of its epoch; answers fetches from the fetch
    offset, or with `diverging_epoch` when the fetcher's log does not match its own; counts a
    voter's progress from the fetch offset of a valid fetch; the HW is the largest offset a
    majority of voters (itself by its flushed log end) reached, and it only moves forward and
    only over an entry of its own epoch; re-sends BeginQuorumEpoch to voters that have not
    fetched lately; resigns when no majority confirmed hearing from it within the check-quorum
    timeout (a leader cut off from the quorum must not take writes forever; see
    `ReplicaProgress` for why confirmations, not fetch arrivals, count).
    """

    epoch: int
    started_ms: int
    progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    begin_sent_ms: dict[int, int] = field(default_factory=dict)
    role: Role = Role.LEADER

    def record_fetch(
        self, replica_id: int, fetch_offset: int, leader_end: int, now_ms: int
    ) -> None:
        p = self.progress.setdefault(replica_id, ReplicaProgress())
        p.end_offset = fetch_offset
        p.last_fetch_ms = now_ms
        if fetch_offset >= leader_end:
            p.last_caught_up_ms = now_ms

    def confirm(self, replica_id: int, leader_clock_ms: int, now_ms: int) -> None:
        """`replica_id` accepted this leader's answer stamped `leader_clock_ms` (-1: none yet);
        a stamp from the future cannot be this leader's and is ignored."""
        if not 0 <= leader_clock_ms <= now_ms:
            return
        p = self.progress.setdefault(replica_id, ReplicaProgress())
        p.confirmed_ms = max(p.confirmed_ms or leader_clock_ms, leader_clock_ms)

    def _confirmed(self, replica_id: int, default: int) -> int:
        confirmed = self.progress.get(replica_id, ReplicaProgress()).confirmed_ms
        return default if confirmed is None else confirmed

    def majority_end_offset(self, voters: frozenset[int], leader_id: int, own_end: int) -> int:
        """The offset a majority of voters have reached (the candidate HW)."""
        ends = sorted(
            (own_end if v == leader_id else self.progress.get(v, ReplicaProgress()).end_offset)
            for v in voters
        )
        ends.reverse()
        return ends[majority(len(voters)) - 1]

    def quorum_contact_ms(
        self, voters: frozenset[int], leader_id: int, now_ms: int, unconfirmed_ms: int | None = None
    ) -> int:
        """The latest time at which a majority of voters (the leader included) had heard from
        this leader, by their confirmations (`ReplicaProgress.confirmed_ms`); a voter that
        confirmed nothing yet counts `unconfirmed_ms` (default: the start of the leadership)."""
        unconfirmed = self.started_ms if unconfirmed_ms is None else unconfirmed_ms
        seen = sorted(
            (now_ms if v == leader_id else self._confirmed(v, unconfirmed)) for v in voters
        )
        seen.reverse()
        return seen[majority(len(voters)) - 1]


@dataclass(slots=True)
class ResignedState:
    """A leader that gave up its epoch (clean shutdown or lost quorum).

    Rules: takes no writes and serves no fetches; still refuses votes in its epoch (it was that
    epoch's leader); stands in the next epoch when `election_deadline_ms` passes, unless a
    leader of a newer epoch shows up first.
    """

    epoch: int
    election_deadline_ms: int
    preferred_successors: tuple[int, ...] = ()
    role: Role = Role.RESIGNED


@dataclass(slots=True)
class ProspectiveState:
    """A voter that would stand in `epoch + 1` and first asks for pre-votes (KIP-996).

    Rules: the epoch and the persisted state stay as they were (`voted_for` still binds real
    votes in `epoch`); asks every other voter once (a failed request is retried after a
    backoff); a majority of granted pre-votes (its own included) makes it Candidate(epoch + 1);
    an answer naming a leader of its epoch or a newer epoch ends it; when
    `election_deadline_ms` passes it asks again. Voters grant a pre-vote when the log is at least
    as up to date and they know no live leader - a follower whose leader answered within the
    fetch timeout refuses, which is what keeps a rejoining node from disrupting it.
    """

    epoch: int
    voted_for: int | None
    election_deadline_ms: int
    #: the leader it timed out on: a pre-vote answer naming it is not followed (the voter may
    #: not have noticed yet that it is gone); its own BeginQuorumEpoch is
    previous_leader: int | None = None
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)
    inflight: dict[int, VoteRequest] = field(default_factory=dict)
    retry_at_ms: dict[int, int] = field(default_factory=dict)
    role: Role = Role.PROSPECTIVE

    def won(self, voter_count: int) -> bool:
        return len(self.granted) >= majority(voter_count)


RoleState = (
    UnattachedState
    | FollowerState
    | ObserverState
    | CandidateState
    | LeaderState
    | ResignedState
    | ProspectiveState
)
