package kafkapy.compat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;

/**
 * SCRAM users through the Admin API, as kafka-configs.sh --entity-type users does it, on a
 * SASL_PLAINTEXT cluster. ARGS: ADMIN_USER ADMIN_PASSWORD OTHER_BOOTSTRAP. The admin (SCRAM-SHA-512
 * on BOOTSTRAP) creates user PREFIX-user (SCRAM-SHA-256, 8192 iterations) and topic PREFIX-t
 * (RF 3); a producer logged in as that user on OTHER_BOOTSTRAP writes one record; a wrong
 * password is refused there; the admin deletes the user and describes it again.
 */
final class Scram {
  private Scram() {}

  static Map<String, String> sasl(String mechanism, String user, String password) {
    Map<String, String> props = new HashMap<>();
    props.put("security.protocol", "SASL_PLAINTEXT");
    props.put("sasl.mechanism", mechanism);
    props.put(
        "sasl.jaas.config",
        "org.apache.kafka.common.security.scram.ScramLoginModule required username=\""
            + user
            + "\" password=\""
            + password
            + "\";");
    return props;
  }

  static void run(String bootstrap, String prefix, String[] args) throws Exception {
    String user = prefix + "-user";
    String topic = prefix + "-t";
    String other = args[2];
    Properties props = Clients.common(bootstrap);
    props.putAll(sasl("SCRAM-SHA-512", args[0], args[1]));
    try (Admin admin = Admin.create(props)) {
      ScramCredentialInfo info = new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192);
      admin
          .alterUserScramCredentials(
              List.of(new UserScramCredentialUpsertion(user, info, "java-secret")))
          .all()
          .get(Clients.WAIT_MS, TimeUnit.MILLISECONDS);
      Clients.createTopic(admin, topic, 1, (short) 3);
      emitDescription(admin, user);

      Map<String, String> as = sasl("SCRAM-SHA-256", user, "java-secret");
      try (KafkaProducer<String, String> producer = Clients.producer(other, as)) {
        RecordMetadata md =
            producer
                .send(new ProducerRecord<>(topic, "k", "v"))
                .get(Clients.WAIT_MS, TimeUnit.MILLISECONDS);
        Map<String, Object> ev = Json.event("produced");
        ev.put("offset", md.offset());
        Json.emit(ev);
      }
      refused(other, topic, sasl("SCRAM-SHA-256", user, "not-the-password"), "wrong-password");

      admin
          .alterUserScramCredentials(
              List.of(new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256)))
          .all()
          .get(Clients.WAIT_MS, TimeUnit.MILLISECONDS);
      emitDescription(admin, user);
    }
  }

  private static void emitDescription(Admin admin, String user) throws Exception {
    Map<String, Object> ev = Json.event("described");
    ev.put("user", user);
    try {
      UserScramCredentialsDescription d =
          admin
              .describeUserScramCredentials(List.of(user))
              .description(user)
              .get(Clients.WAIT_MS, TimeUnit.MILLISECONDS);
      List<Object> infos = new ArrayList<>();
      for (ScramCredentialInfo i : d.credentialInfos()) {
        infos.add(List.of(i.mechanism().mechanismName(), i.iterations()));
      }
      ev.put("credentials", infos);
    } catch (ExecutionException e) {
      ev.put("error", e.getCause().getClass().getSimpleName());
    }
    Json.emit(ev);
  }

  /** A producer with `as` must fail to log in: emits the exception classes it met. */
  private static void refused(String bootstrap, String topic, Map<String, String> as, String what) {
    Map<String, String> extra = new HashMap<>(as);
    extra.put("max.block.ms", "10000");
    Map<String, Object> ev = Json.event("refused");
    ev.put("what", what);
    List<Object> classes = new ArrayList<>();
    try (KafkaProducer<String, String> producer = Clients.producer(bootstrap, extra)) {
      producer.send(new ProducerRecord<>(topic, "k", "v")).get(15, TimeUnit.SECONDS);
    } catch (Exception e) {
      for (Throwable t = e; t != null && !classes.contains(t.getClass().getSimpleName()); t = t.getCause()) {
        classes.add(t.getClass().getSimpleName());
      }
    }
    ev.put("classes", classes);
    Json.emit(ev);
  }
}
