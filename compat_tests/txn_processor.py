"""A consume-transform-produce processor (librdkafka), run as its own OS process by
test_transactions_eos.py so the test can SIGKILL it anywhere.

Usage: txn_processor.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID N

Reads INPUT partition 0 from the group's committed offset (read_committed), writes each value
upper-cased to OUTPUT partition 0 and commits the consumed offsets in the same transaction
(`send_offsets_to_transaction`); exits 0 once the committed position reaches N.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition


def main() -> int:
    bootstrap, source, sink, group, tid, total = sys.argv[1:7]
    n = int(total)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                         "transaction.timeout.ms": 10_000, "linger.ms": 1})
    producer.init_transactions(30)  # fences a killed predecessor and aborts its transaction
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                         "isolation.level": "read_committed", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(source, 0)])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        msgs = [m for m in consumer.consume(num_messages=5, timeout=0.5) if not m.error()]
        if not msgs:
            done = consumer.committed([TopicPartition(source, 0)], timeout=10)[0].offset
            if done >= n:  # a predecessor finished the work before it was killed
                consumer.close()
                return 0
            continue
        producer.begin_transaction()
        for m in msgs:
            producer.produce(sink, value=(m.value() or b"").upper(), partition=0)
        next_offset = (msgs[-1].offset() or 0) + 1
        producer.send_offsets_to_transaction(
            [TopicPartition(source, 0, next_offset)], consumer.consumer_group_metadata(), 30)
        time.sleep(0.05)  # widen the window a kill can land in
        producer.commit_transaction(30)
        if next_offset >= n:
            consumer.close()
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
