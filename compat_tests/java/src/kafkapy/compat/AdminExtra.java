package kafkapy.compat;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.DescribeProducersResult;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;

/**
 * Admin and consumer calls beyond the basics that Java tooling (kafka-consumer-groups.sh,
 * kafka-configs.sh, kafka-transactions.sh, Cruise-Control-like tools) relies on. Topic
 * PREFIX-t (2 partitions) gets 10 records in partition 0 with CreateTime base + 1000*i, and a
 * committed transaction of 3 records in partition 1 from transactional id PREFIX-txn.
 */
final class AdminExtra {
  private AdminExtra() {}

  static void run(String bootstrap, String prefix) throws Exception {
    String topic = prefix + "-t";
    String group = prefix + "-group";
    TopicPartition p0 = new TopicPartition(topic, 0);
    TopicPartition p1 = new TopicPartition(topic, 1);
    long base = System.currentTimeMillis() - 600_000L;
    try (Admin admin = Clients.admin(bootstrap)) {
      Clients.createTopic(admin, topic, 2, (short) 1);
      try (KafkaProducer<String, String> producer = Clients.producer(bootstrap, Map.of())) {
        for (int i = 0; i < 10; i++) {
          producer.send(new ProducerRecord<>(topic, 0, base + 1000L * i, "k" + i, "v" + i));
        }
        producer.flush();
      }
      try (KafkaProducer<String, String> txn =
          Clients.producer(bootstrap, Map.of("transactional.id", prefix + "-txn"))) {
        txn.initTransactions();
        txn.beginTransaction();
        for (int i = 0; i < 3; i++) txn.send(new ProducerRecord<>(topic, 1, "t" + i, "txn" + i));
        txn.commitTransaction();
      }

      Map<String, Object> offsets = new TreeMap<>();
      Map<String, OffsetSpec> specs = Map.of(
          "earliest", OffsetSpec.earliest(), "latest", OffsetSpec.latest(),
          "maxTimestamp", OffsetSpec.maxTimestamp(), "forTimestamp", OffsetSpec.forTimestamp(base + 4500));
      for (Map.Entry<String, OffsetSpec> spec : specs.entrySet()) {
        ListOffsetsResult.ListOffsetsResultInfo info =
            AdminOps.get(admin.listOffsets(Map.of(p0, spec.getValue())).partitionResult(p0));
        offsets.put(spec.getKey(), Map.of("offset", info.offset(), "timestamp", info.timestamp()));
      }
      AdminOps.emit("listOffsets", "p0", offsets);

      try (KafkaConsumer<String, String> consumer = Clients.consumer(bootstrap, Map.of())) {
        Map<TopicPartition, OffsetAndTimestamp> found =
            consumer.offsetsForTimes(Map.of(p0, base + 2000, p1, base + 10_000_000L));
        Map<String, Object> out = new TreeMap<>();
        found.forEach((tp, ot) -> out.put(tp.toString(), ot == null ? "none" : ot.offset()));
        AdminOps.emit("offsetsForTimes", "offsets", out);
        Map<String, Long> ends = new TreeMap<>();
        consumer.endOffsets(List.of(p0, p1)).forEach((tp, o) -> ends.put(tp.toString(), o));
        AdminOps.emit("endOffsets", "offsets", ends);
      }

      // kafka-consumer-groups.sh --reset-offsets / --delete-offsets / --delete on an empty group
      AdminOps.get(admin.alterConsumerGroupOffsets(group,
          Map.of(p0, new OffsetAndMetadata(6, "reset"), p1, new OffsetAndMetadata(2))).all());
      AdminOps.emit("alterConsumerGroupOffsets", "offsets",
          Clients.offsets(AdminOps.get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata())));
      AdminOps.get(admin.deleteConsumerGroupOffsets(group, Set.of(p1)).all());
      AdminOps.emit("deleteConsumerGroupOffsets", "offsets",
          Clients.offsets(AdminOps.get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata())));
      AdminOps.get(admin.deleteConsumerGroups(List.of(group)).all());
      try {
        AdminOps.get(admin.describeConsumerGroups(List.of(group)).all());
        AdminOps.emit("describe-deleted-group", "state",
            AdminOps.get(admin.describeConsumerGroups(List.of(group)).all()).get(group).groupState().name());
      } catch (ExecutionException e) {
        AdminOps.emit("describe-deleted-group", "error", e.getCause().getClass().getSimpleName());
      }

      AdminOps.get(admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(4))).all());
      AdminOps.emit("createPartitions", "partitions",
          AdminOps.get(admin.describeTopics(List.of(topic)).allTopicNames()).get(topic).partitions().size());

      // list-valued configs: APPEND / SUBTRACT (kafka-configs.sh --add-config 'k=[a,b]')
      ConfigResource topicRes = new ConfigResource(ConfigResource.Type.TOPIC, topic);
      Map<String, Object> listOps = new TreeMap<>();
      for (Map.Entry<String, AlterConfigOp> step : List.of(
          Map.entry("append", new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND)),
          Map.entry("subtract", new AlterConfigOp(new ConfigEntry("cleanup.policy", "delete"), AlterConfigOp.OpType.SUBTRACT)))) {
        AdminOps.get(admin.incrementalAlterConfigs(Map.of(topicRes, List.of(step.getValue()))).all());
        Config cfg = AdminOps.get(admin.describeConfigs(List.of(topicRes)).all()).get(topicRes);
        listOps.put(step.getKey(), cfg.get("cleanup.policy").value());
      }
      AdminOps.emit("listConfigOps", "cleanup.policy", listOps);
      Config detailed = AdminOps.get(admin.describeConfigs(List.of(topicRes),
          new org.apache.kafka.clients.admin.DescribeConfigsOptions().includeSynonyms(true).includeDocumentation(true)).all()).get(topicRes);
      ConfigEntry policy = detailed.get("cleanup.policy");
      Map<String, Object> syn = new TreeMap<>();
      syn.put("synonyms", policy.synonyms().stream().map(x -> x.name() + ":" + x.source().name()).toList());
      syn.put("documented", policy.documentation() != null && !policy.documentation().isEmpty());
      syn.put("type", policy.type().name());
      AdminOps.emit("describeConfigs-synonyms", "cleanup.policy", syn);

      ConfigResource brokerRes = new ConfigResource(ConfigResource.Type.BROKER, "1");
      Config brokerConfig = AdminOps.get(admin.describeConfigs(List.of(brokerRes)).all()).get(brokerRes);
      Map<String, Object> bc = new TreeMap<>();
      for (String name : List.of("log.retention.hours", "num.partitions", "default.replication.factor")) {
        ConfigEntry e = brokerConfig.get(name);
        bc.put(name, e == null ? null : e.value());
      }
      bc.put("_count", brokerConfig.entries().size());
      AdminOps.emit("describeConfigs-broker", "configs", bc);

      // kafka-configs.sh --entity-type groups: a KIP-848 group config on a group nobody joined
      ConfigResource groupRes = new ConfigResource(ConfigResource.Type.GROUP, group + "-cfg");
      AdminOps.get(admin.incrementalAlterConfigs(Map.of(groupRes, List.of(new AlterConfigOp(
          new ConfigEntry("consumer.session.timeout.ms", "50000"), AlterConfigOp.OpType.SET)))).all());
      Map<String, Object> gc = new TreeMap<>();
      for (ConfigEntry e : AdminOps.get(admin.describeConfigs(List.of(groupRes)).all()).get(groupRes).entries()) {
        gc.put(e.name(), e.value() + ":" + e.source().name());
      }
      AdminOps.emit("groupConfigs", "configs", gc);

      // kafka-configs.sh --entity-type broker-loggers: set a level, then delete it again
      ConfigResource loggerRes = new ConfigResource(ConfigResource.Type.BROKER_LOGGER, "1");
      String logger = "kafkapy.server.broker";
      Map<String, Object> lc = new TreeMap<>();
      for (Map.Entry<String, AlterConfigOp> step : List.of(
          Map.entry("set", new AlterConfigOp(new ConfigEntry(logger, "DEBUG"), AlterConfigOp.OpType.SET)),
          Map.entry("delete", new AlterConfigOp(new ConfigEntry(logger, ""), AlterConfigOp.OpType.DELETE)))) {
        AdminOps.get(admin.incrementalAlterConfigs(Map.of(loggerRes, List.of(step.getValue()))).all());
        Config levels = AdminOps.get(admin.describeConfigs(List.of(loggerRes)).all()).get(loggerRes);
        ConfigEntry e = levels.get(logger);
        lc.put(step.getKey(), e.value() + ":" + e.source().name());
        lc.put(step.getKey() + "-root", levels.get("root").value());
      }
      AdminOps.emit("brokerLoggers", "levels", lc);

      Collection<TransactionListing> txns = AdminOps.get(admin.listTransactions().all());
      List<Object> listed = new ArrayList<>();
      for (TransactionListing t : txns) {
        listed.add(Map.of("id", t.transactionalId(), "state", t.state().toString(), "producerId", t.producerId()));
      }
      AdminOps.emit("listTransactions", "transactions", listed);
      TransactionDescription td =
          AdminOps.get(admin.describeTransactions(List.of(prefix + "-txn")).all()).get(prefix + "-txn");
      AdminOps.emit("describeTransactions", "transaction", Map.of(
          "state", td.state().toString(), "producerId", td.producerId(),
          "epoch", td.producerEpoch(), "coordinator", td.coordinatorId(),
          "timeoutMs", td.transactionTimeoutMs(), "partitions", Clients.names(td.topicPartitions())));
      // p0: the plain producer with 4.x defaults (idempotent), p1: the transactional one
      for (TopicPartition tp : List.of(p0, p1)) {
        DescribeProducersResult.PartitionProducerState ps =
            AdminOps.get(admin.describeProducers(List.of(tp)).partitionResult(tp));
        List<Object> producers = new ArrayList<>();
        for (ProducerState s : ps.activeProducers()) {
          producers.add(Map.of("producerId", s.producerId(), "epoch", s.producerEpoch(),
              "lastSequence", s.lastSequence(), "open", s.currentTransactionStartOffset().isPresent()));
        }
        Map<String, Object> ev = Json.event("describeProducers");
        ev.put("partition", tp.partition());
        ev.put("producers", producers);
        Json.emit(ev);
      }
    }
  }
}
