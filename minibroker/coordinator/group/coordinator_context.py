"""What the group coordinator's managers need from their broker (Kafka's ``CoordinatorContext``).

``GroupMetadataManager`` and ``OffsetMetadataManager`` hold one ``CoordinatorContext``
and reach the broker only through it: the clock (``now``), the keyed timer
(``timer``, a ``CoordinatorTimer`` on the broker's SystemTimer), the broker's
config, trace events (``emit``), member ids (``new_member_id``), which
``__consumer_offsets`` partition holds a group (``partition_of``), whether a topic
partition exists (``known``) and the one way to persist records (``write``).

``write`` is Kafka's append through the coordinator runtime: one acks=-1 produce
on the group's partition with ``offsets.commit.timeout.ms``, a DelayedProduce in
the broker's produce purgatory, and ``on_done(error)`` when the ISR has it (or
the produce fails). ``write_error`` maps that error to the one a group request
answers, as Kafka's coordinator does.

``when_written`` is the rule of Kafka's ``CoordinatorRuntime`` for an operation whose
answer was read from state that pending writes changed (a write operation that produced
no records): its answer is held until every write of its groups sent before it is
answered, and carries the first of those writes' errors if one failed. Writes sent after
it are not waited for. Every write is answered by ``offsets.commit.timeout.ms`` at the
latest, so a held operation always runs.

Pure: no trio. The broker's ReplicaManager (``manager``) supplies the clock, the
timer, the config, the request numbers and the appends.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import ProduceData, ProduceRequest, TopicPartition
from minibroker.common.record_batch import ProducerBatch
from minibroker.coordinator.group import records
from minibroker.coordinator.group.coordinator_timer import CoordinatorTimer
from minibroker.coordinator.group.hashing import OFFSETS_TOPIC, partition_for
from minibroker.trace import NULL_TRACER, Tracer

_MEMBER_IDS = uuid.UUID("6d696e69-6272-6f6b-6572-67726f757073")  # namespace: "minibrokergroups"


def write_error(error: Errors) -> Errors:
    """Kafka's appendGroupMetadataErrorToResponseError: what a failed write answers."""
    if error in (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
        Errors.NETWORK_EXCEPTION,
    ):
        return Errors.COORDINATOR_NOT_AVAILABLE
    if error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.KAFKA_STORAGE_ERROR):
        return Errors.NOT_COORDINATOR
    return error


class CoordinatorContext:
    """One broker's services to its group coordinator's managers (lives as long as its ReplicaManager).

    ``config`` is read from the ReplicaManager on every use (a dynamic config change applies at once).
    """

    def __init__(self, manager: Any, partitions: Callable[[], int], tracer: Tracer = NULL_TRACER) -> None:
        self._manager = manager
        self.broker_id: int = manager.broker_id
        self._partitions = partitions
        self.tracer = tracer
        self.timer = CoordinatorTimer(manager.timer, manager.now, tracer, self.broker_id)
        #: topic name -> partition count of the cluster's topics (the broker points this at its metadata)
        self.topic_partitions: Callable[[], dict[str, int]] = dict
        #: group id -> numbers of its writes sent to the log and not answered yet
        self.writes_in_flight: dict[str, set[int]] = {}
        self._write_numbers = itertools.count()
        #: operations held by ``when_written``: the (group, write number)s still unanswered, the first
        #: failed one's error, and what to do then
        self._held: list[tuple[set[tuple[str, int]], list[Errors], Callable[[Errors], Any]]] = []

    @property
    def config(self) -> Any:
        return self._manager.config

    def now(self) -> int:
        return self._manager.now()

    def emit(self, kind: str, **fields: Any) -> None:
        if self.tracer.enabled:
            self.tracer.emit(kind, broker=self.broker_id, **fields)

    def new_member_id(self, prefix: str) -> str:
        """``prefix-<uuid>`` as Kafka makes them; the uuid is derived, so runs are reproducible."""
        number = next(self._manager.request_numbers)
        return f"{prefix}-{uuid.uuid5(_MEMBER_IDS, f'{self.broker_id}/{number}')}"

    def partition_of(self, group_id: str) -> int:
        """The ``__consumer_offsets`` partition holding ``group_id``."""
        return partition_for(group_id, self._partitions())

    def known(self, tp: TopicPartition) -> bool:
        return bool(self._manager.known(tp))

    def write(
        self,
        group_id: str,
        values: list[bytes],
        on_done: Callable[[Errors], Any],
        producer: tuple[int, int] | None = None,
    ) -> bool:
        """Append ``values`` to the group's partition with acks=-1; ``on_done(error)`` when answered.
        With a ``producer`` (id, epoch) they are one transactional batch of that producer, without a
        sequence (as Kafka's coordinator writes TxnOffsetCommit): it holds the partition's LSO until
        the transaction's marker.

        Returns whether the batch reached the leader's log. False means it was refused at once (not
        the leader, fewer in-sync replicas than ``min.insync.replicas``, ...): ``on_done`` has had its
        error and nothing of the batch is in the log, so a manager that applied the records to its
        state first must revert them (Kafka's ``CoordinatorRuntime`` reverts its state machine to the
        batch's base offset when an append fails). A batch in the log stays applied even if its
        replication then fails: the log holds it, and a leader that loses it loses the partition."""
        tp = TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id))
        log = self._manager.logs.get(tp)
        before = log.log_end_offset if log is not None else -1
        batches = () if producer is None else (ProducerBatch(*producer, -1, -1, 0, len(values) - 1, True),)
        data = ProduceData(len(values), sum(len(v) for v in values), values=tuple(values), producers=batches)
        request = ProduceRequest(
            -1, self.config.offsets_commit_timeout_ms, {tp: data}, self._manager.next_request_id("offsets")
        )
        number = next(self._write_numbers)
        self.writes_in_flight.setdefault(group_id, set()).add(number)

        def answered(response: Any) -> None:
            error = response.partitions[tp].error
            on_done(error)
            self._write_answered(group_id, number, error)

        self._manager.append_records(request, answered)
        return log is not None and log.log_end_offset > before

    def _write_answered(self, group_id: str, number: int, error: Errors) -> None:
        """One write of ``group_id`` is answered: run the held operations it was the last one for."""
        in_flight = self.writes_in_flight[group_id]
        in_flight.discard(number)
        if not in_flight:
            del self.writes_in_flight[group_id]
        ready = []
        for awaited, failed, then in self._held:
            if (group_id, number) in awaited:
                awaited.discard((group_id, number))
                if error is not Errors.NONE and not failed:
                    failed.append(error)
                if not awaited:
                    ready.append((failed, then))
        if ready:
            self._held = [held for held in self._held if held[0]]
            for failed, then in ready:
                then(failed[0] if failed else Errors.NONE)

    def when_written(self, group_ids: list[str], then: Callable[[Errors], Any]) -> None:
        """Call ``then(error)`` once every write of ``group_ids`` sent so far is answered (at once, with
        NONE, if none is in flight): ``error`` is the first failed write's error, else NONE."""
        awaited = {(gid, n) for gid in group_ids for n in self.writes_in_flight.get(gid, ())}
        if not awaited:
            then(Errors.NONE)
            return
        self._held.append((awaited, [], then))

    def answer_when_written(
        self, group_id: str, answer: Callable[[Any], Any], response: Any, failed: Callable[[Errors], Any]
    ) -> None:
        """``answer(response)`` once the group's writes sent so far are answered; if one failed,
        ``answer(failed(error))`` with the error a group request answers (``write_error``)."""
        self.when_written(
            [group_id],
            lambda error: answer(response if error is Errors.NONE else failed(write_error(error))),
        )

    def group_records(self, group_id: str) -> Iterator[dict[str, Any]]:
        """The records of ``group_id`` in its partition's log, oldest first: what a load would replay
        for it (transactional offsets aside)."""
        log = self._manager.logs.get(TopicPartition(OFFSETS_TOPIC, self.partition_of(group_id)))
        if log is None:
            return
        needle = json.dumps(group_id).encode()
        for batch in log.batches():
            for value in batch.values or ():
                if needle in value:  # cheap test first: most records are other groups'
                    record = records.decode(value)
                    if record["group"] == group_id and "producer_id" not in record:
                        yield record
