"""The client workloads of a chaos run, each a thread driving a confluent-kafka client.

confluent-kafka (librdkafka) because it is what most non-JVM users run and its calls all take
timeouts: every blocking call here is bounded, so a client stuck on a dead or paused broker
cannot hang the run (`stop()` joins with a timeout and the threads are daemons).

- `ProducerWorkload`: values 0, 1, 2, ... to partition `value % partitions`; the idempotent
  acks=all producer and the acks=1 producer (counted apart) are two of these.
- `TxnProcessor`: read-process-write; reads the idempotent topic (read_committed), writes
  `"<txn>:<value>"` to the output topic and commits its input offsets in the same
  transaction. An abortable error aborts and rewinds to the committed offsets; a transaction
  whose end is not known ("unknown") is followed by a new producer (its InitProducerId
  fences the old one and settles the transaction) and a rewind; the consumer stays in the
  group, so no rebalance. Only a fatal consumer error replaces the consumer.
- `GroupMember`: a member of a consumer group that commits synchronously after processing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

from kafkapy.chaos.history import (
    GROUP_CONSUMERS,
    GROUP_TXN,
    TOPIC_IDEMPOTENT,
    TOPIC_TXN_OUT,
    TXN,
    Ack,
    Commit,
    History,
    Processed,
    Resume,
    Send,
    TxnOutcome,
)

__all__ = ["GroupMember", "ProducerWorkload", "TxnProcessor", "Workload"]

#: bound of every blocking client call
CALL_TIMEOUT_S = 30.0
JOIN_TIMEOUT_S = 45.0
#: a call slower than this is counted as a client error (what stalled a workload)
SLOW_CALL_S = 5.0
#: how long past its own timeout a librdkafka call that may ignore it is waited for
HUNG_SLACK_S = 5.0


class Workload(threading.Thread):
    """A daemon thread with a stop flag; `run_workload` does the work, exceptions are counted
    as client errors instead of ending the run."""

    def __init__(self, name: str, history: History, clock: Callable[[], float]) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.workload = name
        self.history = history
        self.clock = clock
        self.stopping = threading.Event()

    def run(self) -> None:
        try:
            self.run_workload()
        except Exception as e:  # a client crash is a finding, not the end of the run
            self.history.client_error(self.workload, f"workload thread ended: {e!r}")

    def run_workload(self) -> None:
        raise NotImplementedError

    def stop(self) -> bool:
        """Ask the thread to finish and wait (bounded); False if it is still running."""
        self.stopping.set()
        self.join(JOIN_TIMEOUT_S)
        return not self.is_alive()


class ProducerWorkload(Workload):
    """Numbered values at `rate_per_s` (see the module doc)."""

    def __init__(
        self,
        name: str,
        history: History,
        clock: Callable[[], float],
        *,
        bootstrap: str,
        topic: str,
        partitions: int,
        config: dict[str, Any],
        rate_per_s: float,
    ) -> None:
        super().__init__(name, history, clock)
        self.topic = topic
        self.partitions = partitions
        self.interval = 1.0 / rate_per_s
        self.producer = Producer({"bootstrap.servers": bootstrap, **config})

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        value = int(msg.value() or b"-1")
        partition = msg.partition() or 0
        if err is None:
            # confluent-kafka gives None for an unknown offset (librdkafka reports a batch as
            # written without one when a later batch of the idempotent producer is acknowledged)
            offset = msg.offset()
            self.history.add(Ack(self.workload, value, partition, self.clock(), offset=-1 if offset is None else offset))
        else:
            self.history.add(Ack(self.workload, value, partition, self.clock(), error=str(err)))

    def run_workload(self) -> None:
        value = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            partition = value % self.partitions
            try:
                self.producer.produce(self.topic, str(value).encode(), partition=partition, on_delivery=self._delivered)
            except BufferError:
                self.producer.poll(0.1)
                continue
            except KafkaException as e:
                self.history.client_error(self.workload, e)
                self.producer.poll(0.1)
                continue
            self.history.add(Send(self.workload, value, partition, self.clock()))
            value += 1
            next_at += self.interval
            self.producer.poll(max(0.0, next_at - time.monotonic()))
            next_at = max(next_at, time.monotonic() - 1.0)
        self.producer.flush(CALL_TIMEOUT_S)


def _error(e: KafkaException) -> KafkaError:
    err = e.args[0] if e.args else None
    return err if isinstance(err, KafkaError) else KafkaError(KafkaError._FAIL, str(e))


class _Renew(Exception):
    """The transactional producer must be replaced (and the consumer rewound)."""


class _Hung(Exception):
    """A librdkafka call did not return within its timeout plus `HUNG_SLACK_S`."""


def _bounded(call: Callable[[], object], what: str, timeout_s: float) -> None:
    """Run `call` in a helper thread and give up on it after `timeout_s` (raise `_Hung`).

    Why: librdkafka's send_offsets_to_transaction ignores its timeout (librdkafka issue 5456)
    and waits forever when the group coordinator it cached was a broker that has left the
    metadata - a killed one (issue 5511; Kafka leaves dead brokers out of Metadata too). Seed 7
    runs had the processor stuck in it for 450 s and past the end of the run. The abandoned
    call keeps its producer alive (the thread holds it) until it returns, if ever; the caller
    replaces the producer, whose InitProducerId fences the old one."""
    done = threading.Event()
    failed: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as e:  # handed to the caller's thread
            failed.append(e)
        finally:
            done.set()

    threading.Thread(target=run, name=f"chaos-txn-{what}", daemon=True).start()
    if not done.wait(timeout_s):
        raise _Hung(what)
    if failed:
        raise failed[0]


def _close_producer(producer: Producer) -> None:
    """Let a producer go whatever state it is in (a fenced producer raises on flush)."""
    with contextlib.suppress(Exception):
        producer.flush(5)


class TxnProcessor(Workload):
    """Transactional read-process-write (see the module doc)."""

    def __init__(
        self,
        history: History,
        clock: Callable[[], float],
        *,
        bootstrap: str,
        extra: dict[str, Any],
        transaction_timeout_ms: int = 15000,
    ) -> None:
        super().__init__(TXN, history, clock)
        self.bootstrap = bootstrap
        self.extra = extra
        self.transaction_timeout_ms = transaction_timeout_ms
        self.txn_no = 0
        self.generation = 0

    def _producer(self) -> Producer:
        return Producer({
            "bootstrap.servers": self.bootstrap,
            "transactional.id": "chaos-txn-processor",
            "transaction.timeout.ms": self.transaction_timeout_ms,
            "enable.idempotence": True, "acks": "all", "linger.ms": 5, **self.extra,
        })

    def _consumer(self) -> Consumer:
        self.generation += 1
        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": GROUP_TXN,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "client.id": f"chaos-txn-{self.generation}", **self.extra,
        })
        consumer.subscribe([TOPIC_IDEMPOTENT])
        return consumer

    def run_workload(self) -> None:
        producer, consumer = self._producer(), self._consumer()
        ready, rewound = False, True
        try:
            while not self.stopping.is_set():
                try:
                    if not ready:
                        ready = self._init(producer)
                    elif not rewound:
                        rewound = self._rewind(consumer)
                    else:
                        msgs = [m for m in consumer.consume(200, 0.5) if m.error() is None]
                        if msgs and not self._transaction(producer, consumer, msgs):
                            raise _Renew()
                except _Renew:
                    # the consumer stays in the group (no rebalance); it starts again from the
                    # committed offsets once the new producer has settled the open transaction
                    _close_producer(producer)
                    producer, ready, rewound = self._producer(), False, False
                except KafkaException as e:
                    self.history.client_error(self.workload, f"{'consume' if ready else 'init_transactions'}: {_error(e)}")
                    _close_producer(producer)
                    with contextlib.suppress(Exception):
                        consumer.close()
                    time.sleep(0.5)
                    producer, consumer, ready, rewound = self._producer(), self._consumer(), False, True
        finally:
            if not ready:  # settle a transaction left open by the producer replaced last
                with contextlib.suppress(KafkaException):
                    self._init(producer)
            _close_producer(producer)
            with contextlib.suppress(Exception):
                consumer.close()

    def _init(self, producer: Producer) -> bool:
        """InitProducerId (it fences an earlier producer and settles its open transaction); a
        retriable failure (a timeout, no coordinator yet) is retried with the same producer, as
        librdkafka asks. A fatal one raises."""
        try:
            producer.init_transactions(CALL_TIMEOUT_S)
            return True
        except KafkaException as e:
            if _error(e).fatal():
                raise
            self.history.client_error(self.workload, f"init_transactions: {_error(e)}")
            return False

    def _rewind(self, consumer: Consumer) -> bool:
        """Seek every assigned partition back to the group's committed offset (after an abort
        or a transaction of unknown end); False if that could not be done now."""
        try:
            assigned = consumer.assignment()
            for tp in consumer.committed(assigned, CALL_TIMEOUT_S) if assigned else []:
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))
                if tp.offset >= 0:
                    self.history.add(Resume(self.workload, tp.partition, tp.offset, self.clock(), group=GROUP_TXN))
        except KafkaException as e:
            self.history.client_error(self.workload, f"rewind: {_error(e)}")
            return False
        return True

    def _transaction(self, producer: Producer, consumer: Consumer, msgs: list[Message]) -> bool:
        """One transaction over `msgs`; False when the clients must be replaced."""
        self.txn_no += 1
        txn = self.txn_no
        values = tuple(int(m.value() or b"-1") for m in msgs)
        try:
            producer.begin_transaction()
            for m, value in zip(msgs, values, strict=True):
                producer.produce(TOPIC_TXN_OUT, f"{txn}:{value}".encode(), partition=m.partition() or 0)
            positions = consumer.position(consumer.assignment())
            metadata = consumer.consumer_group_metadata()
            # no longer than the transaction may stay open: the coordinator aborts it then
            offsets_timeout_s = min(CALL_TIMEOUT_S, self.transaction_timeout_ms / 1000)
            _bounded(
                lambda: producer.send_offsets_to_transaction(positions, metadata, offsets_timeout_s),
                "send_offsets_to_transaction", offsets_timeout_s + HUNG_SLACK_S,
            )
            outcome = self._commit(producer, consumer, txn, values)
            if outcome != "committed":
                # an abort that rewound goes on with these clients; its offsets were not committed
                return outcome == "aborted"
            now = self.clock()
            for tp in positions:
                if tp.offset >= 0:
                    self.history.add(Commit(self.workload, tp.partition, tp.offset, now, group=GROUP_TXN))
            return True
        except _Hung as e:
            self.history.client_error(self.workload, f"{e} did not return within its timeout")
            self.history.add(TxnOutcome(txn, "unknown", values, self.clock()))
            return False
        except KafkaException as e:
            err = _error(e)
            self.history.client_error(self.workload, f"transaction: {err}")
            if err.txn_requires_abort():
                return self._abort(producer, consumer, txn, values)
            self.history.add(TxnOutcome(txn, "unknown", values, self.clock()))
            return False

    def _commit(self, producer: Producer, consumer: Consumer, txn: int, values: tuple[int, ...]) -> str:
        """"committed"; "aborted" (an abortable error: aborted and rewound); "failed" (the end is
        unknown, or the abort or the rewind failed: the clients must be replaced). A retriable
        failure is retried (up to 5 tries of CALL_TIMEOUT_S) only while the run goes on: once
        `stop()` was asked, the thread must end within JOIN_TIMEOUT_S."""
        for attempt in range(5):
            if attempt and self.stopping.is_set():
                break
            try:
                producer.commit_transaction(CALL_TIMEOUT_S)
                self.history.add(TxnOutcome(txn, "committed", values, self.clock()))
                return "committed"
            except KafkaException as e:
                err = _error(e)
                self.history.client_error(self.workload, f"commit_transaction: {err}")
                if err.retriable():
                    continue
                if err.txn_requires_abort():
                    return "aborted" if self._abort(producer, consumer, txn, values) else "failed"
                break
        self.history.add(TxnOutcome(txn, "unknown", values, self.clock()))
        return "failed"

    def _abort(self, producer: Producer, consumer: Consumer, txn: int, values: tuple[int, ...]) -> bool:
        try:
            producer.abort_transaction(CALL_TIMEOUT_S)
        except KafkaException as e:
            self.history.client_error(self.workload, f"abort_transaction: {_error(e)}")
            self.history.add(TxnOutcome(txn, "unknown", values, self.clock()))
            return False
        self.history.add(TxnOutcome(txn, "aborted", values, self.clock()))
        return self._rewind(consumer)


class GroupMember(Workload):
    """One member of the commit-after-processing group (see the module doc)."""

    def __init__(
        self,
        name: str,
        history: History,
        clock: Callable[[], float],
        *,
        bootstrap: str,
        extra: dict[str, Any],
        commit_every_s: float = 0.5,
    ) -> None:
        super().__init__(name, history, clock)
        self.commit_every_s = commit_every_s
        self.fresh: dict[int, float] = {}
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": GROUP_CONSUMERS, "client.id": name,
            "enable.auto.commit": False, "auto.offset.reset": "earliest", **extra,
        })

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        now = self.clock()
        for tp in partitions:
            self.fresh[tp.partition] = now

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._commit()
        for tp in partitions:
            self.fresh.pop(tp.partition, None)

    def _commit(self) -> None:
        started = self.clock()
        try:
            committed = self.consumer.commit(asynchronous=False)
        except KafkaException as e:
            if _error(e).code() != KafkaError._NO_OFFSET:
                self.history.client_error(self.workload, f"commit: {_error(e)}")
            return
        now = self.clock()
        if now - started > SLOW_CALL_S:
            self.history.client_error(self.workload, f"commit took over {SLOW_CALL_S:.0f} s")
        for tp in committed or []:
            if tp.error is not None:
                self.history.client_error(self.workload, f"commit of partition {tp.partition}: {tp.error}")
            elif tp.offset >= 0:
                self.history.add(Commit(self.workload, tp.partition, tp.offset, now))

    def run_workload(self) -> None:
        self.consumer.subscribe([TOPIC_IDEMPOTENT], on_assign=self._assigned, on_revoke=self._revoked)
        last_commit = time.monotonic()
        try:
            while not self.stopping.is_set():
                try:
                    msg = self.consumer.poll(0.2)
                except KafkaException as e:  # fatal to this client: counted, the others go on
                    self.history.client_error(self.workload, f"poll: {_error(e)}")
                    return
                if msg is not None and msg.error() is None:
                    partition, offset = msg.partition() or 0, msg.offset() or 0
                    started = self.fresh.pop(partition, None)
                    if started is not None:
                        self.history.add(Resume(self.workload, partition, offset, started))
                    self.history.add(Processed(self.workload, partition, offset, int(msg.value() or b"-1")))
                if time.monotonic() - last_commit >= self.commit_every_s:
                    self._commit()
                    last_commit = time.monotonic()
            self._commit()
        finally:
            self.consumer.close()
