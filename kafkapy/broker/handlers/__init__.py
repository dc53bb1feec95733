"""Request handlers, one module per API family; importing a module registers its handlers.

Which module serves which API, and the version range ApiVersions advertises for it, is a static
table here (`BROKER_HANDLERS` for the broker listeners, `CONTROLLER_HANDLERS` for the controller
listener). Why a table rather than importing every module at start: a handler module and the
API message classes it needs cost milliseconds each to import, ~0.1 s for all of them, and a
broker (or a test) often serves a handful of APIs; `registry.lookup` imports the module of an
API on its first request (a few ms on the event loop, once). ApiVersions is answered from the
table without importing anything.

A handler module still declares its range with `@handler`; registering checks it against the
table, so the two cannot drift (a test loads every module). A new handler module is added to the
table here. `load_handlers()` imports every module in the table (idempotent): tests that walk
the registries call it.
"""

from __future__ import annotations

import importlib
from typing import NamedTuple

from kafkapy.protocol.api_keys import ApiKey

__all__ = ["BROKER_HANDLERS", "CONTROLLER_HANDLERS", "HandlerEntry", "load_handlers"]


class HandlerEntry(NamedTuple):
    """Where an API's handler lives and the versions it serves (clamped to the codec's)."""

    module: str
    min_version: int
    max_version: int


_E = HandlerEntry
BROKER_HANDLERS: dict[int, HandlerEntry] = {
    ApiKey.PRODUCE: _E("produce", 0, 11),
    ApiKey.FETCH: _E("fetch", 4, 17),
    ApiKey.LIST_OFFSETS: _E("list_offsets", 1, 10),
    ApiKey.METADATA: _E("metadata", 0, 12),
    ApiKey.OFFSET_COMMIT: _E("group_offsets", 0, 9),
    ApiKey.OFFSET_FETCH: _E("group_offsets", 0, 9),
    ApiKey.FIND_COORDINATOR: _E("groups", 0, 6),
    ApiKey.JOIN_GROUP: _E("groups", 0, 9),
    ApiKey.HEARTBEAT: _E("groups", 0, 4),
    ApiKey.LEAVE_GROUP: _E("groups", 0, 5),
    ApiKey.SYNC_GROUP: _E("groups", 0, 5),
    ApiKey.DESCRIBE_GROUPS: _E("groups", 0, 5),
    ApiKey.LIST_GROUPS: _E("groups", 0, 5),
    ApiKey.SASL_HANDSHAKE: _E("sasl", 0, 1),
    ApiKey.API_VERSIONS: _E("api_versions", 0, 4),
    ApiKey.CREATE_TOPICS: _E("topics", 2, 7),
    ApiKey.DELETE_TOPICS: _E("topics", 1, 6),
    ApiKey.DELETE_RECORDS: _E("topics", 0, 2),
    ApiKey.INIT_PRODUCER_ID: _E("transactions", 0, 5),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _E("offset_for_leader_epoch", 0, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: _E("transactions", 0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: _E("transactions", 0, 4),
    ApiKey.END_TXN: _E("transactions", 0, 5),
    ApiKey.WRITE_TXN_MARKERS: _E("transactions", 0, 1),
    ApiKey.TXN_OFFSET_COMMIT: _E("group_offsets", 0, 4),
    ApiKey.DESCRIBE_ACLS: _E("acls", 1, 3),
    ApiKey.CREATE_ACLS: _E("acls", 1, 3),
    ApiKey.DELETE_ACLS: _E("acls", 1, 3),
    ApiKey.DESCRIBE_CONFIGS: _E("configs", 0, 4),
    ApiKey.ALTER_CONFIGS: _E("configs", 0, 2),
    ApiKey.ALTER_REPLICA_LOG_DIRS: _E("log_dirs", 1, 2),
    ApiKey.DESCRIBE_LOG_DIRS: _E("log_dirs", 1, 4),
    ApiKey.SASL_AUTHENTICATE: _E("sasl", 0, 2),
    ApiKey.CREATE_PARTITIONS: _E("topics", 0, 3),
    ApiKey.DELETE_GROUPS: _E("groups", 0, 2),
    ApiKey.ELECT_LEADERS: _E("elections", 0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _E("configs", 0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _E("reassignments", 0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _E("reassignments", 0, 0),
    ApiKey.OFFSET_DELETE: _E("group_offsets", 0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _E("client_quotas", 0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: _E("client_quotas", 0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _E("scram_credentials", 0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _E("scram_credentials", 0, 0),
    ApiKey.DESCRIBE_QUORUM: _E("describe_quorum", 0, 2),
    ApiKey.DESCRIBE_CLUSTER: _E("describe_cluster", 0, 1),
    ApiKey.DESCRIBE_PRODUCERS: _E("describe_producers", 0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: _E("transactions", 0, 0),
    ApiKey.LIST_TRANSACTIONS: _E("transactions", 0, 1),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _E("consumer_groups", 0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _E("consumer_groups", 0, 0),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _E("describe_topic_partitions", 0, 0),
}
"""The broker listeners' APIs: what ApiVersions lists there, and each handler's module."""

CONTROLLER_HANDLERS: dict[int, HandlerEntry] = {
    ApiKey.FETCH: _E("quorum", 12, 17),
    ApiKey.API_VERSIONS: _E("api_versions", 0, 4),
    ApiKey.CREATE_TOPICS: _E("topics", 2, 7),
    ApiKey.DELETE_TOPICS: _E("topics", 1, 6),
    ApiKey.CREATE_ACLS: _E("acls", 1, 3),
    ApiKey.DELETE_ACLS: _E("acls", 1, 3),
    ApiKey.CREATE_PARTITIONS: _E("topics", 0, 3),
    ApiKey.ELECT_LEADERS: _E("elections", 0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _E("configs", 0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _E("reassignments", 0, 0),
    ApiKey.ALTER_CLIENT_QUOTAS: _E("client_quotas", 0, 1),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _E("scram_credentials", 0, 0),
    ApiKey.VOTE: _E("quorum", 0, 1),
    ApiKey.BEGIN_QUORUM_EPOCH: _E("quorum", 0, 1),
    ApiKey.END_QUORUM_EPOCH: _E("quorum", 0, 1),
    ApiKey.DESCRIBE_QUORUM: _E("quorum", 0, 2),
    ApiKey.ALTER_PARTITION: _E("alter_partition", 0, 3),
    ApiKey.FETCH_SNAPSHOT: _E("quorum", 0, 1),
    ApiKey.BROKER_REGISTRATION: _E("broker_lifecycle", 0, 4),
    ApiKey.BROKER_HEARTBEAT: _E("broker_lifecycle", 0, 1),
    ApiKey.ALLOCATE_PRODUCER_IDS: _E("allocate_producer_ids", 0, 0),
}
"""The controller listener's APIs (Raft's quorum RPCs, the broker-to-controller RPCs and the
admin APIs a controller answers), likewise."""


def import_handler_module(module: str) -> None:
    """Import one handler module by its name in the tables (which registers its handlers)."""
    importlib.import_module(f"{__name__}.{module}")


def load_handlers() -> None:
    """Import every handler module in the tables, so both registries are complete."""
    for entry in (*BROKER_HANDLERS.values(), *CONTROLLER_HANDLERS.values()):
        import_handler_module(entry.module)
