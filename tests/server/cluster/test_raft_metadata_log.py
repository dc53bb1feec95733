"""The metadata log on disk (`MetadataLog` over a PartitionLog), the quorum-state file and the
Raft <-> wire mapping.

What the cluster relies on: the on-disk Raft log behaves exactly like the in-memory model the
simulations trust (appends, epochs, truncation inside a batch, reopen after a restart); the
quorum state survives a restart; wire messages map 1:1 and bad ones become error codes.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafkapy.protocol import ApiKey
from kafkapy.protocol import messages as m
from kafkapy.protocol.errors import ErrorCode, ProtocolError
from kafkapy.raft import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    Entry,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    MemoryRaftLog,
    QuorumState,
    SnapshotId,
    VoteRequest,
    VoteResponse,
)
from kafkapy.raft.wire import (
    request_from_wire,
    request_to_wire,
    response_from_wire,
    response_to_wire,
)
from kafkapy.server.cluster.metadata_log import (
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    QUORUM_STATE_FILE,
    MetadataLog,
    entries_from_batches,
    entries_to_batches,
    read_quorum_state,
    write_quorum_state,
)
from kafkapy.storage import LogManager

# (kind, a, b): ("append", epoch bump 0-2, count 1-4) | ("truncate", offset, _) | ("reopen", _, _)
# | ("snapshot", offset, epoch 0: the log's own / 1: a later one the log does not match)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, 2), st.integers(1, 4)),
        st.tuples(st.just("truncate"), st.integers(0, 30), st.just(0)),
        st.tuples(st.just("reopen"), st.just(0), st.just(0)),
        st.tuples(st.just("snapshot"), st.integers(1, 30), st.integers(0, 1)),
    ),
    max_size=14,
)


def _check_same(disk: MetadataLog, model: MemoryRaftLog) -> None:
    assert disk.end_offset() == model.end_offset()
    assert disk.last_epoch() == model.last_epoch()
    assert disk.start_offset() == model.start_offset()
    assert disk.latest_snapshot() == model.latest_snapshot()
    assert disk.read(model.start_offset(), 1000) == model.read(model.start_offset(), 1000)
    for offset in range(-1, model.end_offset() + 2):
        assert disk.epoch_at(offset) == model.epoch_at(offset)
    for epoch in range(0, model.last_epoch() + 2):
        assert disk.end_offset_for_epoch(epoch) == model.end_offset_for_epoch(epoch)


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops)
def test_metadata_log_matches_the_memory_model(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int, int]]
) -> None:
    """Appends of several epochs, truncation (also inside a batch) and reopening: the disk log
    answers every RaftLog question as the in-memory log does."""
    data_dir = tmp_path_factory.mktemp("meta")
    logs = LogManager([data_dir])
    disk = MetadataLog.open(logs)
    model = MemoryRaftLog()
    epoch = 1
    try:
        for kind, a, b in steps:
            if kind == "append":
                epoch += a
                start = model.end_offset()
                batch = [Entry(start + i, epoch, b"v%d" % (start + i)) for i in range(b)]
                disk.append(batch)
                model.append(batch)
            elif kind == "truncate":
                a = max(a, model.start_offset())
                disk.truncate_to(a)
                model.truncate_to(a)
                epoch = max(epoch, model.last_epoch())
            elif kind == "snapshot":
                latest = model.latest_snapshot()
                if latest is not None and a <= latest.end_offset:
                    continue
                if b == 0 and a <= model.end_offset():
                    own = model.epoch_at(a - 1)
                    assert own is not None
                    sid = SnapshotId(a, own)  # a snapshot of this log's own prefix
                else:
                    epoch += 1  # as installed from a leader whose log differs
                    sid = SnapshotId(a, epoch)
                data = b"snapshot %d" % a
                disk.store_snapshot(sid, data)
                model.store_snapshot(sid, data)
                disk.adopt_snapshot(sid)
                model.adopt_snapshot(sid)
                assert disk.read_snapshot(sid, 2, 4) == model.read_snapshot(sid, 2, 4)
            else:
                disk.flush()
                logs.close()
                logs = LogManager([data_dir])
                disk = MetadataLog.open(logs)
            _check_same(disk, model)
    finally:
        logs.close()


def test_entries_are_record_batches_with_the_epoch_as_leader_epoch() -> None:
    """The on-disk and wire format: one batch per epoch run, leader epoch = Raft epoch."""
    entries = [Entry(5, 2, b"a"), Entry(6, 2, b""), Entry(7, 3, b"c")]
    data = entries_to_batches(entries, timestamp_ms=1000)
    from kafkapy.protocol.records import iter_batches

    headers = [h for _, h in iter_batches(data)]
    assert [(h.base_offset, h.partition_leader_epoch, h.records_count) for h in headers] == [
        (5, 2, 2),
        (7, 3, 1),
    ]
    assert entries_from_batches(data) == entries
    assert entries_from_batches(data, first_offset=6) == entries[1:]
    with pytest.raises(ProtocolError):
        entries_from_batches(data[:-3] + b"zzz")


def test_quorum_state_round_trips_and_refuses_garbage(tmp_path: Path) -> None:
    """What a restart reads is what was written (no temp file left); a damaged file stops
    the node rather than letting it forget a vote."""
    assert read_quorum_state(tmp_path) == QuorumState(0)
    for state in (QuorumState(3, 2, None), QuorumState(4, None, 1), QuorumState(5, 5, 5)):
        write_quorum_state(tmp_path, state)
        assert read_quorum_state(tmp_path) == state
    assert not list(tmp_path.glob("*.tmp"))
    (tmp_path / QUORUM_STATE_FILE).write_text("{not json")
    with pytest.raises(RuntimeError, match="unreadable"):
        read_quorum_state(tmp_path)


RAFT_REQUESTS = [
    VoteRequest(4, 2, 3, 17),
    VoteRequest(5, 2, 3, 17, pre_vote=True),
    BeginQuorumEpochRequest(2, 4),
    EndQuorumEpochRequest(2, 4, (3, 1)),
    FetchRequest(3, 17, 3, 4),
    FetchRequest(3, 17, 3, 4, leader_clock_ms=123_456_789_012),
    FetchSnapshotRequest(3, SnapshotId(120, 4), 4096, 5, max_bytes=65536),
    FetchSnapshotRequest(3, SnapshotId(120, 4), 0, 5, max_bytes=65536, leader_clock_ms=0),
]


@pytest.mark.parametrize("request_", RAFT_REQUESTS, ids=lambda r: type(r).__name__)
def test_requests_map_to_wire_and_back(request_: object) -> None:
    """Through the real codec: encode the wire request, decode it, map it back."""
    from kafkapy.protocol import RequestHeader, decode_request, encode_request

    wire = request_to_wire(request_, cluster_id="c1", dst=1, max_wait_ms=500, max_bytes=1 << 20)  # type: ignore[arg-type]
    frame = encode_request(RequestHeader(int(wire.api_key), wire.version, 7, "t"), wire.body)  # type: ignore[arg-type]
    header, body = decode_request(bytearray(frame))
    src, back = request_from_wire(ApiKey(header.api_key), header.api_version, body, cluster_id="c1")
    assert back == request_
    assert src in (2, 3)


RAFT_RESPONSES = [
    (VoteRequest(4, 2, 3, 17), VoteResponse(ErrorCode.NONE, None, 4, True)),
    (BeginQuorumEpochRequest(2, 4), BeginQuorumEpochResponse(ErrorCode.FENCED_LEADER_EPOCH, 3, 5)),
    (EndQuorumEpochRequest(2, 4), EndQuorumEpochResponse(ErrorCode.NONE, 2, 4)),
    (
        FetchRequest(3, 1, 1, 4),
        FetchResponse(ErrorCode.NONE, 2, 4, 2, None, [Entry(1, 1, b"x"), Entry(2, 4, b"")]),
    ),
    (FetchRequest(3, 9, 3, 4), FetchResponse(ErrorCode.NONE, 2, 4, 2, (1, 2), [])),
    (FetchRequest(3, 9, 3, 4), FetchResponse(ErrorCode.NOT_LEADER_OR_FOLLOWER, None, 4, 0)),
    (
        FetchRequest(3, 0, 0, 4),
        FetchResponse(ErrorCode.NONE, 2, 4, 130, None, [], SnapshotId(120, 3)),
    ),
    (
        FetchSnapshotRequest(3, SnapshotId(120, 3), 4, 4),
        FetchSnapshotResponse(ErrorCode.NONE, 2, 4, SnapshotId(120, 3), 10, 4, b"456789"),
    ),
    (
        FetchSnapshotRequest(3, SnapshotId(120, 3), 0, 4),
        FetchSnapshotResponse(ErrorCode.SNAPSHOT_NOT_FOUND, 2, 4, SnapshotId(120, 3)),
    ),
    # the leader's clock, which the fetcher echoes (RaftCore.has_quorum_contact)
    (
        FetchRequest(3, 1, 1, 4, leader_clock_ms=77),
        FetchResponse(ErrorCode.NONE, 2, 4, 2, None, [], leader_clock_ms=123_456_789_012),
    ),
    (
        FetchSnapshotRequest(3, SnapshotId(120, 3), 4, 4),
        FetchSnapshotResponse(
            ErrorCode.NONE, 2, 4, SnapshotId(120, 3), 10, 4, b"456789", leader_clock_ms=5
        ),
    ),
]


@pytest.mark.parametrize(("request_", "response"), RAFT_RESPONSES, ids=lambda r: type(r).__name__)
def test_responses_map_to_wire_and_back(request_: object, response: object) -> None:
    """Through the real codec: encode the wire response, decode it, map it back."""
    from kafkapy.protocol import decode_response, encode_response

    wire = request_to_wire(request_, cluster_id="c1", dst=1, max_wait_ms=0, max_bytes=1 << 20)  # type: ignore[arg-type]
    frame = encode_response(wire.api_key, wire.version, 9, response_to_wire(response))  # type: ignore[arg-type]
    _, body = decode_response(wire.api_key, wire.version, frame)
    assert response_from_wire(request_, body) == response  # type: ignore[arg-type]


def test_bad_quorum_requests_get_error_codes() -> None:
    """Another cluster, another partition, a malformed body: error codes, not crashes."""
    wire = request_to_wire(
        VoteRequest(1, 1, 0, 0), cluster_id="other", dst=2, max_wait_ms=0, max_bytes=1
    )
    with pytest.raises(ProtocolError) as err:
        request_from_wire(ApiKey.VOTE, 0, wire.body, cluster_id="ours")
    assert err.value.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID
    fetch = m.FetchRequest(
        cluster_id="ours",
        replica_id=2,
        topics=[
            m.FetchRequest.FetchTopic(
                topic="x",
                topic_id=METADATA_TOPIC_ID,
                partitions=[m.FetchRequest.FetchPartition(partition=3)],
            )
        ],
    )
    with pytest.raises(ProtocolError) as err:
        request_from_wire(ApiKey.FETCH, 13, fetch, cluster_id="ours")
    assert err.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    vote = m.VoteRequest(
        cluster_id="ours", topics=[m.VoteRequest.TopicData(topic_name=METADATA_TOPIC)]
    )
    with pytest.raises(ProtocolError):
        request_from_wire(ApiKey.VOTE, 0, vote, cluster_id="ours")
    snap = m.FetchSnapshotRequest(
        cluster_id="ours",
        replica_id=2,
        topics=[
            m.FetchSnapshotRequest.TopicSnapshot(
                name="x", partitions=[m.FetchSnapshotRequest.PartitionSnapshot(partition=0)]
            )
        ],
    )
    with pytest.raises(ProtocolError) as err:
        request_from_wire(ApiKey.FETCH_SNAPSHOT, 0, snap, cluster_id="ours")
    assert err.value.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    snap.topics[0].name = METADATA_TOPIC
    snap.topics[0].partitions[0].snapshot_id.end_offset = -5
    with pytest.raises(ProtocolError):
        request_from_wire(ApiKey.FETCH_SNAPSHOT, 0, snap, cluster_id="ours")


entry_runs = st.lists(st.tuples(st.integers(0, 2), st.binary(max_size=40)), min_size=1, max_size=20)


@settings(max_examples=100)
@given(st.integers(0, 1000), entry_runs)
def test_entries_survive_the_batch_format(start: int, runs: list[tuple[int, bytes]]) -> None:
    """Any entries (epochs ascending, empty data included) come back from their batches."""
    epoch, entries = 1, []
    for i, (bump, data) in enumerate(runs):
        epoch += bump
        entries.append(Entry(start + i, epoch, data))
    assert entries_from_batches(entries_to_batches(entries)) == entries


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=40), min_size=1, max_size=20), st.data())
def test_corrupted_batches_raise_protocol_error_only(
    values: list[bytes], data: st.DataObject
) -> None:
    """Batch bytes from a peer with any byte changed (or cut short) never crash the reader; a
    change in the CRC-covered part (from the CRC field on) is always caught."""
    good = bytearray(entries_to_batches([Entry(i, 1, v) for i, v in enumerate(values)]))
    pos = data.draw(st.integers(0, len(good) - 1))
    good[pos] ^= data.draw(st.integers(1, 255))
    cut = data.draw(st.integers(0, len(good)))
    with contextlib.suppress(ProtocolError):
        entries_from_batches(bytes(good[:cut]))
    if pos >= 17:  # base offset, length, leader epoch and magic precede the CRC
        with pytest.raises(ProtocolError):
            entries_from_batches(bytes(good))
    else:
        with contextlib.suppress(ProtocolError):
            entries_from_batches(bytes(good))


def test_a_vote_meant_for_another_voter_is_refused() -> None:
    """Vote v1 names its voter: a request that reached the wrong node (an address that moved)
    gets INVALID_VOTER_KEY instead of a vote."""
    wire = request_to_wire(
        VoteRequest(3, 1, 0, 0), cluster_id="c", dst=2, max_wait_ms=0, max_bytes=1
    )
    with pytest.raises(ProtocolError) as err:
        request_from_wire(ApiKey.VOTE, 1, wire.body, cluster_id="c", local_id=3)
    assert err.value.error_code == ErrorCode.INVALID_VOTER_KEY
    src, req = request_from_wire(ApiKey.VOTE, 1, wire.body, cluster_id="c", local_id=2)
    assert (src, req) == (1, VoteRequest(3, 1, 0, 0))
