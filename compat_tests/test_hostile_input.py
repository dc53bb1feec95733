"""Hostile and malformed input on raw sockets: one clear answer, never a dead broker.

What users rely on: a broken or malicious client (a port scanner, an HTTP request sent to the
Kafka port, a client that dies mid-frame) costs at most its own connection. For each input the
broker must either answer with the Kafka error code (UNSUPPORTED_VERSION for an unknown
ApiVersions version, CORRUPT_MESSAGE for a batch whose CRC does not match) or close that
connection - and afterwards a real client on another connection still produces and consumes.

The frames are encoded by hand with `struct` (not with kafkapy's codec) so that a codec bug
cannot hide a server bug; a positive control (the same Produce with an intact CRC) proves the
hand encoding is right.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import crc32c
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compat_tests.conftest import BrokerProcess, unique_topic

pytestmark = pytest.mark.timeout(60)

IO_TIMEOUT_S = 5.0
API_PRODUCE = 0
API_VERSIONS = 18
API_METADATA = 3
UNSUPPORTED_VERSION = 35
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
INVALID_PARTITIONS = 37
POLICY_VIOLATION = 44
NONE = 0
API_CREATE_TOPICS = 19
API_CREATE_PARTITIONS = 37
#: Kafka's controller refuses a request that would create more partitions than this
#: (ReplicationControlManager.MAX_PARTITIONS_PER_BATCH)
MAX_PARTITIONS_PER_REQUEST = 10_000


# --- hand encoding -----------------------------------------------------------------------------


def kstring(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def request(api_key: int, api_version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """Size-prefixed request with a v1 (non-flexible) header."""
    header = struct.pack(">hhi", api_key, api_version, correlation_id) + kstring("hostile-test")
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record_batch(values: list[bytes], base_timestamp: int, leader_epoch: int = -1) -> bytes:
    """A magic v2 batch, uncompressed, no producer id, CRC32C over attributes..end."""
    records = b""
    for delta, value in enumerate(values):
        body = (
            b"\x00"  # record attributes
            + zigzag_varint(0)  # timestamp delta
            + zigzag_varint(delta)  # offset delta
            + zigzag_varint(-1)  # null key
            + zigzag_varint(len(value))
            + value
            + zigzag_varint(0)  # no headers
        )
        records += zigzag_varint(len(body)) + body
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes: no compression, CreateTime
            len(values) - 1,  # last offset delta
            base_timestamp,
            base_timestamp,  # max timestamp
            -1,  # producer id
            -1,  # producer epoch
            -1,  # base sequence
            len(values),
        )
        + records
    )
    crc = crc32c.crc32c(after_crc)
    after_length = struct.pack(">ibI", leader_epoch, 2, crc) + after_crc  # epoch, magic, crc
    return struct.pack(">qi", 0, len(after_length)) + after_length


def produce_v7(topic: str, partition: int, batch: bytes, acks: int = -1) -> bytes:
    return (
        kstring(None)  # transactional id
        + struct.pack(">hi", acks, 5000)  # acks (-1 = all), timeout
        + struct.pack(">i", 1)
        + kstring(topic)
        + struct.pack(">i", 1)
        + struct.pack(">ii", partition, len(batch))
        + batch
    )


def parse_produce_v7_response(body: bytes) -> list[tuple[str, int, int, int]]:
    """(topic, partition, error_code, base_offset) for each partition in the response."""
    pos = 0
    out = []
    (n_topics,) = struct.unpack_from(">i", body, pos)
    pos += 4
    for _ in range(n_topics):
        (name_len,) = struct.unpack_from(">h", body, pos)
        name = body[pos + 2 : pos + 2 + name_len].decode()
        pos += 2 + name_len
        (n_parts,) = struct.unpack_from(">i", body, pos)
        pos += 4
        for _ in range(n_parts):
            index, error_code, base_offset, _append_time, _start = struct.unpack_from(
                ">ihqqq", body, pos
            )
            pos += 30
            out.append((name, index, error_code, base_offset))
    return out


# --- raw socket helpers ------------------------------------------------------------------------


def connect(broker: BrokerProcess) -> socket.socket:
    sock = socket.create_connection((broker.host, broker.port), timeout=IO_TIMEOUT_S)
    sock.settimeout(IO_TIMEOUT_S)
    return sock


def recv_exact(sock: socket.socket, n: int) -> bytes | None:
    """n bytes, or None if the peer closed first. Raises TimeoutError if it neither answers nor closes."""
    buf = b""
    while len(buf) < n:
        try:
            chunk = sock.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def read_response(sock: socket.socket) -> tuple[int, bytes] | None:
    """(correlation id, body after a v0 response header), or None on connection close."""
    size_raw = recv_exact(sock, 4)
    if size_raw is None:
        return None
    (size,) = struct.unpack(">i", size_raw)
    assert 4 <= size < 10 * 1024 * 1024, f"implausible response size {size}"
    frame = recv_exact(sock, size)
    assert frame is not None, "connection closed in the middle of a response"
    (correlation_id,) = struct.unpack_from(">i", frame)
    return correlation_id, frame[4:]


def expect_close(sock: socket.socket, what: str) -> None:
    """The broker must close this connection (reading stops with EOF/reset, not a timeout)."""
    deadline = time.monotonic() + IO_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return
            if not chunk:
                return
    except TimeoutError:
        pass
    raise AssertionError(
        f"{what}: broker neither answered nor closed the connection in {IO_TIMEOUT_S}s"
    )


def expect_logged(broker: BrokerProcess, port: int, what: str) -> None:
    """A connection the broker closes on bad input is logged, naming the peer (host:port)."""
    deadline = time.monotonic() + 3.0
    while f":{port}" not in broker.log_text():
        assert time.monotonic() < deadline, f"{what}: the close of peer port {port} was not logged"
        time.sleep(0.05)


def expect_close_or_error_response(
    broker: BrokerProcess, sock: socket.socket, correlation_id: int, what: str
) -> None:
    port = sock.getsockname()[1]
    try:
        response = read_response(sock)
    except TimeoutError as exc:
        raise AssertionError(f"{what}: no response and no close in {IO_TIMEOUT_S}s") from exc
    if response is None:
        expect_logged(broker, port, what)
    else:
        assert response[0] == correlation_id, f"{what}: response to the wrong correlation id"


def api_versions_ok(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        sock.sendall(request(API_VERSIONS, 0, 7))
        response = read_response(sock)
    assert response is not None, "broker closed a well-formed ApiVersions v0 request"
    correlation_id, body = response
    assert correlation_id == 7
    assert struct.unpack_from(">h", body)[0] == NONE


def still_serves(broker: BrokerProcess) -> None:
    """The broker process is up and a real client, on new connections, produces and consumes."""
    assert broker.is_running(), "broker process died:\n" + broker.log_tail()
    api_versions_ok(broker)
    topic = unique_topic("after-hostile")
    prod = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 0})
    prod.produce(topic, key=b"k", value=b"still-alive")  # auto-created
    assert prod.flush(15) == 0, "real client could not produce after hostile input"
    cons = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": unique_topic("g"),
            "enable.auto.commit": False,
        }
    )
    try:
        cons.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 15
        msg = None
        while time.monotonic() < deadline:
            msg = cons.poll(0.2)
            if msg is not None and msg.error() is None:
                break
        assert msg is not None, "real client could not consume after hostile input"
        assert msg.value() == b"still-alive"
    finally:
        cons.close()


# --- the tests ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", id="http-request"),
        # Fixed bytes, not random: api key 0xdead is negative, so never a real API.
        pytest.param(struct.pack(">i", 16) + b"\xde\xad\xbe\xef" * 4, id="junk-body"),
        pytest.param(b"\x00\x00\x00\x02\xff\xff", id="frame-shorter-than-header"),
        pytest.param(
            struct.pack(">i", 10) + struct.pack(">hhi", 18, 3, 1) + b"\x7f\xff",
            id="client-id-past-frame-end",
        ),
    ],
)
def test_garbage_bytes(broker: BrokerProcess, garbage: bytes) -> None:
    with connect(broker) as sock:
        sock.sendall(garbage)
        expect_close_or_error_response(broker, sock, 1, f"garbage {garbage[:16]!r}")
    still_serves(broker)


@pytest.mark.parametrize(
    "length", [2**31 - 1, 2 * 1024**3 - 4, 200 * 1024 * 1024, -1, -(2**31)], ids=lambda n: str(n)
)
def test_huge_or_negative_length_prefix(broker: BrokerProcess, length: int) -> None:
    # Over socket.request.max.bytes (100 MiB) or negative: closed before any body is read.
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", length) + b"\x00" * 64)
        expect_close(sock, f"length prefix {length}")
        expect_logged(broker, sock.getsockname()[1], f"length prefix {length}")
    still_serves(broker)


def test_truncated_frame_then_close(broker: BrokerProcess) -> None:
    frame = request(API_METADATA, 1, 3, struct.pack(">i", -1))
    with connect(broker) as sock:
        sock.sendall(frame[: len(frame) // 2])
    # Many clients vanish mid-frame; the broker must simply drop the connection.
    time.sleep(0.2)
    still_serves(broker)


def test_peer_reset_is_not_a_crash(broker: BrokerProcess) -> None:
    """A client that vanishes with a TCP reset (SO_LINGER 0) mid-request is routine on real
    networks: the broker drops the connection quietly - no unhandled exception in its log."""
    before = len(broker.log_text())
    frame = request(API_METADATA, 1, 5, struct.pack(">i", -1))
    sock = connect(broker)
    sock.sendall(frame[:10])
    time.sleep(0.1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()  # RST instead of FIN
    time.sleep(0.3)
    still_serves(broker)
    new_log = broker.log_text()[before:]
    assert "Traceback" not in new_log, (
        "peer reset logged as an unhandled error:\n" + new_log[-2000:]
    )


def test_unknown_api_key(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        sock.sendall(request(9999, 0, 11))
        expect_close_or_error_response(broker, sock, 11, "unknown API key 9999")
    still_serves(broker)


def test_unsupported_api_versions_version(broker: BrokerProcess) -> None:
    # KIP-511: a too-new ApiVersions gets a v0 response with UNSUPPORTED_VERSION and the broker's
    # version ranges, so the client can retry with a version both sides speak.
    with connect(broker) as sock:
        sock.sendall(request(API_VERSIONS, 99, 12))
        response = read_response(sock)
        assert response is not None, "broker closed instead of answering ApiVersions v99"
        correlation_id, body = response
        assert correlation_id == 12
        error_code, n_keys = struct.unpack_from(">hi", body)
        assert error_code == UNSUPPORTED_VERSION
        ranges = {
            struct.unpack_from(">hhh", body, 6 + 6 * i)[0]: struct.unpack_from(
                ">hhh", body, 6 + 6 * i
            )[1:]
            for i in range(n_keys)
        }
        assert API_VERSIONS in ranges, "the error response must still list ApiVersions' range"
        # The same connection keeps working with a supported version.
        sock.sendall(request(API_VERSIONS, 0, 13))
        again = read_response(sock)
        assert again is not None
        assert again[0] == 13
    still_serves(broker)


def test_unsupported_version_of_other_api(broker: BrokerProcess) -> None:
    with connect(broker) as sock:
        sock.sendall(request(API_METADATA, 999, 14, struct.pack(">i", -1)))
        expect_close_or_error_response(broker, sock, 14, "Metadata v999")
    still_serves(broker)


def test_produce_with_corrupt_crc(broker: BrokerProcess) -> None:
    topic = unique_topic("hostile-crc")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(
        timeout=15
    )
    now = int(time.time() * 1000)
    good = record_batch([b"intact-1", b"intact-2"], now)
    corrupt = bytearray(record_batch([b"corrupt-1", b"corrupt-2"], now))
    corrupt[-5] ^= 0xFF  # inside the last record's value: covered by the CRC

    with connect(broker) as sock:
        sock.sendall(request(API_PRODUCE, 7, 21, produce_v7(topic, 0, bytes(corrupt))))
        response = read_response(sock)
        assert response is not None, "broker closed instead of answering a Produce with a bad CRC"
        assert response[0] == 21
        assert parse_produce_v7_response(response[1]) == [(topic, 0, CORRUPT_MESSAGE, -1)]

        # Positive control on the same connection: the intact batch is appended at offset 0,
        # i.e. nothing of the corrupt batch was written.
        sock.sendall(request(API_PRODUCE, 7, 22, produce_v7(topic, 0, good)))
        response = read_response(sock)
        assert response is not None
        assert response[0] == 22
        assert parse_produce_v7_response(response[1]) == [(topic, 0, NONE, 0)]
    still_serves(broker)


def test_produce_with_any_leader_epoch_is_accepted_and_overwritten(broker: BrokerProcess) -> None:
    """Clients put whatever partition leader epoch they like in a batch (librdkafka -1, others a
    stale value); the broker accepts it and stores its own epoch, which consumers then see."""
    topic = unique_topic("hostile-epoch")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(
        timeout=15
    )
    batch = record_batch([b"odd-epoch"], int(time.time() * 1000), leader_epoch=12345)
    with connect(broker) as sock:
        sock.sendall(request(API_PRODUCE, 7, 31, produce_v7(topic, 0, batch)))
        response = read_response(sock)
    assert response is not None
    assert parse_produce_v7_response(response[1]) == [(topic, 0, NONE, 0)]

    from kafka import KafkaConsumer  # type: ignore[import-untyped]
    from kafka import TopicPartition as KafkaTopicPartition

    tp = KafkaTopicPartition(topic, 0)
    cons = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, fetch_max_wait_ms=100)
    try:
        cons.assign([tp])
        cons.seek(tp, 0)
        records: list[Any] = []
        deadline = time.monotonic() + 15
        while not records and time.monotonic() < deadline:
            for batch_records in cons.poll(timeout_ms=200).values():
                records.extend(batch_records)
    finally:
        cons.close()
    assert len(records) == 1, "the odd-epoch batch was not readable"
    record = records[0]
    assert record.value == b"odd-epoch"
    epoch = record.leader_epoch
    assert epoch != 12345, "the client's leader epoch was stored instead of the leader's"
    assert epoch >= 0


def with_records(batch: bytes, count: int, records: bytes | None = None) -> bytes:
    """`batch` claiming `count` records (last offset delta count - 1), its records region
    replaced by `records` if given, batch length and CRC32C recomputed: framed and checksummed
    like a good batch, whatever the records are."""
    out = bytearray(batch if records is None else batch[:61] + records)
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">i", out, 23, count - 1)
    struct.pack_into(">i", out, 57, count)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


def test_malformed_records_under_a_correct_crc_are_refused_and_consumers_read_on(
    broker: BrokerProcess,
) -> None:
    """A batch whose header says 3 records over 1, and one whose records are garbage, both with
    a correct CRC: CORRUPT_MESSAGE and nothing written. Accepted, they made kafka-python raise
    CorruptRecordError on every poll of the partition (and kcat hang)."""
    topic = unique_topic("hostile-records")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(
        timeout=15
    )
    now = int(time.time() * 1000)
    lying_count = with_records(record_batch([b"only-one" * 4], now), 3)
    garbage = with_records(record_batch([b"x"], now), 1, b"\xc8" * 40)
    with connect(broker) as sock:
        for i, batch in enumerate([record_batch([b"before"], now), lying_count, garbage,
                                   record_batch([b"after"], now)]):  # fmt: skip
            sock.sendall(request(API_PRODUCE, 7, 40 + i, produce_v7(topic, 0, batch)))
            response = read_response(sock)
            assert response is not None
            code = NONE if i in (0, 3) else CORRUPT_MESSAGE
            assert parse_produce_v7_response(response[1]) == [(topic, 0, code, -1 if code else i // 3)]

    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTopicPartition

    tp = KafkaTopicPartition(topic, 0)
    cons = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=None, fetch_max_wait_ms=100)
    try:
        cons.assign([tp])
        cons.seek(tp, 0)
        records: list[Any] = []
        deadline = time.monotonic() + 15
        while len(records) < 2 and time.monotonic() < deadline:
            for batch_records in cons.poll(timeout_ms=200).values():
                records.extend(batch_records)
    finally:
        cons.close()
    assert [(r.offset, r.value) for r in records] == [(0, b"before"), (1, b"after")]

    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        assert os.environ.get("CI") != "true", "kcat missing under CI (.ci/run installs it)"
        pytest.skip("kcat not installed (apt-get install kcat); kafka-python read past it above")
    read = subprocess.run(
        [kcat, "-b", broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e",
         "-f", "%o %s\\n"],
        capture_output=True, timeout=30, check=False,
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.decode().splitlines() == ["0 before", "1 after"]


def test_produce_errors_are_per_partition_codes(broker: BrokerProcess) -> None:
    """Bad produce parameters get Kafka's per-partition error codes on a connection that stays
    usable: acks=2, a partition that does not exist, a batch over the topic's max.message.bytes."""
    topic = unique_topic("hostile-produce-errors")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics(
        [
            NewTopic(
                topic, num_partitions=1, replication_factor=1, config={"max.message.bytes": "2000"}
            )
        ]
    )[topic].result(timeout=15)
    now = int(time.time() * 1000)
    small = record_batch([b"small"], now)
    big = record_batch([b"x" * 3000], now)
    cases = [
        ("acks=2", produce_v7(topic, 0, small, acks=2), (topic, 0, INVALID_REQUIRED_ACKS, -1)),
        ("partition 99", produce_v7(topic, 99, small), (topic, 99, UNKNOWN_TOPIC_OR_PARTITION, -1)),
        ("over max.message.bytes", produce_v7(topic, 0, big), (topic, 0, MESSAGE_TOO_LARGE, -1)),
        ("valid", produce_v7(topic, 0, small), (topic, 0, NONE, 0)),
    ]
    with connect(broker) as sock:
        for correlation_id, (what, body, expected) in enumerate(cases, start=40):
            sock.sendall(request(API_PRODUCE, 7, correlation_id, body))
            response = read_response(sock)
            assert response is not None, f"{what}: connection closed instead of an error code"
            assert response[0] == correlation_id
            assert parse_produce_v7_response(response[1]) == [expected], what
    still_serves(broker)


def create_topics_v3(topics: list[tuple[str, int]]) -> bytes:
    body = struct.pack(">i", len(topics))
    for name, partitions in topics:
        # name, num_partitions, replication_factor -1, no assignments, no configs
        body += kstring(name) + struct.pack(">ihii", partitions, -1, 0, 0)
    return body + struct.pack(">ib", 5000, 0)  # timeout_ms, validate_only


def create_partitions_v1(topic: str, count: int) -> bytes:
    # one topic: name, count, null assignments; timeout_ms, validate_only
    return struct.pack(">i", 1) + kstring(topic) + struct.pack(">iiib", count, -1, 5000, 0)


def parse_topic_errors(body: bytes) -> list[tuple[str, int, str | None]]:
    """(name, error_code, error_message) of a CreateTopics v3 / CreatePartitions v1 response:
    both are throttle_time_ms then [name, error_code, nullable error_message]."""
    pos = 4
    (n,) = struct.unpack_from(">i", body, pos)
    pos += 4
    out = []
    for _ in range(n):
        (name_len,) = struct.unpack_from(">h", body, pos)
        name = body[pos + 2 : pos + 2 + name_len].decode()
        pos += 2 + name_len
        error_code, msg_len = struct.unpack_from(">hh", body, pos)
        pos += 4
        message = None
        if msg_len >= 0:
            message = body[pos : pos + msg_len].decode()
            pos += msg_len
        out.append((name, error_code, message))
    return out


def partition_dirs(broker: BrokerProcess, topic: str) -> list[Path]:
    assert broker.data_dir is not None
    return list(broker.data_dir.glob(f"{topic}-*"))


def test_create_topics_over_the_partition_limit_is_refused(broker: BrokerProcess) -> None:
    """A CreateTopics asking for 1,048,577 partitions (one flipped bit in a real client's
    request) is refused at once with POLICY_VIOLATION for every topic, as Kafka's controller
    does above 10,000 partitions per request, and creates nothing; the refusal is logged."""
    huge, small = unique_topic("hostile-huge"), unique_topic("hostile-small")
    with connect(broker) as sock:
        sock.sendall(request(API_CREATE_TOPICS, 3, 51, create_topics_v3([(huge, 2**20 + 1)])))
        response = read_response(sock)
        assert response is not None, "connection closed instead of an error code"
        assert response[0] == 51
        [(name, code, message)] = parse_topic_errors(response[1])
        assert (name, code) == (huge, POLICY_VIOLATION)
        assert message is not None
        assert "partitions" in message
        # The limit counts the whole request: two topics that add up to one partition too many.
        half = MAX_PARTITIONS_PER_REQUEST // 2
        body = create_topics_v3([(huge, half), (small, half + 1)])
        sock.sendall(request(API_CREATE_TOPICS, 3, 52, body))
        response = read_response(sock)
        assert response is not None
        assert [(n, c) for n, c, _ in parse_topic_errors(response[1])] == [
            (huge, POLICY_VIOLATION),
            (small, POLICY_VIOLATION),
        ]
    assert partition_dirs(broker, huge) == []
    assert partition_dirs(broker, small) == []
    assert "Excessively large number of partitions" in broker.log_text()
    still_serves(broker)


def test_create_partitions_over_the_partition_limit_is_refused(broker: BrokerProcess) -> None:
    topic = unique_topic("hostile-grow")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(
        timeout=15
    )
    with connect(broker) as sock:
        body = create_partitions_v1(topic, 1 + MAX_PARTITIONS_PER_REQUEST + 1)
        sock.sendall(request(API_CREATE_PARTITIONS, 1, 61, body))
        response = read_response(sock)
        assert response is not None, "connection closed instead of an error code"
        assert response[0] == 61
        [(name, code, message)] = parse_topic_errors(response[1])
        assert (name, code) == (topic, INVALID_PARTITIONS)
        assert message is not None
        assert str(MAX_PARTITIONS_PER_REQUEST) in message
        # Exactly 10,000 new partitions would be allowed; 2 new ones certainly are.
        sock.sendall(request(API_CREATE_PARTITIONS, 1, 62, create_partitions_v1(topic, 3)))
        response = read_response(sock)
        assert response is not None
        assert [(n, c) for n, c, _ in parse_topic_errors(response[1])] == [(topic, NONE)]
    assert len(partition_dirs(broker, topic)) == 3
    still_serves(broker)


# Requests that may legitimately stay unanswered for a while when random bytes happen to decode:
# acks=0 Produce (no response at all), long-polling Fetch, JoinGroup/SyncGroup waiting for a
# rebalance.
MAY_WAIT = {0, 1, 11, 14}


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    api_key=st.integers(min_value=0, max_value=80),
    api_version=st.integers(min_value=0, max_value=20),
    body=st.binary(max_size=200),
)
def test_random_request_bodies_get_an_answer_or_a_close(
    broker: BrokerProcess, api_key: int, api_version: int, body: bytes
) -> None:
    """Garbage after a well-formed header, for every API and version: the broker answers (an
    error) or closes this one connection - it never hangs and never goes down."""
    with connect(broker) as sock:
        sock.settimeout(2.0)
        sock.sendall(request(api_key, api_version, 77, body))
        try:
            response = read_response(sock)
        except TimeoutError:
            assert api_key in MAY_WAIT, f"API {api_key} v{api_version}: no answer, no close in 2 s"
            response = None
        if response is not None:
            assert response[0] == 77, "response to the wrong correlation id"
    assert broker.is_running(), "broker died on a random request body:\n" + broker.log_tail()


GOLDEN_REQUESTS = [
    bytes.fromhex(path.read_text())
    for path in sorted(
        (Path(__file__).parent.parent / "tests" / "protocol" / "golden").glob("*_request_*.hex")
    )
]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_mutated_real_client_requests_get_an_answer_or_a_close(
    broker: BrokerProcess, data: st.DataObject
) -> None:
    """Requests real clients sent (tests/protocol/golden), with flipped bits or cut short: the
    parsers see almost-valid input, which finds more than random bytes do."""
    assert GOLDEN_REQUESTS, "golden request fixtures missing"
    frame = bytearray(data.draw(st.sampled_from(GOLDEN_REQUESTS)))
    if data.draw(st.booleans()):
        for pos in data.draw(st.lists(st.integers(8, len(frame) - 1), min_size=1, max_size=4)):
            frame[pos] ^= 1 << data.draw(st.integers(0, 7))
    else:
        frame = frame[: data.draw(st.integers(8, len(frame) - 1))]
    struct.pack_into(">i", frame, 4, 4242)  # our correlation id
    api_key = struct.unpack_from(">h", frame)[0]
    with connect(broker) as sock:
        sock.settimeout(2.0)
        sock.sendall(struct.pack(">i", len(frame)) + bytes(frame))
        try:
            response = read_response(sock)
        except TimeoutError:
            assert api_key in MAY_WAIT, f"API {api_key}: no answer, no close in 2 s"
            response = None
        if response is not None:
            assert response[0] == 4242, "response to the wrong correlation id"
    assert broker.is_running(), "broker died on a mutated request:\n" + broker.log_tail()


def test_broker_serves_after_random_bodies(broker: BrokerProcess) -> None:
    """Runs after the property tests in this module: a real client is unaffected, and none of
    the fuzzed requests left an unhandled exception in the broker's log."""
    still_serves(broker)
    assert "Traceback" not in broker.log_text(), broker.log_tail()
