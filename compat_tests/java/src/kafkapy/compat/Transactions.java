package kafkapy.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Transactions as a Java user writes them. Topics PREFIX-in (2 partitions, 6 plain records) and
 * PREFIX-out (2 partitions).
 *
 * <p>initTransactions; txn 1 sends 10 "commit" records and commits; txn 2 sends 10 "abort"
 * records, flushes (so they are on the broker) and aborts; txn 3 is consume-transform-produce: a
 * read_committed group member reads the 6 input records, the producer sends 6 "xform" records
 * and sendOffsetsToTransaction(input offsets, consumer group metadata), then commits. Events:
 * "record" with isolation=read_committed / read_uncommitted for everything in PREFIX-out, and
 * "group-offsets" with what Admin.listConsumerGroupOffsets returns for the input group.
 */
final class Transactions {
  private Transactions() {}

  static void run(String bootstrap, String prefix) throws Exception {
    String in = prefix + "-in";
    String out = prefix + "-out";
    String group = prefix + "-group";
    try (Admin admin = Clients.admin(bootstrap)) {
      Clients.createTopic(admin, in, 2, (short) 1);
      Clients.createTopic(admin, out, 2, (short) 1);
    }
    try (KafkaProducer<String, String> plain = Clients.producer(bootstrap, Map.of())) {
      for (int i = 0; i < 6; i++) plain.send(new ProducerRecord<>(in, i % 2, "in" + i, "input-" + i));
      plain.flush();
    }
    Map<String, String> txCfg = new HashMap<>();
    txCfg.put("transactional.id", prefix + "-txn");
    txCfg.put("transaction.timeout.ms", "20000");
    try (KafkaProducer<String, String> producer = Clients.producer(bootstrap, txCfg)) {
      producer.initTransactions();

      producer.beginTransaction();
      for (int i = 0; i < 10; i++) producer.send(new ProducerRecord<>(out, i % 2, "c" + i, "commit-" + i));
      producer.commitTransaction();

      producer.beginTransaction();
      for (int i = 0; i < 10; i++) producer.send(new ProducerRecord<>(out, i % 2, "a" + i, "abort-" + i));
      producer.flush();
      producer.abortTransaction();

      Map<String, String> cCfg = new HashMap<>();
      cCfg.put("group.id", group);
      cCfg.put("isolation.level", "read_committed");
      try (KafkaConsumer<String, String> consumer = Clients.consumer(bootstrap, cCfg)) {
        consumer.subscribe(List.of(in));
        List<ConsumerRecord<String, String>> inputs = new ArrayList<>();
        long deadline = System.currentTimeMillis() + Clients.WAIT_MS;
        while (System.currentTimeMillis() < deadline && inputs.size() < 6) {
          consumer.poll(Duration.ofMillis(100)).forEach(inputs::add);
        }
        Map<String, Object> ev = Json.event("inputs");
        ev.put("count", inputs.size());
        Json.emit(ev);
        producer.beginTransaction();
        Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
        for (ConsumerRecord<String, String> rec : inputs) {
          producer.send(new ProducerRecord<>(out, rec.partition(), rec.key(), "xform-" + rec.value()));
          next.put(new TopicPartition(rec.topic(), rec.partition()), new OffsetAndMetadata(rec.offset() + 1));
        }
        producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
        producer.commitTransaction();
      }
    }
    for (String isolation : List.of("read_committed", "read_uncommitted")) {
      try (KafkaConsumer<String, String> consumer =
          Clients.consumer(bootstrap, Map.of("isolation.level", isolation))) {
        int expected = isolation.equals("read_committed") ? 16 : 26;
        List<ConsumerRecord<String, String>> got =
            Clients.readAll(consumer, Clients.partitions(out, 2), expected);
        got.addAll(Clients.drain(consumer, 300));
        for (ConsumerRecord<String, String> rec : got) {
          Map<String, Object> ev = Clients.recordEvent("record", rec);
          ev.put("isolation", isolation);
          Json.emit(ev);
        }
        Map<String, Object> ends = Json.event("end-offsets");
        ends.put("isolation", isolation);
        Map<String, Long> endMap = new java.util.TreeMap<>();
        consumer.endOffsets(Clients.partitions(out, 2)).forEach((tp, off) -> endMap.put(tp.toString(), off));
        ends.put("offsets", endMap);
        Json.emit(ends);
      }
    }
    try (Admin admin = Clients.admin(bootstrap)) {
      Map<TopicPartition, OffsetAndMetadata> committed =
          admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata().get(
              Clients.WAIT_MS, TimeUnit.MILLISECONDS);
      Map<String, Object> ev = Json.event("group-offsets");
      ev.put("offsets", Clients.offsets(committed));
      Json.emit(ev);
    }
  }

  /**
   * A read_committed group member that starts while its group's offsets are still pending in an
   * open transaction (KIP-447: OffsetFetch with requireStable answers UNSTABLE_OFFSET_COMMIT and
   * the client retries) must wait for the commit and start from the transaction's offset 3, not
   * from auto.offset.reset=earliest. Events: "commit" when the transaction committed and
   * "resumed" with the offsets the member read.
   */
  static void pendingOffsets(String bootstrap, String prefix) throws Exception {
    String in = prefix + "-in";
    String group = prefix + "-group";
    try (Admin admin = Clients.admin(bootstrap)) {
      Clients.createTopic(admin, in, 1, (short) 1);
    }
    try (KafkaProducer<String, String> plain = Clients.producer(bootstrap, Map.of())) {
      for (int i = 0; i < 6; i++) plain.send(new ProducerRecord<>(in, 0, "k", "input-" + i));
      plain.flush();
    }
    try (KafkaProducer<String, String> producer =
        Clients.producer(bootstrap, Map.of("transactional.id", prefix + "-txn"))) {
      producer.initTransactions();
      producer.beginTransaction();
      producer.sendOffsetsToTransaction(
          Map.of(new TopicPartition(in, 0), new OffsetAndMetadata(3)),
          new org.apache.kafka.clients.consumer.ConsumerGroupMetadata(group));
      List<Long> offsets = java.util.Collections.synchronizedList(new ArrayList<>());
      java.util.concurrent.atomic.AtomicBoolean assigned = new java.util.concurrent.atomic.AtomicBoolean();
      Thread member = new Thread(() -> {
        Map<String, String> cfg = Map.of("group.id", group, "isolation.level", "read_committed");
        try (KafkaConsumer<String, String> c = Clients.consumer(bootstrap, cfg)) {
          c.subscribe(List.of(in));
          long deadline = System.currentTimeMillis() + Clients.WAIT_MS;
          while (System.currentTimeMillis() < deadline && offsets.size() < 3) {
            if (!c.assignment().isEmpty()) assigned.set(true);
            c.poll(Duration.ofMillis(100)).forEach(r -> offsets.add(r.offset()));
          }
          offsets.addAll(Clients.drain(c, 300).stream().map(r -> r.offset()).toList());
        }
      });
      member.start();
      Thread.sleep(2500); // the member joins and asks for its offsets meanwhile
      // diagnostics: whether the member had joined (and so was asking for offsets) by now
      Map<String, Object> commit = Json.event("commit");
      commit.put("memberAssigned", assigned.get());
      commit.put("readBefore", offsets.size());
      producer.commitTransaction();
      Json.emit(commit);
      member.join(Clients.WAIT_MS + 5000);
      Map<String, Object> ev = Json.event("resumed");
      ev.put("offsets", new ArrayList<>(offsets));
      Json.emit(ev);
    }
  }
}
