"""Requests and responses between clients, brokers and the controller (plain frozen data)."""

from __future__ import annotations

from operator import itemgetter

import attrs

from minibroker.common.errors import Errors
from minibroker.common.record_batch import ProducerBatch, RecordBatch


class TopicPartition(tuple):
    """A partition of a topic; also the purgatory watch key (Kafka's TopicPartitionOperationKey).

    An immutable ``(topic, partition)`` pair: a ``tuple`` subclass, so hashing, equality and ordering
    (topic, then partition) run in C. Every dict and purgatory keyed by partitions hashes these on
    each lookup, which makes them the most hashed objects of a run.
    """

    __slots__ = ()

    def __new__(cls, topic: str, partition: int) -> TopicPartition:
        return tuple.__new__(cls, (topic, partition))

    topic: str = property(itemgetter(0), doc="The topic's name.")  # type: ignore[assignment]
    partition: int = property(itemgetter(1), doc="The partition's index.")  # type: ignore[assignment]

    def __getnewargs__(self) -> tuple[str, int]:  # type: ignore[override]
        return (self[0], self[1])

    def key_label(self) -> str:
        return f"{self[0]}-{self[1]}"

    def __str__(self) -> str:
        return f"{self[0]}-{self[1]}"

    def __repr__(self) -> str:
        return f"TopicPartition(topic={self[0]!r}, partition={self[1]!r})"


# --- produce ---------------------------------------------------------------------------------
@attrs.frozen(slots=True)
class ProduceData:
    """Records for one partition: ``count`` records of ``size`` bytes in all.

    ``raw``: the record batch bytes as a Kafka client sent them (the wire front end), kept as-is.
    """

    count: int
    size: int
    values: tuple[bytes, ...] | None = None
    raw: bytes | None = attrs.field(default=None, repr=False)
    #: the idempotent producer fields of ``raw``'s batches (checked and recorded by the leader)
    producers: tuple[ProducerBatch, ...] = ()


@attrs.frozen(slots=True)
class ProduceRequest:
    acks: int
    timeout_ms: int
    data: dict[TopicPartition, ProduceData]
    request_id: str = ""
    #: a transactional producer's id: its leader verifies a transaction's first batch (KIP-890)
    transactional_id: str | None = None
    #: what the leader may do for a transactional batch, by Produce version (``transaction_operation``)
    transaction_operation: int = 0


#: Kafka's ``TransactionSupportedOperation``: a Produce up to v10 is told INVALID_TXN_STATE when its
#: partition is not in the transaction, v11 TRANSACTION_ABORTABLE, and v12+ (transaction version 2)
#: adds the partition to the transaction itself
DEFAULT_ERROR, GENERIC_ERROR_SUPPORTED, ADD_PARTITION = 0, 1, 2


def transaction_operation(produce_version: int) -> int:
    """Kafka's ``produceRequestVersionToTransactionSupportedOperation``."""
    if produce_version > 11:
        return ADD_PARTITION
    return GENERIC_ERROR_SUPPORTED if produce_version > 10 else DEFAULT_ERROR


@attrs.frozen(slots=True)
class PartitionProduceResponse:
    error: Errors
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1


@attrs.frozen(slots=True)
class ProduceResponse:
    partitions: dict[TopicPartition, PartitionProduceResponse]
    #: how the broker answered: "immediate", "condition", "expiry" or "leadership"
    cause: str = "immediate"


# --- fetch -----------------------------------------------------------------------------------
CONSUMER_REPLICA_ID = -1

#: Kafka's FetchIsolation: what a read may return up to
LOG_END = "LOG_END"
HIGH_WATERMARK = "HIGH_WATERMARK"
TXN_COMMITTED = "TXN_COMMITTED"


@attrs.frozen(slots=True)
class FetchPartition:
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    #: a follower's own log start offset (the leader's low watermark counts it); -1 from consumers
    log_start_offset: int = -1


@attrs.frozen(slots=True)
class FetchRequest:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: dict[TopicPartition, FetchPartition]
    isolation: str = HIGH_WATERMARK
    request_id: str = ""

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


@attrs.frozen(slots=True)
class EpochEndOffset:
    epoch: int
    end_offset: int


@attrs.frozen(slots=True)
class PartitionFetchResponse:
    error: Errors
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    batches: tuple[RecordBatch, ...] = ()
    diverging_epoch: EpochEndOffset | None = None
    #: READ_COMMITTED: (producer id, first offset) of each aborted transaction the batches overlap
    aborted: tuple[tuple[int, int], ...] = ()
    #: with OFFSET_MOVED_TO_TIERED_STORAGE, the leader's local log start offset (a Kafka follower asks
    #: for it with ListOffsets -4; the answer carries it here)
    local_log_start_offset: int = -1

    @property
    def size(self) -> int:
        return sum(batch.size for batch in self.batches)


@attrs.frozen(slots=True)
class FetchResponse:
    partitions: dict[TopicPartition, PartitionFetchResponse]
    cause: str = "immediate"


# --- delete records --------------------------------------------------------------------------
#: DeleteRecords' offset meaning "up to the high watermark"
DELETE_TO_HIGH_WATERMARK = -1


@attrs.frozen(slots=True)
class DeleteRecordsRequest:
    """Move each partition's log start offset up to an offset (-1: the HW); wait up to ``timeout_ms``."""

    offsets: dict[TopicPartition, int]
    timeout_ms: int
    request_id: str = ""


@attrs.frozen(slots=True)
class PartitionDeleteRecordsResponse:
    error: Errors
    low_watermark: int = -1


@attrs.frozen(slots=True)
class DeleteRecordsResponse:
    partitions: dict[TopicPartition, PartitionDeleteRecordsResponse]
    cause: str = "immediate"


# --- list offsets ----------------------------------------------------------------------------
#: ListOffsets' special timestamps (Kafka's ``ListOffsetsRequest``): the HW (or LSO), the log start
#: offset, the local log start offset (v8+) and the highest offset in remote storage (v9+)
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@attrs.frozen(slots=True)
class ListOffsetsRequest:
    """For each partition, the offset of a special timestamp or of the first record at or after a time."""

    timestamps: dict[TopicPartition, int]
    isolation: str = HIGH_WATERMARK
    request_id: str = ""
    current_leader_epochs: dict[TopicPartition, int] = attrs.field(factory=dict)


@attrs.frozen(slots=True)
class PartitionListOffsetsResponse:
    error: Errors
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@attrs.frozen(slots=True)
class ListOffsetsResponse:
    partitions: dict[TopicPartition, PartitionListOffsetsResponse]
    cause: str = "immediate"


# --- elect leaders ---------------------------------------------------------------------------
@attrs.frozen(slots=True)
class ElectLeadersRequest:
    """Elect a leader for each partition (0: preferred, 1: unclean); wait up to ``timeout_ms`` for
    every elected leader to show in the metadata of the broker that was asked."""

    partitions: tuple[TopicPartition, ...]
    election_type: int
    timeout_ms: int
    request_id: str = ""


@attrs.frozen(slots=True)
class PartitionElectLeaderResponse:
    error: Errors
    message: str | None = None


@attrs.frozen(slots=True)
class ElectLeadersResponse:
    partitions: dict[TopicPartition, PartitionElectLeaderResponse]
    cause: str = "immediate"


# --- controller ------------------------------------------------------------------------------
@attrs.frozen(slots=True)
class AlterPartitionRequest:
    """A leader proposes a new ISR for a partition it leads."""

    broker_id: int
    tp: TopicPartition
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    #: the sender's life (1 at the first start, + 1 per restart): one from before a restart is stale
    broker_epoch: int = -1


@attrs.frozen(slots=True)
class LeaderAndIsr:
    """The controller's word on a partition: who leads, in which epoch, with which ISR."""

    tp: TopicPartition
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int
    replicas: tuple[int, ...]


@attrs.frozen(slots=True)
class MetadataCatchUp:
    """What a broker missed while its link to the controller was down: every state it replicates.

    KRaft brokers fetch the metadata log, so a healed link brings them up to date; the
    broker applies only the states that differ from what it has.
    """

    states: tuple[LeaderAndIsr, ...]


@attrs.frozen(slots=True)
class AlterPartitionResponse:
    error: Errors
    state: LeaderAndIsr | None = None


@attrs.frozen(slots=True)
class NetworkError:
    """What a requester gets instead of a response: connection reset, its own timeout, or
    UNKNOWN_SERVER_ERROR with ``cause``, an exception its handling raised (``Network.on_error``)."""

    error: Errors
    reason: str
    cause: Exception | None = attrs.field(default=None, eq=False)
