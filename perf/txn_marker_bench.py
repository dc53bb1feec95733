"""What a hung data-partition leader costs a transaction (issue 12 anomaly 3), in-process.

Three in-process brokers (tests/server/cluster/replication_helpers: real brokers and sockets,
the controller collapsed into direct calls). A transaction writes to a partition whose leader
then hangs (the coordinator's marker connection reaches a socket that reads and never
answers, as a SIGSTOPped process does); `--detect` seconds after EndTxn was sent the
controller fences that leader (what failure detection does) and the partition gets a new
leader. Figures per run: EndTxn latency (what the producer's commit waits for) and the time
from EndTxn to the transaction's CompleteCommit (what the next transaction waits for).

    .venv/bin/python perf/txn_marker_bench.py [--runs 5] [--detect 2.0] [--json PATH]

A/B: `PYTHONPATH=<other tree> .venv/bin/python perf/txn_marker_bench.py` runs the other
tree's broker with this script.
"""

from __future__ import annotations

import argparse
import importlib
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

sys.path.append(str(Path(__file__).resolve().parents[1]))  # tests.* (after PYTHONPATH: A/B)

from kafkapy.broker import txn_driver as txn_driver_module
from kafkapy.coordinator.txn import TxnState
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.protocol.messages import EndTxnRequest, FindCoordinatorRequest
from kafkapy.server.cluster.peer import PeerPool
from tests.broker.test_transactions import Txn
from tests.server.cluster.replication_helpers import Node, running_cluster, wait_for

TID = "bench-markers"


def _marker_home() -> Any:
    """The module holding the marker connections (txn_markers; txn_driver in older trees,
    for A/B runs)."""
    try:
        return importlib.import_module("kafkapy.broker.txn_markers")
    except ImportError:
        return txn_driver_module


async def _txn_runtime(broker: Any) -> Any:
    """The broker's transaction coordinator runtime, loaded (`broker.txn_coordinator`; a
    module-level registry in older trees, for A/B runs)."""
    runtime = getattr(broker, "txn_coordinator", None)
    if runtime is not None:
        return await runtime.ready()
    return await txn_driver_module.txn_driver(broker)  # type: ignore[attr-defined]


class HungPeer:
    def __init__(self) -> None:
        self.port = 0

    async def serve(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    @staticmethod
    async def _handle(stream: trio.SocketStream) -> None:
        async for _ in stream:
            pass


def _state(coord: Node) -> TxnState | None:
    runtime = getattr(coord.broker, "txn_coordinator", None)
    if runtime is None:  # older trees, for A/B runs
        runtime = txn_driver_module._DRIVERS[coord.broker]  # type: ignore[attr-defined]
    owner = runtime.coordinator_for(TID)
    if isinstance(owner, ErrorCode) or TID not in owner.transactions:
        return None
    state: TxnState = owner.transactions[TID].state
    return state


async def one_run(base: Path, detect_s: float) -> dict[str, float]:
    overrides: dict[str, Any] = {"transaction.state.log.num.partitions": "1"}
    async with running_cluster(base, **overrides) as (
        controller, nodes,
    ), trio.open_nursery() as nursery:
        hung = HungPeer()
        await nursery.start(hung.serve)
        client = await nodes[1].client()
        coord: Node | None = None
        for _ in range(200):
            r = await client.request(ApiKey.FIND_COORDINATOR, 4, FindCoordinatorRequest(
                key_type=1, coordinator_keys=[TID]))
            if r.coordinators[0].error_code == ErrorCode.NONE:
                coord = nodes[r.coordinators[0].node_id]
                break
            await trio.sleep(0.05)
        await client.aclose()
        assert coord is not None
        await _txn_runtime(coord.broker)
        topic = ""
        for i in range(10):
            controller.create_topic(f"t{i}", rf=3)
            if controller.image.topics[f"t{i}"].partitions[0].leader != coord.node_id:
                topic = f"t{i}"
                break
        leader = nodes[controller.image.topics[topic].partitions[0].leader]
        real = coord.cluster.broker_address
        pool = PeerPool(
            lambda n: ("127.0.0.1", hung.port) if n == leader.node_id else real(n),
            client_id="bench-markers",
        )
        runtime = getattr(coord.broker, "txn_coordinator", None)
        if runtime is not None and hasattr(runtime, "marker_peers"):
            runtime.marker_peers.pool = pool
        else:  # older trees keep the pool in a module-level registry (A/B runs)
            _marker_home()._MARKER_PEERS[coord.broker] = pool
        to_coord, to_leader = await coord.client(), await leader.client()
        tx = Txn(to_coord, TID)
        assert await tx.init() == ErrorCode.NONE
        assert await tx.add(topic) == ErrorCode.NONE
        data = Txn(to_leader, TID)
        data.pid, data.epoch = tx.pid, tx.epoch
        assert (await data.send(topic, b"a"))[0] == ErrorCode.NONE
        await to_leader.aclose()
        started = trio.current_time()
        answered: list[float] = []

        async def end() -> None:
            await to_coord.send(ApiKey.END_TXN, 3, EndTxnRequest(
                transactional_id=TID, producer_id=tx.pid, producer_epoch=tx.epoch,
                committed=True))
            _, r = await to_coord.receive(wait_s=120)  # as long as the broker takes
            assert r.error_code == ErrorCode.NONE, r
            answered.append(trio.current_time() - started)

        nursery.start_soon(end)
        await trio.sleep(detect_s)
        await leader.stop()
        controller.fence(leader.node_id)
        await wait_for(lambda: _state(coord) is TxnState.COMPLETE_COMMIT and bool(answered),
                       timeout_s=120, what="the transaction to complete")
        completed = trio.current_time() - started
        await to_coord.aclose()
        nursery.cancel_scope.cancel()
        return {"end_txn_s": round(answered[0], 3), "complete_s": round(completed, 3)}


async def main_async(args: argparse.Namespace) -> None:
    results = []
    for i in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="txn-markers-") as tmp:
            result = await one_run(Path(tmp), args.detect)
        print(f"run {i + 1}: {result}", flush=True)
        results.append(result)
    for key in ("end_txn_s", "complete_s"):
        values = [r[key] for r in results]
        print(f"{key}: median {statistics.median(values):.3f} s (min {min(values):.3f}, "
              f"max {max(values):.3f}, {len(values)} runs; leader fenced {args.detect} s after "
              "EndTxn was sent)")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--detect", type=float, default=2.0,
                        help="seconds from EndTxn to the fencing of the hung leader")
    parser.add_argument("--json", type=Path)
    trio.run(main_async, parser.parse_args())


if __name__ == "__main__":
    main()
