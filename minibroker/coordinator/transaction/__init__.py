"""The transaction coordinator: transactional ids, their state on ``__transaction_state``, markers.

``TransactionCoordinator`` (one per broker, beside its ReplicaManager) answers the ``messages``
requests for the ids of the ``__transaction_state`` partitions its broker leads, reaching the
broker through a ``TransactionContext``; ``transaction_metadata`` holds Kafka's states and their
transitions. Rank 3 of the layers (Kafka's server parts). See docs/kafka-model.md.
"""

from minibroker.coordinator.transaction.transaction_context import (
    TRANSACTION_STATE_TOPIC,
    TransactionContext,
    partition_for,
)
from minibroker.coordinator.transaction.transaction_coordinator import TransactionCoordinator
from minibroker.coordinator.transaction.transaction_metadata import TransactionMetadata

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "TransactionContext",
    "TransactionCoordinator",
    "TransactionMetadata",
    "partition_for",
]
