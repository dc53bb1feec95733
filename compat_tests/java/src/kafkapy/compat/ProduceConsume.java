package kafkapy.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeader;

/**
 * Produce with each compression codec and read everything back. Args: COUNT CODEC...
 *
 * <p>The producer keeps kafka-clients' defaults (acks=all, enable.idempotence=true), sets an
 * explicit CreateTime per record and two headers, and lingers so several records share a batch.
 * Each codec gets its own 3-partition topic PREFIX-CODEC. Events: "ack" per acknowledged
 * record, "record" per consumed record, "config" with the producer's effective settings.
 */
final class ProduceConsume {
  static final int PARTITIONS = 3;

  private ProduceConsume() {}

  static void run(String bootstrap, String prefix, String[] args) throws Exception {
    int count = Integer.parseInt(args[0]);
    long baseTs = System.currentTimeMillis() - 3_600_000L;
    try (Admin admin = Clients.admin(bootstrap)) {
      for (int c = 1; c < args.length; c++) {
        Clients.createTopic(admin, prefix + "-" + args[c], PARTITIONS, (short) 1);
      }
    }
    for (int c = 1; c < args.length; c++) {
      String codec = args[c];
      String topic = prefix + "-" + codec;
      try (KafkaProducer<String, String> producer =
          Clients.producer(bootstrap, Map.of("compression.type", codec, "linger.ms", "20"))) {
        List<Future<RecordMetadata>> acks = new ArrayList<>();
        for (int i = 0; i < count; i++) {
          ProducerRecord<String, String> rec =
              new ProducerRecord<>(
                  topic, null, baseTs + i * 10L, "key-" + (i % 7), codec + "-value-" + i + "-x".repeat(i % 50));
          rec.headers().add(new RecordHeader("seq", Integer.toString(i).getBytes(StandardCharsets.UTF_8)));
          rec.headers().add(new RecordHeader("client", "java".getBytes(StandardCharsets.UTF_8)));
          acks.add(producer.send(rec));
        }
        producer.flush();
        for (int i = 0; i < count; i++) {
          RecordMetadata md = acks.get(i).get(Clients.WAIT_MS, TimeUnit.MILLISECONDS);
          Map<String, Object> ev = Json.event("ack");
          ev.put("codec", codec);
          ev.put("seq", i);
          ev.put("partition", md.partition());
          ev.put("offset", md.offset());
          ev.put("timestamp", md.timestamp());
          Json.emit(ev);
        }
      }
      try (KafkaConsumer<String, String> consumer = Clients.consumer(bootstrap, Map.of())) {
        List<ConsumerRecord<String, String>> got =
            Clients.readAll(consumer, Clients.partitions(topic, PARTITIONS), count);
        got.addAll(Clients.drain(consumer, 300));
        for (ConsumerRecord<String, String> rec : got) {
          Map<String, Object> ev = Clients.recordEvent("record", rec);
          ev.put("codec", codec);
          Json.emit(ev);
        }
      }
    }
  }

  /**
   * Record sizes around the broker's message.max.bytes (1 MiB by default): a 900 KiB record is
   * accepted; a 2 MiB one (the producer's own max.request.size raised to let it through) is
   * refused by the broker with RecordTooLargeException; a consumer whose fetch limits (1 KiB) are
   * far below the big record still receives it (KIP-74: the first batch always comes back whole)
   * and the small records after it.
   */
  static void big(String bootstrap, String prefix) throws Exception {
    String topic = prefix + "-big";
    try (Admin admin = Clients.admin(bootstrap)) {
      Clients.createTopic(admin, topic, 1, (short) 1);
    }
    String big = "b".repeat(900 * 1024);
    Map<String, String> cfg = Map.of("max.request.size", "3145728", "compression.type", "none");
    try (KafkaProducer<String, String> producer = Clients.producer(bootstrap, cfg)) {
      producer.send(new ProducerRecord<>(topic, 0, "small", "before")).get();
      producer.send(new ProducerRecord<>(topic, 0, "big", big)).get();
      Map<String, Object> ev = Json.event("too-large");
      try {
        producer.send(new ProducerRecord<>(topic, 0, "huge", "h".repeat(2 * 1024 * 1024))).get();
        ev.put("error", null);
      } catch (java.util.concurrent.ExecutionException e) {
        ev.put("error", e.getCause().getClass().getSimpleName());
      }
      Json.emit(ev);
      for (int i = 0; i < 3; i++) producer.send(new ProducerRecord<>(topic, 0, "small", "after-" + i));
      producer.flush();
    }
    Map<String, String> small = Map.of("max.partition.fetch.bytes", "1024", "fetch.max.bytes", "2048");
    try (KafkaConsumer<String, String> consumer = Clients.consumer(bootstrap, small)) {
      List<ConsumerRecord<String, String>> got = Clients.readAll(consumer, Clients.partitions(topic, 1), 5);
      got.addAll(Clients.drain(consumer, 300));
      List<Object> seen = new ArrayList<>();
      for (ConsumerRecord<String, String> rec : got) {
        seen.add(Map.of("offset", rec.offset(), "key", rec.key(), "size", rec.value().length()));
      }
      Map<String, Object> ev = Json.event("big-read");
      ev.put("records", seen);
      ev.put("bigIntact", got.stream().anyMatch(r -> r.value().equals(big)));
      Json.emit(ev);
    }
  }
}
