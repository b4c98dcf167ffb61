"""ShareCoordinator: keeps share partitions' state in ``__share_group_state`` (KIP-932).

Kafka's classes: https://github.com/apache/kafka/blob/trunk/share-coordinator/src/main/java/org/apache/kafka/coordinator/share/ShareCoordinatorService.java
and ``ShareCoordinatorShard``. A share partition's key is ``group:topic:partition``; it lives on the
``__share_group_state`` partition ``abs(hash(key)) % share.coordinator.state.topic.num.partitions``, and the
broker leading that partition is its share coordinator (NOT_COORDINATOR elsewhere).

- WriteShareGroupState appends the whole state (start offset, in-flight batches with state and delivery
  count, state epoch) as one record with acks=-1 (``share.coordinator.write.timeout.ms``: the broker's
  ``request.timeout.ms``), and answers once the ISR has it; only then does the coordinator's view change.
- ReadShareGroupState answers the latest state written, or none; ReadShareGroupStateSummary (87) the same
  without its batches.
- InitializeShareGroupState (83) writes a fresh state (the given start offset, no in-flight records) at the
  next state epoch; DeleteShareGroupState (86) writes a tombstone for the key. A WriteShareGroupState whose
  state epoch is below the key's is refused with FENCED_STATE_EPOCH: the leader that sent it holds a share
  partition from before the reset.
- A broker that becomes leader of a ``__share_group_state`` partition reads it (the last record of each key
  wins) before it answers for its keys.

The records are JSON (Kafka writes ``ShareSnapshotValue``/``ShareUpdateValue`` records), one full snapshot
per write. Trace events: ``share.state.write`` (key, start offset, batches, error), ``share.state.load``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import ProduceData, ProduceRequest, TopicPartition
from minibroker.coordinator.group.hashing import java_string_hash, kafka_abs
from minibroker.coordinator.share.messages import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    PersistedBatch,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    ShareGroupState,
    ShareGroupStateResponse,
    WriteShareGroupStateRequest,
)

SHARE_STATE_TOPIC = "__share_group_state"


def share_key(group_id: str, topic: str, partition: int) -> str:
    return f"{group_id}:{topic}:{partition}"


def state_partition_for(key: str, partitions: int) -> int:
    """The ``__share_group_state`` partition of ``key`` (Kafka's ``partitionFor``)."""
    return kafka_abs(java_string_hash(key)) % partitions


def encode_state(key: str, state: ShareGroupState) -> bytes:
    batches = [[b.first_offset, b.last_offset, b.delivery_count, b.state] for b in state.batches]
    return json.dumps(
        {"key": key, "start": state.start_offset, "epoch": state.state_epoch, "batches": batches},
        separators=(",", ":"),
    ).encode()


def encode_tombstone(key: str) -> bytes:
    return json.dumps({"key": key, "deleted": True}, separators=(",", ":")).encode()


def decode_state(value: bytes) -> tuple[str, ShareGroupState | None]:
    """The key and state of a record (None for a tombstone)."""
    record = json.loads(value)
    if record.get("deleted") is True:
        return str(record["key"]), None
    batches = tuple(PersistedBatch(*map(int, b)) for b in record["batches"])
    return str(record["key"]), ShareGroupState(int(record["start"]), batches, int(record["epoch"]))


class ShareCoordinator:
    """The share coordinator of one broker (lives and dies with its ReplicaManager)."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.tracer = manager.tracer
        self.broker_id = manager.broker_id
        #: key -> the latest state written, for the partitions led here
        self.states: dict[str, ShareGroupState] = {}
        #: ``__share_group_state`` partitions this broker leads (and has read)
        self.led: set[int] = set()

    def handle(self, message: Any, respond: Callable[[ShareGroupStateResponse], object]) -> None:
        key = share_key(message.group_id, message.topic, message.partition)
        partition = state_partition_for(key, self.manager.config.share_coordinator_state_topic_num_partitions)
        if partition not in self.led:
            respond(ShareGroupStateResponse(Errors.NOT_COORDINATOR))
            return
        current = self.states.get(key)
        if isinstance(message, ReadShareGroupStateRequest):
            respond(ShareGroupStateResponse(Errors.NONE, current))
        elif isinstance(message, ReadShareGroupStateSummaryRequest):
            summary = (
                None if current is None else ShareGroupState(current.start_offset, (), current.state_epoch)
            )
            respond(ShareGroupStateResponse(Errors.NONE, summary))
        elif isinstance(message, InitializeShareGroupStateRequest):
            epoch = current.state_epoch + 1 if current is not None else 1
            self._write(partition, key, ShareGroupState(message.start_offset, (), epoch), respond)
        elif isinstance(message, DeleteShareGroupStateRequest):
            self._write(partition, key, None, respond)
        else:
            assert isinstance(message, WriteShareGroupStateRequest)
            if current is not None and message.state.state_epoch < current.state_epoch:
                respond(ShareGroupStateResponse(Errors.FENCED_STATE_EPOCH))
                return
            self._write(partition, key, message.state, respond)

    def _write(
        self,
        partition: int,
        key: str,
        state: ShareGroupState | None,
        respond: Callable[[ShareGroupStateResponse], object],
    ) -> None:
        """Append ``state`` (None: a tombstone) with acks=-1; the view changes once the ISR has it."""
        tp = TopicPartition(SHARE_STATE_TOPIC, partition)
        value = encode_state(key, state) if state is not None else encode_tombstone(key)
        request = ProduceRequest(
            -1,
            self.manager.config.request_timeout_ms,
            {tp: ProduceData(1, len(value), values=(value,))},
            self.manager.next_request_id("share-state"),
        )

        def done(response: Any) -> None:
            error = response.partitions[tp].error
            if error is Errors.NONE and partition in self.led:
                if state is None:
                    self.states.pop(key, None)
                else:
                    self.states[key] = state
            if self.tracer.enabled:
                self.tracer.emit(
                    "share.state.write",
                    broker=self.broker_id,
                    key=key,
                    offset=state.start_offset if state is not None else -1,
                    count=len(state.batches) if state is not None else 0,
                    error=error.name,
                )
            respond(ShareGroupStateResponse(error))

        self.manager.append_records(request, done)

    def on_leadership(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        """Read a ``__share_group_state`` partition on becoming its leader; forget its keys on losing it."""
        if tp.topic != SHARE_STATE_TOPIC:
            return
        partitions = self.manager.config.share_coordinator_state_topic_num_partitions
        if not leader:
            self.led.discard(tp.partition)
            for key in [k for k in self.states if state_partition_for(k, partitions) == tp.partition]:
                del self.states[key]
            return
        if tp.partition in self.led:
            return
        replica = self.manager.partition(tp)
        loaded = 0
        for batch in replica.log.batches() if replica is not None else ():
            for value in batch.values or ():
                try:
                    key, state = decode_state(value)
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue  # not a record the share coordinator wrote
                if state is None:
                    self.states.pop(key, None)
                else:
                    self.states[key] = state
                loaded += 1
        self.led.add(tp.partition)
        if self.tracer.enabled:
            self.tracer.emit(
                "share.state.load", broker=self.broker_id, partition=tp.partition, records=loaded
            )
