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


@attrs.frozen
class EndTxnRequest:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool


@attrs.frozen
class TxnResponse:
    """The answer to AddPartitionsToTxn, AddOffsetsToTxn and EndTxn."""

    error: Errors


TxnRequest = InitProducerIdRequest | AddPartitionsToTxnRequest | EndTxnRequest
