"""Controller fail-over as an admin client sees it: SIGKILL of the active controller's node to the
first successful CreateTopics (confluent-kafka), on a four-node subprocess cluster (three
voters and a broker-only node, kafkapy.testing.cluster).

Why measured: admin operations (CreateTopics, DeleteTopics, ...) must work again within seconds
of a controller fail-over (compat_tests/test_cluster_controller_failover.py asserts they do
within 30 s; the time itself is a figure, not an assert). The figure is the election timeout
plus the new controller's activation plus one forwarded CreateTopics; it is bounded by Raft's
timers, so it is little affected by machine load.

Each run starts a fresh cluster, creates one topic, reads the active controller from
DescribeCluster, kills it, and then, `--client-delay` seconds later, creates a new AdminClient
bootstrapped at the survivors (its first Metadata answer comes from inside the election window:
the case that used to hang) and retries CreateTopics (8 s per try) until one succeeds or
`--deadline` passes. The admin client that existed before the kill is tried as well
("existing client"), in a thread of its own, as in the original bug report.

    .venv/bin/python perf/controller_failover_bench.py [--runs 5] [--deadline 40]
        [--client-delay 0.2] [--json perf/results/controller_failover_bench.json]

A/B against an older tree: `PYTHONPATH=<old tree> .venv/bin/python <old tree>/perf/...` does
not work for trees without this script; copy it there, the cluster subprocesses inherit
PYTHONPATH. Prints each run and the medians; a run that did not succeed counts as the deadline.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from kafkapy.testing.cluster import ClusterProcesses

TRY_TIMEOUT_S = 8.0


def _create(admin: AdminClient, topic: str) -> None:
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=2)],
        operation_timeout=TRY_TIMEOUT_S,
        request_timeout=TRY_TIMEOUT_S,
    )
    try:
        futures[topic].result(timeout=TRY_TIMEOUT_S + 2)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # a retry of an applied one
            raise


def _until_created(admin: AdminClient, topic: str, start: float, deadline: float) -> float | None:
    """Seconds from `start` to the first successful CreateTopics; None at the deadline."""
    while time.monotonic() < deadline:
        try:
            _create(admin, topic)
        except Exception:
            time.sleep(0.1)
            continue
        return time.monotonic() - start
    return None


def one_run(deadline_s: float, client_delay_s: float) -> dict[str, float | None]:
    with tempfile.TemporaryDirectory(prefix="ctlfailover") as base:
        cluster = ClusterProcesses(Path(base), 4, voters=3)
        cluster.start()
        try:
            admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
            _create(admin, "before")
            controller = admin.describe_cluster().result(timeout=20).controller.id
            cluster.kill(controller)
            killed = time.monotonic()
            deadline = killed + deadline_s
            existing: dict[str, float | None] = {}
            thread = threading.Thread(
                target=lambda: existing.update(
                    s=_until_created(admin, "by-existing", killed, deadline)
                ),
                daemon=True,
            )
            thread.start()
            time.sleep(client_delay_s)
            fresh = AdminClient({"bootstrap.servers": cluster.bootstrap_of(*cluster.live())})
            fresh_s = _until_created(fresh, "by-fresh", killed, deadline)
            thread.join(timeout=max(0.0, deadline - time.monotonic()) + TRY_TIMEOUT_S + 5)
            return {
                "killed": controller,
                "fresh_client_s": fresh_s,
                "existing_client_s": existing.get("s"),
            }
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--deadline", type=float, default=40.0)
    parser.add_argument("--client-delay", type=float, default=0.2)
    parser.add_argument("--json", default="perf/results/controller_failover_bench.json")
    args = parser.parse_args()
    runs: list[dict[str, float | None]] = []
    for i in range(args.runs):
        run = one_run(args.deadline, args.client_delay)
        runs.append(run)
        shown = {k: (f"{v:.2f} s" if isinstance(v, float) else v) for k, v in run.items()}
        print(f"run {i + 1}: {shown}", flush=True)

    def median(key: str) -> float:
        values = [r[key] for r in runs]
        return statistics.median(v if v is not None else args.deadline for v in values)

    summary = {
        "runs": runs,
        "median_fresh_client_s": median("fresh_client_s"),
        "median_existing_client_s": median("existing_client_s"),
        "failed_runs": sum(
            1 for r in runs if r["fresh_client_s"] is None or r["existing_client_s"] is None
        ),
        "deadline_s": args.deadline,
        "client_delay_s": args.client_delay,
    }
    print(
        f"kill -> first CreateTopics, median of {args.runs}: fresh client "
        f"{summary['median_fresh_client_s']:.2f} s, existing client "
        f"{summary['median_existing_client_s']:.2f} s ({summary['failed_runs']} runs hit the "
        f"{args.deadline:.0f} s deadline)"
    )
    out = Path(args.json)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
