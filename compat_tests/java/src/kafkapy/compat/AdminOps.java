package kafkapy.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.FeatureMetadata;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.MemberDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.RecordsToDelete;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;

/**
 * The Admin API calls Java tools rely on, each printed as one event named after the call.
 * Topics: PREFIX-a (3 partitions, retention.ms and cleanup.policy set at creation) and PREFIX-b
 * (1 partition, 10 records, then deleteRecords before offset 4). Group PREFIX-group has one live
 * member subscribed to PREFIX-b with offset 7 committed while Admin describes it.
 */
final class AdminOps {
  private AdminOps() {}

  static <T> T get(KafkaFuture<T> future) throws Exception {
    return future.get(Clients.WAIT_MS, TimeUnit.MILLISECONDS);
  }

  static void emit(String name, String key, Object value) {
    Map<String, Object> ev = Json.event(name);
    ev.put(key, value);
    Json.emit(ev);
  }

  static Map<String, Object> describeTopic(TopicDescription desc) {
    Map<String, Object> out = new TreeMap<>();
    out.put("name", desc.name());
    out.put("internal", desc.isInternal());
    out.put("topicId", desc.topicId().toString());
    List<Map<String, Object>> parts = new ArrayList<>();
    for (TopicPartitionInfo p : desc.partitions()) {
      Map<String, Object> info = new TreeMap<>();
      info.put("partition", p.partition());
      info.put("leader", p.leader() == null ? null : p.leader().id());
      info.put("replicas", p.replicas().stream().map(Node::id).toList());
      info.put("isr", p.isr().stream().map(Node::id).toList());
      parts.add(info);
    }
    out.put("partitions", parts);
    return out;
  }

  static Map<String, Object> configs(Admin admin, String topic, Collection<String> names)
      throws Exception {
    ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic);
    Config config = get(admin.describeConfigs(List.of(res)).all()).get(res);
    Map<String, Object> out = new TreeMap<>();
    for (String name : names) {
      ConfigEntry entry = config.get(name);
      out.put(name, entry == null ? null : Map.of("value", String.valueOf(entry.value()), "source", entry.source().name()));
    }
    out.put("_count", config.entries().size());
    return out;
  }

  static void run(String bootstrap, String prefix) throws Exception {
    String a = prefix + "-a";
    String b = prefix + "-b";
    String group = prefix + "-group";
    List<String> watched = List.of("retention.ms", "cleanup.policy", "max.message.bytes");
    try (Admin admin = Clients.admin(bootstrap)) {
      NewTopic topicA = new NewTopic(a, 3, (short) 1)
          .configs(Map.of("retention.ms", "3600000", "cleanup.policy", "compact"));
      get(admin.createTopics(List.of(topicA, new NewTopic(b, 1, (short) 1))).all());
      try {
        get(admin.createTopics(List.of(new NewTopic(a, 3, (short) 1))).all());
        emit("createTopics-again", "error", null);
      } catch (ExecutionException e) {
        emit("createTopics-again", "error", e.getCause().getClass().getSimpleName());
      }
      emit("listTopics", "names", new ArrayList<>(get(admin.listTopics().names())));
      Map<String, TopicDescription> descs = get(admin.describeTopics(List.of(a, b)).allTopicNames());
      List<Object> described = new ArrayList<>();
      for (TopicDescription d : descs.values()) described.add(describeTopic(d));
      emit("describeTopics", "topics", described);

      emit("describeConfigs", "configs", configs(admin, a, watched));
      ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, a);
      get(admin.incrementalAlterConfigs(Map.of(res, List.of(
          new AlterConfigOp(new ConfigEntry("retention.ms", "7200000"), AlterConfigOp.OpType.SET),
          new AlterConfigOp(new ConfigEntry("max.message.bytes", "200000"), AlterConfigOp.OpType.SET),
          new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)))).all());
      emit("describeConfigs-altered", "configs", configs(admin, a, watched));
      try {
        get(admin.incrementalAlterConfigs(Map.of(res, List.of(
            new AlterConfigOp(new ConfigEntry("no.such.config", "1"), AlterConfigOp.OpType.SET)))).all());
        emit("incrementalAlterConfigs-unknown", "error", null);
      } catch (ExecutionException e) {
        emit("incrementalAlterConfigs-unknown", "error", e.getCause().getClass().getSimpleName());
      }

      try (KafkaProducer<String, String> producer = Clients.producer(bootstrap, Map.of())) {
        for (int i = 0; i < 10; i++) producer.send(new ProducerRecord<>(b, 0, "k" + i, "v" + i));
        producer.flush();
      }
      TopicPartition b0 = new TopicPartition(b, 0);
      var deleted = get(admin.deleteRecords(Map.of(b0, RecordsToDelete.beforeOffset(4))).lowWatermarks().get(b0));
      emit("deleteRecords", "lowWatermark", deleted.lowWatermark());

      try (KafkaConsumer<String, String> member =
          Clients.consumer(bootstrap, Map.of("group.id", group, "group.protocol", "classic"))) {
        member.subscribe(List.of(b));
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + Clients.WAIT_MS;
        while (System.currentTimeMillis() < deadline && (member.assignment().isEmpty() || got.size() < 6)) {
          member.poll(Duration.ofMillis(100)).forEach(got::add);
        }
        emit("member-read", "offsets", got.stream().map(ConsumerRecord::offset).toList());
        member.commitSync(Map.of(b0, new OffsetAndMetadata(7)));

        Collection<GroupListing> groups = get(admin.listGroups(ListGroupsOptions.forConsumerGroups()).all());
        List<Object> listed = new ArrayList<>();
        for (GroupListing g : groups) {
          listed.add(Map.of("groupId", g.groupId(), "type", String.valueOf(g.type().map(Enum::name).orElse(null)),
              "state", String.valueOf(g.groupState().map(Enum::name).orElse(null))));
        }
        emit("listGroups", "groups", listed);
        ConsumerGroupDescription desc = get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
        Map<String, Object> d = new TreeMap<>();
        d.put("groupId", desc.groupId());
        d.put("state", desc.groupState().name());
        d.put("type", desc.type().name());
        d.put("assignor", desc.partitionAssignor());
        d.put("coordinator", desc.coordinator().id());
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : desc.members()) {
          members.add(Map.of("clientId", m.clientId(), "host", m.host(),
              "assignment", Clients.names(m.assignment().topicPartitions())));
        }
        d.put("members", members);
        emit("describeConsumerGroups", "group", d);
        Map<TopicPartition, OffsetAndMetadata> offsets =
            get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        emit("listConsumerGroupOffsets", "offsets", Clients.offsets(offsets));
      }

      DescribeClusterResult cluster = admin.describeCluster();
      Map<String, Object> c = new TreeMap<>();
      c.put("clusterId", get(cluster.clusterId()));
      c.put("controller", get(cluster.controller()).id());
      c.put("nodes", get(cluster.nodes()).stream().map(n -> Map.of("id", n.id(), "host", n.host(), "port", n.port())).toList());
      emit("describeCluster", "cluster", c);

      FeatureMetadata features = get(admin.describeFeatures().featureMetadata());
      Map<String, Object> f = new TreeMap<>();
      Map<String, Object> finalized = new TreeMap<>();
      features.finalizedFeatures().forEach((name, range) ->
          finalized.put(name, List.of(range.minVersionLevel(), range.maxVersionLevel())));
      Map<String, Object> supported = new TreeMap<>();
      features.supportedFeatures().forEach((name, range) ->
          supported.put(name, List.of(range.minVersion(), range.maxVersion())));
      f.put("finalized", finalized);
      f.put("supported", supported);
      f.put("epoch", features.finalizedFeaturesEpoch().orElse(null));
      emit("describeFeatures", "features", f);

      get(admin.deleteTopics(List.of(a)).all());
      emit("listTopics-after-delete", "names", new ArrayList<>(get(admin.listTopics().names())));
      try {
        get(admin.describeTopics(List.of(a)).allTopicNames());
        emit("describeTopics-deleted", "error", null);
      } catch (ExecutionException e) {
        emit("describeTopics-deleted", "error", e.getCause().getClass().getSimpleName());
      }
    }
  }

  /**
   * Cluster story: an RF=3 topic, 200 records with acks=all, read back; describeCluster and
   * describeTopics as seen through every node.
   */
  static void replicated(String bootstrap, String prefix) throws Exception {
    String topic = prefix + "-rf3";
    try (Admin admin = Clients.admin(bootstrap)) {
      Clients.createTopic(admin, topic, 3, (short) 3);
      try (KafkaProducer<String, String> producer = Clients.producer(bootstrap, Map.of("acks", "all"))) {
        for (int i = 0; i < 200; i++) producer.send(new ProducerRecord<>(topic, "k" + (i % 11), "rf3-" + i));
        producer.flush();
      }
      try (KafkaConsumer<String, String> consumer = Clients.consumer(bootstrap, Map.of())) {
        List<ConsumerRecord<String, String>> got = Clients.readAll(consumer, Clients.partitions(topic, 3), 200);
        got.addAll(Clients.drain(consumer, 300));
        emit("consumed", "values", got.stream().map(ConsumerRecord::value).toList());
      }
      DescribeClusterResult cluster = admin.describeCluster();
      emit("describeCluster", "nodes", get(cluster.nodes()).stream().map(Node::id).sorted().toList());
      emit("describeTopics", "topic", describeTopic(get(admin.describeTopics(Set.of(topic)).allTopicNames()).get(topic)));
    }
  }
}
