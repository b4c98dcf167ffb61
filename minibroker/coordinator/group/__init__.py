"""The group coordinator: classic consumer groups and committed offsets on ``__consumer_offsets``.

``GroupCoordinator`` (one per broker, beside its ReplicaManager) answers the
``messages`` requests; ``hashing.partition_for`` says which partition (hence which
broker) coordinates a group; ``coordinator_timer.CoordinatorTimer`` arms its keyed tasks on the
broker's one SystemTimer. Rank 3 of the layers (Kafka's server parts). See docs/groups.md.
"""

from minibroker.coordinator.group.coordinator import GroupCoordinator
from minibroker.coordinator.group.coordinator_timer import CoordinatorTimer
from minibroker.coordinator.group.group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
    ClassicGroup,
    Member,
)
from minibroker.coordinator.group.hashing import OFFSETS_TOPIC, java_string_hash, partition_for

__all__ = [
    "COMPLETING_REBALANCE",
    "DEAD",
    "EMPTY",
    "OFFSETS_TOPIC",
    "PREPARING_REBALANCE",
    "STABLE",
    "ClassicGroup",
    "CoordinatorTimer",
    "GroupCoordinator",
    "Member",
    "java_string_hash",
    "partition_for",
]
