package kafkapy.compat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterClientQuotasOptions;
import org.apache.kafka.common.quota.ClientQuotaAlteration;
import org.apache.kafka.common.quota.ClientQuotaEntity;
import org.apache.kafka.common.quota.ClientQuotaFilter;
import org.apache.kafka.common.quota.ClientQuotaFilterComponent;

/**
 * The Admin client-quota API (alterClientQuotas, describeClientQuotas) as kafka-configs.sh
 * --entity-type users/clients uses it. Entities are PREFIX-named; events: "described" (filter
 * label + entries: entity map with "<default>" for a default name -> quota map), "refused" (the
 * exception class and message of an alteration the broker must refuse).
 */
final class Quotas {
  private Quotas() {}

  static ClientQuotaEntity entity(String user, String clientId) {
    Map<String, String> parts = new HashMap<>();
    if (user != null) parts.put(ClientQuotaEntity.USER, user.equals("<default>") ? null : user);
    if (clientId != null) {
      parts.put(ClientQuotaEntity.CLIENT_ID, clientId.equals("<default>") ? null : clientId);
    }
    return new ClientQuotaEntity(parts);
  }

  static void alter(Admin admin, ClientQuotaEntity entity, String key, Double value)
      throws Exception {
    admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity,
        List.of(new ClientQuotaAlteration.Op(key, value))))).all().get();
  }

  static void describe(Admin admin, String label, ClientQuotaFilter filter) throws Exception {
    List<Object> entries = new ArrayList<>();
    for (Map.Entry<ClientQuotaEntity, Map<String, Double>> e :
        admin.describeClientQuotas(filter).entities().get().entrySet()) {
      Map<String, Object> names = new TreeMap<>();
      e.getKey().entries().forEach((t, n) -> names.put(t, n == null ? "<default>" : n));
      entries.add(List.of(names, new TreeMap<>(e.getValue())));
    }
    Map<String, Object> ev = Json.event("described");
    ev.put("filter", label);
    ev.put("entries", entries);
    Json.emit(ev);
  }

  static void run(String bootstrap, String prefix) throws Exception {
    String user = prefix + "-user";
    String client = prefix + "-client";
    try (Admin admin = Clients.admin(bootstrap)) {
      alter(admin, entity(user, client), "producer_byte_rate", 1048576.0);
      alter(admin, entity(user, "<default>"), "consumer_byte_rate", 2097152.0);
      alter(admin, entity(null, client), "request_percentage", 25.5);
      describe(admin, "user-exact", ClientQuotaFilter.contains(
          List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user))));
      describe(admin, "client-only-strict", ClientQuotaFilter.containsOnly(
          List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.CLIENT_ID, client))));
      describe(admin, "default-client", ClientQuotaFilter.contains(
          List.of(ClientQuotaFilterComponent.ofDefaultEntity(ClientQuotaEntity.CLIENT_ID))));
      // validateOnly: checked by the controller, nothing stored
      admin.alterClientQuotas(List.of(new ClientQuotaAlteration(entity(prefix + "-v", null),
              List.of(new ClientQuotaAlteration.Op("producer_byte_rate", 10.0)))),
          new AlterClientQuotasOptions().validateOnly(true)).all().get();
      describe(admin, "validated", ClientQuotaFilter.contains(
          List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, prefix + "-v"))));
      try {
        alter(admin, entity(user, null), "producer_byte_rate", -1.0);
        Json.emit(Json.event("accepted"));
      } catch (ExecutionException e) {
        Map<String, Object> ev = Json.event("refused");
        ev.put("class", e.getCause().getClass().getSimpleName());
        ev.put("message", String.valueOf(e.getCause().getMessage()));
        Json.emit(ev);
      }
      alter(admin, entity(user, client), "producer_byte_rate", null);
      describe(admin, "after-remove", ClientQuotaFilter.contains(
          List.of(ClientQuotaFilterComponent.ofEntity(ClientQuotaEntity.USER, user))));
    }
  }
}
