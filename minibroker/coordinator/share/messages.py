"""ShareGroupHeartbeat and ShareGroupDescribe as the emulated network carries them (KIP-932)."""

from __future__ import annotations

import attrs

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition


@attrs.frozen(slots=True)
class ShareGroupHeartbeatRequest:
    """``member_epoch`` 0 joins, -1 leaves; ``subscribed_topics`` None when unchanged."""

    group_id: str
    member_id: str
    member_epoch: int
    subscribed_topics: tuple[str, ...] | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""


@attrs.frozen(slots=True)
class ShareGroupHeartbeatResponse:
    error: Errors
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    #: topic -> partitions, None when the member's assignment did not change since it last heard it
    assignment: dict[str, tuple[int, ...]] | None = None


@attrs.frozen(slots=True)
class ShareGroupDescribeRequest:
    group_ids: tuple[str, ...]


@attrs.frozen(slots=True)
class DescribedShareMember:
    member_id: str
    member_epoch: int
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topics: tuple[str, ...]
    assignment: dict[str, tuple[int, ...]]


@attrs.frozen(slots=True)
class DescribedShareGroup:
    group_id: str
    error: Errors
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = "simple"
    members: tuple[DescribedShareMember, ...] = ()


@attrs.frozen(slots=True)
class ShareGroupDescribeResponse:
    groups: tuple[DescribedShareGroup, ...]


@attrs.frozen(slots=True)
class PersistedBatch:
    """A run of offsets with one state and delivery count, as ``__share_group_state`` keeps it."""

    first_offset: int
    last_offset: int
    delivery_count: int
    state: int


@attrs.frozen(slots=True)
class ShareGroupState:
    """A share partition's persisted state: its start offset and the in-flight batches above it."""

    start_offset: int
    batches: tuple[PersistedBatch, ...] = ()
    state_epoch: int = 0


@attrs.frozen(slots=True)
class WriteShareGroupStateRequest:
    """Kafka's WriteShareGroupState (85): replace the state of (group, topic, partition)."""

    group_id: str
    topic: str
    partition: int
    state: ShareGroupState


@attrs.frozen(slots=True)
class ShareStateKey:
    """A share partition's key at its share coordinator: the requests that name nothing else."""

    group_id: str
    topic: str
    partition: int


@attrs.frozen(slots=True)
class ReadShareGroupStateRequest(ShareStateKey):
    """Kafka's ReadShareGroupState (84)."""


@attrs.frozen(slots=True)
class ShareGroupStateResponse:
    """The answer to both: the error, and for a read the state (None when none was ever written)."""

    error: Errors
    state: ShareGroupState | None = None


@attrs.frozen(slots=True)
class InitializeShareGroupStateRequest(ShareStateKey):
    """Kafka's InitializeShareGroupState (83): start (group, topic, partition) afresh at ``start_offset``,
    with no in-flight records and the next state epoch (a leader writing an older epoch is fenced)."""

    start_offset: int


@attrs.frozen(slots=True)
class ReadShareGroupStateSummaryRequest(ShareStateKey):
    """Kafka's ReadShareGroupStateSummary (87): the start offset and state epoch, without the batches."""


@attrs.frozen(slots=True)
class DeleteShareGroupStateRequest(ShareStateKey):
    """Kafka's DeleteShareGroupState (86): forget the state of (group, topic, partition)."""


@attrs.frozen(slots=True)
class ShareGroupOffset:
    """One partition's answer to an offsets admin call: its error and its share-partition start offset
    (-1 when the partition has no state)."""

    error: Errors
    start_offset: int = -1


@attrs.frozen(slots=True)
class DescribeShareGroupOffsetsRequest:
    """Kafka's DescribeShareGroupOffsets (90) for one group: ``partitions`` None asks for every partition
    of the topics the group has state for."""

    group_id: str
    partitions: tuple[TopicPartition, ...] | None = None


@attrs.frozen(slots=True)
class AlterShareGroupOffsetsRequest:
    """Kafka's AlterShareGroupOffsets (91): move each partition's SPSO (the group must be empty)."""

    group_id: str
    offsets: dict[TopicPartition, int]


@attrs.frozen(slots=True)
class DeleteShareGroupOffsetsRequest:
    """Kafka's DeleteShareGroupOffsets (92): forget the group's state on every partition of ``topics``."""

    group_id: str
    topics: tuple[str, ...]


@attrs.frozen(slots=True)
class ShareGroupOffsetsResponse:
    """The answer to all three: a group-level error, else one ``ShareGroupOffset`` per partition."""

    error: Errors
    partitions: dict[TopicPartition, ShareGroupOffset] = attrs.field(factory=dict)


#: the messages a broker's share group coordinator answers
SHARE_GROUP_REQUESTS = (
    ShareGroupHeartbeatRequest,
    ShareGroupDescribeRequest,
    DescribeShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
)
#: the messages a broker's share coordinator (``__share_group_state``) answers
SHARE_STATE_REQUESTS = (
    ReadShareGroupStateRequest,
    WriteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    DeleteShareGroupStateRequest,
)
