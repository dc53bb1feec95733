"""Request handlers, one module per API family; importing a module registers its handlers.

Later layers add their modules to `HANDLER_MODULES` (e.g. `groups`); `load_handlers()` is
idempotent and called once by the broker at start-up.

`CONTROLLER_HANDLER_MODULES` hold the controller-listener handlers (`@controller_handler`, cluster
mode: Raft's quorum APIs, the broker-to-controller RPCs). They are written by different parts of
the cluster work and may land at different times, so a module that does not exist yet is skipped
(logged at debug level) instead of breaking start-up; an import error *inside* a module that does
exist still propagates.
"""

from __future__ import annotations

import importlib
import logging

__all__ = ["CONTROLLER_HANDLER_MODULES", "HANDLER_MODULES", "load_handlers"]

log = logging.getLogger(__name__)

HANDLER_MODULES: list[str] = [
    "api_versions",
    "metadata",
    "produce",
    "fetch",
    "list_offsets",
    "offset_for_leader_epoch",
    "topics",
    "configs",
    "describe_cluster",
    "describe_topic_partitions",
    "describe_quorum",
    "log_dirs",
    "acls",
    "producer_ids",
    "elections",
    "reassignments",
    "groups",
    "group_offsets",
    "consumer_groups",
    "transactions",
    "sasl",
    "scram_credentials",
]

CONTROLLER_HANDLER_MODULES: list[str] = [
    "quorum",
    "controller_apis",
]


def load_handlers() -> None:
    for name in HANDLER_MODULES:
        importlib.import_module(f"{__name__}.{name}")
    importlib.import_module(f"{__name__}.registry")  # the controller listener's ApiVersions
    for name in CONTROLLER_HANDLER_MODULES:
        module = f"{__name__}.{name}"
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            log.debug("controller handler module %s not present", module)
