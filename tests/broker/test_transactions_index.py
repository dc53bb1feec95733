"""Property test: restoring `.txnindex` entries from a log replay (what a producer-state load
does after a crash) gives the complete, ordered index whatever subset survived, and the file
reloads to the same entries."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.storage.txn_index import AbortedTxnEntry, TransactionIndex


@st.composite
def aborted_entries(draw: st.DrawFn) -> list[AbortedTxnEntry]:
    gaps = draw(st.lists(st.integers(1, 50), min_size=0, max_size=25))
    out, last = [], 0
    for gap in gaps:
        last += gap
        length = draw(st.integers(0, gap - 1)) if gap > 1 else 0
        out.append(AbortedTxnEntry(last, draw(st.integers(0, 5)), last - length, last + 1))
    return out


@settings(max_examples=60, deadline=None)
@given(entries=aborted_entries(), data=st.data())
def test_restore_completes_the_index_in_order(entries: list[AbortedTxnEntry], data: st.DataObject) -> None:
    survived = [e for e in entries if data.draw(st.booleans())]
    replay_order = data.draw(st.permutations(entries))
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "00000000000000000000.txnindex"
        index = TransactionIndex(path)
        for e in survived:
            index.append(e)
        missing = sum(index.restore(e) for e in replay_order)
        assert missing == len(entries) - len(survived)
        assert index.entries == entries
        assert TransactionIndex(path).entries == entries
        # restoring again finds nothing missing (a second crash-replay is harmless)
        assert not any(index.restore(e) for e in entries)
