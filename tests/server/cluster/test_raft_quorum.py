"""Three in-process Raft replicas of `__cluster_metadata-0` over real 127.0.0.1 sockets.

The harness (raft_harness.py): each node a real Broker on its own data dir, its controller
listener served by the real `Connection` from the controller handler registry, its `RaftDriver`
talking to the others through `PeerPool`, plus a broker-only observer. Only the Raft part of a
cluster node runs (the other parts have their own tests).

What the cluster relies on: a leader is elected; proposals commit on every node, in order, once;
stopping the leader elects another quickly (it resigns with EndQuorumEpoch); a restarted node
keeps its log and quorum state and catches up; DescribeQuorum and bad requests answer properly.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft import Entry, Role
from kafkapy.server.cluster.metadata_log import METADATA_TOPIC, read_quorum_state
from kafkapy.server.cluster.peer import PeerClient
from tests.server.cluster.raft_harness import FAST_TIMEOUTS, OBSERVER_ID, propose, quorum

pytestmark = pytest.mark.timeout(90)


def _records(entries: list[Entry]) -> list[bytes]:
    return [e.data for e in entries if e.data]


async def test_three_nodes_elect_commit_fail_over_and_restart(tmp_path: Path) -> None:
    """Elect, commit on every node in order and once, DescribeQuorum, clean fail-over, and a
    restart that keeps the log and quorum state and catches up."""
    async with quorum(tmp_path) as q:
        first = await q.leader()
        assert all(mb.raft.epoch == first.raft.epoch for mb in q.live())
        followers = [mb for mb in q.voters_live() if mb is not first]
        assert {mb.raft.role for mb in followers} == {Role.FOLLOWER}
        assert q.members[OBSERVER_ID].raft.role is Role.OBSERVER

        last = 0
        for i in range(10):
            last = await propose(q, [b"rec-%d" % i, b"more-%d" % i])
        await q.wait_for("all nodes applied", lambda: all(len(mb.applied) > last for mb in q.live()))
        expected = [b"%s-%d" % (kind, i) for i in range(10) for kind in (b"rec", b"more")]
        for mb in q.live():
            assert _records(mb.applied) == expected
            assert [e.offset for e in mb.applied] == list(range(len(mb.applied)))  # once, in order
        assert read_quorum_state(first.raft.log.directory).leader_id == first.node_id

        # DescribeQuorum from the leader's controller listener (once every replica's next
        # fetch told the leader how far it got)
        await q.wait_for("leader saw every replica's progress", lambda: len(first.raft.replica_progress()) == 4
                         and all(p.end_offset > last for p in first.raft.replica_progress().values()))
        client = PeerClient("127.0.0.1", first.port, client_id="describe")
        try:
            req = m.DescribeQuorumRequest(topics=[m.DescribeQuorumRequest.TopicData(
                topic_name=METADATA_TOPIC, partitions=[m.DescribeQuorumRequest.PartitionData(partition_index=0)])])
            resp = await client.request(ApiKey.DESCRIBE_QUORUM, 1, req, timeout_s=10)
        finally:
            await client.aclose()
        (part,) = resp.topics[0].partitions
        assert part.error_code == ErrorCode.NONE
        assert part.leader_id == first.node_id
        assert part.high_watermark > last
        assert sorted(v.replica_id for v in part.current_voters) == [1, 2, 3]
        assert [o.replica_id for o in part.observers] == [OBSERVER_ID]
        assert all(v.log_end_offset > last for v in part.current_voters)

        # a clean stop of the leader: it resigns and names its successors, another takes over
        await q.stop(first.node_id)
        second = await q.leader(timeout_s=10)
        assert second.node_id != first.node_id
        assert second.raft.epoch > first.raft.epoch
        after = await propose(q, [b"after-failover"])
        await q.wait_for("live nodes applied", lambda: all(len(mb.applied) > after for mb in q.live()))
        assert len(q.live()) == 3  # two voters and the observer

        # the old leader restarts on its data: its log and quorum state are still there
        old_log_end = first.raft.log.end_offset()
        assert old_log_end > last
        async with trio.open_nursery() as nursery:
            await q.start(nursery, first.node_id)
            restarted = q.members[first.node_id]
            assert restarted.raft.log.end_offset() >= old_log_end
            assert restarted.raft.epoch >= first.raft.epoch
            final = await propose(q, [b"after-restart"])
            await q.wait_for("restarted node caught up", lambda: len(restarted.applied) > final)
            assert _records(restarted.applied) == [*expected, b"after-failover", b"after-restart"]
            for mb in q.live():
                await q.stop(mb.node_id)


async def test_quorum_requests_with_bad_input_get_error_codes(tmp_path: Path) -> None:
    """Over the wire: a foreign cluster id and a wrong partition get error codes and do not
    disturb the quorum; an observer-style fetch from 0 gets the log."""
    async with quorum(tmp_path) as q:
        leader = await q.leader()
        client = PeerClient("127.0.0.1", leader.port, client_id="bad")
        try:
            vote = m.VoteRequest(cluster_id="someone-else", topics=[m.VoteRequest.TopicData(
                topic_name=METADATA_TOPIC, partitions=[m.VoteRequest.PartitionData(candidate_epoch=99, candidate_id=2)])])
            resp = await client.request(ApiKey.VOTE, 0, vote, timeout_s=10)
            assert resp.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
            fetch = m.FetchRequest(replica_id=2, topics=[m.FetchRequest.FetchTopic(
                topic_id=leader.raft.log.plog.topic_id, partitions=[m.FetchRequest.FetchPartition(partition=7)])])
            resp = await client.request(ApiKey.FETCH, 13, fetch, timeout_s=10)
            assert resp.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # an observer-style fetch from offset 0 gets the log from the start
            fetch = m.FetchRequest(replica_id=77, max_wait_ms=0, topics=[m.FetchRequest.FetchTopic(
                topic_id=leader.raft.log.plog.topic_id, partitions=[m.FetchRequest.FetchPartition(
                    partition=0, fetch_offset=0, last_fetched_epoch=0)])])
            resp = await client.request(ApiKey.FETCH, 13, fetch, timeout_s=10)
            (part,) = resp.responses[0].partitions
            assert part.error_code == ErrorCode.NONE
            assert part.current_leader.leader_id == leader.node_id
            assert part.records  # at least the leader's epoch-start entry
        finally:
            await client.aclose()
        assert leader.raft.is_leader  # the foreign vote did not disturb the quorum


async def test_leader_crash_without_resigning_elects_another(tmp_path: Path) -> None:
    """A leader that vanishes without EndQuorumEpoch (a crash): the followers notice after the
    fetch timeout and elect a new leader; the committed entries stay committed."""
    async with quorum(tmp_path) as q:
        offset = await propose(q, [b"before-crash"])
        first = await q.leader()
        first.raft.resign_on_stop = False
        await q.stop(first.node_id)
        second = await q.leader(timeout_s=10)
        assert second.node_id != first.node_id
        after = await propose(q, [b"after-crash"])
        assert after > offset
        await q.wait_for("live nodes applied", lambda: all(len(mb.applied) > after for mb in q.live()))
        for mb in q.live():
            assert _records(mb.applied) == [b"before-crash", b"after-crash"]


async def test_clean_stop_of_leader_hands_over_without_a_fetch_timeout(tmp_path: Path) -> None:
    """KIP-595 graceful resignation: with a fetch timeout of a minute no follower would stand
    on its own within the test's bounds; the leader's EndQuorumEpoch makes its most caught-up
    follower stand at once."""
    slow_fetch_timeout = {**FAST_TIMEOUTS, "controller.quorum.fetch.timeout.ms": "60000"}
    async with quorum(tmp_path, slow_fetch_timeout) as q:
        await propose(q, [b"x"])
        first = await q.leader()
        await q.stop(first.node_id)
        second = await q.leader(timeout_s=20)
        assert second.node_id != first.node_id
        assert second.raft.epoch > first.raft.epoch
        await propose(q, [b"y"])
