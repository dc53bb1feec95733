"""Issue 25's tiered-storage scenario at full size (KIP-405): 1 GB through a three-node cluster
whose topic keeps only its tail on local disk and the rest in a real S3 server.

The steps and their checks are `compat_tests/tiered_scenario.py` (the suite runs the same at
about 50 MB): segments of size/128, local.retention.bytes of size/32; produce with acks=all, an
aborted transaction in the tiered range, the object store stopped for `--outage-s` seconds
during production; copier catch-up; confluent-kafka reads from offset 0 with the partition
leader SIGKILLed half way; every node restarted; kafka-python reads from offset 0;
retention.bytes lowered and the bucket listed. A broken promise ends the run with an
AssertionError.

Figures: produce MB/s, outage (Fetch error code, what each client saw, peak disk while the
copier could not copy), copier catch-up time, disk per node against the bound (size/10.24:
100 MB at 1 GB), remote bytes and objects, each client's read MB/s, objects before/after
retention. JSON: perf/results/tiered_scenario.json.

    .venv/bin/python perf/tiered_scenario.py [--mb 1024] [--outage-s 30] [--s3 seaweedfs|moto]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

PERF = Path(__file__).resolve().parent
sys.path.insert(0, str(PERF.parent))

from compat_tests.tiered_scenario import MB, Scenario, dump, run  # noqa: E402

RESULTS = PERF / "results" / "tiered_scenario.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=1024, help="MB produced (default 1024)")
    parser.add_argument("--outage-s", type=float, default=30.0, help="object store outage (s)")
    parser.add_argument("--s3", choices=["seaweedfs", "moto"], default="seaweedfs")
    parser.add_argument("--json", type=Path, default=RESULTS)
    args = parser.parse_args()
    sc = Scenario(total_bytes=args.mb * MB, outage_s=args.outage_s, s3_kind=args.s3)
    with tempfile.TemporaryDirectory(prefix="kafkapy-tiered-scenario-") as tmp:
        figures = run(sc, Path(tmp), log=lambda line: print(f"  {line}", flush=True))
    dump(figures, args.json)
    disk = figures["disk_bytes_per_node"]
    print(f"\n{args.mb} MB through RF 3, segment {sc.segment_bytes / MB:.2f} MB, "
          f"local.retention.bytes {sc.local_retention_bytes / MB:.1f} MB, {args.s3}")
    print(f"produce (acks=all, incl. outage)  {figures['produce_mb_per_s']:8.2f} MB/s "
          f"({figures['acked_records']} records acked, {figures['failed_records']} failed)")
    print(f"store outage                      {figures['outage_actual_s']:8.1f} s; Fetch error "
          f"{figures['outage_fetch_error_code']}; {figures['produced_during_outage_mb']} MB produced, "
          f"peak disk {figures['outage_peak_disk_bytes'] / MB:.1f} MB")
    print(f"  confluent-kafka saw             {json.dumps(figures['outage_confluent'])}")
    print(f"  kafka-python saw                {figures['outage_kafka_python']}")
    lag = figures["copy_lag_after_outage"]
    print(f"copy lag after the outage         peak {lag.get('peak_bytes', 0) / MB:.1f} MB, 0 after "
          f"{lag.get('zero_after_s', '?')} s; 0 at {figures['catch_up_s']:.1f} s after production")
    print(f"disk per node (bound {sc.disk_bound / MB:.0f} MB)      "
          + ", ".join(f"node {n}: {b / MB:.1f} MB" for n, b in disk.items()))
    print(f"remote                            {figures['remote_log_size_bytes'] / MB:8.1f} MB in "
          f"{figures['remote_objects']} objects")
    print(f"confluent-kafka read, leader kill {figures['confluent_read']['mb_per_s']:8.2f} MB/s "
          f"(node {figures['confluent_read']['killed_leader']} killed)")
    print(f"kafka-python read after restart   {figures['kafka_python_read_after_restart']['mb_per_s']:8.2f} MB/s")
    ret = figures["retention"]
    print(f"retention.bytes {ret['retention_bytes'] / MB:.0f} MB               objects "
          f"{ret['objects_before']} -> {ret['objects_after']}, log start {ret['log_start_offset']}")
    print(f"JSON: {args.json}")


if __name__ == "__main__":
    main()
