"""Partition verification (KIP-890): Kafka's ``AddPartitionsToTxnManager`` on a partition leader.

With ``transaction.partition.verification.enable`` (default true), a leader about to append the
first transactional batch of a producer and epoch that has no transaction open on the partition
(``ProducerStateManager.has_ongoing``) first asks the id's transaction coordinator, the leader of
its ``__transaction_state`` partition, over the emulated network: an AddPartitionsToTxn with
``verify_only`` for a Produce up to v11, a plain one (the produce adds the partition, transaction
protocol version 2) for v12+. Only partitions the coordinator confirms are appended. This is what
keeps a late or stray write from opening a transaction no marker will ever close (KIP-664's
hanging transaction: the LSO stuck at its first offset).

The coordinator's answer is translated as Kafka's ``AddPartitionsToTxnManager`` and
``ReplicaManager`` do: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE becomes
INVALID_TXN_STATE for a Produce up to v10 (``DEFAULT_ERROR``); retriable coordinator errors
(CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR) become NOT_ENOUGH_REPLICAS, which every client retries.

A verification leaves its guard in the producer's state (``verifying``) until a marker for that
producer clears it; a batch whose guard is gone when the answer arrives is refused
with INVALID_TXN_STATE (Kafka's ``VerificationGuard``): it was verified for a transaction that has
ended since.

Verifications of the same transaction's partitions (same transactional id, producer id, epoch and
partitions) asked while one is on its way wait for that one's answer instead of sending another:
Kafka's manager keeps one entry per transactional id and coordinator, and Kafka's producer sends
one Produce per leader where the emulated one sends one per ``send``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import (
    ADD_PARTITION,
    DEFAULT_ERROR,
    NetworkError,
    ProduceRequest,
    TopicPartition,
)
from minibroker.coordinator.transaction.messages import AddPartitionsToTxnRequest, TxnResponse
from minibroker.timer import TimerTask

#: coordinator errors a leader turns into NOT_ENOUGH_REPLICAS (clients retry it without a metadata refresh)
RETRIABLE = frozenset(
    {
        Errors.CONCURRENT_TRANSACTIONS,
        Errors.NETWORK_EXCEPTION,
        Errors.COORDINATOR_LOAD_IN_PROGRESS,
        Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.NOT_COORDINATOR,
    }
)


def produce_error(error: Errors, operation: int) -> Errors:
    """What the producer is told for a coordinator's verification ``error``."""
    if error is Errors.PRODUCER_FENCED:
        return Errors.INVALID_PRODUCER_EPOCH
    if error is Errors.TRANSACTION_ABORTABLE and operation == DEFAULT_ERROR:
        return Errors.INVALID_TXN_STATE
    if error in RETRIABLE:
        return Errors.NOT_ENOUGH_REPLICAS
    return error


class AddPartitionsToTxnManager:
    """Verifies a Produce's transactional partitions with their coordinator before the append."""

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        #: transactional id -> the broker coordinating it (-1 when none); the Broker sets it
        self.coordinator_of: Callable[[str], int] = lambda transactional_id: -1
        #: (coordinator, verify-only request) on its way -> the callbacks waiting for its answer
        self._verifying: dict[tuple[int, AddPartitionsToTxnRequest], list[Callable[[Any], None]]] = {}

    def unverified(self, request: ProduceRequest) -> dict[TopicPartition, tuple[int, int, int]]:
        """Partitions led here whose transactional batches open a transaction: tp -> (producer id,
        epoch, first sequence)."""
        found: dict[TopicPartition, tuple[int, int, int]] = {}
        if (
            request.transactional_id is None
            or not self._manager.config.transaction_partition_verification_enable
        ):
            return found
        for tp, data in request.data.items():
            partition = self._manager.partition(tp)
            if partition is None or not partition.is_leader:
                continue
            batch = next((b for b in data.producers if b.transactional and b.control < 0), None)
            if batch is not None and not partition.log.producer_state.has_ongoing(
                batch.producer_id, batch.epoch
            ):
                found[tp] = (batch.producer_id, batch.epoch, batch.first_seq)
        return found

    def verify(
        self,
        request: ProduceRequest,
        unverified: dict[TopicPartition, tuple[int, int, int]],
        then: Callable[[dict[TopicPartition, Errors]], None],
    ) -> None:
        """Ask the coordinator; ``then(refused)`` with each refused partition's error for the producer."""
        manager = self._manager
        txn_id = request.transactional_id
        assert txn_id is not None
        operation = request.transaction_operation
        guards: dict[TopicPartition, object] = {}
        for tp, (pid, epoch, sequence) in unverified.items():
            # one entry per producer until its next transactional batch or marker here clears it:
            # concurrent verifications share it
            state = manager.partition(tp).log.producer_state
            guards[tp] = state.start_verification(pid, sequence, epoch)
        (pid, epoch, _), *_ = unverified.values()
        tps = sorted(unverified)
        message = AddPartitionsToTxnRequest(
            txn_id,
            pid,
            epoch,
            tuple((tp.topic, tp.partition) for tp in tps),
            verify_only=operation != ADD_PARTITION,
            transaction_version=2 if operation == ADD_PARTITION else 1,
        )
        coordinator = self.coordinator_of(txn_id)

        def trace(coordinator: int) -> None:
            if manager.tracer.enabled:
                manager.emit(
                    "txn.verify",
                    op=request.request_id,
                    txn=txn_id,
                    coordinator=coordinator,
                    partitions=[str(tp) for tp in tps],
                    add=not message.verify_only,
                )

        def ask(callback: Callable[[Any], None], coordinator: int) -> None:
            trace(coordinator)
            self._ask(message, callback, coordinator)

        def answered(response: Any) -> None:
            if manager.stopped:
                return
            if isinstance(response, NetworkError):
                errors = dict.fromkeys(tps, Errors.NETWORK_EXCEPTION)
            elif not isinstance(response, TxnResponse):
                errors = dict.fromkeys(tps, Errors.UNKNOWN_SERVER_ERROR)
            elif response.error is not Errors.NONE or not message.verify_only:
                errors = dict.fromkeys(tps, response.error)
            else:
                by_pair = dict(response.partition_errors)
                errors = {tp: by_pair.get((tp.topic, tp.partition), Errors.INVALID_TXN_STATE) for tp in tps}
            refused: dict[TopicPartition, Errors] = {}
            for tp in tps:
                error = produce_error(errors[tp], operation)
                partition = manager.partition(tp)
                state = partition.log.producer_state if partition is not None else None
                if (
                    error is Errors.NONE
                    and state is not None
                    and state.verifying.get(pid) is not guards[tp]
                    and not state.has_ongoing(pid, epoch)
                ):
                    error = Errors.INVALID_TXN_STATE  # a marker came meanwhile: that transaction ended
                if error is not Errors.NONE:
                    refused[tp] = error
            if manager.tracer.enabled:
                manager.emit(
                    "txn.verified",
                    op=request.request_id,
                    txn=txn_id,
                    refused={str(tp): error.name for tp, error in refused.items()},
                )
            then(refused)

        if not message.verify_only:
            # the produce adds the partition (transaction version 2): an add refused
            # CONCURRENT_TRANSACTIONS (the previous transaction still completing) is asked again every
            # add.partitions.to.txn.retry.backoff.ms until add.partitions.to.txn.retry.backoff.max.ms
            # (at most request.timeout.ms) from the first ask, as Kafka's ReplicaManager does
            config = manager.config
            backoff = config.add_partitions_to_txn_retry_backoff_ms
            deadline = manager.now() + min(
                config.add_partitions_to_txn_retry_backoff_max_ms, config.request_timeout_ms
            )

            def retrying(response: Any) -> None:
                if (
                    not manager.stopped
                    and isinstance(response, TxnResponse)
                    and response.error is Errors.CONCURRENT_TRANSACTIONS
                    and manager.now() < deadline
                ):
                    manager.timer.add(TimerTask(backoff, again))
                    return
                answered(response)

            def again() -> None:
                if not manager.stopped:
                    ask(retrying, self.coordinator_of(txn_id))  # the coordinator looked up again

            return ask(retrying, coordinator)
        key = (coordinator, message)
        waiting = self._verifying.get(key)
        if waiting is not None:
            trace(coordinator)  # asked too, answered by the verification on its way
            waiting.append(answered)
            return
        self._verifying[key] = [answered]

        def shared(response: Any) -> None:
            for callback in self._verifying.pop(key):
                callback(response)

        ask(shared, coordinator)

    def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: tuple[tuple[str, int], ...],
        then: Callable[[Errors], None],
    ) -> None:
        """Add ``partitions`` to the open transaction for another request of transaction version 2
        (TxnOffsetCommit v5+ adds the group's ``__consumer_offsets`` partition so); ``then(error)``."""
        message = AddPartitionsToTxnRequest(
            transactional_id, producer_id, epoch, partitions, transaction_version=2
        )

        def answered(response: Any) -> None:
            if isinstance(response, NetworkError):
                return then(Errors.NETWORK_EXCEPTION)
            error = response.error if isinstance(response, TxnResponse) else Errors.UNKNOWN_SERVER_ERROR
            then(Errors.INVALID_PRODUCER_EPOCH if error is Errors.PRODUCER_FENCED else error)

        self._ask(message, answered)

    def _ask(
        self,
        message: AddPartitionsToTxnRequest,
        answered: Callable[[Any], None],
        coordinator: int | None = None,
    ) -> None:
        manager = self._manager
        if coordinator is None:
            coordinator = self.coordinator_of(message.transactional_id)
        if coordinator < 0:
            return answered(TxnResponse(Errors.COORDINATOR_NOT_AVAILABLE))
        manager.network.request(
            manager.broker_id, coordinator, message, manager.config.request_timeout_ms, answered
        )
