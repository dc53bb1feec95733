"""Request handlers, one module per API family; importing a module registers its handlers.

`load_handlers()` imports every handler module (the client APIs, then the controller listener's
`@controller_handler` ones: Raft's quorum APIs and the broker-to-controller RPCs); it is
idempotent and called once by the Server at start-up. A new handler module is added to its
import list here. The imports are inside the function so that importing one handler module (or
the registry) does not import them all.
"""

from __future__ import annotations

__all__ = ["load_handlers"]


def load_handlers() -> None:
    from kafkapy.broker.handlers import (  # noqa: F401  (imported to register their handlers)
        acls,
        allocate_producer_ids,
        alter_partition,
        api_versions,
        broker_lifecycle,
        client_quotas,
        configs,
        consumer_groups,
        describe_cluster,
        describe_producers,
        describe_quorum,
        describe_topic_partitions,
        elections,
        fetch,
        group_offsets,
        groups,
        list_offsets,
        log_dirs,
        metadata,
        offset_for_leader_epoch,
        produce,
        quorum,
        reassignments,
        registry,
        sasl,
        scram_credentials,
        topics,
        transactions,
    )
