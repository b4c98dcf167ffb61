"""The requests the transaction coordinator answers, and its answers (Kafka's request names).

Each request carries what the wire request does; ``error`` is a Kafka error. AddPartitionsToTxn
and AddOffsetsToTxn answer one error for the whole request (the wire front end spreads it over
the partitions, as Kafka's handler does).
"""

from __future__ import annotations

import attrs

from minibroker.common.errors import Errors


@attrs.frozen
class InitProducerIdRequest:
    transactional_id: str
    timeout_ms: int
    #: the producer's current id and epoch (InitProducerId v3+, KIP-360), -1 when unknown
    producer_id: int = -1
    producer_epoch: int = -1


@attrs.frozen
class InitProducerIdResponse:
    error: Errors
    producer_id: int = -1
    producer_epoch: int = -1


@attrs.frozen
class AddPartitionsToTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]
    #: KIP-890: a partition leader asks whether the partitions are in the open transaction; the
    #: answer's ``partition_errors`` say so (NONE, or TRANSACTION_ABORTABLE), nothing is added
    verify_only: bool = False
    #: 2 when a partition leader adds the partition for a transaction-version-2 write (Produce v12+)
    transaction_version: int = 1


@attrs.frozen
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    #: the client's transaction protocol version: 2 (EndTxn v5+, KIP-890) bumps the epoch at every end
    transaction_version: int = 1


@attrs.frozen
class TxnResponse:
    """The answer to AddPartitionsToTxn, AddOffsetsToTxn and EndTxn."""

    error: Errors
    #: a verify-only AddPartitionsToTxn: each partition's error
    partition_errors: tuple[tuple[tuple[str, int], Errors], ...] = ()
    #: EndTxn with transaction version 2: the producer id and epoch the client continues with
    producer_id: int = -1
    producer_epoch: int = -1


@attrs.frozen
class DescribeTransactionsRequest:
    transactional_ids: tuple[str, ...]


@attrs.frozen
class DescribedTransaction:
    transactional_id: str
    error: Errors
    state: str = ""
    timeout_ms: int = 0
    #: when the open transaction began (virtual ms), -1 when none is open
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: tuple[tuple[str, int], ...] = ()


@attrs.frozen
class DescribeTransactionsResponse:
    transactions: tuple[DescribedTransaction, ...]


@attrs.frozen
class ListTransactionsRequest:
    #: empty: every state; else the states to list (Kafka's names, ``Ongoing``, ...)
    states: tuple[str, ...] = ()
    producer_ids: tuple[int, ...] = ()
    #: v1+: only transactions open for at least this long (ms); -1 for all
    duration_ms: int = -1


@attrs.frozen
class ListTransactionsResponse:
    error: Errors
    unknown_states: tuple[str, ...] = ()
    #: (transactional id, producer id, state)
    transactions: tuple[tuple[str, int, str], ...] = ()


TxnRequest = (
    InitProducerIdRequest
    | AddPartitionsToTxnRequest
    | EndTxnRequest
    | DescribeTransactionsRequest
    | ListTransactionsRequest
)
