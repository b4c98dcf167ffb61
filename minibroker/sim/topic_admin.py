"""Admin operations on topics and leaders, with Kafka's checks and error codes.

The controller's side of CreateTopics, DeleteTopics, CreatePartitions and ElectLeaders (KRaft's
``ReplicationControlManager``), acting on the emulated cluster. Each operation either raises
``AdminError`` (a Kafka error and a one-line message, as KRaft's controller answers) or acts on the
cluster at once (the controller's decision is immediate here; its LeaderAndIsr messages still travel
the network).
``validate_only`` runs every check and changes nothing.

- ``create_topic``: partitions and replication factor (-1: the broker's
  ``num.partitions`` / ``default.replication.factor``), or a manual assignment
  (then both must be -1), and config overrides (``topic_configs``).
- ``delete_topic``: every replica stops (waiting produce and fetch requests answer
  NOT_LEADER_OR_FOLLOWER) and its log goes, on live and crashed brokers alike.
- ``create_partitions``: grow a topic to ``count`` partitions (never shrink).
- ``alter_reassignment`` / ``list_reassignments``: partition reassignments (KIP-455) as KRaft's
  ``ReplicationControlManager`` checks them; the controller carries them out (``Controller``).
- ``elect_leader``: a preferred election (the first replica, if alive and in the
  ISR), or an unclean one for a partition without a leader.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from minibroker.broker.topic_configs import TopicConfigError, check_remote_storage, check_topic_configs
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.common.topic_names import topic_error
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC
from minibroker.sim.cluster import Cluster, TopicSpec

PREFERRED = 0
UNCLEAN = 1


class AdminError(Exception):
    """An admin request refused with Kafka's ``error`` and a message saying why."""

    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error


def _check_assignment(cluster: Cluster, replicas: Sequence[int], where: str) -> None:
    n = len(cluster.brokers)
    if not replicas:
        raise AdminError(Errors.INVALID_REPLICA_ASSIGNMENT, f"{where}: the replica list is empty")
    if len(set(replicas)) != len(replicas):
        raise AdminError(Errors.INVALID_REPLICA_ASSIGNMENT, f"{where}: duplicate brokers in {list(replicas)}")
    unknown = [b for b in replicas if not 0 <= b < n]
    if unknown:
        raise AdminError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"{where}: broker(s) {unknown} do not exist (brokers are 0..{n - 1})",
        )


def create_topic(
    cluster: Cluster,
    name: str,
    partitions: int = -1,
    replication_factor: int = -1,
    assignment: Mapping[int, Sequence[int]] | None = None,
    configs: Mapping[str, str | None] | None = None,
    validate_only: bool = False,
) -> TopicSpec:
    """Check and (unless ``validate_only``) create the topic; return its spec."""
    invalid = topic_error(name)
    if invalid is not None:
        raise AdminError(Errors.INVALID_TOPIC_EXCEPTION, invalid)
    if name in cluster.topics:
        raise AdminError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    defaults = cluster.brokers[0].config
    layout: tuple[tuple[int, ...], ...] | None = None
    if assignment:
        if partitions != -1 or replication_factor != -1:
            raise AdminError(
                Errors.INVALID_REQUEST,
                "A manual partition assignment was given: numPartitions and replicationFactor must be -1.",
            )
        if sorted(assignment) != list(range(len(assignment))):
            raise AdminError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"partition indexes {sorted(assignment)} are not 0..{len(assignment) - 1}",
            )
        for index, replicas in assignment.items():
            _check_assignment(cluster, replicas, f"partition {index}")
        sizes = {len(replicas) for replicas in assignment.values()}
        if len(sizes) != 1:
            raise AdminError(
                Errors.INVALID_REPLICA_ASSIGNMENT, "all partitions must have the same number of replicas"
            )
        layout = tuple(tuple(assignment[i]) for i in range(len(assignment)))
        partitions, replication_factor = len(layout), sizes.pop()
    else:
        partitions = defaults.num_partitions if partitions == -1 else partitions
        replication_factor = (
            defaults.default_replication_factor if replication_factor == -1 else replication_factor
        )
        if partitions <= 0:
            raise AdminError(
                Errors.INVALID_PARTITIONS, f"Number of partitions was set to an invalid value: {partitions}."
            )
        if replication_factor <= 0:
            raise AdminError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Replication factor must be larger than 0, or -1 for the default; got {replication_factor}.",
            )
        if replication_factor > len(cluster.brokers):
            raise AdminError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): only "
                f"{len(cluster.brokers)} broker(s) are registered.",
            )
    problem = cluster.replicas_problem(partitions * replication_factor)
    if problem is not None:
        raise AdminError(Errors.POLICY_VIOLATION, problem[0].upper() + problem[1:] + ".")
    try:
        checked = check_topic_configs(configs or {})
        check_remote_storage(checked, cluster.remote_storage_system_enabled())
    except TopicConfigError as error:
        raise AdminError(Errors.INVALID_CONFIG, str(error)) from None
    spec = TopicSpec(name, partitions, replication_factor, layout, configs=checked)
    if not validate_only:
        cluster.create_topic(spec)
        if cluster.tracer.enabled:
            cluster.tracer.emit("topic.create", topic=name, partitions=partitions, rf=replication_factor)
    return spec


def _existing(cluster: Cluster, name: str) -> TopicSpec:
    spec = cluster.topics.get(name)
    if spec is None:
        raise AdminError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"This server does not host topic '{name}'.")
    return spec


def delete_topic(cluster: Cluster, name: str) -> None:
    """Stop and delete every replica of ``name``; forget the topic."""
    spec = _existing(cluster, name)
    if name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
        raise AdminError(Errors.INVALID_REQUEST, f"the internal topic {name} cannot be deleted")
    del cluster.topics[name]
    cluster.topic_deletions[name] = cluster.topic_deletions.get(name, 0) + 1
    for p in range(spec.partitions):
        tp = TopicPartition(name, p)
        cluster.controller.state.pop(tp, None)
        for broker in cluster.brokers:
            if broker.replica_manager is not None:
                broker.replica_manager.stop_replica(tp, delete=True)
            broker.logs.pop(tp, None)
        cluster.remote_storage.delete_partition(tp)
    cluster.on_metadata_change()
    if cluster.tracer.enabled:
        cluster.tracer.emit("topic.delete", topic=name, partitions=spec.partitions)


def create_partitions(
    cluster: Cluster,
    name: str,
    count: int,
    assignment: Sequence[Sequence[int]] | None = None,
    validate_only: bool = False,
) -> None:
    """Grow ``name`` to ``count`` partitions, placed like the first ones or as ``assignment`` says."""
    spec = _existing(cluster, name)
    if count < spec.partitions:
        raise AdminError(
            Errors.INVALID_PARTITIONS,
            f"Topic currently has {spec.partitions} partitions, which is higher than the requested {count}.",
        )
    if count == spec.partitions:
        raise AdminError(Errors.INVALID_PARTITIONS, f"Topic already has {spec.partitions} partitions.")
    added = count - spec.partitions
    n = len(cluster.brokers)
    if assignment is not None:
        if len(assignment) != added:
            raise AdminError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"{len(assignment)} assignments were given for {added} new partitions",
            )
        for i, replicas in enumerate(assignment):
            _check_assignment(cluster, replicas, f"new partition {spec.partitions + i}")
            if len(replicas) != spec.replication_factor:
                raise AdminError(
                    Errors.INVALID_REPLICA_ASSIGNMENT,
                    f"new partition {spec.partitions + i} has {len(replicas)} replicas; the topic has "
                    f"replication factor {spec.replication_factor}",
                )
        new = [tuple(replicas) for replicas in assignment]
    else:
        new = [
            tuple((p + i) % n for i in range(spec.replication_factor)) for p in range(spec.partitions, count)
        ]
    problem = cluster.replicas_problem(added * spec.replication_factor)
    if problem is not None:
        raise AdminError(Errors.POLICY_VIOLATION, problem[0].upper() + problem[1:] + ".")
    if validate_only:
        return
    # the controller's replicas, not the creation's assignment: a reassignment may have moved them
    old = tuple(cluster.controller.state[TopicPartition(name, p)].replicas for p in range(spec.partitions))
    cluster.topics[name] = attrs.evolve(spec, partitions=count, assignment=(*old, *new))
    for p, replicas in enumerate(new, start=spec.partitions):
        cluster.controller.create_partition(TopicPartition(name, p), replicas)
    cluster.on_metadata_change()
    if cluster.tracer.enabled:
        cluster.tracer.emit("topic.partitions", topic=name, partitions=count)


def elect_leader(cluster: Cluster, tp: TopicPartition, election_type: int = PREFERRED) -> None:
    """Kafka's ElectLeaders for one partition; ``AdminError`` when no election happens."""
    outcome = cluster.controller.elect_leaders(tp, election_type)
    if not isinstance(outcome, int):
        raise AdminError(*outcome)


def alter_reassignment(
    cluster: Cluster, tp: TopicPartition, replicas: Sequence[int] | None, allow_rf_change: bool = True
) -> None:
    """Kafka's AlterPartitionReassignments for one partition: move it to ``replicas``, or cancel (None)."""
    spec = cluster.topics.get(tp.topic)
    if spec is None or tp not in cluster.controller.state:
        raise AdminError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {tp}.")
    ongoing = cluster.controller.reassignments.get(tp)
    if replicas is None:
        if ongoing is None:
            raise AdminError(
                Errors.NO_REASSIGNMENT_IN_PROGRESS, f"Partition {tp} has no ongoing reassignment."
            )
    else:
        _check_assignment(cluster, replicas, f"partition {tp}")
        original = ongoing.original if ongoing is not None else cluster.controller.state[tp].replicas
        if not allow_rf_change and len(replicas) != len(original):
            raise AdminError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"The replication factor of partition {tp} would change from {len(original)} to "
                f"{len(replicas)}, and the request does not allow it.",
            )
    cluster.controller.alter_reassignment(tp, None if replicas is None else tuple(replicas))
    cluster.on_metadata_change()


def list_reassignments(
    cluster: Cluster, partitions: Sequence[TopicPartition] | None = None
) -> list[tuple[TopicPartition, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
    """The ongoing reassignments (of ``partitions``, else all): (partition, replicas, adding, removing)."""
    ongoing = cluster.controller.reassignments
    asked = sorted(ongoing) if partitions is None else [tp for tp in partitions if tp in ongoing]
    return [
        (tp, cluster.controller.state[tp].replicas, ongoing[tp].adding, ongoing[tp].removing) for tp in asked
    ]
