"""The group coordinator: classic consumer groups and committed offsets on ``__consumer_offsets``.

``GroupCoordinator`` (one per broker, beside its ReplicaManager) answers the
``messages`` requests through the two managers it holds: a ``GroupMetadataManager``
(JoinGroup, SyncGroup, Heartbeat, LeaveGroup, rebalances, DescribeGroups, ListGroups)
and an ``OffsetMetadataManager`` (OffsetCommit, OffsetFetch, expiry), both reaching
the broker through a ``CoordinatorContext``; ``hashing.partition_for`` says which
partition (hence which broker) coordinates a group; ``coordinator_timer.CoordinatorTimer``
arms the keyed tasks on the broker's one SystemTimer. KIP-848's consumer groups
(ConsumerGroupHeartbeat, ConsumerGroupDescribe) are a ``ConsumerGroupManager``'s
(``ConsumerGroup``, ``ConsumerGroupMember``; assignment by ``target_assignment_builder``
and ``current_assignment_builder``). In the layer of Kafka's server parts. See
docs/groups.md.
"""

from minibroker.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember
from minibroker.coordinator.group.consumer_group_manager import ConsumerGroupManager
from minibroker.coordinator.group.coordinator import GroupCoordinator
from minibroker.coordinator.group.coordinator_context import CoordinatorContext
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
from minibroker.coordinator.group.group_metadata_manager import GroupMetadataManager
from minibroker.coordinator.group.hashing import OFFSETS_TOPIC, java_string_hash, partition_for
from minibroker.coordinator.group.offset_metadata_manager import OffsetMetadataManager

__all__ = [
    "COMPLETING_REBALANCE",
    "DEAD",
    "EMPTY",
    "OFFSETS_TOPIC",
    "PREPARING_REBALANCE",
    "STABLE",
    "ClassicGroup",
    "ConsumerGroup",
    "ConsumerGroupManager",
    "ConsumerGroupMember",
    "CoordinatorContext",
    "CoordinatorTimer",
    "GroupCoordinator",
    "GroupMetadataManager",
    "Member",
    "OffsetMetadataManager",
    "java_string_hash",
    "partition_for",
]
