"""`controller_mutation_rate` (KIP-599) for CreateTopics, CreatePartitions and DeleteTopics.

Kafka's rules: each topic costs its partitions (created, added or deleted) from the client's
token bucket (`kafkapy.quota`). A strict request version (CreateTopics v6+, CreatePartitions v3+,
DeleteTopics v5+) refuses, with THROTTLING_QUOTA_EXCEEDED, every topic met while the bucket is
already below zero - so one request may take it below zero, and the next waits; older versions
are never refused, only throttled. The response's throttle_time_ms is the time until the bucket
is back at zero, and the connection is muted for it (KIP-219). The bucket is the receiving
broker's (Kafka meters on its controller); validate_only requests are checked, not charged.
"""

from __future__ import annotations

from collections.abc import Iterable

from kafkapy.broker.clock import quota_ms
from kafkapy.broker.context import RequestContext
from kafkapy.protocol import ApiKey
from kafkapy.protocol.errors import ErrorCode
from kafkapy.quota.client_quotas import CONTROLLER_MUTATION_RATE

__all__ = ["STRICT_FROM", "THROTTLED_MESSAGE", "THROTTLING", "charge_mutations"]

THROTTLING = ErrorCode.THROTTLING_QUOTA_EXCEEDED
THROTTLED_MESSAGE = "The throttling quota has been exceeded."
#: the first version of each API whose topics are refused (not only throttled) over the quota
STRICT_FROM = {ApiKey.CREATE_TOPICS: 6, ApiKey.CREATE_PARTITIONS: 3, ApiKey.DELETE_TOPICS: 5}


def charge_mutations(
    ctx: RequestContext, costs: Iterable[tuple[str, int]], *, validate_only: bool = False
) -> set[str]:
    """Charge each (topic, partitions) in request order; the topics refused. Sets
    `ctx.throttle_ms` (the caller puts it in the response). Nothing to do - and no work - when
    no mutation quota is configured."""
    quotas = ctx.quotas
    if not quotas.enabled(CONTROLLER_MUTATION_RATE):
        return set()
    user, client_id, now = ctx.user, ctx.header.client_id or "", quota_ms()
    strict = ctx.api_version >= STRICT_FROM[ApiKey(ctx.header.api_key)]
    refused: set[str] = set()
    for name, partitions in costs:
        if strict and quotas.mutation_throttle_ms(user, client_id, now) > 0:
            refused.add(name)
        elif not validate_only:
            quotas.record_mutations(user, client_id, partitions, now)
    ctx.throttle_ms = max(ctx.throttle_ms, quotas.mutation_throttle_ms(user, client_id, now))
    return refused
