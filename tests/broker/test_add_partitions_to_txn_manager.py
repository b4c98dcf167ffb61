"""What a producer is told when its partition's verification fails (Kafka's translations)."""

from __future__ import annotations

import pytest

from minibroker.broker.add_partitions_to_txn_manager import produce_error
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    ADD_PARTITION,
    DEFAULT_ERROR,
    GENERIC_ERROR_SUPPORTED,
    transaction_operation,
)


def test_the_produce_version_chooses_the_transaction_operation():
    assert [transaction_operation(v) for v in (3, 9, 10, 11, 12)] == [
        DEFAULT_ERROR,
        DEFAULT_ERROR,
        DEFAULT_ERROR,
        GENERIC_ERROR_SUPPORTED,
        ADD_PARTITION,
    ]


@pytest.mark.parametrize(
    ("coordinator", "operation", "producer"),
    [
        (Errors.NONE, DEFAULT_ERROR, Errors.NONE),
        (Errors.TRANSACTION_ABORTABLE, DEFAULT_ERROR, Errors.INVALID_TXN_STATE),
        (Errors.TRANSACTION_ABORTABLE, GENERIC_ERROR_SUPPORTED, Errors.TRANSACTION_ABORTABLE),
        (Errors.PRODUCER_FENCED, ADD_PARTITION, Errors.INVALID_PRODUCER_EPOCH),
        (Errors.CONCURRENT_TRANSACTIONS, DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.NOT_COORDINATOR, ADD_PARTITION, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.COORDINATOR_LOAD_IN_PROGRESS, DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.COORDINATOR_NOT_AVAILABLE, DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.NETWORK_EXCEPTION, DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.INVALID_PRODUCER_ID_MAPPING, DEFAULT_ERROR, Errors.INVALID_PRODUCER_ID_MAPPING),
    ],
)
def test_the_coordinator_s_answer_is_translated_for_the_producer(coordinator, operation, producer):
    assert produce_error(coordinator, operation) is producer
