"""`kafkapy chaos`: a seeded fault-injection run against a local N-node kafkapy cluster.

Starts the cluster (RF 3, min.insync.replicas 2, Kafka's default timeouts; `--config` adds or
changes keys), runs the workloads, injects the seeded faults, reads everything back and checks
it (kafkapy/chaos/). Prints a table per fault kind; `--json PATH` also writes the whole report
(`-` for stdout, the text then goes to stderr). Exit code 0 when no anomaly was found, 1 when
one was, 2 on bad usage or a cluster that could not be set up. Faults that cannot be made on
this machine are skipped with a printed reason. `--seed` replays a run's fault schedule; when
not given a random seed is chosen and printed.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import click
from rich.console import Console

from kafkapy.chaos.schedule import FAULT_KINDS, parse_kinds

__all__ = ["chaos"]


def _kinds(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    try:
        return parse_kinds(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e


@click.command(name="chaos", context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--nodes", default=3, show_default=True, type=click.IntRange(3, 9), help="cluster size")
@click.option("--seed", type=int, default=None, help="fault schedule seed (default: random, printed)")
@click.option("--duration", default=150.0, show_default=True, type=click.FloatRange(20), help="seconds of faults")
@click.option(
    "--faults", "kinds", default=",".join(FAULT_KINDS), show_default=True, callback=_kinds,
    help="comma-separated fault kinds",
)
@click.option(
    "--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="server.properties with extra keys for every node",
)
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", help="an extra key (repeatable)")
@click.option("--json", "json_path", default=None, metavar="PATH", help="write the JSON report (- for stdout)")
@click.option(
    "--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="where the nodes keep data and logs (default: a temporary dir, kept when anomalies are found)",
)
@click.option("--keep", is_flag=True, help="keep the data dir and node logs")
@click.option("--disk-mib", default=256, show_default=True, type=click.IntRange(16), help="tmpfs size per node")
@click.option("--rate", default=50.0, show_default=True, type=click.FloatRange(1), help="acks=all messages/s")
@click.option(
    "--client-debug", default=None, metavar="CONTEXTS",
    help="librdkafka debug contexts for the workloads' clients (e.g. eos,msg), logged to clients.log",
)
def chaos(
    nodes: int, seed: int | None, duration: float, kinds: tuple[str, ...], config_file: Path | None,
    overrides: tuple[str, ...], json_path: str | None, data_dir: Path | None, keep: bool,
    disk_mib: int, rate: float, client_debug: str | None,
) -> int:
    """Run seeded faults against a local kafkapy cluster and check what clients saw."""
    from kafkapy.broker.config import parse_properties
    from kafkapy.chaos.report import render
    from kafkapy.chaos.runner import ChaosOptions, ChaosRun, outcome_json
    from kafkapy.testing.cluster import ClusterStartError

    config: dict[str, str] = {}
    if config_file is not None:
        config.update(parse_properties(config_file.read_text(encoding="utf-8")))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"needs KEY=VALUE, got {item!r}", param_hint="--override")
        config[key.strip()] = value
    seed = random.randrange(1_000_000) if seed is None else seed
    to_stdout = json_path == "-"
    console = Console(stderr=to_stdout)
    if not console.is_terminal:  # a CI log or a file: no terminal width to fit, keep columns whole
        console.width = max(console.width, 132)
    console.print(f"kafkapy chaos: seed {seed} (replay with --seed {seed}), {nodes} nodes, faults {','.join(kinds)}")
    options = ChaosOptions(
        nodes=nodes, seed=seed, duration_s=duration, kinds=kinds, config=config, base_dir=data_dir,
        keep=keep, disk_mib=disk_mib, rate_per_s=rate, client_debug=client_debug, progress=lambda line: console.print(line, highlight=False),
    )
    try:
        outcome = ChaosRun(options).run()
    except ClusterStartError as e:
        console.print(f"kafkapy chaos: the cluster could not be set up: {e}")
        return 2
    except KeyboardInterrupt:
        console.print("kafkapy chaos: interrupted; the faults were healed and the cluster stopped")
        return 130
    report = outcome_json(outcome)
    render(report, console)
    if json_path is not None:
        text = json.dumps(report, indent=2)
        if to_stdout:
            sys.stdout.write(text + "\n")
        else:
            Path(json_path).write_text(text + "\n", encoding="utf-8")
    return 1 if report["total_anomalies"] else 0
