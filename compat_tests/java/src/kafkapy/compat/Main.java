package kafkapy.compat;

import java.util.Arrays;
import java.util.Map;

/**
 * Entry point: `java -cp ... kafkapy.compat.Main SCENARIO BOOTSTRAP PREFIX [ARGS...]`.
 *
 * <p>Why one program with scenarios: a JVM start costs about a second on this machine, so each
 * scenario does a whole user story (create, produce, consume, commit, ...) in one run and prints
 * JSON lines the Python test asserts on. The first line is always {"event":"client",...} naming
 * the kafka-clients version; the last is {"event":"done"} unless the scenario threw, in which
 * case an {"event":"error"} line is printed and the exit code is 1.
 */
public final class Main {
  private Main() {}

  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: Main SCENARIO BOOTSTRAP PREFIX [ARGS...]");
      System.exit(2);
    }
    String scenario = args[0];
    String bootstrap = args[1];
    String prefix = args[2];
    String[] rest = Arrays.copyOfRange(args, 3, args.length);
    Map<String, Object> hello = Json.event("client");
    hello.put("version", org.apache.kafka.common.utils.AppInfoParser.getVersion());
    hello.put("scenario", scenario);
    Json.emit(hello);
    int code = 0;
    try {
      switch (scenario) {
        case "produce-consume" -> ProduceConsume.run(bootstrap, prefix, rest);
        case "big" -> ProduceConsume.big(bootstrap, prefix);
        case "groups" -> Groups.run(bootstrap, prefix, rest);
        case "transactions" -> Transactions.run(bootstrap, prefix);
        case "admin" -> AdminOps.run(bootstrap, prefix);
        case "replicated" -> AdminOps.replicated(bootstrap, prefix);
        case "api-versions" -> apiVersions();
        case "admin-extra" -> AdminExtra.run(bootstrap, prefix);
        case "static-member" -> Membership.staticMember(bootstrap, prefix);
        case "fencing" -> Membership.fencing(bootstrap, prefix);
        case "pending-offsets" -> Transactions.pendingOffsets(bootstrap, prefix);
        case "scram" -> Scram.run(bootstrap, prefix, rest);
        case "acls" -> Acls.run(bootstrap, prefix);
        case "authz" -> Authz.run(bootstrap, prefix, rest);
        case "quotas" -> Quotas.run(bootstrap, prefix);
        default -> throw new IllegalArgumentException("unknown scenario " + scenario);
      }
      Json.emit(Json.event("done"));
    } catch (Throwable t) {
      Json.emit(Clients.error(scenario, t));
      t.printStackTrace();
      code = 1;
    }
    // kafka-clients' non-daemon threads must not keep a failed run alive
    System.exit(code);
  }

  /**
   * The version range this kafka-clients build speaks for every broker API (no connection):
   * the Python side intersects it with what the broker advertises to learn what Java
   * negotiates (the highest version both speak).
   */
  static void apiVersions() {
    java.util.List<Object> apis = new java.util.ArrayList<>();
    for (org.apache.kafka.common.protocol.ApiKeys key :
        org.apache.kafka.common.protocol.ApiKeys.clientApis()) {
      apis.add(Map.of("key", (int) key.id, "name", key.name,
          "min", (int) key.oldestVersion(), "max", (int) key.latestVersion()));
    }
    Map<String, Object> ev = Json.event("api-versions");
    ev.put("apis", apis);
    Json.emit(ev);
  }
}
