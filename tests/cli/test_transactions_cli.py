"""`kafkapy transactions list|describe|abort` against a real broker."""

from __future__ import annotations

from confluent_kafka import Producer

from tests.cli.conftest import kafkapy


def test_list_describe_and_abort_an_open_transaction(bootstrap: str) -> None:
    assert kafkapy("topics", "create", "txn-t", bootstrap=bootstrap).code == 0
    assert kafkapy("produce", "txn-t", "--transactional-id", "done-tx", stdin="c\n", bootstrap=bootstrap).code == 0
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "open-tx"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("txn-t", b"open")
    assert producer.flush(30) == 0
    listed = kafkapy("transactions", "list", "--json", bootstrap=bootstrap)
    assert listed.code == 0, listed.stderr
    states = {t["transactional_id"]: t["state"] for t in listed.json()}
    assert states == {"done-tx": "CompleteCommit", "open-tx": "Ongoing"}
    described = kafkapy("transactions", "describe", "--transactional-id", "open-tx", "--json", bootstrap=bootstrap)
    assert described.code == 0, described.stderr
    doc = described.json()
    assert (doc["state"], doc["partitions"], doc["coordinator"]) == ("Ongoing", ["txn-t-0"], 1)
    assert doc["duration_ms"] >= 0
    human = kafkapy("transactions", "describe", "--transactional-id", "open-tx", bootstrap=bootstrap)
    assert "txn-t-0" in human.stdout
    # read_committed readers stop at the open transaction (offset 1 after the committed record
    # and its marker at 0..1) until it is aborted
    stuck = kafkapy("consume", "txn-t", "--from-beginning", "--exit-at-end", "--isolation-level",
                    "read_committed", bootstrap=bootstrap)
    assert stuck.stdout == "c\n"
    wrong = kafkapy("transactions", "abort", "--topic", "txn-t", "--partition", "0", "--start-offset", "0",
                    bootstrap=bootstrap)
    assert wrong.code == 1
    assert "no open transaction of txn-t-0 starts at offset 0" in wrong.stderr
    aborted = kafkapy("transactions", "abort", "--topic", "txn-t", "--partition", "0", "--start-offset", "2",
                      bootstrap=bootstrap)
    assert aborted.code == 0, aborted.stderr
    assert aborted.stdout.startswith("aborted the transaction of producer ")
    kafkapy("produce", "txn-t", stdin="after\n", bootstrap=bootstrap)
    read = kafkapy("consume", "txn-t", "--from-beginning", "--exit-at-end", "--isolation-level", "read_committed",
                   bootstrap=bootstrap)
    assert read.stdout.split() == ["c", "after"]  # "open" aborted, the partition readable past it
    missing = kafkapy("transactions", "describe", "--transactional-id", "nope", bootstrap=bootstrap)
    assert missing.code == 1
    assert kafkapy("transactions", "abort", "--topic", "txn-t", "--partition", "0", bootstrap=bootstrap).code == 2
