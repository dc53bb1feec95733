"""The seeded fault schedule of a chaos run: which faults, in which order, held how long.

Pure and deterministic: `build_schedule(seed, duration_s, kinds)` depends on nothing else, so
the same seed replays the same schedule (a failing run is reproduced by its seed). What a fault
hits is chosen at run time from the cluster's state then (the leader of the partition `pick`
names, the active controller), since leadership after earlier faults is not a function of the
seed; the report records the node each fault hit.

Faults run one after another: each is injected, held `hold_s`, healed, and the next one starts
once the cluster has recovered (all nodes ready again). The nominal times assume a recovery of
`RECOVERY_ALLOWANCE_S`; the runner starts a fault no earlier than its nominal time, later when
recovery took longer, and always runs the whole schedule (the fault count is the seed's).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "FAULT_KINDS",
    "HOLD_RANGES_S",
    "FaultSpec",
    "build_schedule",
    "parse_kinds",
]

#: every kind of fault, in the order the report lists them
FAULT_KINDS: tuple[str, ...] = ("kill", "pause", "partition", "controller", "two-down", "disk-full")

#: how long each kind of fault lasts before it is healed, (min, max) seconds:
#: kill/controller - down before the restart; pause - SIGSTOP to SIGCONT (12-15 s, longer than
#: a broker session); partition - isolated (~15 s); two-down - both down; disk-full - full disk
HOLD_RANGES_S: dict[str, tuple[float, float]] = {
    "kill": (2.0, 5.0),
    "pause": (12.0, 15.0),
    "partition": (13.0, 16.0),
    "controller": (2.0, 5.0),
    "two-down": (5.0, 9.0),
    "disk-full": (8.0, 12.0),
}

WARMUP_S = 5.0
COOLDOWN_S = 2.0
RECOVERY_ALLOWANCE_S = 3.0
GAP_RANGE_S = (0.5, 1.5)


@dataclass(frozen=True)
class FaultSpec:
    """One scheduled fault. `pick` (0 <= pick < 2**31) chooses the target among the
    candidates the cluster offers at run time (`candidates[pick % len(candidates)]`)."""

    index: int
    kind: str
    at_s: float
    hold_s: float
    pick: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def parse_kinds(text: str) -> tuple[str, ...]:
    """`kill,pause,...` -> the kinds, in FAULT_KINDS order; ValueError naming an unknown one."""
    wanted = {part.strip() for part in text.split(",") if part.strip()}
    unknown = sorted(wanted - set(FAULT_KINDS))
    if unknown:
        raise ValueError(f"unknown fault kind(s) {', '.join(unknown)}; known: {', '.join(FAULT_KINDS)}")
    if not wanted:
        raise ValueError("no fault kinds given")
    return tuple(k for k in FAULT_KINDS if k in wanted)


def build_schedule(seed: int, duration_s: float, kinds: tuple[str, ...]) -> list[FaultSpec]:
    """The faults of a run of `duration_s` seconds: as many as fit (each with its hold, the
    recovery allowance and a short gap), kinds taken from seeded shuffles of `kinds` in turn so
    that every kind appears once before any appears twice."""
    if not kinds:
        return []
    for kind in kinds:
        if kind not in HOLD_RANGES_S:
            raise ValueError(f"unknown fault kind {kind!r}")
    rng = random.Random(seed)
    faults: list[FaultSpec] = []
    bag: list[str] = []
    t = WARMUP_S
    while True:
        if not bag:
            bag = list(kinds)
            rng.shuffle(bag)
        kind = bag[0]
        low, high = HOLD_RANGES_S[kind]
        hold = round(rng.uniform(low, high), 1)
        gap = round(rng.uniform(*GAP_RANGE_S), 1)
        pick = rng.randrange(2**31)
        if t + hold + RECOVERY_ALLOWANCE_S > duration_s - COOLDOWN_S:
            return faults
        bag.pop(0)
        faults.append(FaultSpec(len(faults), kind, round(t, 1), hold, pick))
        t += hold + RECOVERY_ALLOWANCE_S + gap
