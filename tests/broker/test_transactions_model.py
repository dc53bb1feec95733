"""Model-based property test over the wire: two transactional producers interleave sends,
commits and aborts on one partition; after every step a read_committed fetch returns exactly the
committed records before the first open transaction (the LSO), in log order, ListOffsets
(read_committed) answers that LSO, and read_uncommitted returns every record."""

from __future__ import annotations

from dataclasses import dataclass, field

import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from kafkapy.protocol.errors import ErrorCode as E
from tests.broker.test_transactions import TXN_SETTINGS, Txn, fetch, latest
from tests.server.helpers import Client, create_topic, running_broker

Step = tuple[str, int]
steps = st.lists(
    st.tuples(st.sampled_from(["send", "send", "commit", "abort"]), st.integers(0, 1)),
    min_size=1, max_size=14,
)


@dataclass
class Model:
    log: list[tuple[int, int, bytes]] = field(default_factory=list)  # (offset, txn, value)
    outcome: dict[int, str] = field(default_factory=dict)  # txn -> open/commit/abort
    current: dict[int, int] = field(default_factory=dict)  # producer -> its open txn
    next_offset: int = 0

    def lso(self) -> int:
        starts = [off for off, txn, _ in self.log if self.outcome[txn] == "open"]
        return min(starts) if starts else self.next_offset

    def committed(self) -> list[bytes]:
        return [v for off, txn, v in self.log if self.outcome[txn] == "commit" and off < self.lso()]


async def run_scenario(script: list[Step]) -> None:
    async with running_broker(None, **TXN_SETTINGS) as (_, _, port):
        await create_topic(port, "m", 1)
        c = await Client.connect(port)
        producers = [Txn(c, "tx-0"), Txn(c, "tx-1")]
        for p in producers:
            assert await p.init() == E.NONE
        model, txn_ids = Model(), 0
        for i, (op, who) in enumerate(script):
            p = producers[who]
            if op == "send":
                if who not in model.current:
                    assert await p.add("m") == E.NONE
                    model.current[who] = txn_ids
                    model.outcome[txn_ids] = "open"
                    txn_ids += 1
                value = b"%d-%d" % (who, i)
                assert (await p.send("m", value))[0] == E.NONE
                model.log.append((model.next_offset, model.current[who], value))
                model.next_offset += 1
            elif who in model.current:
                commit = op == "commit"
                assert (await p.end(commit)).error_code == E.NONE
                model.outcome[model.current.pop(who)] = "commit" if commit else "abort"
                model.next_offset += 1  # the marker
            values, part = await fetch(c, "m", committed=True)
            assert values == model.committed()
            assert part.last_stable_offset == model.lso()
            assert await latest(c, "m", committed=True) == model.lso()
            assert (await fetch(c, "m", committed=False))[0] == [v for _, _, v in model.log]
        await c.aclose()


@settings(max_examples=25, deadline=None)
@given(script=steps)
def test_read_committed_matches_the_model(script: list[Step]) -> None:
    async def main() -> None:
        with trio.fail_after(60):
            await run_scenario(script)

    trio.run(main)
