"""The broker config keys kafkapy knows: Kafka's names, types, kafkapy's defaults and what each
does here.

Why a module of its own: the table is data (one entry a key), read by the config parser
(`kafkapy.broker.config`), DescribeConfigs, the dynamic-config rules and the CLI's config help;
kept apart, the parser reads as code.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafkapy.protocol.config_types import ConfigType

__all__ = ["BROKER_CONFIGS", "STANDARD_AUTHORIZER", "BrokerConfigKey"]

#: the one authorizer kafkapy has (Kafka's KRaft authorizer: ACLs in the metadata log)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


@dataclass(frozen=True, slots=True)
class BrokerConfigKey:
    name: str
    type: ConfigType
    default: str | None
    doc: str


_B = BrokerConfigKey
_T = ConfigType

# Broker keys kafkapy acts on. Defaults are the embedded developer defaults (see the module doc of
# kafkapy.cli.main); where they differ from Kafka's the doc says so.
BROKER_CONFIGS: dict[str, BrokerConfigKey] = {
    k.name: k
    for k in [
        _B("node.id", _T.INT, "1", "This broker's id; a single node is always the leader."),
        _B("broker.id", _T.INT, None, "Legacy synonym of node.id."),
        _B(
            "process.roles",
            _T.LIST,
            "broker,controller",
            "broker, controller or both; a broker-only node is always a cluster member.",
        ),
        _B(
            "listeners",
            _T.LIST,
            "PLAINTEXT://127.0.0.1:9092",
            "Where to listen (Kafka's default binds all interfaces; ours is loopback).",
        ),
        _B(
            "advertised.listeners",
            _T.LIST,
            None,
            "Addresses handed to clients in Metadata; defaults to listeners.",
        ),
        _B(
            "listener.security.protocol.map",
            _T.LIST,
            "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "Listener name to security protocol.",
        ),
        _B(
            "controller.listener.names",
            _T.LIST,
            "CONTROLLER",
            "Listeners the controller quorum is served on (cluster mode only; one node does not bind them).",
        ),
        _B(
            "inter.broker.listener.name",
            _T.STRING,
            None,
            "Broker listener replicas fetch over (default: the first broker listener).",
        ),
        _B(
            "sasl.enabled.mechanisms",
            _T.LIST,
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
            "SASL mechanisms of SASL_* listeners (Kafka's default is GSSAPI, which kafkapy lacks).",
        ),
        _B(
            "sasl.jaas.config",
            _T.PASSWORD,
            None,
            'JAAS line; its user_NAME="PASSWORD" options are SASL users (also read from listener.name.L.MECH.sasl.jaas.config).',
        ),
        # Kerberos (GSSAPI) keys: stored and described, inert - GSSAPI itself is refused in
        # sasl.enabled.mechanisms of a SASL listener and as an inter-node mechanism, so nothing
        # reads them. Kafka takes them at run time per broker (DynamicListenerConfig).
        *[
            _B(name, typ, default, f"Kerberos setting, inert: kafkapy has no GSSAPI. {why}")
            for name, typ, default, why in [
                ("sasl.kerberos.service.name", _T.STRING, None, "Kafka's Kerberos service name."),
                ("sasl.kerberos.kinit.cmd", _T.STRING, "/usr/bin/kinit", "Kafka's kinit command."),
                ("sasl.kerberos.min.time.before.relogin", _T.LONG, "60000",
                 "Kafka's login thread sleep between refresh attempts (ms)."),
                ("sasl.kerberos.ticket.renew.window.factor", _T.DOUBLE, "0.8",
                 "Kafka's share of the ticket lifetime before renewal."),
                ("sasl.kerberos.ticket.renew.jitter", _T.DOUBLE, "0.05",
                 "Kafka's random jitter added to the renewal time."),
                ("sasl.kerberos.principal.to.local.rules", _T.LIST, "DEFAULT",
                 "Kafka's rules mapping Kerberos principals to short names."),
            ]
        ],
        _B(
            "kafkapy.sasl.users",
            _T.PASSWORD,
            None,
            "SASL users NAME:PASSWORD,... for PLAIN and SCRAM-SHA-256/512 (see README, Security).",
        ),
        _B(
            "authorizer.class.name",
            _T.STRING,
            "",
            f"Empty (no authorizer: any client may do anything) or {STANDARD_AUTHORIZER} "
            "(ACLs in the metadata log); any other class refuses to start.",
        ),
        _B(
            "super.users",
            _T.STRING,
            None,
            "Principals the authorizer allows everything, e.g. User:admin;User:ops.",
        ),
        _B(
            "allow.everyone.if.no.acl.found",
            _T.BOOLEAN,
            "false",
            "The authorizer allows what no ACL of the resource speaks about.",
        ),
        _B(
            "ssl.keystore.type",
            _T.STRING,
            "PEM",
            "Only PEM: ssl.keystore.location is a PEM file holding the certificate chain and the private key.",
        ),
        _B(
            "ssl.keystore.location",
            _T.STRING,
            None,
            "PEM file with this broker's certificate chain and private key (SSL/SASL_SSL listeners).",
        ),
        _B(
            "ssl.keystore.password",
            _T.PASSWORD,
            None,
            "Password of the private key in ssl.keystore.location (synonym of ssl.key.password).",
        ),
        _B(
            "ssl.key.password",
            _T.PASSWORD,
            None,
            "Password of the private key, if it is encrypted.",
        ),
        _B(
            "ssl.certificate.location",
            _T.STRING,
            None,
            "PEM certificate chain (librdkafka-style name; with ssl.key.location instead of a keystore).",
        ),
        _B(
            "ssl.key.location",
            _T.STRING,
            None,
            "PEM private key belonging to ssl.certificate.location.",
        ),
        _B("ssl.truststore.type", _T.STRING, "PEM", "Only PEM."),
        _B(
            "ssl.truststore.location",
            _T.STRING,
            None,
            "PEM CA certificates that client certificates must chain to (ssl.client.auth).",
        ),
        _B(
            "ssl.ca.location",
            _T.STRING,
            None,
            "librdkafka-style synonym of ssl.truststore.location.",
        ),
        _B(
            "ssl.client.auth",
            _T.STRING,
            "none",
            "none, requested or required: whether TLS clients must present a certificate.",
        ),
        _B(
            "ssl.endpoint.identification.algorithm",
            _T.STRING,
            "https",
            "Inter-node TLS: check the other node's host name against its certificate (empty: do not).",
        ),
        _B(
            "controller.quorum.voters",
            _T.LIST,
            "",
            "The controller quorum, id@host:port,...; more than one voter turns cluster mode on.",
        ),
        _B(
            "controller.quorum.bootstrap.servers",
            _T.LIST,
            "",
            "Controller addresses host:port,...; kafkapy still needs controller.quorum.voters for a cluster.",
        ),
        _B(
            "controller.quorum.election.timeout.ms",
            _T.INT,
            "1000",
            "Raft: a candidate's election timeout (randomised up to twice this).",
        ),
        _B(
            "controller.quorum.fetch.timeout.ms",
            _T.INT,
            "2000",
            "Raft: a voter without a leader's answer this long starts an election.",
        ),
        _B(
            "controller.quorum.request.timeout.ms",
            _T.INT,
            "2000",
            "Timeout of one request between controller quorum members.",
        ),
        _B(
            "metadata.log.max.record.bytes.between.snapshots",
            _T.LONG,
            "20971520",
            "Cluster mode: a node snapshots its metadata image after this many bytes of new records.",
        ),
        _B(
            "broker.session.timeout.ms",
            _T.LONG,
            "9000",
            "A broker without a heartbeat this long is fenced by the controller.",
        ),
        _B(
            "broker.heartbeat.interval.ms",
            _T.INT,
            "2000",
            "How often a broker heartbeats to the active controller.",
        ),
        _B(
            "replica.lag.time.max.ms",
            _T.LONG,
            "30000",
            "A follower not caught up for this long leaves the ISR.",
        ),
        _B(
            "replica.fetch.max.bytes",
            _T.INT,
            "1048576",
            "Bytes a follower asks for per partition per fetch (at least one batch).",
        ),
        _B(
            "replica.fetch.response.max.bytes",
            _T.INT,
            "10485760",
            "Bytes a follower asks for per fetch in all.",
        ),
        _B("replica.fetch.wait.max.ms", _T.INT, "500", "Long-poll time of a follower's fetch."),
        _B("replica.fetch.min.bytes", _T.INT, "1", "Bytes a follower's fetch waits for."),
        _B("replica.fetch.backoff.ms", _T.INT, "1000", "Pause after a failed follower fetch."),
        _B("log.dirs", _T.LIST, None, "Data directories; the first also holds topic metadata."),
        _B("log.dir", _T.STRING, "./data", "Data directory when log.dirs is not set."),
        _B(
            "num.partitions",
            _T.INT,
            "1",
            "Partitions of an auto-created topic or a CreateTopics with -1.",
        ),
        _B(
            "default.replication.factor",
            _T.SHORT,
            "1",
            "Replication factor for -1 (only 1 is possible on one node).",
        ),
        _B("min.insync.replicas", _T.INT, "1", "Default min.insync.replicas of topics."),
        _B(
            "auto.create.topics.enable",
            _T.BOOLEAN,
            "true",
            "Create unknown topics on Metadata and Produce.",
        ),
        _B("delete.topic.enable", _T.BOOLEAN, "true", "Allow DeleteTopics."),
        _B(
            "broker.rack",
            _T.STRING,
            None,
            "This broker's rack (failure domain): sent in its registration, shown in Metadata and DescribeCluster, used by rack-aware replica placement and follower fetching.",
        ),
        _B(
            "replica.selector.class",
            _T.STRING,
            "",
            "Empty: consumers read from leaders only; org.apache.kafka.common.replica.RackAwareReplicaSelector: a leader names an in-sync replica in the consumer's rack (Fetch rack_id) as its preferred read replica (KIP-392).",
        ),
        _B(
            "auto.leader.rebalance.enable",
            _T.BOOLEAN,
            "true",
            "Cluster: the active controller runs a preferred leader election for every partition whose preferred replica is in its ISR but not leader, at each leader.imbalance.check.interval.seconds.",
        ),
        _B(
            "leader.imbalance.check.interval.seconds",
            _T.LONG,
            "300",
            "Cluster: seconds between the controller's leader-imbalance checks.",
        ),
        _B(
            "leader.imbalance.per.broker.percentage",
            _T.INT,
            "10",
            "Accepted and not applied, as Kafka 4's KRaft controller: every imbalanced partition moves at each check.",
        ),
        _B(
            "max.broker.partitions",
            _T.INT,
            "2147483647",
            "Cluster: most partition replicas one broker may hold (KIP-578); CreateTopics, CreatePartitions and reassignments beyond it get POLICY_VIOLATION; internal topics are never refused.",
        ),
        _B(
            "max.partitions",
            _T.INT,
            "2147483647",
            "Cluster: most partitions (not replicas) the cluster may hold (KIP-578); beyond it POLICY_VIOLATION.",
        ),
        _B("log.retention.ms", _T.LONG, None, "Default retention.ms; wins over minutes and hours."),
        _B("log.retention.minutes", _T.INT, None, "Default retention in minutes."),
        _B("log.retention.hours", _T.INT, "168", "Default retention in hours."),
        _B("log.retention.bytes", _T.LONG, "-1", "Default retention.bytes."),
        _B("log.segment.bytes", _T.INT, "1073741824", "Default segment.bytes."),
        _B("log.roll.ms", _T.LONG, None, "Default segment.ms; wins over hours."),
        _B("log.roll.hours", _T.INT, "168", "Default segment roll time in hours."),
        _B("log.roll.jitter.ms", _T.LONG, None, "Default segment.jitter.ms; wins over hours."),
        _B("log.roll.jitter.hours", _T.INT, "0", "Default segment.jitter.ms in hours."),
        _B("log.preallocate", _T.BOOLEAN, "false", "Default preallocate."),
        _B("log.local.retention.ms", _T.LONG, "-2", "Default local.retention.ms."),
        _B("log.local.retention.bytes", _T.LONG, "-2", "Default local.retention.bytes."),
        _B("remote.log.storage.system.enable", _T.BOOLEAN, "false",
           "Tiered storage (KIP-405): leaders copy rolled segments of remote.storage.enable topics "
           "to the object store under rsm.config.*."),
        _B("remote.log.manager.task.interval.ms", _T.LONG, "30000",
           "How often the remote log manager copies rolled segments and applies remote retention."),
        _B("remote.log.manager.copier.retry.backoff.ms", _T.LONG, "500",
           "First wait after a failed copy to the object store."),
        _B("remote.log.manager.copier.retry.backoff.max.ms", _T.LONG, "30000",
           "Longest wait between copy attempts while the object store fails."),
        _B("remote.log.metadata.topic.num.partitions", _T.INT, "50",
           "Partitions of __remote_log_metadata (fixed once created)."),
        _B("remote.log.metadata.topic.replication.factor", _T.SHORT, "3",
           "Replication factor of __remote_log_metadata (capped at the registered brokers)."),
        _B("remote.log.metadata.topic.retention.ms", _T.LONG, "-1",
           "retention.ms of __remote_log_metadata (-1: kept, as Kafka's default)."),
        _B("remote.fetch.max.wait.ms", _T.INT, "500",
           "Longest a fetch waits for its remote-tier read before answering that partition empty."),
        _B("compression.gzip.level", _T.INT, "-1", "Default compression.gzip.level."),
        _B("compression.lz4.level", _T.INT, "9", "Default compression.lz4.level."),
        _B("compression.zstd.level", _T.INT, "3", "Default compression.zstd.level."),
        _B("log.cleanup.policy", _T.LIST, "delete", "Default cleanup.policy."),
        _B("log.cleaner.enable", _T.BOOLEAN, "true", "Run the compaction cleaner."),
        _B(
            "log.cleaner.backoff.ms",
            _T.LONG,
            "15000",
            "How often the cleaner looks for logs to compact.",
        ),
        _B("log.cleaner.delete.retention.ms", _T.LONG, "86400000", "Default delete.retention.ms."),
        _B(
            "log.cleaner.min.cleanable.ratio",
            _T.DOUBLE,
            "0.5",
            "Default min.cleanable.dirty.ratio.",
        ),
        _B("log.cleaner.min.compaction.lag.ms", _T.LONG, "0", "Default min.compaction.lag.ms."),
        _B(
            "log.cleaner.max.compaction.lag.ms",
            _T.LONG,
            "9223372036854775807",
            "Default max.compaction.lag.ms.",
        ),
        _B("log.index.interval.bytes", _T.INT, "4096", "Default index.interval.bytes."),
        _B("log.index.size.max.bytes", _T.INT, "10485760", "Default segment.index.bytes."),
        _B("log.segment.delete.delay.ms", _T.LONG, "60000", "Default file.delete.delay.ms."),
        _B(
            "log.flush.interval.messages", _T.LONG, "9223372036854775807", "Default flush.messages."
        ),
        _B(
            "log.flush.interval.ms",
            _T.LONG,
            None,
            "Default flush.ms (unset: rely on the periodic flusher).",
        ),
        _B(
            "log.flush.scheduler.interval.ms",
            _T.LONG,
            "1000",
            "How often the background flusher looks for dirty logs.",
        ),
        _B(
            "log.retention.check.interval.ms",
            _T.LONG,
            "300000",
            "How often retention and the cleaner run.",
        ),
        _B(
            "log.message.timestamp.type", _T.STRING, "CreateTime", "Default message.timestamp.type."
        ),
        _B(
            "log.message.timestamp.before.max.ms",
            _T.LONG,
            "9223372036854775807",
            "Default message.timestamp.before.max.ms.",
        ),
        _B(
            "log.message.timestamp.after.max.ms",
            _T.LONG,
            "3600000",
            "Default message.timestamp.after.max.ms.",
        ),
        _B(
            "message.max.bytes",
            _T.INT,
            "1048588",
            "Default max.message.bytes (largest batch accepted).",
        ),
        _B(
            "compression.type",
            _T.STRING,
            "producer",
            "Default compression.type (only 'producer' is applied).",
        ),
        _B(
            "unclean.leader.election.enable",
            _T.BOOLEAN,
            "false",
            "Cluster: elect a live replica outside the ISR when the whole ISR is down (risks losing acknowledged writes; per topic too).",
        ),
        _B(
            "socket.request.max.bytes",
            _T.INT,
            "104857600",
            "Largest request frame; checked from the size prefix.",
        ),
        _B(
            "queued.max.request.bytes",
            _T.LONG,
            "536870912",
            "Bytes of requests read but not yet answered, all connections; at it reading stops (-1: no bound).",
        ),
        _B("connections.max.idle.ms", _T.LONG, "600000", "Close connections idle this long."),
        _B("max.connections", _T.INT, "2147483647", "Broker-wide connections; accepting waits at the limit."),
        _B("max.connections.per.ip", _T.INT, "2147483647", "Connections per client IP; more are closed."),
        _B(
            "max.connections.per.ip.overrides",
            _T.STRING,
            "",
            "Per-IP limits HOST_OR_IP:N,... overriding max.connections.per.ip.",
        ),
        _B(
            "max.connection.creation.rate",
            _T.INT,
            "2147483647",
            "New connections accepted per second, broker-wide; accepting waits above it.",
        ),
        _B(
            "connection.failed.authentication.delay.ms",
            _T.INT,
            "100",
            "How long a connection that failed SASL authentication stays open after the answer.",
        ),
        _B(
            "sasl.server.max.receive.size",
            _T.INT,
            "524288",
            "Largest frame a SASL listener takes before authentication (Kafka's CVE-2022-34917 cap).",
        ),
        _B(
            "max.incremental.fetch.session.cache.slots",
            _T.INT,
            "1000",
            "Fetch sessions kept (KIP-227).",
        ),
        _B("quota.window.num", _T.INT, "11", "Samples a client quota rate is measured over."),
        _B("quota.window.size.seconds", _T.INT, "1", "Length of one client quota sample."),
        _B(
            "group.initial.rebalance.delay.ms",
            _T.INT,
            "0",
            "Kafka's default is 3000; 0 makes a dev broker snappy.",
        ),
        _B(
            "group.min.session.timeout.ms",
            _T.INT,
            "6000",
            "Smallest consumer session timeout accepted.",
        ),
        _B(
            "group.max.session.timeout.ms",
            _T.INT,
            "1800000",
            "Largest consumer session timeout accepted.",
        ),
        _B(
            "group.max.size",
            _T.INT,
            "2147483647",
            "Most members a classic group admits (GROUP_MAX_SIZE_REACHED beyond).",
        ),
        _B(
            "group.consumer.heartbeat.interval.ms",
            _T.INT,
            "5000",
            "Heartbeat interval the coordinator gives KIP-848 consumer group members.",
        ),
        _B(
            "group.consumer.session.timeout.ms",
            _T.INT,
            "45000",
            "A KIP-848 consumer group member silent this long is removed from its group.",
        ),
        _B(
            "group.consumer.assignors",
            _T.LIST,
            "uniform,range",
            "Server-side assignors of KIP-848 consumer groups; the first is the default.",
        ),
        _B(
            "group.consumer.max.size",
            _T.INT,
            "2147483647",
            "Most members a KIP-848 consumer group admits (GROUP_MAX_SIZE_REACHED beyond).",
        ),
        _B(
            "group.consumer.min.session.timeout.ms",
            _T.INT,
            "45000",
            "Smallest consumer.session.timeout.ms a consumer group's config may set.",
        ),
        _B(
            "group.consumer.max.session.timeout.ms",
            _T.INT,
            "60000",
            "Largest consumer.session.timeout.ms a consumer group's config may set.",
        ),
        _B(
            "group.consumer.min.heartbeat.interval.ms",
            _T.INT,
            "5000",
            "Smallest consumer.heartbeat.interval.ms a consumer group's config may set.",
        ),
        _B(
            "group.consumer.max.heartbeat.interval.ms",
            _T.INT,
            "15000",
            "Largest consumer.heartbeat.interval.ms a consumer group's config may set.",
        ),
        _B(
            "group.share.session.timeout.ms",
            _T.INT,
            "45000",
            "Default share.session.timeout.ms of a share group's config (KIP-932; kafkapy has no share groups: it bounds the stored config only).",
        ),
        _B(
            "group.share.min.session.timeout.ms",
            _T.INT,
            "45000",
            "Smallest share.session.timeout.ms a share group's config may set (KIP-932; kafkapy has no share groups: it bounds the stored config only).",
        ),
        _B(
            "group.share.max.session.timeout.ms",
            _T.INT,
            "60000",
            "Largest share.session.timeout.ms a share group's config may set (KIP-932; kafkapy has no share groups: it bounds the stored config only).",
        ),
        _B(
            "group.share.heartbeat.interval.ms",
            _T.INT,
            "5000",
            "Default share.heartbeat.interval.ms of a share group's config (KIP-932; kafkapy has no share groups: it bounds the stored config only).",
        ),
        _B(
            "group.share.min.heartbeat.interval.ms",
            _T.INT,
            "5000",
            "Smallest share.heartbeat.interval.ms a share group's config may set (KIP-932; kafkapy has no share groups: it bounds the stored config only).",
        ),
        _B(
            "group.share.max.heartbeat.interval.ms",
            _T.INT,
            "15000",
            "Largest share.heartbeat.interval.ms a share group's config may set (KIP-932; kafkapy has no share groups: it bounds the stored config only).",
        ),
        _B(
            "group.share.record.lock.duration.ms",
            _T.INT,
            "30000",
            "Default share.record.lock.duration.ms of a share group's config (KIP-932; kafkapy has no share groups: it bounds the stored config only).",
        ),
        _B(
            "group.share.min.record.lock.duration.ms",
            _T.INT,
            "15000",
            "Smallest share.record.lock.duration.ms a share group's config may set (KIP-932; kafkapy has no share groups: it bounds the stored config only).",
        ),
        _B(
            "group.share.max.record.lock.duration.ms",
            _T.INT,
            "60000",
            "Largest share.record.lock.duration.ms a share group's config may set (KIP-932; kafkapy has no share groups: it bounds the stored config only).",
        ),
        _B("offsets.topic.num.partitions", _T.INT, "50", "Partitions of __consumer_offsets."),
        _B(
            "offsets.topic.replication.factor",
            _T.SHORT,
            "3",
            "Replicas of __consumer_offsets in a cluster (capped at the registered brokers); one node ignores it.",
        ),
        _B("offsets.retention.minutes", _T.INT, "10080", "Committed offset retention."),
        _B(
            "offsets.retention.check.interval.ms",
            _T.LONG,
            "600000",
            "How often expired committed offsets are removed.",
        ),
        _B(
            "offset.metadata.max.bytes",
            _T.INT,
            "4096",
            "Longest commit metadata string (OFFSET_METADATA_TOO_LARGE beyond).",
        ),
        _B(
            "transaction.state.log.num.partitions",
            _T.INT,
            "50",
            "Partitions of __transaction_state.",
        ),
        _B(
            "transaction.state.log.replication.factor",
            _T.SHORT,
            "3",
            "Replicas of __transaction_state in a cluster (capped at the registered brokers); one node ignores it.",
        ),
        _B("transaction.state.log.min.isr", _T.INT, "1", "Accepted; one node."),
        _B("transaction.max.timeout.ms", _T.INT, "900000", "Largest transaction timeout accepted."),
        _B(
            "transactional.id.expiration.ms",
            _T.INT,
            "604800000",
            "Idle transactional ids expire after this.",
        ),
        _B(
            "producer.id.expiration.ms",
            _T.INT,
            "86400000",
            "Idle idempotent producer state expires after this.",
        ),
        _B(
            "producer.id.expiration.check.interval.ms",
            _T.INT,
            "600000",
            "How often idle producer state is swept (the only place it expires).",
        ),
        _B(
            "kafkapy.leader.lease.enable",
            _T.BOOLEAN,
            "true",
            "Cluster mode: a broker whose last heartbeat answer is older than broker.session.timeout.ms refuses writes (NOT_LEADER_OR_FOLLOWER) until the controller answers again; false = Kafka's behaviour.",
        ),
        _B(
            "kafkapy.shutdown.grace.ms",
            _T.LONG,
            "1500",
            "How long shutdown waits for in-flight requests.",
        ),
        _B(
            "kafkapy.http.listener",
            _T.STRING,
            "",
            "HOST:PORT of the HTTP listener (/metrics, /healthz, /readyz, status page at /); "
            "empty: off. A bare PORT binds loopback.",
        ),
        _B(
            "kafkapy.log.requests",
            _T.LIST,
            "",
            "APIs (Kafka's names: Produce,Fetch,...; or all) whose requests are logged one line "
            "each (logger kafkapy.request) with client id, principal, latency and error code.",
        ),
        _B(
            "kafkapy.max.inflight.requests.per.connection",
            _T.INT,
            "64",
            "Pipelined requests read ahead per connection.",
        ),
        _B(
            "kafkapy.test.fault.drop.after.produce.append",
            _T.INT,
            "0",
            "TEST ONLY: drop the connection after this many produce appends instead of answering them (0 = off).",
        ),
        _B(
            "kafkapy.test.fault.control.socket",
            _T.STRING,
            "",
            "TEST ONLY: a Unix socket path where tests install request faults (kafkapy.broker.faults; empty = off).",
        ),
    ]
}
