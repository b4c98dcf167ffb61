"""Share groups on the broker side (KIP-932): share partitions, their acquisition locks, share sessions and
the ShareFetch purgatory. docs/kafka-model.md, "Share groups", describes the behaviour."""

from minibroker.broker.share.acquisition_lock import AcquisitionLock
from minibroker.broker.share.delayed_share_fetch import (
    DelayedShareFetch,
    DelayedShareFetchGroupKey,
    DelayedShareFetchPartitionKey,
)
from minibroker.broker.share.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchPartitionData,
    ShareFetchRequest,
    ShareFetchResponse,
)
from minibroker.broker.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    InFlightRecord,
    RecordState,
    SharePartition,
)
from minibroker.broker.share.share_partition_manager import SharePartitionManager
from minibroker.broker.share.share_session_cache import ShareSession, ShareSessionCache

__all__ = [
    "AcknowledgeType",
    "AcknowledgementBatch",
    "AcquiredRecords",
    "AcquisitionLock",
    "DelayedShareFetch",
    "DelayedShareFetchGroupKey",
    "DelayedShareFetchPartitionKey",
    "InFlightRecord",
    "RecordState",
    "ShareAcknowledgeRequest",
    "ShareAcknowledgeResponse",
    "ShareFetchPartitionData",
    "ShareFetchRequest",
    "ShareFetchResponse",
    "SharePartition",
    "SharePartitionManager",
    "ShareSession",
    "ShareSessionCache",
]
