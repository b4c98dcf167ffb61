"""IsrChanges: a leader's side of ISR changes (Kafka's Partition ISR logic with its AlterPartitionManager).

- Every ``isr_expiration_period_ms`` (Kafka: half of ``replica.lag.time.max.ms``)
  each partition this broker leads proposes to drop the followers that are not
  caught up (``Partition.isr_shrink_candidate``).
- A follower fetch that brings an ISR-eligible follower up to the HW proposes to
  add it (``Partition.isr_expansion_candidate``; the replica manager calls
  ``alter_partition``).
- A proposal stays pending (the maximal ISR counts it) until the controller
  answers: a commit sets the ISR and may raise the HW, which completes waiting
  produces and fetches; a rejection (or a lost answer) drops the pending change.
  Answers for an older leader epoch, or after the broker stopped, are ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minibroker.broker.partition import Partition
from minibroker.common.errors import Errors
from minibroker.common.messages import (
    AlterPartitionRequest,
    AlterPartitionResponse,
    LeaderAndIsr,
    NetworkError,
)
from minibroker.controller.quorum_controller import CONTROLLER

if TYPE_CHECKING:
    from minibroker.broker.replica_manager import ReplicaManager


class IsrChanges:
    """Proposes ISR shrinks and expansions to the controller for one broker, and applies commits."""

    def __init__(self, manager: ReplicaManager) -> None:
        self.manager = manager

    async def run_expiration(self) -> None:
        """Kafka's isr-expiration task: check every partition for a shrink, once a period."""
        manager = self.manager
        period = manager.config.isr_expiration_period_ms
        next_check = manager.clock.now_ms() + period
        while True:
            await manager.clock.sleep_until(next_check)
            next_check += period
            self.maybe_shrink_isr()

    def maybe_shrink_isr(self) -> None:
        now = self.manager.now()
        for partition in self.manager.partitions.values():
            proposed = partition.isr_shrink_candidate(now)
            if proposed is not None:
                self.alter_partition(partition, "shrink", proposed)

    def alter_partition(self, partition: Partition, kind: str, proposed: tuple[int, ...]) -> None:
        """Mark ``proposed`` pending on ``partition`` and send it to the controller."""
        manager = self.manager
        partition.propose(kind, proposed)
        if manager.tracer.enabled:
            manager.emit(
                "isr.propose",
                partition=str(partition.tp),
                change=kind,
                isr=list(proposed),
                current=list(partition.isr),
            )
        request = AlterPartitionRequest(
            manager.broker_id,
            partition.tp,
            partition.leader_epoch,
            partition.partition_epoch,
            proposed,
            manager.broker_epoch,
        )
        epoch = partition.leader_epoch

        def on_response(response: Any) -> None:
            if manager.stopped or partition.leader_epoch != epoch or not partition.is_leader:
                return
            if (
                isinstance(response, AlterPartitionResponse)
                and response.error is Errors.NONE
                and response.state
            ):
                self.commit_isr(partition, response.state)
            else:
                partition.pending = None
                error = (
                    response.error.name
                    if isinstance(response, (AlterPartitionResponse, NetworkError))
                    else "?"
                )
                if manager.tracer.enabled:
                    manager.emit("isr.rejected", partition=str(partition.tp), error=error)

        manager.network.request(
            manager.broker_id, CONTROLLER, request, manager.config.replica_socket_timeout_ms, on_response
        )

    def commit_isr(self, partition: Partition, state: LeaderAndIsr) -> None:
        """The controller's ISR for a partition this broker leads (an answer or a LeaderAndIsr)."""
        manager = self.manager
        before = partition.high_watermark
        raised = partition.commit_isr(state.isr, state.partition_epoch, manager.now())
        if manager.tracer.enabled:
            manager.emit(
                "isr.commit", partition=str(partition.tp), isr=list(state.isr), epoch=state.leader_epoch
            )
        if raised:
            manager.trace_hw(partition, before)
        manager.try_complete_delayed_requests(partition.tp)
