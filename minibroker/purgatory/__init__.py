"""Pure core: delayed operations and the purgatory that watches and expires them. Pure, no trio."""

from minibroker.purgatory.keys import TopicPartitionOperationKey
from minibroker.purgatory.operation import DelayedOperation
from minibroker.purgatory.purgatory import DEFAULT_PURGE_INTERVAL, DelayedOperationPurgatory

__all__ = [
    "DEFAULT_PURGE_INTERVAL",
    "DelayedOperation",
    "DelayedOperationPurgatory",
    "TopicPartitionOperationKey",
]
