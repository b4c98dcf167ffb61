"""What the transaction coordinator needs from its broker (as ``CoordinatorContext`` is for groups).

The clock (``now``), one-shot tasks on the broker's one SystemTimer (``schedule``), the broker's
config, trace events (``emit``), producer ids (``next_producer_id``), which ``__transaction_state``
partition holds a transactional id (``partition_of``, Kafka's ``partitionFor``), the records of a
partition this broker leads (``state_records``) and how far its HW covers them (``high_watermark``,
``when_committed``), the leader of any partition (``leader_of``) and two ways to write: ``write``
appends a state record with acks=-1 to the id's partition through the produce purgatory
(``request.timeout.ms``), ``send`` sends a request (the markers) to a broker over the emulated
network.

Pure: no trio. The broker's ReplicaManager supplies the clock, the timer, the config and appends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import ProduceData, ProduceRequest, TopicPartition
from minibroker.coordinator.group.hashing import java_string_hash, kafka_abs
from minibroker.timer import TimerTask
from minibroker.trace import NULL_TRACER, Tracer

TRANSACTION_STATE_TOPIC = "__transaction_state"


def partition_for(transactional_id: str, partitions: int) -> int:
    """Kafka's ``partitionFor``: ``Utils.abs(transactionalId.hashCode) % partitions``."""
    return kafka_abs(java_string_hash(transactional_id)) % partitions


class TransactionContext:
    """One broker's services to its transaction coordinator (lives as long as its ReplicaManager)."""

    def __init__(
        self,
        manager: Any,
        network: Any,
        leader_of: Callable[[TopicPartition], int],
        producer_ids: Any,
        tracer: Tracer = NULL_TRACER,
    ) -> None:
        self._manager = manager
        self._network = network
        self.broker_id: int = manager.broker_id
        self.leader_of = leader_of
        self._producer_ids = producer_ids
        self.tracer = tracer
        #: the wall-clock time (ms since the Unix epoch) of the clock's 0 when ``__transaction_state``
        #: outlives the process (``serve --data-dir``): its records then hold wall-clock times; else 0
        self.origin_ms = 0
        #: (transactional id, partition count) -> its ``__transaction_state`` partition (``partition_for``)
        self._partitions: dict[tuple[str, int], int] = {}

    @property
    def config(self) -> Any:
        return self._manager.config

    def now(self) -> int:
        return self._manager.now()

    def emit(self, kind: str, **fields: Any) -> None:
        if self.tracer.enabled:
            self.tracer.emit(kind, broker=self.broker_id, **fields)

    def schedule(self, delay_ms: int, action: Callable[[], Any]) -> TimerTask:
        """Run ``action`` once after ``delay_ms`` on the broker's SystemTimer."""
        task = TimerTask(delay_ms, action)
        self._manager.timer.add(task)
        return task

    def next_producer_id(self) -> int:
        return next(self._producer_ids)

    def partition_of(self, transactional_id: str) -> int:
        partitions = self.config.transaction_state_log_num_partitions
        key = (transactional_id, partitions)
        found = self._partitions.get(key)
        if found is None:
            found = self._partitions[key] = partition_for(transactional_id, partitions)
        return found

    def known(self, tp: TopicPartition) -> bool:
        return bool(self._manager.known(tp))

    def state_records(self, partition: int) -> list[tuple[int, bytes]]:
        """Every record value of ``__transaction_state-partition`` in this broker's log up to its end,
        in order, each with the last offset of its batch (the HW covers the value once it passes that)."""
        replica = self._manager.partition(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        if replica is None:
            return []
        batches = replica.log.batches()
        return [(batch.next_offset - 1, value) for batch in batches for value in (batch.values or ())]

    def high_watermark(self, partition: int) -> int:
        """The HW of ``__transaction_state-partition`` here (-1 when not hosted)."""
        replica = self._manager.partition(TopicPartition(TRANSACTION_STATE_TOPIC, partition))
        return -1 if replica is None else replica.log.high_watermark

    def when_committed(self, partition: int, offset: int, on_done: Callable[[Errors], Any]) -> None:
        """``on_done(error)`` once the HW of ``__transaction_state-partition`` passes ``offset``: a
        DelayedProduce in the produce purgatory, answered as an acks=-1 write would be (within
        ``request.timeout.ms``; NOT_LEADER_OR_FOLLOWER when the partition's leadership moves)."""
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        op_id = self._manager.next_request_id("txn-state-wait")
        self._manager.await_high_watermark(tp, offset, self.config.request_timeout_ms, op_id, on_done)

    def write(self, partition: int, value: bytes, on_done: Callable[[Errors], Any]) -> None:
        """Append ``value`` to ``__transaction_state-partition`` with acks=-1; ``on_done(error)``."""
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        data = ProduceData(1, len(value), values=(value,))
        request = ProduceRequest(
            -1, self.config.request_timeout_ms, {tp: data}, self._manager.next_request_id("txn-state")
        )
        self._manager.append_records(request, lambda response: on_done(response.partitions[tp].error))

    def send(self, broker: int, message: Any, timeout_ms: int, on_response: Callable[[Any], Any]) -> None:
        """Send ``message`` to ``broker``; ``on_response`` hears its answer or a network error."""
        self._network.request(self.broker_id, broker, message, timeout_ms, on_response)

    def next_request_id(self, kind: str) -> str:
        return self._manager.next_request_id(kind)
