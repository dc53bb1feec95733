"""A QuorumController plus a replica that replays every emitted record through the wire codec,
so each test also checks "replay(records) of a fresh image == the controller's image"."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import TypeVar

from kafkapy.controller.controller import (
    ControllerConfig,
    ControllerResult,
    HeartbeatReply,
    QuorumController,
)
from kafkapy.controller.image import MetadataDelta, MetadataImage
from kafkapy.controller.records import Endpoint, decode_record, encode_record
from kafkapy.protocol.errors import ErrorCode

T = TypeVar("T")

CLUSTER_ID = "test-cluster"


class Cluster:
    def __init__(self, config: ControllerConfig | None = None, seed: int = 1) -> None:
        cfg = config if config is not None else ControllerConfig(cluster_id=CLUSTER_ID)
        self.ctl = QuorumController(cfg, MetadataImage(), rng=random.Random(seed))
        self.replica = MetadataImage()
        self.now_ms = 0
        self.epochs: dict[int, int] = {}
        self.incarnations: dict[int, uuid.UUID] = {}
        self.last_delta = MetadataDelta()

    def run(self, result: ControllerResult[T]) -> T:
        """Commit `result`'s records to the replica (via bytes) and check both images agree."""
        delta = MetadataDelta()
        for record in result.records:
            decoded = decode_record(encode_record(record))
            self.replica.apply(decoded, self.replica.offset + 1, delta)
        self.last_delta = delta
        assert self.replica == self.ctl.image
        return result.response

    def register(
        self, broker_id: int, *, incarnation: uuid.UUID | None = None, rack: str | None = None
    ) -> int:
        inc = incarnation if incarnation is not None else uuid.uuid4()
        reply = self.run(
            self.ctl.register_broker(
                broker_id,
                cluster_id=CLUSTER_ID,
                incarnation_id=inc,
                endpoints=[Endpoint("PLAINTEXT", "127.0.0.1", 9000 + broker_id)],
                rack=rack,
                now_ms=self.now_ms,
            )
        )
        assert reply.error is ErrorCode.NONE, reply
        self.epochs[broker_id] = reply.broker_epoch
        self.incarnations[broker_id] = inc
        return reply.broker_epoch

    def heartbeat(
        self,
        broker_id: int,
        *,
        offset: int | None = None,
        want_fence: bool = False,
        want_shutdown: bool = False,
    ) -> HeartbeatReply:
        return self.run(
            self.ctl.broker_heartbeat(
                broker_id,
                self.epochs[broker_id],
                current_metadata_offset=self.replica.offset if offset is None else offset,
                want_fence=want_fence,
                want_shutdown=want_shutdown,
                now_ms=self.now_ms,
            )
        )

    def start(self, *broker_ids: int) -> None:
        """Register and unfence brokers."""
        for b in broker_ids:
            self.register(b)
        for b in broker_ids:
            reply = self.heartbeat(b)
            assert not reply.is_fenced

    def start_racks(self, racks: Mapping[int, str | None]) -> None:
        """Register (with `broker.rack`) and unfence brokers."""
        for b, rack in racks.items():
            self.register(b, rack=rack)
        for b in racks:
            assert not self.heartbeat(b).is_fenced

    def advance(self, ms: int) -> list[int]:
        """Move the clock, heartbeat nobody, tick: the ids fenced by expiry."""
        self.now_ms += ms
        return self.run(self.ctl.tick(self.now_ms))

    def keep_alive(self, *broker_ids: int) -> None:
        for b in broker_ids:
            self.heartbeat(b)
