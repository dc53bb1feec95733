package kafkapy.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;

/**
 * Consumer groups. Args: ASSIGNOR (range, roundrobin, cooperative or default = the client's
 * default list; with PROTOCOL consumer: the server-side assignor, uniform or range, or default)
 * and PROTOCOL (classic, consumer = KIP-848, or default = group.protocol unset).
 *
 * <p>Story: member "a" joins one group on a 4-partition topic and gets every partition, then
 * "b" joins and both poll until both hold partitions; then 10 records per partition are produced and read between them; both commit; "b" leaves (close), "a" must end up with all
 * 4 partitions; 8 more records are produced and "a" reads exactly those; "a" commits and
 * leaves; 4 more are produced; a fresh member "c" must resume from the committed offsets and
 * read exactly the last 4. Every rebalance callback is printed ("rebalance" events), so the
 * Python side can tell an eager from a cooperative rebalance.
 */
final class Groups {
  static final int PARTITIONS = 4;

  private Groups() {}

  static Map<String, String> settings(String group, String assignor, String protocol) {
    Map<String, String> cfg = new HashMap<>();
    cfg.put("group.id", group);
    if (!protocol.equals("default")) cfg.put("group.protocol", protocol);
    if (protocol.equals("consumer")) {
      // KIP-848: session, heartbeat and assignment are the broker's (group.consumer.*); the
      // client refuses these settings with group.protocol=consumer
      if (!assignor.equals("default")) cfg.put("group.remote.assignor", assignor);
      return cfg;
    }
    cfg.put("session.timeout.ms", "10000");
    cfg.put("heartbeat.interval.ms", "500");
    String cls =
        switch (assignor) {
          case "range" -> "org.apache.kafka.clients.consumer.RangeAssignor";
          case "roundrobin" -> "org.apache.kafka.clients.consumer.RoundRobinAssignor";
          case "sticky" -> "org.apache.kafka.clients.consumer.StickyAssignor";
          case "cooperative" -> "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
          case "default" -> null;
          default -> throw new IllegalArgumentException("assignor " + assignor);
        };
    if (cls != null) cfg.put("partition.assignment.strategy", cls);
    return cfg;
  }

  static ConsumerRebalanceListener listener(String member) {
    return new ConsumerRebalanceListener() {
      @Override
      public void onPartitionsRevoked(Collection<TopicPartition> parts) {
        emit("revoked", parts);
      }

      @Override
      public void onPartitionsAssigned(Collection<TopicPartition> parts) {
        emit("assigned", parts);
      }

      @Override
      public void onPartitionsLost(Collection<TopicPartition> parts) {
        emit("lost", parts);
      }

      private void emit(String kind, Collection<TopicPartition> parts) {
        Map<String, Object> ev = Json.event("rebalance");
        ev.put("member", member);
        ev.put("kind", kind);
        ev.put("partitions", Clients.names(parts));
        Json.emit(ev);
      }
    };
  }

  static void produce(String bootstrap, String topic, String tag, int perPartition) throws Exception {
    try (KafkaProducer<String, String> producer = Clients.producer(bootstrap, Map.of())) {
      for (int p = 0; p < PARTITIONS; p++) {
        for (int i = 0; i < perPartition; i++) {
          producer.send(new ProducerRecord<>(topic, p, "k" + i, tag + "-" + p + "-" + i));
        }
      }
      producer.flush();
    }
  }

  static void emitRecords(String member, String phase, List<ConsumerRecord<String, String>> recs) {
    for (ConsumerRecord<String, String> rec : recs) {
      Map<String, Object> ev = Clients.recordEvent("record", rec);
      ev.put("member", member);
      ev.put("phase", phase);
      Json.emit(ev);
    }
  }

  static void emitPhase(String phase, Map<String, KafkaConsumer<String, String>> members) {
    Map<String, Object> ev = Json.event("phase");
    ev.put("phase", phase);
    Map<String, Object> assignment = new HashMap<>();
    members.forEach((name, c) -> assignment.put(name, Clients.names(c.assignment())));
    ev.put("assignment", assignment);
    Json.emit(ev);
  }

  static void run(String bootstrap, String prefix, String[] args) throws Exception {
    String assignor = args[0];
    String protocol = args[1];
    String topic = prefix + "-topic";
    String group = prefix + "-group";
    try (Admin admin = Clients.admin(bootstrap)) {
      Clients.createTopic(admin, topic, PARTITIONS, (short) 1);
    }
    Map<String, String> cfg = settings(group, assignor, protocol);
    KafkaConsumer<String, String> a = Clients.consumer(bootstrap, cfg);
    KafkaConsumer<String, String> b = Clients.consumer(bootstrap, cfg);
    Map<String, List<ConsumerRecord<String, String>>> got = new HashMap<>();
    got.put("a", new ArrayList<>());
    got.put("b", new ArrayList<>());
    long deadline = System.currentTimeMillis() + Clients.WAIT_MS;
    // "a" first holds every partition, so "b" joining is a real rebalance (eager or cooperative)
    a.subscribe(List.of(topic), listener("a"));
    while (System.currentTimeMillis() < deadline && a.assignment().size() < PARTITIONS) {
      a.poll(Duration.ofMillis(100)).forEach(got.get("a")::add);
    }
    emitPhase("first", Map.of("a", a));
    b.subscribe(List.of(topic), listener("b"));
    // first both members must hold partitions (together all 4), then the 40 records are sent
    while (System.currentTimeMillis() < deadline
        && (a.assignment().isEmpty()
            || b.assignment().isEmpty()
            || a.assignment().size() + b.assignment().size() < PARTITIONS)) {
      a.poll(Duration.ofMillis(100)).forEach(got.get("a")::add);
      b.poll(Duration.ofMillis(100)).forEach(got.get("b")::add);
    }
    emitPhase("joined", Map.of("a", a, "b", b));
    produce(bootstrap, topic, "first", 10);
    while (System.currentTimeMillis() < deadline && got.get("a").size() + got.get("b").size() < 40) {
      a.poll(Duration.ofMillis(100)).forEach(got.get("a")::add);
      b.poll(Duration.ofMillis(100)).forEach(got.get("b")::add);
    }
    a.commitSync();
    b.commitSync();
    emitRecords("a", "split", got.get("a"));
    emitRecords("b", "split", got.get("b"));
    emitPhase("split", Map.of("a", a, "b", b));

    b.close(); // LeaveGroup: "a" must take over every partition
    deadline = System.currentTimeMillis() + Clients.WAIT_MS;
    List<ConsumerRecord<String, String>> extra = new ArrayList<>();
    while (System.currentTimeMillis() < deadline && a.assignment().size() < PARTITIONS) {
      a.poll(Duration.ofMillis(100)).forEach(extra::add);
    }
    emitPhase("after-leave", Map.of("a", a));
    produce(bootstrap, topic, "second", 2);
    deadline = System.currentTimeMillis() + Clients.WAIT_MS;
    while (System.currentTimeMillis() < deadline && extra.size() < 8) {
      a.poll(Duration.ofMillis(100)).forEach(extra::add);
    }
    extra.addAll(Clients.drain(a, 300));
    emitRecords("a", "after-leave", extra);
    a.commitSync();
    a.close();

    produce(bootstrap, topic, "third", 1);
    try (KafkaConsumer<String, String> c = Clients.consumer(bootstrap, cfg)) {
      c.subscribe(Pattern.compile(Pattern.quote(topic)), listener("c"));
      List<ConsumerRecord<String, String>> resumed = new ArrayList<>();
      deadline = System.currentTimeMillis() + Clients.WAIT_MS;
      while (System.currentTimeMillis() < deadline && resumed.size() < 4) {
        c.poll(Duration.ofMillis(100)).forEach(resumed::add);
      }
      resumed.addAll(Clients.drain(c, 300));
      emitRecords("c", "resume", resumed);
      emitPhase("resume", Map.of("c", c));
      c.commitSync();
      Map<String, Object> ev = Json.event("committed");
      ev.put("offsets", Clients.offsets(c.committed(Set.copyOf(Clients.partitions(topic, PARTITIONS)))));
      Json.emit(ev);
      // what an admin sees of the live group (ConsumerGroupDescribe first, DescribeGroups for
      // a classic group)
      try (Admin admin = Clients.admin(bootstrap)) {
        org.apache.kafka.clients.admin.ConsumerGroupDescription desc =
            admin.describeConsumerGroups(List.of(group)).all().get().get(group);
        Map<String, Object> d = Json.event("described");
        d.put("type", desc.type().name());
        d.put("state", desc.groupState().name());
        d.put("assignor", desc.partitionAssignor());
        List<String> owned = new ArrayList<>();
        desc.members().forEach(m -> owned.addAll(Clients.names(m.assignment().topicPartitions())));
        d.put("members", desc.members().size());
        d.put("assigned", owned);
        Json.emit(d);
      }
    }
  }
}
