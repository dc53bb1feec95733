package kafkapy.compat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * Client construction and the loops every scenario shares. Why bounded loops everywhere: a
 * scenario that waits for something the broker never does must end with an "error" event (the
 * Python side then fails with it), never hang until the test's subprocess timeout.
 */
final class Clients {
  static final long WAIT_MS = 25_000;

  private Clients() {}

  static Properties common(String bootstrap) {
    Properties props = new Properties();
    props.put("bootstrap.servers", bootstrap);
    // fail fast instead of the client's minute-long defaults
    props.put("request.timeout.ms", "10000");
    props.put("default.api.timeout.ms", "20000");
    props.put("reconnect.backoff.max.ms", "200");
    props.put("retry.backoff.max.ms", "200");
    return props;
  }

  static Admin admin(String bootstrap) {
    Properties props = common(bootstrap);
    props.put(AdminClientConfig.CLIENT_ID_CONFIG, "kafkapy-java-admin");
    return Admin.create(props);
  }

  /** A producer with kafka-clients' defaults (idempotence on, acks=all) unless overridden. */
  static KafkaProducer<String, String> producer(String bootstrap, Map<String, String> extra) {
    Properties props = common(bootstrap);
    props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
    props.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, "20000");
    props.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, "20000");
    props.putAll(extra);
    return new KafkaProducer<>(props);
  }

  static KafkaConsumer<String, String> consumer(String bootstrap, Map<String, String> extra) {
    Properties props = common(bootstrap);
    props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    props.putAll(extra);
    return new KafkaConsumer<>(props);
  }

  static void createTopic(Admin admin, String topic, int partitions, short replicas)
      throws Exception {
    admin
        .createTopics(List.of(new NewTopic(topic, partitions, replicas)))
        .all()
        .get(WAIT_MS, TimeUnit.MILLISECONDS);
  }

  static List<TopicPartition> partitions(String topic, int count) {
    List<TopicPartition> parts = new ArrayList<>();
    for (int p = 0; p < count; p++) parts.add(new TopicPartition(topic, p));
    return parts;
  }

  /** Read `expected` records from the start of `parts` (no group), or fail after WAIT_MS. */
  static List<ConsumerRecord<String, String>> readAll(
      KafkaConsumer<String, String> consumer, Collection<TopicPartition> parts, int expected) {
    consumer.assign(parts);
    consumer.seekToBeginning(parts);
    List<ConsumerRecord<String, String>> got = new ArrayList<>();
    long deadline = System.currentTimeMillis() + WAIT_MS;
    while (got.size() < expected && System.currentTimeMillis() < deadline) {
      consumer.poll(Duration.ofMillis(200)).forEach(got::add);
    }
    return got;
  }

  /** Poll for `ms` more and return what arrived: shows that nothing beyond the expected came. */
  static List<ConsumerRecord<String, String>> drain(KafkaConsumer<String, String> consumer, long ms) {
    List<ConsumerRecord<String, String>> got = new ArrayList<>();
    long deadline = System.currentTimeMillis() + ms;
    while (System.currentTimeMillis() < deadline) {
      consumer.poll(Duration.ofMillis(100)).forEach(got::add);
    }
    return got;
  }

  static Map<String, Object> recordEvent(String name, ConsumerRecord<String, String> rec) {
    Map<String, Object> ev = Json.event(name);
    ev.put("topic", rec.topic());
    ev.put("partition", rec.partition());
    ev.put("offset", rec.offset());
    ev.put("key", rec.key());
    ev.put("value", rec.value());
    ev.put("timestamp", rec.timestamp());
    ev.put("timestampType", rec.timestampType().name);
    List<List<String>> headers = new ArrayList<>();
    for (Header h : rec.headers()) {
      headers.add(List.of(h.key(), new String(h.value(), StandardCharsets.UTF_8)));
    }
    ev.put("headers", headers);
    return ev;
  }

  static List<String> names(Collection<TopicPartition> parts) {
    List<String> out = new ArrayList<>();
    for (TopicPartition tp : parts) out.add(tp.toString());
    out.sort(null);
    return out;
  }

  static Map<String, Long> offsets(Map<TopicPartition, ? extends Object> committed) {
    Map<String, Long> out = new TreeMap<>();
    committed.forEach(
        (tp, meta) -> {
          if (meta instanceof org.apache.kafka.clients.consumer.OffsetAndMetadata om) {
            out.put(tp.toString(), om.offset());
          } else {
            out.put(tp.toString(), null);
          }
        });
    return out;
  }

  static Map<String, Object> error(String where, Throwable t) {
    Map<String, Object> ev = Json.event("error");
    ev.put("where", where);
    Throwable root = t;
    while (root.getCause() != null && root != root.getCause()) root = root.getCause();
    ev.put("class", t.getClass().getName());
    ev.put("rootClass", root.getClass().getName());
    ev.put("message", String.valueOf(root.getMessage()));
    return ev;
  }
}
