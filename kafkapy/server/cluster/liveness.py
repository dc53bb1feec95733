"""GoneDetector: the active controller fences a crashed broker as soon as it can prove the
process is gone, instead of after `broker.session.timeout.ms` (9 s by default; beyond Kafka).

Why: a partition whose leader (or, with acks=all, a follower) died is unavailable until the
controller fences the dead broker. Kafka waits for the session to lapse. But a crashed process
leaves positive evidence behind: its host's kernel refuses connections to its ports. A frozen
process (SIGSTOP) or a cut-off host leaves none - connections time out, or are even accepted -
so those stay bounded by the session timeout, as in Kafka.

The rule: a broker is fenced early only when *every* address it must be listening on refuses a
TCP connection from the controller: its inter-broker listener (from its registration) and, for a
voter, its controller listener. A live kafkapy process keeps both open for its whole life; a
broker restarting on the same ports accepts again, and then replaces its old incarnation by
registering (lifecycle.py). Slowness never fences: a probe that times out is no evidence. (A
firewall that *rejects* the controller's connections to both ports, rather than dropping them,
looks the same as a dead process; one that drops them, as `kafkapy chaos` does, does not.)

When a probe runs (a "suspicion"):
- some node's request to the broker failed with a refused/reset/closed connection
  (`PeerPool.on_gone`: replica fetchers, Raft, the controller channel); brokers report theirs in
  their next heartbeat, sent at once (`SUSPECTS_TAG`), the controller's own node directly;
- the broker's heartbeat is overdue (no contact for a heartbeat interval plus a second);
- a controller takes over: every active broker is probed once (the old controller's node may
  be the one that died, and the new controller starts every session afresh).
Probes of one broker are at least `_PROBE_EVERY_S` apart.

Resource handling: `run()` owns the probe tasks (its nursery) and is run by the ControllerDriver.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from kafkapy.broker.controller_tags import SUSPECTS_TAG, decode_suspects, encode_suspects
from kafkapy.server.cluster.peer import is_gone_error

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from kafkapy.broker.config import ClusterConfig
    from kafkapy.controller.controller import QuorumController
    from kafkapy.controller.image import BrokerRegistration

__all__ = ["SUSPECTS_TAG", "GoneDetector", "decode_suspects", "encode_suspects"]

log = logging.getLogger(__name__)

_PROBE_TIMEOUT_S = 1.0
_PROBE_EVERY_S = 1.0
_CHECK_S = 0.25
#: a heartbeat this much later than its interval makes the controller look
_OVERDUE_SLACK_MS = 1000




async def _refuses(host: str, port: int) -> bool:
    """True only when a connection to host:port is refused (a timeout or success: False)."""
    with trio.move_on_after(_PROBE_TIMEOUT_S):
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            return is_gone_error(exc)
        await trio.aclose_forcefully(stream)
    return False


class GoneDetector:
    """See the module docstring."""

    def __init__(
        self,
        cluster_config: ClusterConfig,
        *,
        active: Callable[[], QuorumController | None],
        fence_gone: Callable[[int, int], Awaitable[bool]],
    ) -> None:
        """`active()`: the controller while this node is the active one (the driver's);
        `fence_gone(node_id, epoch)`: commit the fencing, False if it was not done (no longer
        the active controller, or that registration is not the active one any more)."""
        self._active = active
        self._fence_gone = fence_gone
        self.cluster_config = cluster_config
        self.node_id = cluster_config.node_id
        self.heartbeat_interval_ms = max(self.cluster_config.heartbeat_interval_ms, 10)
        self._last_probe: dict[int, float] = {}
        self._probing: set[int] = set()
        self._seen_controller: QuorumController | None = None
        self._nursery: trio.Nursery | None = None
        #: brokers fenced early so far (figures for tests and benchmarks)
        self.fenced_early = 0

    def suspect(self, node_id: int, reason: str) -> None:
        """Probe `node_id` soon if it is an active broker (see the module docstring)."""
        controller = self._active()
        if controller is None or self._nursery is None or node_id == self.node_id:
            return
        registration = controller.image.brokers.get(node_id)
        if registration is None or registration.fenced or node_id in self._probing:
            return
        now = trio.current_time()
        if now - self._last_probe.get(node_id, -_PROBE_EVERY_S) < _PROBE_EVERY_S:
            return
        self._last_probe[node_id] = now
        self._probing.add(node_id)
        self._nursery.start_soon(self._probe, node_id, registration.epoch, reason)

    def _addresses(self, node_id: int, registration: BrokerRegistration) -> list[tuple[str, int]]:
        name = self.cluster_config.inter_broker_listener_name
        endpoints = [e for e in registration.endpoints if e.name == name] or list(registration.endpoints)
        out = [(str(e.host), int(e.port)) for e in endpoints]
        voter = self.cluster_config.voters.get(node_id)
        if voter is not None:
            out.append(voter)
        return out

    async def _probe(self, node_id: int, epoch: int, reason: str) -> None:
        try:
            controller = self._active()
            registration = controller.image.brokers.get(node_id) if controller else None
            if registration is None or registration.epoch != epoch:
                return
            addresses = self._addresses(node_id, registration)
            refused = [await _refuses(host, port) for host, port in addresses]
            if not addresses or not all(refused):
                return
            if await self._fence_gone(node_id, epoch):
                self.fenced_early += 1
                log.warning(
                    "fenced broker %d (epoch %d) before its session expired: %s, and %s refuse "
                    "connections (its process is gone)",
                    node_id,
                    epoch,
                    reason,
                    ", ".join(f"{h}:{p}" for h, p in addresses),
                )
        finally:
            self._probing.discard(node_id)

    def _check(self) -> None:
        """Suspect every active broker after a takeover, and brokers whose heartbeat is late."""
        controller = self._active()
        if controller is None:
            self._seen_controller = None
            return
        takeover = controller is not self._seen_controller
        self._seen_controller = controller
        now_ms = int(trio.current_time() * 1000)
        for registration in list(controller.image.brokers.values()):
            if registration.fenced:
                continue
            if takeover:
                self.suspect(registration.id, "a new controller took over")
                continue
            last = controller.last_contact_ms(registration.id)
            if last is not None and now_ms - last > self.heartbeat_interval_ms + _OVERDUE_SLACK_MS:
                self.suspect(registration.id, f"no heartbeat for {(now_ms - last) / 1000:.1f} s")

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                while True:
                    self._check()
                    await trio.sleep(_CHECK_S)
            finally:
                self._nursery = None
