package kafkapy.compat;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourceType;

/**
 * ACL enforcement as a Java application meets it, on a SASL_PLAINTEXT broker with
 * StandardAuthorizer. ARGS: ADMIN_USER ADMIN_PASSWORD USER USER_PASSWORD (PLAIN). The admin (a
 * super user) creates topic PREFIX-t; USER's producer is refused (events "refused"), then the
 * admin grants WRITE with Admin.createAcls and USER produces ("produced"); USER's consumer in
 * group PREFIX-g is refused until READ on the topic and the group are granted ("consumed").
 */
final class Authz {
  private Authz() {}

  static Map<String, String> plain(String user, String password) {
    Map<String, String> props = new HashMap<>();
    props.put("security.protocol", "SASL_PLAINTEXT");
    props.put("sasl.mechanism", "PLAIN");
    props.put(
        "sasl.jaas.config",
        "org.apache.kafka.common.security.plain.PlainLoginModule required username=\""
            + user + "\" password=\"" + password + "\";");
    return props;
  }

  static void run(String bootstrap, String prefix, String[] args) throws Exception {
    String topic = prefix + "-t";
    String group = prefix + "-g";
    String principal = "User:" + args[2];
    Map<String, String> as = plain(args[2], args[3]);
    Properties props = Clients.common(bootstrap);
    props.putAll(plain(args[0], args[1]));
    try (Admin admin = Admin.create(props)) {
      Clients.createTopic(admin, topic, 1, (short) 1);
      produce(bootstrap, topic, as, "no-acl");
      grant(admin, ResourceType.TOPIC, topic, principal, AclOperation.WRITE);
      produce(bootstrap, topic, as, "write");
      consume(bootstrap, topic, group, as, "no-group-acl");
      grant(admin, ResourceType.TOPIC, topic, principal, AclOperation.READ);
      grant(admin, ResourceType.GROUP, group, principal, AclOperation.READ);
      consume(bootstrap, topic, group, as, "read");
    }
  }

  private static void grant(Admin admin, ResourceType type, String name, String principal, AclOperation op)
      throws Exception {
    AclBinding binding = new AclBinding(
        new ResourcePattern(type, name, PatternType.LITERAL),
        new AccessControlEntry(principal, "*", op, AclPermissionType.ALLOW));
    admin.createAcls(List.of(binding)).all().get(Clients.WAIT_MS, TimeUnit.MILLISECONDS);
  }

  /** One record as `as`: "produced" with its offset, or "refused" with the exception classes. */
  private static void produce(String bootstrap, String topic, Map<String, String> as, String step) {
    Map<String, String> extra = new HashMap<>(as);
    extra.put("max.block.ms", "10000");
    extra.put("delivery.timeout.ms", "15000");
    extra.put("request.timeout.ms", "10000");
    try (KafkaProducer<String, String> producer = Clients.producer(bootstrap, extra)) {
      long offset = producer.send(new ProducerRecord<>(topic, "k", "v")).get(20, TimeUnit.SECONDS).offset();
      Map<String, Object> ev = Json.event("produced");
      ev.put("step", step);
      ev.put("offset", offset);
      Json.emit(ev);
    } catch (Exception e) {
      emitRefused(step, e);
    }
  }

  /** Poll as `as` in `group`: "consumed" with the values read, or "refused". */
  private static void consume(String bootstrap, String topic, String group, Map<String, String> as, String step) {
    Map<String, String> extra = new HashMap<>(as);
    extra.put("group.id", group);
    extra.put("auto.offset.reset", "earliest");
    try (KafkaConsumer<String, String> consumer = Clients.consumer(bootstrap, extra)) {
      consumer.subscribe(List.of(topic));
      List<Object> values = new ArrayList<>();
      long deadline = System.currentTimeMillis() + Clients.WAIT_MS;
      while (values.isEmpty() && System.currentTimeMillis() < deadline) {
        consumer.poll(Duration.ofMillis(500)).forEach(r -> values.add(r.value()));
      }
      Map<String, Object> ev = Json.event("consumed");
      ev.put("step", step);
      ev.put("values", values);
      Json.emit(ev);
    } catch (Exception e) {
      emitRefused(step, e);
    }
  }

  private static void emitRefused(String step, Exception e) {
    List<Object> classes = new ArrayList<>();
    for (Throwable t = e; t != null && !classes.contains(t.getClass().getSimpleName()); t = t.getCause()) {
      classes.add(t.getClass().getSimpleName());
    }
    Map<String, Object> ev = Json.event("refused");
    ev.put("step", step);
    ev.put("classes", classes);
    Json.emit(ev);
  }
}
