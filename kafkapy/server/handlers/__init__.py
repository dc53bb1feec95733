"""Request handlers, one module per API family; importing a module registers its handlers.

Later layers add their modules to `HANDLER_MODULES` (e.g. `groups`); `load_handlers()` is
idempotent and called once by the broker at start-up.
"""

from __future__ import annotations

import importlib

__all__ = ["HANDLER_MODULES", "load_handlers"]

HANDLER_MODULES: list[str] = [
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "offset_for_leader_epoch",
    "topics",
    "configs",
    "cluster",
    "acls",
    "producer_ids",
    "groups",
    "group_offsets",
    "transactions",
]


def load_handlers() -> None:
    for name in HANDLER_MODULES:
        importlib.import_module(f"{__name__}.{name}")
