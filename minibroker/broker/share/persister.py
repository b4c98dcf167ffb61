"""Persister: a broker's reads and writes of share-partition state at the share coordinators (KIP-932).

Kafka's class: https://github.com/apache/kafka/blob/trunk/server-common/src/main/java/org/apache/kafka/server/share/persister/DefaultStatePersister.java
Each call finds the share coordinator of the share partition's key (the leader of its ``__share_group_state``
partition, made on first use), sends it ReadShareGroupState or WriteShareGroupState over the emulated
network, and retries every ``RETRY_BACKOFF_MS`` on a missing coordinator, NOT_COORDINATOR, a write the ISR
did not take in time, or a network error, until ``request.timeout.ms`` has passed since the call; then
``on_done`` hears the last error. A broker that has stopped drops its calls.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import NetworkError, TopicPartition
from minibroker.coordinator.share.messages import (
    DeleteShareGroupStateRequest,
    InitializeShareGroupStateRequest,
    ReadShareGroupStateRequest,
    ReadShareGroupStateSummaryRequest,
    ShareGroupState,
    WriteShareGroupStateRequest,
)
from minibroker.timer import TimerTask

RETRY_BACKOFF_MS = 100
RETRIABLE = frozenset(
    {
        Errors.NOT_COORDINATOR,
        Errors.COORDINATOR_NOT_AVAILABLE,
        Errors.NOT_LEADER_OR_FOLLOWER,
        Errors.NOT_ENOUGH_REPLICAS,
        Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        Errors.REQUEST_TIMED_OUT,
        Errors.NETWORK_EXCEPTION,
    }
)


class Persister:
    """``locate(group, tp)`` names the share coordinator's broker (-1 while there is none)."""

    def __init__(self, manager: Any, network: Any, locate: Callable[[str, TopicPartition], int]) -> None:
        self.manager = manager
        self.network = network
        self.locate = locate

    def read(
        self,
        group_id: str,
        tp: TopicPartition,
        on_done: Callable[[Errors, ShareGroupState | None], Any],
        summary: bool = False,
    ) -> None:
        """ReadShareGroupState, or with ``summary`` ReadShareGroupStateSummary (the start offset and state
        epoch only); ``on_done`` hears None when there is no state."""
        kind = ReadShareGroupStateSummaryRequest if summary else ReadShareGroupStateRequest
        message = kind(group_id, tp.topic, tp.partition)
        self._send(message, lambda error, response: on_done(error, response.state if response else None))

    def write(
        self, group_id: str, tp: TopicPartition, state: ShareGroupState, on_done: Callable[[Errors], Any]
    ) -> None:
        message = WriteShareGroupStateRequest(group_id, tp.topic, tp.partition, state)
        self._send(message, lambda error, response: on_done(error))

    def initialize(
        self, group_id: str, tp: TopicPartition, start_offset: int, on_done: Callable[[Errors], Any]
    ) -> None:
        """InitializeShareGroupState: a fresh state at ``start_offset`` and the next state epoch."""
        message = InitializeShareGroupStateRequest(group_id, tp.topic, tp.partition, start_offset)
        self._send(message, lambda error, response: on_done(error))

    def delete(self, group_id: str, tp: TopicPartition, on_done: Callable[[Errors], Any]) -> None:
        """DeleteShareGroupState: forget the state."""
        message = DeleteShareGroupStateRequest(group_id, tp.topic, tp.partition)
        self._send(message, lambda error, response: on_done(error))

    def _send(self, message: Any, on_done: Callable[[Errors, Any], Any]) -> None:
        manager = self.manager
        deadline = manager.now() + manager.config.request_timeout_ms
        tp = TopicPartition(message.topic, message.partition)

        def attempt() -> None:
            if manager.stopped:
                return
            broker = self.locate(message.group_id, tp)
            if broker < 0:
                retry(Errors.COORDINATOR_NOT_AVAILABLE)
                return
            timeout = max(1, deadline - manager.now())
            self.network.request(manager.broker_id, broker, message, timeout, answered)

        def answered(response: Any) -> None:
            error = response.error  # a NetworkError's too: a reset connection or no answer in time
            if error is Errors.NONE and not isinstance(response, NetworkError):
                on_done(error, response)
            elif error in RETRIABLE:
                retry(error)
            else:
                on_done(error, None)

        def retry(error: Errors) -> None:
            if manager.stopped:
                return
            if manager.now() + RETRY_BACKOFF_MS > deadline:
                on_done(error, None)
                return
            manager.timer.add(TimerTask(RETRY_BACKOFF_MS, attempt))

        attempt()
