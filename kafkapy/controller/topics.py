"""Topic and partition decisions (Kafka's ReplicationControlManager).

Rules:
- Placement: Kafka's striped, rack-aware rules over the active brokers (`placement.py`: replicas
  of a partition on distinct racks, leaders spread evenly over brokers) with a start that rotates
  per topic, so leaders of successive topics do not pile onto one broker; without racks that is
  round robin over the brokers sorted by id. A replication factor above the number of active
  brokers is INVALID_REPLICATION_FACTOR. Explicit assignments, and reassignment targets, are
  applied as given, racks or not (as Kafka does).
- New partitions start with ISR = replicas and the first replica as leader (epochs 0).
- AlterPartition (ISR changes from a leader) is checked in this order: broker epoch
  (STALE_BROKER_EPOCH for the whole request), unknown topic/partition, sender is not the leader
  (INVALID_REQUEST), leader epoch (older: FENCED_LEADER_EPOCH, newer: NOT_CONTROLLER - this
  controller is behind), partition epoch (INVALID_UPDATE_VERSION), ISR members that are not
  replicas or not the leader itself missing (INVALID_REQUEST), members that are fenced, shutting
  down or of a stale broker epoch (INELIGIBLE_REPLICA). An accepted change bumps the partition
  epoch only.
- ElectLeaders (`elect_leaders`, see `_elect_one` for the per-partition answers): preferred
  election (type 0) makes the first replica leader when it is in the ISR and active; unclean
  election (type 1) gives a leaderless partition an active ISR member, else any active replica.
  Kafka also marks an unclean leader's partition RECOVERING (LeaderRecoveryState) until that
  leader confirms; we do not model leader recovery state yet (the ISR becomes the new leader
  alone, and followers truncate to its log through the leader-epoch check).
- Reassignment (`alter_partition_reassignments`, Kafka's rules): a target replica list makes
  the partition's replicas target + removing (the current replicas not in the target), with
  `adding_replicas` (target replicas not yet replicas) and `removing_replicas` in the record;
  the added replicas start fetching and join the ISR through the leader's AlterPartition. The
  reassignment completes - replicas = target, ISR = ISR within the target, a new leader from
  the target if the old one left - in the record of the change that makes every target replica
  an ISR member (at once if they all are). `None` cancels: back to the replicas before the
  adding ones (NO_REASSIGNMENT_IN_PROGRESS when none is ongoing). A target with unregistered
  brokers, duplicates or no replicas is INVALID_REPLICA_ASSIGNMENT.
- Size of one request (Kafka's `ReplicationControlManager.validateTotalNumberOfPartitions` and
  the controller's `MAX_RECORDS_PER_USER_OP`): a CreateTopics whose topics ask for more than
  `MAX_PARTITIONS_PER_REQUEST` partitions in all (-1 counting `num.partitions`, an assignment
  list its length) is refused as a whole, POLICY_VIOLATION for every topic, before anything else
  is looked at; a CreatePartitions topic whose new partitions would take the request past that
  many is INVALID_PARTITIONS (Kafka fails it with UNKNOWN_SERVER_ERROR when its bounded record
  list overflows). Why: one request must not make the controller write, and every broker open,
  an unbounded number of partitions - a flipped bit in a partition count asks for millions.
- Partition budgets (`budgets.py`, KIP-578's `max.broker.partitions` / `max.partitions`): a
  creation, growth or reassignment that would take a broker or the cluster over its budget is
  POLICY_VIOLATION, the message naming the broker and by how much; internal topics never are.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence

from kafkapy.controller.image import PartitionImage, changed
from kafkapy.controller.placement import striped_placement
from kafkapy.controller.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kafkapy.controller.state import (
    NO_LEADER,
    ControllerResult,
    ControllerState,
    partition_budget,
    partition_change,
)
from kafkapy.protocol.errors import ErrorCode
from kafkapy.storage.config import validate_topic_configs
from kafkapy.storage.errors import InvalidLogConfigError

__all__ = [
    "MAX_PARTITIONS_PER_REQUEST",
    "TOO_MANY_PARTITIONS",
    "AlterPartitionItem",
    "AlterPartitionReply",
    "AlterPartitionResult",
    "CreatePartitionsResult",
    "CreateTopicResult",
    "DeleteTopicResult",
    "ElectionResult",
    "NewPartitions",
    "NewTopic",
    "Reassignment",
    "ReassignmentResult",
    "alter_partition",
    "alter_partition_reassignments",
    "create_partitions",
    "create_topics",
    "delete_topics",
    "elect_leaders",
    "is_partition_limit_refusal",
    "requested_partitions",
    "too_many_new_partitions",
    "topic_name_error",
]

MAX_TOPIC_NAME_LENGTH = 249
ZERO_UUID = uuid.UUID(int=0)
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")
PREFERRED, UNCLEAN = 0, 1
#: Kafka's ReplicationControlManager.MAX_PARTITIONS_PER_BATCH (= QuorumController's
#: MAX_RECORDS_PER_USER_OP): the most partitions one CreateTopics/CreatePartitions may create
MAX_PARTITIONS_PER_REQUEST = 10_000
#: Kafka's message for a CreateTopics over the limit (PolicyViolationException)
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."


def requested_partitions(num_partitions: int, assignments: int, default_partitions: int) -> int:
    """The partitions one CreateTopics topic asks for, counted as Kafka counts them for the
    per-request limit: an assignment list its length, -1 the default, a bad count none."""
    if assignments:
        return assignments
    if num_partitions == -1:
        return default_partitions
    return max(num_partitions, 0)


def too_many_new_partitions(added: int, count: int) -> str | None:
    """Why a CreatePartitions topic adding `count` partitions after `added` others in the same
    request goes over `MAX_PARTITIONS_PER_REQUEST`, or None."""
    if added + count <= MAX_PARTITIONS_PER_REQUEST:
        return None
    return (
        f"{TOO_MANY_PARTITIONS} Adding {count} partitions would create more than "
        f"{MAX_PARTITIONS_PER_REQUEST} partitions in one request."
    )


def is_partition_limit_refusal(message: str | None) -> bool:
    """Whether a CreateTopics/CreatePartitions answer is the per-request limit's refusal (which
    the server logs: a client asking for that much is worth an operator's look)."""
    return message is not None and message.startswith(TOO_MANY_PARTITIONS)


def topic_name_error(name: str) -> str | None:
    """Why `name` is not a legal Kafka topic name, or None."""
    if not name or name in (".", ".."):
        return f"topic name {name!r} is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name is longer than {MAX_TOPIC_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_', '-'"
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: Mapping[int, Sequence[int]] | None = None
    configs: Mapping[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    error: ErrorCode
    message: str | None = None
    topic_id: uuid.UUID = ZERO_UUID
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True, slots=True)
class DeleteTopicResult:
    name: str | None
    topic_id: uuid.UUID
    error: ErrorCode
    message: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class NewPartitions:
    name: str
    count: int
    assignments: Sequence[Sequence[int]] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class CreatePartitionsResult:
    name: str
    error: ErrorCode
    message: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class AlterPartitionItem:
    """One partition of an AlterPartition request; `new_isr` holds (broker id, broker epoch or
    -1 when the request version carries no epochs)."""

    topic_name: str | None
    topic_id: uuid.UUID | None
    partition: int
    leader_epoch: int
    new_isr: Sequence[tuple[int, int]]
    partition_epoch: int


@dataclasses.dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    topic_name: str | None
    topic_id: uuid.UUID | None
    partition: int
    error: ErrorCode
    leader: int = NO_LEADER
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1


@dataclasses.dataclass(frozen=True, slots=True)
class AlterPartitionReply:
    error: ErrorCode
    partitions: list[AlterPartitionResult]


@dataclasses.dataclass(frozen=True, slots=True)
class ElectionResult:
    topic: str
    partition: int
    error: ErrorCode
    message: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Reassignment:
    """One partition of an AlterPartitionReassignments request; `replicas` None = cancel."""

    topic: str
    partition: int
    replicas: Sequence[int] | None


@dataclasses.dataclass(frozen=True, slots=True)
class ReassignmentResult:
    topic: str
    partition: int
    error: ErrorCode
    message: str | None = None


def _usable_brokers(st: ControllerState) -> list[int]:
    return sorted(b for b in st.image.brokers if st.image.is_active(b))


def _place(st: ControllerState, first_partition: int, count: int, rf: int) -> list[tuple[int, ...]]:
    """Striped, rack-aware placement over the active brokers (placement.py), from a start that
    rotates per call; with no racks, partition p's replicas are consecutive brokers from
    start + p."""
    racks = {b: st.image.brokers[b].rack for b in _usable_brokers(st)}
    start = st.placement_start
    st.placement_start += 1
    return striped_placement(racks, count, rf, start + first_partition)


def _check_replicas(st: ControllerState, replicas: Sequence[int]) -> str | None:
    if not replicas:
        return "an empty replica list"
    if len(set(replicas)) != len(replicas):
        return f"duplicate replicas in {list(replicas)}"
    unknown = [r for r in replicas if r not in st.image.brokers]
    if unknown:
        return f"unregistered brokers {unknown}"
    return None


def _validate_configs(st: ControllerState, configs: Mapping[str, str]) -> str | None:
    try:
        validate_topic_configs(
            configs, remote_storage_system_enabled=st.config.remote_log_storage_system_enable)
    except InvalidLogConfigError as exc:
        return str(exc)
    return None


def _plan_topic(
    st: ControllerState, topic: NewTopic, collisions: Mapping[str, str]
) -> tuple[ErrorCode, str | None, list[tuple[int, ...]]]:
    """Validate one creation and choose its replicas (nothing emitted). `collisions`: every
    existing topic by its name with "." as "_" (Kafka's metric-name collision), built once per
    request: a walk over every topic per topic made a CreateTopics of 10,000 topics quadratic."""
    reason = topic_name_error(topic.name)
    if reason is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, reason, []
    if topic.name in st.image.topics:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {topic.name!r} already exists", []
    other = collisions.get(topic.name.replace(".", "_"))
    if other is not None:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"{topic.name!r} collides with {other!r}", []
    reason = _validate_configs(st, topic.configs)
    if reason is not None:
        return ErrorCode.INVALID_CONFIG, reason, []
    if topic.assignments is not None:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            msg = "assignments need num_partitions and replication_factor of -1"
            return ErrorCode.INVALID_REQUEST, msg, []
        if (
            sorted(topic.assignments) != list(range(len(topic.assignments)))
            or not topic.assignments
        ):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions must be 0..n-1", []
        plan = [tuple(topic.assignments[p]) for p in range(len(topic.assignments))]
        for replicas in plan:
            reason = _check_replicas(st, replicas)
            if reason is not None:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, reason, []
        return ErrorCode.NONE, None, plan
    partitions = topic.num_partitions
    rf = topic.replication_factor
    if partitions == -1:
        partitions = st.config.default_partitions
    if rf == -1:
        rf = st.config.default_replication_factor
    if partitions <= 0:
        return ErrorCode.INVALID_PARTITIONS, "the number of partitions must be positive", []
    if rf <= 0:
        return ErrorCode.INVALID_REPLICATION_FACTOR, "replication factor must be positive", []
    usable = len(_usable_brokers(st))
    if rf > usable:
        msg = f"replication factor {rf} is larger than the {usable} active brokers"
        return ErrorCode.INVALID_REPLICATION_FACTOR, msg, []
    return ErrorCode.NONE, None, _place(st, 0, partitions, rf)


def create_topics(
    st: ControllerState, topics: Sequence[NewTopic], *, validate_only: bool = False
) -> ControllerResult[list[CreateTopicResult]]:
    records: list[MetadataRecord] = []
    results: list[CreateTopicResult] = []
    total = sum(
        requested_partitions(
            t.num_partitions, len(t.assignments or ()), st.config.default_partitions
        )
        for t in topics
    )
    if total > MAX_PARTITIONS_PER_REQUEST:
        refused = ErrorCode.POLICY_VIOLATION
        return ControllerResult(
            [], [CreateTopicResult(t.name, refused, TOO_MANY_PARTITIONS) for t in topics]
        )
    counts = Counter(t.name for t in topics)
    budget = partition_budget(st)
    collisions = {other.replace(".", "_"): other for other in st.image.topics}
    for topic in topics:
        if counts[topic.name] > 1:
            results.append(
                CreateTopicResult(topic.name, ErrorCode.INVALID_REQUEST, "duplicate topic name")
            )
            continue
        error, message, plan = _plan_topic(st, topic, collisions)
        if error is ErrorCode.NONE:
            message = budget.charge(topic.name, plan, len(plan))
            error = ErrorCode.POLICY_VIOLATION if message is not None else error
        if error is not ErrorCode.NONE:
            results.append(CreateTopicResult(topic.name, error, message))
            continue
        topic_id = uuid.UUID(int=0) if validate_only else st.new_topic_id()
        if not validate_only:
            collisions[topic.name.replace(".", "_")] = topic.name
            st.emit(records, TopicRecord(topic.name, topic_id))
            for name, value in sorted(topic.configs.items()):
                st.emit(records, ConfigRecord(ConfigResourceType.TOPIC, topic.name, name, value))
            for pid, replicas in enumerate(plan):
                leader = next((r for r in replicas if st.image.is_active(r)), NO_LEADER)
                st.emit(records, PartitionRecord(pid, topic_id, replicas, replicas, leader))
        results.append(
            CreateTopicResult(
                topic.name,
                ErrorCode.NONE,
                None,
                topic_id,
                len(plan),
                len(plan[0]),
                dict(topic.configs),
            )
        )
    return ControllerResult(records, results)


def delete_topics(
    st: ControllerState,
    names: Sequence[str] = (),
    topic_ids: Sequence[uuid.UUID] = (),
) -> ControllerResult[list[DeleteTopicResult]]:
    records: list[MetadataRecord] = []
    results: list[DeleteTopicResult] = []
    wanted: list[tuple[str | None, uuid.UUID | None]] = [(n, None) for n in names]
    wanted += [(None, i) for i in topic_ids]
    for name, topic_id in wanted:
        topic = st.image.topics.get(name) if name is not None else None
        if topic_id is not None:
            topic = st.image.topic_by_id(topic_id)
        if topic is None:
            error = (
                ErrorCode.UNKNOWN_TOPIC_ID
                if topic_id is not None
                else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            )
            results.append(DeleteTopicResult(name, topic_id or uuid.UUID(int=0), error))
            continue
        if not st.config.delete_topic_enable:
            results.append(
                DeleteTopicResult(topic.name, topic.topic_id, ErrorCode.TOPIC_DELETION_DISABLED)
            )
            continue
        if topic.name in st.config.protected_topics:
            results.append(
                DeleteTopicResult(
                    topic.name,
                    topic.topic_id,
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    "internal topics cannot be deleted",
                )
            )
            continue
        st.emit(records, RemoveTopicRecord(topic.topic_id))
        results.append(DeleteTopicResult(topic.name, topic.topic_id, ErrorCode.NONE))
    return ControllerResult(records, results)


def create_partitions(
    st: ControllerState, items: Sequence[NewPartitions], *, validate_only: bool = False
) -> ControllerResult[list[CreatePartitionsResult]]:
    records: list[MetadataRecord] = []
    results: list[CreatePartitionsResult] = []
    counts = Counter(i.name for i in items)
    budget = partition_budget(st)
    added = 0
    for item in items:
        if counts[item.name] > 1:
            results.append(
                CreatePartitionsResult(item.name, ErrorCode.INVALID_REQUEST, "duplicate topic")
            )
            continue
        error, message, plan = _plan_partitions(st, item, added)
        if error is ErrorCode.NONE:
            message = budget.charge(item.name, plan, len(plan))
            error = ErrorCode.POLICY_VIOLATION if message is not None else error
        added += len(plan)
        if error is ErrorCode.NONE and not validate_only:
            topic = st.image.topics[item.name]
            first = len(topic.partitions)
            for offset, replicas in enumerate(plan):
                leader = next((r for r in replicas if st.image.is_active(r)), NO_LEADER)
                st.emit(
                    records,
                    PartitionRecord(first + offset, topic.topic_id, replicas, replicas, leader),
                )
        results.append(CreatePartitionsResult(item.name, error, message))
    return ControllerResult(records, results)


def _plan_partitions(
    st: ControllerState, item: NewPartitions, before: int
) -> tuple[ErrorCode, str | None, list[tuple[int, ...]]]:
    """Validate one growth and choose its replicas; `before`: partitions the same request adds
    to the topics ahead of this one (the per-request limit)."""
    topic = st.image.topics.get(item.name)
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"unknown topic {item.name!r}", []
    current = len(topic.partitions)
    if item.count <= current:
        msg = f"topic has {current} partitions; the new count must be larger, not {item.count}"
        return ErrorCode.INVALID_PARTITIONS, msg, []
    added = item.count - current
    too_many = too_many_new_partitions(before, added)
    if too_many is not None:
        return ErrorCode.INVALID_PARTITIONS, too_many, []
    if item.assignments is not None:
        if len(item.assignments) != added:
            msg = f"{len(item.assignments)} assignments for {added} new partitions"
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, msg, []
        plan = [tuple(a) for a in item.assignments]
        for replicas in plan:
            reason = _check_replicas(st, replicas)
            if reason is not None:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, reason, []
        return ErrorCode.NONE, None, plan
    rf = len(topic.partitions[0].replicas) if 0 in topic.partitions else 1
    usable = len(_usable_brokers(st))
    if rf > usable:
        msg = f"replication factor {rf} is larger than the {usable} active brokers"
        return ErrorCode.INVALID_REPLICATION_FACTOR, msg, []
    return ErrorCode.NONE, None, _place(st, current, added, rf)


def alter_partition(
    st: ControllerState,
    broker_id: int,
    broker_epoch: int,
    items: Sequence[AlterPartitionItem],
) -> ControllerResult[AlterPartitionReply]:
    """ISR changes proposed by partition leaders (see the module rules)."""
    records: list[MetadataRecord] = []
    b = st.image.brokers.get(broker_id)
    if b is None or (broker_epoch != -1 and b.epoch != broker_epoch):
        return ControllerResult(records, AlterPartitionReply(ErrorCode.STALE_BROKER_EPOCH, []))
    results = [_alter_one(st, records, broker_id, item) for item in items]
    return ControllerResult(records, AlterPartitionReply(ErrorCode.NONE, results))


def _alter_one(
    st: ControllerState,
    records: list[MetadataRecord],
    broker_id: int,
    item: AlterPartitionItem,
) -> AlterPartitionResult:
    def fail(error: ErrorCode) -> AlterPartitionResult:
        return AlterPartitionResult(item.topic_name, item.topic_id, item.partition, error)

    if item.topic_id is not None:
        topic = st.image.topic_by_id(item.topic_id)
        if topic is None:
            return fail(ErrorCode.UNKNOWN_TOPIC_ID)
    else:
        topic = st.image.topics.get(item.topic_name or "")
        if topic is None:
            return fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    part = topic.partitions.get(item.partition)
    if part is None:
        return fail(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if part.leader != broker_id:
        return fail(ErrorCode.INVALID_REQUEST)
    if item.leader_epoch < part.leader_epoch:
        return fail(ErrorCode.FENCED_LEADER_EPOCH)
    if item.leader_epoch > part.leader_epoch:
        return fail(ErrorCode.NOT_CONTROLLER)
    if item.partition_epoch != part.partition_epoch:
        return fail(ErrorCode.INVALID_UPDATE_VERSION)
    new_isr = tuple(r for r, _ in item.new_isr)
    if (
        len(set(new_isr)) != len(new_isr)
        or any(r not in part.replicas for r in new_isr)
        or broker_id not in new_isr
    ):
        return fail(ErrorCode.INVALID_REQUEST)
    for replica, epoch in item.new_isr:
        reg = st.image.brokers.get(replica)
        # Members already in the ISR may stay while fenced: removing them is the leader's call.
        if replica in part.isr and (epoch == -1 or (reg is not None and reg.epoch == epoch)):
            continue
        if reg is None or not st.image.is_active(replica):
            return fail(ErrorCode.INELIGIBLE_REPLICA)
        if epoch != -1 and reg.epoch != epoch:
            return fail(ErrorCode.INELIGIBLE_REPLICA)
    if part.adding_replicas or part.removing_replicas:
        change = _reassignment_change(st, topic.topic_id, item.partition, part, isr=new_isr)
        if change is not None:
            st.emit(records, change)
    elif new_isr != part.isr:
        st.elect(records, topic, item.partition, isr=new_isr)
    now = topic.partitions[item.partition]
    return AlterPartitionResult(
        item.topic_name,
        item.topic_id,
        item.partition,
        ErrorCode.NONE,
        now.leader,
        now.leader_epoch,
        now.isr,
        now.partition_epoch,
    )


def elect_leaders(
    st: ControllerState,
    election_type: int,
    partitions: Sequence[tuple[str, int]] | None,
) -> ControllerResult[list[ElectionResult]]:
    """Preferred (0) or unclean (1) election, answered per partition as Kafka's controller does.

    `None` = every partition; then, as in Kafka, the partitions that already have the wanted
    leader (ELECTION_NOT_NEEDED) are left out of the answer, failures are not."""
    records: list[MetadataRecord] = []
    results: list[ElectionResult] = []
    explicit = partitions is not None
    if partitions is None:
        partitions = [(t.name, p) for t in st.image.topics.values() for p in sorted(t.partitions)]
    for name, pid in partitions:
        topic = st.image.topics.get(name)
        part = topic.partitions.get(pid) if topic is not None else None
        if topic is None or part is None:
            unknown = f"no such partition as {name}-{pid}"
            results.append(ElectionResult(name, pid, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, unknown))
            continue
        error, message = _elect_one(st, records, election_type, name, pid)
        if explicit or error is not ErrorCode.ELECTION_NOT_NEEDED:
            results.append(ElectionResult(name, pid, error, message))
    return ControllerResult(records, results)


def _elect_one(
    st: ControllerState, records: list[MetadataRecord], election_type: int, name: str, pid: int
) -> tuple[ErrorCode, str | None]:
    """Kafka's rules: PREFERRED is not needed when the first replica leads; otherwise the first
    replica leads if it is in the ISR and active, else the current leader stays if it can, else
    another active ISR member takes over (a change: NONE) - no change at all is
    PREFERRED_LEADER_NOT_AVAILABLE. UNCLEAN is not needed while an active leader exists; an
    active ISR member is preferred, and only when none is live does an active replica outside
    the ISR lead (the ISR becomes just it) - none at all is ELIGIBLE_LEADERS_NOT_AVAILABLE."""
    topic = st.image.topics[name]
    part = topic.partitions[pid]
    if election_type == PREFERRED:
        if part.replicas and part.leader == part.replicas[0]:
            return ErrorCode.ELECTION_NOT_NEEDED, None
        record = partition_change(topic.topic_id, pid, part, st.image.is_active, preferred=True)
        if record is None:
            first = part.replicas[0] if part.replicas else NO_LEADER
            why = "is not in the ISR" if first not in part.isr else "is not an active broker"
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"preferred replica {first} {why}"
        st.emit(records, record)
        return ErrorCode.NONE, None
    if election_type == UNCLEAN:
        if part.leader != NO_LEADER and st.image.is_active(part.leader):
            return ErrorCode.ELECTION_NOT_NEEDED, None
        record = partition_change(topic.topic_id, pid, part, st.image.is_active, unclean=True)
        if record is None or record.leader in (None, NO_LEADER):
            alive = [r for r in part.replicas if st.image.is_active(r)]
            return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"no live replica among {alive}"
        st.emit(records, record)
        return ErrorCode.NONE, None
    return ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}"


def alter_partition_reassignments(
    st: ControllerState, items: Sequence[Reassignment]
) -> ControllerResult[list[ReassignmentResult]]:
    """Start, change or cancel reassignments (see the module rules)."""
    records: list[MetadataRecord] = []
    results: list[ReassignmentResult] = []
    budget = partition_budget(st)
    for item in items:
        topic = st.image.topics.get(item.topic)
        part = topic.partitions.get(item.partition) if topic is not None else None
        if topic is None or part is None:
            results.append(
                ReassignmentResult(
                    item.topic,
                    item.partition,
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"no such partition as {item.topic}-{item.partition}",
                )
            )
            continue
        target = item.replicas  # None: cancel
        if target is None:
            error, message, change = _cancel(st, topic.topic_id, item.partition, part)
        else:
            error, message, change = _reassign(st, topic.topic_id, item.partition, part, target)
            adding = [r for r in target if r not in part.replicas]
            refused = budget.charge(item.topic, [adding], 0) if change is not None else None
            if refused is not None:
                error, message, change = ErrorCode.POLICY_VIOLATION, refused, None
        if change is not None:
            st.emit(records, change)
        results.append(ReassignmentResult(item.topic, item.partition, error, message))
    return ControllerResult(records, results)


_Planned = tuple[ErrorCode, str | None, PartitionChangeRecord | None]


def _reassign(
    st: ControllerState,
    topic_id: uuid.UUID,
    pid: int,
    part: PartitionImage,
    target: Sequence[int],
) -> _Planned:
    reason = _check_replicas(st, target)
    if reason is not None:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, reason, None
    removing = tuple(r for r in part.replicas if r not in target)
    adding = tuple(r for r in target if r not in part.replicas)
    change = _reassignment_change(
        st,
        topic_id,
        pid,
        part,
        replicas=tuple(target) + removing,
        adding=adding,
        removing=removing,
    )
    return ErrorCode.NONE, None, change


def _cancel(st: ControllerState, topic_id: uuid.UUID, pid: int, part: PartitionImage) -> _Planned:
    if not part.adding_replicas and not part.removing_replicas:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None, None
    replicas = tuple(r for r in part.replicas if r not in part.adding_replicas)
    isr = tuple(r for r in part.isr if r not in part.adding_replicas)
    if not isr:
        message = "no replica of the original assignment is in the ISR"
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, message, None
    change = _reassignment_change(
        st, topic_id, pid, part, replicas=replicas, isr=isr, adding=(), removing=()
    )
    return ErrorCode.NONE, None, change


def _reassignment_change(
    st: ControllerState,
    topic_id: uuid.UUID,
    pid: int,
    part: PartitionImage,
    *,
    replicas: tuple[int, ...] | None = None,
    isr: tuple[int, ...] | None = None,
    adding: tuple[int, ...] | None = None,
    removing: tuple[int, ...] | None = None,
) -> PartitionChangeRecord | None:
    """The change to a partition's replicas / ISR / reassignment (unchanged where None), with
    the reassignment completed if every target replica is in the ISR, and a leader that is an
    active ISR member among the replicas (the current one if it still qualifies)."""
    new_replicas = changed(replicas, part.replicas)
    new_isr = changed(isr, part.isr)
    new_adding = changed(adding, part.adding_replicas)
    new_removing = changed(removing, part.removing_replicas)
    target = tuple(r for r in new_replicas if r not in new_removing)
    if (new_adding or new_removing) and all(r in new_isr for r in target):
        new_replicas, new_adding, new_removing = target, (), ()
    new_isr = tuple(r for r in new_isr if r in new_replicas) or new_isr
    leader = part.leader
    if leader not in new_isr or leader not in new_replicas or not st.image.is_active(leader):
        leader = next(
            (r for r in new_replicas if r in new_isr and st.image.is_active(r)), NO_LEADER
        )
    record = PartitionChangeRecord(
        pid,
        topic_id,
        isr=new_isr if new_isr != part.isr else None,
        leader=leader if leader != part.leader else None,
        replicas=new_replicas if new_replicas != part.replicas else None,
        adding_replicas=new_adding if new_adding != part.adding_replicas else None,
        removing_replicas=new_removing if new_removing != part.removing_replicas else None,
    )
    if record == PartitionChangeRecord(pid, topic_id):
        return None
    return record
