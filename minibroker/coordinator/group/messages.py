"""Requests to and answers from a group coordinator, as they travel on the emulated network.

Field names follow Kafka's request schemas (JoinGroup v9, SyncGroup v5, Heartbeat v4,
LeaveGroup v5, OffsetCommit v9, OffsetFetch v9, DescribeGroups v5, ListGroups v5,
DeleteGroups v2, ConsumerGroupHeartbeat v1, ConsumerGroupDescribe v1) in Python spelling;
the wire front end and the emulator's own consumer both build them. Errors are ``Errors`` members.
"""

from __future__ import annotations

import attrs

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition

#: a member's protocol: (name, metadata); a member's assignment: (member id, bytes)
Protocol = tuple[str, bytes]


class GroupRequest:
    """Base of every request a broker hands to its group coordinator."""

    __slots__ = ()


@attrs.frozen
class JoinGroupRequest(GroupRequest):
    group_id: str
    member_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    #: JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED (KIP-394)
    require_known_member_id: bool = True
    reason: str | None = None


@attrs.frozen
class JoinGroupMember:
    member_id: str
    instance_id: str | None
    metadata: bytes


@attrs.frozen
class JoinGroupResponse:
    error: Errors
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    members: tuple[JoinGroupMember, ...] = ()
    skip_assignment: bool = False


@attrs.frozen
class SyncGroupRequest(GroupRequest):
    group_id: str
    generation_id: int
    member_id: str
    assignments: tuple[tuple[str, bytes], ...] = ()
    instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None


@attrs.frozen
class SyncGroupResponse:
    error: Errors
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@attrs.frozen
class HeartbeatRequest(GroupRequest):
    group_id: str
    generation_id: int
    member_id: str
    instance_id: str | None = None


@attrs.frozen
class HeartbeatResponse:
    error: Errors


@attrs.frozen
class LeavingMember:
    member_id: str
    instance_id: str | None = None
    reason: str | None = None


@attrs.frozen
class LeaveGroupRequest(GroupRequest):
    group_id: str
    members: tuple[LeavingMember, ...]


@attrs.frozen
class LeaveGroupResponse:
    error: Errors
    #: (member id, instance id, error) per member, in request order
    members: tuple[tuple[str, str | None, Errors], ...] = ()


@attrs.frozen
class CommitOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@attrs.frozen
class OffsetCommitRequest(GroupRequest):
    group_id: str
    offsets: tuple[CommitOffset, ...]
    generation_id: int = -1
    member_id: str = ""
    instance_id: str | None = None
    #: v2-v4's retention_time_ms; -1 means the broker's offsets.retention.minutes
    retention_ms: int = -1
    api_version: int = 9


@attrs.frozen
class TxnOffsetCommitRequest(GroupRequest):
    """Offsets a transactional producer commits for ``group_id``: pending until its transaction ends."""

    group_id: str
    producer_id: int
    producer_epoch: int
    offsets: tuple[CommitOffset, ...]
    #: KIP-447 (v3+): the consumer's group generation and member, checked when given
    generation_id: int = -1
    member_id: str = ""
    instance_id: str | None = None


@attrs.frozen
class OffsetCommitResponse:
    #: (topic, partition, error) per partition, in request order
    partitions: tuple[tuple[str, int, Errors], ...]


@attrs.frozen
class FetchedOffset:
    topic: str
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str | None = ""
    error: Errors = Errors.NONE


@attrs.frozen
class OffsetFetchGroup:
    group_id: str
    #: (topic, partitions) pairs; None for every committed offset of the group
    topics: tuple[tuple[str, tuple[int, ...]], ...] | None = None
    #: v9+: a consumer group member's id and epoch, checked against the group (None, -1: not given)
    member_id: str | None = None
    member_epoch: int = -1


@attrs.frozen
class OffsetFetchRequest(GroupRequest):
    groups: tuple[OffsetFetchGroup, ...]
    require_stable: bool = False


@attrs.frozen
class OffsetFetchResult:
    group_id: str
    error: Errors
    offsets: tuple[FetchedOffset, ...] = ()


@attrs.frozen
class OffsetFetchResponse:
    groups: tuple[OffsetFetchResult, ...]


def refused_while_loading(answer: OffsetCommitResponse | OffsetFetchResponse) -> bool:
    """An OffsetCommit (per partition) or OffsetFetch (per group) answer refused while loading."""
    if isinstance(answer, OffsetFetchResponse):
        errors = [group.error for group in answer.groups]
    else:
        errors = [error for _, _, error in answer.partitions]
    return Errors.COORDINATOR_LOAD_IN_PROGRESS in errors


@attrs.frozen
class DescribedMember:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@attrs.frozen
class DescribedGroup:
    group_id: str
    error: Errors
    state: str
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


@attrs.frozen
class DescribeGroupsRequest(GroupRequest):
    group_ids: tuple[str, ...]


@attrs.frozen
class DescribeGroupsResponse:
    groups: tuple[DescribedGroup, ...]


@attrs.frozen
class ListGroupsRequest(GroupRequest):
    states: tuple[str, ...] = ()
    types: tuple[str, ...] = ()


@attrs.frozen
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    #: "classic" or "consumer" (ListGroups v5's group type)
    group_type: str = "classic"


@attrs.frozen
class ListGroupsResponse:
    error: Errors
    groups: tuple[ListedGroup, ...] = ()


@attrs.frozen
class DeleteGroupsRequest(GroupRequest):
    group_ids: tuple[str, ...]


@attrs.frozen
class DeleteGroupsResponse:
    #: (group id, error) per group, in request order
    results: tuple[tuple[str, Errors], ...]


@attrs.frozen
class OffsetDeleteRequest(GroupRequest):
    group_id: str
    partitions: tuple[TopicPartition, ...]


@attrs.frozen
class OffsetDeleteResponse:
    error: Errors
    #: (partition, error) per partition, in request order (empty when ``error`` is the group's)
    partitions: tuple[tuple[TopicPartition, Errors], ...] = ()


#: (topic, partitions) pairs, sorted: a consumer group member's assignment
TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


def partition_names(assignment: TopicPartitions) -> list[str]:
    """An assignment as ``topic-partition`` names, in its order (trace fields, read-outs)."""
    return [f"{topic}-{p}" for topic, parts in assignment for p in parts]


@attrs.frozen
class ConsumerGroupHeartbeatRequest(GroupRequest):
    """KIP-848's one request of a member: join (epoch 0), heartbeat, leave (-1, or -2 for a static member).

    Optional fields are None when they did not change since the member's last heartbeat;
    ``owned_partitions`` names topics (the wire front end maps topic ids to names).

    A member's loop, as Kafka's consumers run it: join with epoch 0, a member id of its own,
    ``subscribed_topic_names`` (or ``subscribed_topic_regex``), ``rebalance_timeout_ms`` and
    ``owned_partitions=()``; then heartbeat every answered ``heartbeat_interval_ms`` with the answered
    ``member_epoch``. An answer with an ``assignment`` is the whole set the member may own now: it stops
    fetching (and commits) the partitions it had that are not in it, then heartbeats at once with
    ``owned_partitions`` set to what it still owns, which lets the coordinator move it on. On
    FENCED_MEMBER_EPOCH or UNKNOWN_MEMBER_ID it drops every partition and joins again with epoch 0. It
    leaves with epoch -1 (a static member may leave with -2 and come back under its instance id).
    """

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned_partitions: TopicPartitions | None = None
    client_id: str = ""
    client_host: str = ""
    #: v0: the coordinator makes the member id of a joining member; v1: the member brings it
    api_version: int = 1


@attrs.frozen
class ConsumerGroupHeartbeatResponse:
    error: Errors
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    #: None when not sent (the assignment did not change and the request was not a full one)
    assignment: TopicPartitions | None = None


@attrs.frozen
class ConsumerGroupDescribeRequest(GroupRequest):
    group_ids: tuple[str, ...]


@attrs.frozen
class DescribedConsumerGroupMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: TopicPartitions
    target_assignment: TopicPartitions


@attrs.frozen
class DescribedConsumerGroup:
    group_id: str
    error: Errors
    error_message: str | None = None
    state: str = ""
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[DescribedConsumerGroupMember, ...] = ()


@attrs.frozen
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedConsumerGroup, ...]
