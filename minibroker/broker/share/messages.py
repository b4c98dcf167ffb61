"""ShareFetch and ShareAcknowledge as the emulated network carries them (KIP-932).

The wire server (``minibroker.server.share``) turns the Kafka requests into these; the broker's
``SharePartitionManager`` answers them.
"""

from __future__ import annotations

import attrs

from minibroker.broker.share.share_partition import AcknowledgementBatch, AcquiredRecords
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.common.record_batch import RecordBatch

Acknowledgements = dict[TopicPartition, tuple[AcknowledgementBatch, ...]]


@attrs.frozen(slots=True)
class ShareFetchRequest:
    """Fetch for ``member_id`` of ``group_id`` in its share session (epoch 0 opens one, -1 closes it)."""

    group_id: str
    member_id: str
    session_epoch: int
    max_wait_ms: int
    partitions: tuple[TopicPartition, ...]
    acknowledgements: Acknowledgements = attrs.field(factory=dict)
    forgotten: tuple[TopicPartition, ...] = ()
    max_records: int = 500
    min_bytes: int = 1
    max_bytes: int = 52_428_800
    request_id: str = ""


@attrs.frozen(slots=True)
class ShareFetchPartitionData:
    """One partition's answer: fetch error, acknowledgement error, the acquired runs and the log batches
    that hold them, the leader as this broker knows it."""

    error: Errors = Errors.NONE
    acknowledge_error: Errors = Errors.NONE
    acquired: tuple[AcquiredRecords, ...] = ()
    batches: tuple[RecordBatch, ...] = ()
    leader_id: int = -1
    leader_epoch: int = -1


@attrs.frozen(slots=True)
class ShareFetchResponse:
    error: Errors
    partitions: dict[TopicPartition, ShareFetchPartitionData]
    acquisition_lock_timeout_ms: int = 0
    cause: str = "immediate"


@attrs.frozen(slots=True)
class ShareAcknowledgeRequest:
    group_id: str
    member_id: str
    session_epoch: int
    acknowledgements: Acknowledgements
    request_id: str = ""


@attrs.frozen(slots=True)
class ShareAcknowledgeResponse:
    error: Errors
    partitions: dict[TopicPartition, Errors]
