"""What every controller-listener handler shares: run a QuorumController operation on the
active controller and wait for its commit, or learn that this node is not the active controller
(the handler then answers NOT_CONTROLLER where its response has a code, and the sending broker's
ControllerChannel retries against the new leader).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TypeVar

from kafkapy.broker.context import RequestContext
from kafkapy.broker.errors import NotControllerError
from kafkapy.broker.request_ports import ActiveController
from kafkapy.controller.controller import (
    ControllerResult,
    QuorumController,
)

__all__ = [
    "MAX_ADMIN_COMMIT_WAIT_S",
    "ZERO_UUID",
    "controller_of",
    "has_quorum_contact",
    "log_limit_refusals",
    "run_on_controller",
]

T = TypeVar("T")
ZERO_UUID = uuid.UUID(int=0)

log = logging.getLogger(__name__)


def controller_of(ctx: RequestContext) -> ActiveController | None:
    """The active controller's driver when this node runs one (None on a broker-only node)."""
    return ctx.active_controller


def has_quorum_contact(driver: ActiveController | None) -> bool:
    """Does this node's Raft leadership still hold (`RaftDriver.has_quorum_contact`)?"""
    return driver is None or driver.raft.has_quorum_contact()


#: the longest commit wait an admin request's `timeout_ms` may ask for
MAX_ADMIN_COMMIT_WAIT_S = 60.0


async def run_on_controller(
    ctx: RequestContext,
    op: Callable[[QuorumController], ControllerResult[T]],
    *,
    timeout_ms: int | None = None,
) -> tuple[T, int] | None:
    """(response, committed offset), or None when this node is not the active controller.
    `timeout_ms`: an admin request's own timeout, which bounds the wait for the commit (see
    `ControllerDriver.submit_with_offset`)."""
    driver = controller_of(ctx)
    if driver is None:
        return None
    ctx.release_turn()
    wait_s = None if timeout_ms is None else min(max(timeout_ms, 0) / 1000, MAX_ADMIN_COMMIT_WAIT_S)
    try:
        return await driver.submit_with_offset(op, commit_timeout_s=wait_s)
    except NotControllerError:
        return None


def log_limit_refusals(ctx: RequestContext, api: str, answers: list[tuple[str, str | None]]) -> None:
    """WARNING for the topics refused by the per-request partition limit (one line a request).
    Broker registration runs through this module at start; the controller's topic decisions
    load only with the topic handlers that call this."""
    from kafkapy.controller.topics import is_partition_limit_refusal

    refused = [name for name, message in answers if is_partition_limit_refusal(message)]
    if refused:
        message = next(m for _, m in answers if is_partition_limit_refusal(m))
        log.warning(
            "refused %s of %s forwarded by %s: %s", api, ", ".join(refused), ctx.connection.peer, message
        )
