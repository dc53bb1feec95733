"""The status page in a real headless browser: Debian's chromium driven by Playwright (never a
downloaded browser), against a broker subprocess started with `--http` that confluent-kafka
filled with traffic. The page must render, its numbers must match what the admin API says, and
its charts must be drawn; a screenshot is kept under the test's tmp dir (path printed).

What a reader of a small single node relies on: the topics and groups open, the lag chart on the
group that lags most, a burst not flattening steady traffic in the throughput chart, the hot
partition first, the brokers' racks and partition replicas against `max.broker.partitions`,
the topic's own configs, sizes that say whose they are, a partition log that
could not be opened and a partition the cleaner gave up on listed under storage health, and the
Raft quorum of one out of the way. With tiered storage on (a real SeaweedFS), a "Tiered storage"
section that is absent until a `remote.storage.enable` topic exists, then lists it with its
bytes on this node's disk, its bytes in the bucket and the copier's lag."""

from __future__ import annotations

import json
import re
import shutil
import time
import urllib.request
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)

from compat_tests.conftest import BrokerFactory, in_ci
from kafkapy.storage.remote.s3 import S3ObjectStore
from kafkapy.testing.object_store import S3Server

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.timeout(180)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
TOPIC = "orders"
GROUP = "page-readers"
PARTITIONS = 3
PER_PARTITION = 200
COMMITTED = (150, 200, 100)  # lag 50, 0, 100
LIVE_GROUP = "page-live"
LIVE_CLIENT = "page-test-client"
TOPIC_CONFIGS = {"retention.ms": "86400000"}
BROKEN = "legacy"  # a topic whose log is damaged while the broker is down: offline after
KEYED = "keyed"  # compacted once a segment of it is damaged: the cleaner gives up on it
RACK = "rack-page"
BUDGET = 1000  # max.broker.partitions: the page shows the replicas against it


@pytest.fixture
def chromium_path() -> str:
    if shutil.which(CHROMIUM) is None:
        if in_ci():
            pytest.fail("chromium is missing in CI (.ci/run installs it: apt-get install chromium)")
        pytest.skip("chromium not installed here (apt-get install -y chromium)")
    return CHROMIUM


def _fill(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1, config=TOPIC_CONFIGS)])[TOPIC].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(PARTITIONS * PER_PARTITION):
        producer.produce(TOPIC, value=b"order-%06d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    got, deadline = 0, time.monotonic() + 30
    while got < PARTITIONS * PER_PARTITION and time.monotonic() < deadline:
        got += sum(1 for m in consumer.consume(500, 1.0) if m.error() is None)
    assert got == PARTITIONS * PER_PARTITION
    consumer.commit(
        offsets=[TopicPartition(TOPIC, p, c) for p, c in enumerate(COMMITTED)], asynchronous=False
    )
    consumer.close()


def _damaged_topic(broker_factory: BrokerFactory, data_dir: Path) -> None:
    """The topic BROKEN created, then its log damaged while its broker is stopped: a directory
    where its first segment should be, so the next start cannot open it."""
    first = broker_factory.start(data_dir=data_dir)
    admin = AdminClient({"bootstrap.servers": first.bootstrap})
    admin.create_topics([NewTopic(BROKEN, 1, 1)])[BROKEN].result(15)
    first.stop()
    segment = data_dir / f"{BROKEN}-0" / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()


def _make_uncleanable(bootstrap: str, data_dir: Path, page_url: str) -> None:
    """A topic with closed segments, the first one's records overwritten on disk, then made
    compacted: the cleaner's next pass fails on it and marks it uncleanable."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    small = {"segment.bytes": "2048", "min.cleanable.dirty.ratio": "0.01"}
    admin.create_topics([NewTopic(KEYED, 1, 1, config=small)])[KEYED].result(15)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(60):
        producer.produce(KEYED, key=b"k%d" % (i % 3), value=b"v" * 100)
        assert producer.flush(10) == 0
    with open(data_dir / f"{KEYED}-0" / "00000000000000000000.log", "r+b") as segment:
        segment.seek(61)  # past the first batch's header: its records
        segment.write(b"\xff" * 40)
    compact = ConfigResource("topic", KEYED, incremental_configs=[
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)
    ])
    admin.incremental_alter_configs([compact])[compact].result(15)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with urllib.request.urlopen(page_url + "api/status?summary=1", timeout=10) as response:
            if json.loads(response.read())["storage"]["uncleanable"]:
                return
        time.sleep(0.2)
    raise AssertionError("the cleaner did not give up on the damaged partition")


def _admin_view(bootstrap: str) -> dict[str, object]:
    """What the Kafka admin API says: cluster, brokers, log ends, committed offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cluster = admin.describe_cluster(request_timeout=15).result(15)
    from confluent_kafka import ConsumerGroupTopicPartitions

    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(15)
    committed = {tp.partition: tp.offset for tp in offsets.topic_partitions if tp.topic == TOPIC}
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    ends = {p: probe.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1] for p in range(PARTITIONS)}
    probe.close()
    return {
        "cluster_id": cluster.cluster_id,
        "controller": cluster.controller.id,
        "brokers": {(n.id, n.host, n.port) for n in cluster.nodes},
        "ends": ends,
        "committed": committed,
    }


def test_status_page_renders_and_matches_the_admin_api(
    broker_factory: BrokerFactory, chromium_path: str, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    data_dir = tmp_path / "data"
    _damaged_topic(broker_factory, data_dir)
    broker = broker_factory.start(
        data_dir=data_dir,
        extra_args=["--http", "127.0.0.1:0", "--override", "log.cleaner.backoff.ms=200",
                    "--override", f"broker.rack={RACK}", "--override", f"max.broker.partitions={BUDGET}"],
    )
    url = re.search(r"HTTP on (http://\S+/)", broker.log_text())
    assert url, broker.log_tail()
    _fill(broker.bootstrap)
    _make_uncleanable(broker.bootstrap, data_dir, url.group(1))
    admin = _admin_view(broker.bootstrap)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    # a live member, so the page has one to show (librdkafka heartbeats in its own thread)
    live = Consumer({
        "bootstrap.servers": broker.bootstrap, "group.id": LIVE_GROUP, "client.id": LIVE_CLIENT,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,  # no offsets: lag 0
    })
    live.subscribe([TOPIC])
    deadline = time.monotonic() + 30
    while not live.assignment() and time.monotonic() < deadline:
        live.poll(0.5)
    assert live.assignment()

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1500})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url.group(1), wait_until="load")
            # keep a trickle of produce traffic while the page samples, so the chart moves,
            # until the refreshed tables put the trickle's partition first among the hot ones
            deadline = time.monotonic() + 40
            while time.monotonic() < deadline:
                producer.produce("trickle", value=b"x" * 512)
                producer.poll(0)
                if int(page.evaluate("document.body.dataset.polls || 0")) >= 4 and _hottest(page) == ["trickle", "0"]:
                    break
                page.wait_for_timeout(200)
            cluster_rate = page.inner_text("#cluster-messages-in")
            producer.flush(10)
            assert not errors, errors
            assert int(page.evaluate("document.body.dataset.polls || 0")) >= 4
            assert _hottest(page) == ["trickle", "0"]
            assert _number(cluster_rate) > 0

            cluster_text = page.inner_text("#cluster-table")
            assert str(admin["cluster_id"]) in cluster_text
            assert f"{admin['controller']} (this node)" in cluster_text
            rows = page.locator("table.brokers tbody tr")
            shown = set()
            for i in range(rows.count()):
                node, host, port = (c.strip() for c in rows.nth(i).locator("td").all_inner_texts()[:3])
                shown.add((int(node), host, int(port)))
            assert shown == admin["brokers"]
            _check_racks_and_partition_budget(page, broker.bootstrap)

            topic = page.locator(f'details.topic[data-topic="{TOPIC}"]')
            assert topic.locator(".partition-count").inner_text() == str(PARTITIONS)
            assert topic.evaluate("d => d.open"), "a short topic list is open"
            assert "retention.ms=86400000" in topic.locator(".configs").inner_text()
            assert "(this node's replicas)" in topic.locator(".size").inner_text()
            assert "Size (this replica)" in topic.locator("table.partitions thead").inner_text()
            ends = admin["ends"]
            assert isinstance(ends, dict)
            part_rows = topic.locator("table.partitions tbody tr")
            assert part_rows.count() == PARTITIONS
            for i in range(PARTITIONS):
                cells = part_rows.nth(i).locator("td").all_inner_texts()
                assert int(cells[0]) == i
                assert int(cells[5]) == ends[i] == PER_PARTITION  # log end offset

            committed = admin["committed"]
            assert isinstance(committed, dict)
            expected_lag = sum(ends[p] - committed[p] for p in range(PARTITIONS))
            group = page.locator(f'details.group[data-group="{GROUP}"]')
            assert int(group.locator(".group-lag").inner_text()) == expected_lag == 150
            assert group.evaluate("d => d.open"), "a short group list is open"
            offset_rows = group.locator("table.offsets tbody tr")
            by_partition = {}
            for i in range(offset_rows.count()):
                cells = [c.strip() for c in offset_rows.nth(i).locator("td").all_inner_texts()]
                by_partition[int(cells[1])] = (int(cells[2]), int(cells[4]))
            assert by_partition == {p: (committed[p], ends[p] - committed[p]) for p in range(PARTITIONS)}

            live_group = page.locator(f'details.group[data-group="{LIVE_GROUP}"]')
            assert live_group.locator(".state").inner_text() == "Stable"
            members = live_group.locator("table.members tbody tr")
            assert members.count() == 1
            assert members.first.locator("td").nth(1).inner_text() == LIVE_CLIENT

            # the charts are drawn by the page's own script from the polled history
            assert page.locator("#chart-throughput polyline").count() == 3
            options = page.locator("#lag-group option").all_inner_texts()
            assert sorted(options) == sorted([GROUP, LIVE_GROUP])
            # by default the group with the most lag, not the alphabetically first
            assert page.input_value("#lag-group") == GROUP
            page.select_option("#lag-group", GROUP)
            assert page.locator("#chart-lag polyline").count() == 1
            # the y axis is scaled to the group's lag of 150: ticks 0..200 in quarters
            ticks = [t.text_content() for t in page.locator("#chart-lag text.axis").all()]
            assert ticks[:5] == ["0.0", "50.0", "100", "150", "200"]
            assert page.inner_text("#partition-count") != ""
            # no remote.storage.enable topic (tiering off): no Tiered storage section
            assert page.locator("#tiered").count() == 0
            _check_burst_leaves_steady_traffic_readable(page)
            _check_storage_health_and_raft_placement(page)

            shot = tmp_path / "status-page.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"status page screenshot: {shot}")
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
            live.close()


def _check_racks_and_partition_budget(page: Page, bootstrap: str) -> None:
    """The brokers table shows each broker's rack and its partition replicas against
    `max.broker.partitions`; the replica count is what the admin API's metadata adds up to."""
    row = page.locator("table.brokers tbody tr").first
    cells = [c.strip() for c in row.locator("td").all_inner_texts()]
    assert cells[3] == RACK
    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).topics
    replicas = sum(len(p.replicas) for t in topics.values() for p in t.partitions.values())
    assert cells[6] == f"{replicas} / {BUDGET} ({round(100 * replicas / BUDGET)}%)"
    budget_line = page.inner_text("#partition-budget")
    assert f"max.broker.partitions={BUDGET}" in budget_line
    assert "max.partitions=unlimited" in budget_line
    assert "Leader" in page.locator("table.hot-partitions thead").inner_text()


def _hottest(page: Page) -> list[str]:
    """Topic and partition of the first row of the hot-partition table."""
    cells = page.locator("table.hot-partitions tbody tr").first.locator("td").all_inner_texts()
    return [c.strip() for c in cells[:2]]


def _number(text: str) -> float:
    """A figure as the page's fmtNum prints it ("47.0", "1.2k", "3.4M")."""
    scale = {"k": 1e3, "M": 1e6}.get(text.strip()[-1:], 1.0)
    return float(text.strip().rstrip("kM")) * scale


BURST_THEN_TRICKLE = """() => {
  // 3 samples at 66k msg/s, then 27 at 47 msg/s (100 bytes each), drawn by the page's own code
  const history = [];
  let messages = 0;
  for (let i = 0; i < 30; i++) {
    messages += (i > 0 && i < 4 ? 66000 : 47) * 2;
    history.push({ t: 1e12 + i * 2000, messages_in: messages, bytes_in: messages * 100,
                   bytes_out: 0, lag: {} });
  }
  update({ ...latest, history });
  const plot = document.querySelector("#chart-throughput rect.plot");
  const bottom = +plot.getAttribute("y") + +plot.getAttribute("height");
  const lastY = (series) => {
    const points = document.querySelector(`#chart-throughput polyline[data-series="${series}"]`)
      .getAttribute("points").trim().split(" ");
    return +points[points.length - 1].split(",")[1];
  };
  return { height: +plot.getAttribute("height"), messages: bottom - lastY(0),
           bytes: bottom - lastY(1),
           right_axis: [...document.querySelectorAll("#chart-throughput text.axis-1")].map((t) => t.textContent) };
}"""


def _check_burst_leaves_steady_traffic_readable(page: Page) -> None:
    drawn = page.evaluate(BURST_THEN_TRICKLE)
    # 47 msg/s after a 66k msg/s burst stands well clear of the zero line (linear: 0.07 %)
    assert drawn["messages"] > 0.25 * drawn["height"], drawn
    assert drawn["bytes"] > 0.25 * drawn["height"], drawn
    # bytes/s have their own axis, labelled in bytes
    assert any(label.endswith("KiB") for label in drawn["right_axis"]), drawn


def _check_storage_health_and_raft_placement(page: Page) -> None:
    offline = page.locator("table.offline-logs tbody tr")
    assert offline.count() == 1
    cells = [c.strip() for c in offline.first.locator("td").all_inner_texts()]
    assert cells[:2] == [BROKEN, "0"]
    assert "Is a directory" in cells[3]
    uncleanable = page.locator("table.uncleanable tbody tr")
    assert uncleanable.count() == 1
    cells = [c.strip() for c in uncleanable.first.locator("td").all_inner_texts()]
    assert cells[:2] == [KEYED, "0"]
    assert "InvalidRecordError" in cells[3]
    # a single node's Raft quorum: not in the cluster table, collapsed below the groups
    assert "Raft" not in page.inner_text("#cluster-table")
    raft = page.locator("details#raft-internals")
    assert not raft.evaluate("d => d.open")
    raft_box, groups_box = raft.bounding_box(), page.locator("#groups").bounding_box()
    assert raft_box is not None
    assert groups_box is not None
    assert raft_box["y"] > groups_box["y"] + groups_box["height"] - 1


TIERED = "archived"
TIERED_SEGMENT_BYTES = 16 * 1024
BYTE_UNITS = {"B": 1, "KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}


def _size(text: str) -> float:
    """A size as the page's `_bytes` prints it ("512 B", "48.0 KiB")."""
    value, unit = text.split()
    return float(value) * BYTE_UNITS[unit]


def _tiered_broker(broker_factory: BrokerFactory, s3: S3Server, prefix: str) -> tuple[str, str]:
    """A broker with tiering on against `s3`, serving the status page: bootstrap and page URL."""
    settings = {
        "remote.log.storage.system.enable": "true",
        "rsm.config.storage.s3.bucket.name": s3.bucket,
        "rsm.config.storage.s3.endpoint.url": s3.endpoint_url,
        "rsm.config.storage.s3.path.style.access.enabled": "true",
        "rsm.config.storage.aws.credentials.file": str(s3.credentials_file),
        "rsm.config.key.prefix": prefix,
        "remote.log.manager.task.interval.ms": "300",
        "remote.log.metadata.topic.num.partitions": "1",
    }
    args = ["--http", "127.0.0.1:0"] + [a for k, v in settings.items() for a in ("--override", f"{k}={v}")]
    broker = broker_factory.start(extra_args=args)
    url = re.search(r"HTTP on (http://\S+/)", broker.log_text())
    assert url, broker.log_tail()
    return broker.bootstrap, url.group(1)


def _produce_and_wait_for_copies(bootstrap: str, store: S3ObjectStore) -> None:
    """Rolled segments of TIERED, copied: at least two `.log` objects in the bucket."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    configs = {"remote.storage.enable": "true", "segment.bytes": str(TIERED_SEGMENT_BYTES)}
    admin.create_topics([NewTopic(TIERED, 1, 1, config=configs)])[TIERED].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.size": 2000})
    for i in range(100):  # ~100 KB: about 6 segments
        producer.produce(TIERED, b"x" * 1000, key=b"%d" % i)
        producer.poll(0)
    assert producer.flush(30) == 0
    deadline = time.monotonic() + 90
    while len([o for o in store.list(f"{TIERED}-") if o.key.endswith(".log")]) < 2:
        assert time.monotonic() < deadline, "no segments copied to the bucket"
        time.sleep(0.3)


@pytest.mark.slow
def test_tiered_storage_section_shows_local_and_remote_bytes_and_copier_lag(
    broker_factory: BrokerFactory, chromium_path: str, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    prefix = f"page-{uuid.uuid4().hex[:10]}"
    with S3Server("seaweedfs") as s3, sync_playwright() as pw:
        bootstrap, url = _tiered_broker(broker_factory, s3, prefix)
        browser = pw.chromium.launch(executable_path=chromium_path, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1500})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url, wait_until="load")
            # tiering on, but no tiered topic yet: no section (the topics table says enough)
            page.wait_for_selector("#topics", timeout=30_000)
            assert page.locator("#tiered").count() == 0
            assert "Tiered storage" not in page.inner_text("#tables")

            _produce_and_wait_for_copies(bootstrap, S3ObjectStore(s3.config(key_prefix=prefix)))
            # the tables refresh every few seconds: wait for the copied bytes to show
            row = page.locator(f'#tiered table.tiered-topics tbody tr:has(td:text-is("{TIERED}"))')
            deadline = time.monotonic() + 60
            while True:
                if row.count() == 1:
                    cells = [c.strip() for c in row.locator("td").all_inner_texts()]
                    if _size(cells[2]) > 0:
                        break
                assert time.monotonic() < deadline, page.inner_text("#tables")
                page.wait_for_timeout(500)
            assert "Tiered storage" in page.inner_text("#tiered h2")
            headers = page.locator("#tiered table.tiered-topics thead").inner_text()
            for header in ("Local", "Remote", "Copier lag"):
                assert header in headers
            assert cells[0] == TIERED
            assert _size(cells[1]) > 0  # the active segment at least stays local
            assert _size(cells[2]) > TIERED_SEGMENT_BYTES  # two copied segments, nearly full
            lag = re.fullmatch(r"(\S+ \S+) \((\d+) segments?\)", cells[3])
            assert lag, cells[3]
            assert _size(lag.group(1)) >= 0
            assert not errors, errors
            shot = tmp_path / "status-page-tiered.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"status page screenshot: {shot}")
        finally:
            browser.close()
