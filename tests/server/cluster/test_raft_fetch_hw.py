"""The leader's long-polled metadata Fetch answers at once when the fetcher's high watermark is stale.

Why it matters: a fetcher learns that metadata is committed only from the HW in a Fetch answer.
When the HW moves while a fetcher's previous answer is on its way (another voter's fetch
committed the entry), its next Fetch brings no new entries; held for the whole long poll, the
commit would reach that node up to `max_wait_ms` late (topic creation, ISR changes, fencing all
wait on it). Kafka's leader answers such a Fetch at once; so must ours, while a Fetch with
nothing new at all still long-polls.

Driven through the real in-process quorum (raft_harness.py): a Fetch from an extra observer id
at the leader's log end, with a long poll far beyond the test's own bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from kafkapy.protocol.errors import ErrorCode
from kafkapy.raft import FetchRequest, FetchResponse
from tests.server.cluster.raft_harness import propose, quorum

pytestmark = pytest.mark.timeout(60)

FETCHER = 77  # an observer id no member uses
LONG_POLL_MS = 60_000  # far past every bound below: an answer within them did not long-poll


async def test_fetch_without_entries_but_newer_hw_answers_at_once(tmp_path: Path) -> None:
    async with quorum(tmp_path) as q:
        leader = await q.leader()
        raft = leader.raft
        await propose(q, [b"first"])

        def at_end() -> FetchRequest:
            end = raft.log.end_offset()
            return FetchRequest(FETCHER, end, raft.log.last_epoch(), raft.epoch)

        with trio.fail_after(10):  # first answer to this fetcher: its HW is news
            first = await raft.fetch(FETCHER, at_end(), LONG_POLL_MS)
        assert isinstance(first, FetchResponse)
        assert first.error is ErrorCode.NONE
        assert not first.entries

        # nothing new at all: the Fetch long-polls (still waiting after a while)
        with trio.move_on_after(0.5) as idle:
            await raft.fetch(FETCHER, at_end(), LONG_POLL_MS)
        assert idle.cancelled_caught

        # the HW moves past what this fetcher was told while it is not fetching
        committed = await propose(q, [b"second"])
        await q.wait_for("HW past the entry", lambda: raft.high_watermark > committed)
        with trio.fail_after(10):
            news = await raft.fetch(FETCHER, at_end(), LONG_POLL_MS)
        assert isinstance(news, FetchResponse)
        assert news.error is ErrorCode.NONE
        assert not news.entries
        assert news.high_watermark > first.high_watermark
        assert news.high_watermark > committed
