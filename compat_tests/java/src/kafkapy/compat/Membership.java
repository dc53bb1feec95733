package kafkapy.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Static membership (group.instance.id, KIP-345) and producer fencing - the two mechanisms Java
 * stream processors lean on to restart without rebalancing or duplicating.
 */
final class Membership {
  private Membership() {}

  static int pollUntilAssigned(KafkaConsumer<String, String> c, List<ConsumerRecord<String, String>> sink) {
    long deadline = System.currentTimeMillis() + Clients.WAIT_MS;
    while (System.currentTimeMillis() < deadline && c.assignment().isEmpty()) {
      c.poll(Duration.ofMillis(100)).forEach(sink::add);
    }
    return c.groupMetadata().generationId();
  }

  /**
   * A static member is closed and started again with the same group.instance.id (the restart
   * of a deployed service); then removed with Admin.removeMembersFromConsumerGroup.
   */
  static void staticMember(String bootstrap, String prefix) throws Exception {
    String topic = prefix + "-t";
    String group = prefix + "-group";
    try (Admin admin = Clients.admin(bootstrap)) {
      Clients.createTopic(admin, topic, 2, (short) 1);
      Map<String, String> cfg = new HashMap<>();
      cfg.put("group.id", group);
      cfg.put("group.instance.id", "instance-a");
      cfg.put("group.protocol", "classic");
      cfg.put("session.timeout.ms", "10000");
      cfg.put("heartbeat.interval.ms", "500");
      List<ConsumerRecord<String, String>> sink = new ArrayList<>();
      for (String round : List.of("first", "restart")) {
        try (KafkaConsumer<String, String> c = Clients.consumer(bootstrap, cfg)) {
          c.subscribe(List.of(topic), Groups.listener(round));
          int generation = pollUntilAssigned(c, sink);
          c.commitSync();
          ConsumerGroupDescription desc =
              AdminOps.get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
          Map<String, Object> ev = Json.event("static");
          ev.put("round", round);
          ev.put("generation", generation);
          ev.put("assignment", Clients.names(c.assignment()));
          ev.put("state", desc.groupState().name());
          List<Object> members = new ArrayList<>();
          for (MemberDescription m : desc.members()) {
            members.add(Map.of("instance", String.valueOf(m.groupInstanceId().orElse(null)),
                "memberId", m.consumerId()));
          }
          ev.put("members", members);
          Json.emit(ev);
        }
      }
      // the closed static member stays in the group until its session expires or it is removed
      ConsumerGroupDescription kept =
          AdminOps.get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
      AdminOps.emit("after-close", "members", kept.members().size());
      AdminOps.get(admin.removeMembersFromConsumerGroup(group, new RemoveMembersFromConsumerGroupOptions(
          List.of(new MemberToRemove("instance-a")))).all());
      ConsumerGroupDescription removed =
          AdminOps.get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
      Map<String, Object> ev = Json.event("removed");
      ev.put("members", removed.members().size());
      ev.put("state", removed.groupState().name());
      Json.emit(ev);
    }
  }

  /**
   * A second producer with the same transactional.id fences the first: the first's open
   * transaction is aborted and its commit fails; only the second's records are committed.
   */
  static void fencing(String bootstrap, String prefix) throws Exception {
    String topic = prefix + "-t";
    try (Admin admin = Clients.admin(bootstrap)) {
      Clients.createTopic(admin, topic, 1, (short) 1);
    }
    Map<String, String> cfg = Map.of("transactional.id", prefix + "-txn");
    KafkaProducer<String, String> zombie = Clients.producer(bootstrap, cfg);
    zombie.initTransactions();
    zombie.beginTransaction();
    for (int i = 0; i < 5; i++) zombie.send(new ProducerRecord<>(topic, 0, "z", "zombie-" + i));
    zombie.flush();
    try (KafkaProducer<String, String> fresh = Clients.producer(bootstrap, cfg)) {
      fresh.initTransactions();
      Map<String, Object> ev = Json.event("zombie-commit");
      try {
        zombie.commitTransaction();
        ev.put("error", null);
      } catch (Exception e) {
        ev.put("error", e.getClass().getSimpleName());
      }
      Json.emit(ev);
      zombie.close(Duration.ZERO);
      fresh.beginTransaction();
      for (int i = 0; i < 3; i++) fresh.send(new ProducerRecord<>(topic, 0, "f", "fresh-" + i));
      fresh.commitTransaction();
    }
    try (KafkaConsumer<String, String> consumer =
        Clients.consumer(bootstrap, Map.of("isolation.level", "read_committed"))) {
      List<ConsumerRecord<String, String>> got = Clients.readAll(consumer, Clients.partitions(topic, 1), 3);
      got.addAll(Clients.drain(consumer, 300));
      AdminOps.emit("committed-values", "values", got.stream().map(ConsumerRecord::value).toList());
    }
  }
}
