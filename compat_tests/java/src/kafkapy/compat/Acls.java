package kafkapy.compat;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.common.acl.AccessControlEntry;
import org.apache.kafka.common.acl.AccessControlEntryFilter;
import org.apache.kafka.common.acl.AclBinding;
import org.apache.kafka.common.acl.AclBindingFilter;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.acl.AclPermissionType;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.resource.ResourceType;

/**
 * The Admin ACL API (createAcls, describeAcls, deleteAcls) as kafka-acls.sh and Java tooling use
 * it, against a broker with StandardAuthorizer where this client is a super user. Bindings are on
 * PREFIX-named resources; events: "created", "described" (filter name + bindings), "refused"
 * (a binding the broker must refuse), "deleted".
 */
final class Acls {
  private Acls() {}

  static AclBinding binding(ResourceType type, String name, PatternType pattern, String principal,
      AclOperation op, AclPermissionType permission) {
    return new AclBinding(new ResourcePattern(type, name, pattern),
        new AccessControlEntry(principal, "*", op, permission));
  }

  static List<Object> rows(Collection<AclBinding> bindings) {
    List<Object> out = new ArrayList<>();
    for (AclBinding b : bindings) {
      out.add(List.of(b.pattern().resourceType().name(), b.pattern().name(),
          b.pattern().patternType().name(), b.entry().principal(), b.entry().host(),
          b.entry().operation().name(), b.entry().permissionType().name()));
    }
    return out;
  }

  static void describe(Admin admin, String label, AclBindingFilter filter) throws Exception {
    Map<String, Object> ev = Json.event("described");
    ev.put("filter", label);
    ev.put("bindings", rows(admin.describeAcls(filter).values().get()));
    Json.emit(ev);
  }

  static void run(String bootstrap, String prefix) throws Exception {
    try (Admin admin = Clients.admin(bootstrap)) {
      List<AclBinding> wanted = List.of(
          binding(ResourceType.TOPIC, prefix + "-orders", PatternType.LITERAL, "User:alice",
              AclOperation.READ, AclPermissionType.ALLOW),
          binding(ResourceType.TOPIC, prefix + "-", PatternType.PREFIXED, "User:alice",
              AclOperation.WRITE, AclPermissionType.ALLOW),
          binding(ResourceType.GROUP, prefix + "-app", PatternType.LITERAL, "User:mallory",
              AclOperation.ALL, AclPermissionType.DENY),
          binding(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL, "User:" + prefix,
              AclOperation.IDEMPOTENT_WRITE, AclPermissionType.ALLOW));
      admin.createAcls(wanted).all().get();
      Map<String, Object> created = Json.event("created");
      created.put("bindings", rows(wanted));
      Json.emit(created);

      describe(admin, "any", AclBindingFilter.ANY);
      describe(admin, "match", new AclBindingFilter(
          new ResourcePatternFilter(ResourceType.TOPIC, prefix + "-orders", PatternType.MATCH),
          AccessControlEntryFilter.ANY));

      AclBinding bad = binding(ResourceType.CLUSTER, "my-cluster", PatternType.LITERAL,
          "User:alice", AclOperation.ALTER, AclPermissionType.ALLOW);
      Map<String, Object> refused = Json.event("refused");
      try {
        admin.createAcls(List.of(bad)).all().get();
        refused.put("class", "none");
      } catch (ExecutionException e) {
        refused.put("class", e.getCause().getClass().getSimpleName());
      }
      Json.emit(refused);

      AclBindingFilter alice = new AclBindingFilter(ResourcePatternFilter.ANY,
          new AccessControlEntryFilter("User:alice", null, AclOperation.ANY, AclPermissionType.ANY));
      Map<String, Object> deleted = Json.event("deleted");
      deleted.put("bindings", rows(admin.deleteAcls(List.of(alice)).all().get()));
      Json.emit(deleted);
      describe(admin, "after", AclBindingFilter.ANY);
    }
  }
}
