"""The emulated share consumer (KIP-932): a member of a share group that fetches records under acquisition
locks and acknowledges each one.

Kafka's class: https://github.com/apache/kafka/blob/trunk/clients/src/main/java/org/apache/kafka/clients/consumer/internals/ShareConsumerImpl.java
(with its ``ShareHeartbeatRequestManager`` and ``ShareConsumeRequestManager``). ``run`` keeps two loops:

- **Heartbeats.** ShareGroupHeartbeat to the group's coordinator: epoch 0 joins with the subscription,
  then every ``heartbeat_interval_ms`` the coordinator answers; a new assignment replaces the old. An
  UNKNOWN_MEMBER_ID or FENCED_MEMBER_EPOCH answer joins again at epoch 0.
- **Fetches.** One ShareFetch per leader of the assigned partitions, in its share session on that broker
  (epoch 0 opens it, each answer moves it on; SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH or a
  network error start a new one). The acknowledgements of the records received so far ride on the next
  ShareFetch to the record's leader. Processing is instant: a record is acknowledged as it arrives, by the
  last ``acknowledge`` rule that names its offset, else the last that names none, else ACCEPT.

``stall`` holds every record received from then on unacknowledged and sends no ShareFetch (heartbeats go
on), so its locks expire; ``crash`` stops both loops at once, leaving the share session open and the
records acquired until their locks expire. ``deliveries`` and ``acknowledgements`` record what happened,
for expectations and chaos checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs
import trio

from minibroker.broker.config import ConsumerConfig
from minibroker.broker.share.messages import ShareFetchRequest, ShareFetchResponse
from minibroker.broker.share.share_partition import AcknowledgementBatch, AcknowledgeType
from minibroker.clients.request import Client, ClientContext
from minibroker.common.errors import Errors
from minibroker.common.messages import NetworkError, TopicPartition
from minibroker.coordinator.share.messages import ShareGroupHeartbeatRequest

#: wait after an error before the next request (the Java client's ``retry.backoff.ms``)
RETRY_BACKOFF_MS = 100
#: records one ShareFetch asks for (``max.poll.records``)
MAX_RECORDS = 500
_REJOIN = (Errors.UNKNOWN_MEMBER_ID, Errors.FENCED_MEMBER_EPOCH)
_NEW_SESSION = (Errors.SHARE_SESSION_NOT_FOUND, Errors.INVALID_SHARE_SESSION_EPOCH)


@attrs.frozen(slots=True)
class AcknowledgeRule:
    """Acknowledge with ``type`` the records at ``offsets`` (None: all) of ``partition`` (None: any)."""

    type: AcknowledgeType
    offsets: frozenset[int] | None = None
    partition: TopicPartition | None = None

    def matches(self, tp: TopicPartition, offset: int) -> bool:
        return (self.partition is None or self.partition == tp) and (
            self.offsets is None or offset in self.offsets
        )


@attrs.frozen(slots=True)
class Delivery:
    """A record handed to this consumer: when, where, and its delivery count."""

    at_ms: int
    tp: TopicPartition
    offset: int
    delivery_count: int


@attrs.frozen(slots=True)
class Acknowledgement:
    """An acknowledgement sent (``at_ms``) and answered (``answered_ms``, ``error``)."""

    at_ms: int
    answered_ms: int
    tp: TopicPartition
    offset: int
    delivery_count: int
    type: AcknowledgeType
    error: Errors


class ShareConsumer(Client):
    """A share-group member on ``topics``; run ``run`` in a nursery (``crash`` cancels it)."""

    def __init__(
        self, cluster: ClientContext, client_id: str, config: ConsumerConfig, topics: Iterable[str]
    ) -> None:
        super().__init__(cluster, client_id)
        self.config = config
        self.group_id = config.group_id
        self.topics = tuple(topics)
        #: the member id (the client's id: Kafka's client makes up its own, a UUID)
        self.member_id = client_id
        self.member_epoch = 0
        self.assignment: tuple[TopicPartition, ...] = ()
        self.rules: list[AcknowledgeRule] = []
        self.stalled = False
        self.crashed = False
        #: set by whoever starts ``run`` (a scenario's join step), so it starts once
        self.joined = False
        #: every record received, in order
        self.deliveries: list[Delivery] = []
        #: every acknowledgement once answered, in order
        self.acknowledgements: list[Acknowledgement] = []
        #: (api, error) of each failed request, in order
        self.errors: list[tuple[str, str]] = []
        #: per partition: offset -> (delivery count, type) not sent yet
        self._pending: dict[TopicPartition, dict[int, tuple[int, AcknowledgeType]]] = {}
        #: per broker: the share session's next epoch and its partitions
        self._sessions: dict[int, tuple[int, tuple[TopicPartition, ...]]] = {}
        self._scope: trio.CancelScope | None = None
        self._changed = trio.Event()
        #: called with each Delivery as it arrives and each Acknowledgement as it is answered (chaos checks)
        self.on_delivery: Callable[[Delivery], None] | None = None
        self.on_acknowledgement: Callable[[Acknowledgement], None] | None = None

    # ---- control -------------------------------------------------------------------------------------------
    def acknowledge(
        self,
        ack_type: AcknowledgeType,
        offsets: Iterable[int] | None = None,
        tp: TopicPartition | None = None,
    ) -> None:
        """From now on acknowledge the records at ``offsets`` (all when None) with ``ack_type``."""
        self.rules.append(AcknowledgeRule(ack_type, None if offsets is None else frozenset(offsets), tp))

    def stall(self, stalled: bool = True) -> None:
        self.stalled = stalled
        self._wake()

    def crash(self) -> None:
        """Stop at once: nothing more is sent; the broker keeps the session and locks until they run out."""
        self.crashed = True
        if self._scope is not None:
            self._scope.cancel()

    # ---- the loops -----------------------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            task_status.started()
            if self.crashed:
                return
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeats)
                nursery.start_soon(self._fetches)

    async def _heartbeats(self) -> None:
        clock = self.cluster.clock
        while True:
            coordinator = self.cluster.coordinator_for(self.group_id)
            if coordinator < 0:
                await self._sleep(RETRY_BACKOFF_MS)
                continue
            joining = self.member_epoch == 0
            request = ShareGroupHeartbeatRequest(
                self.group_id,
                self.member_id,
                self.member_epoch,
                self.topics if joining else None,
                client_id=self.client_id,
            )
            answer = await self._call(coordinator, request, "ShareGroupHeartbeat")
            if answer is None:
                await self._sleep(RETRY_BACKOFF_MS)
                continue
            if answer.error is not Errors.NONE:
                if answer.error in _REJOIN:
                    self.member_epoch = 0
                await self._sleep(RETRY_BACKOFF_MS)
                continue
            self.member_epoch = answer.member_epoch
            if answer.assignment is not None:
                self.assignment = tuple(
                    TopicPartition(topic, p) for topic, ps in sorted(answer.assignment.items()) for p in ps
                )
                self._wake()
            await clock.sleep_until(clock.now_ms() + answer.heartbeat_interval_ms)

    async def _fetches(self) -> None:
        clock = self.cluster.clock
        while True:
            while self.stalled or not (self.assignment or self._has_pending()):
                self._changed = trio.Event()
                await self._changed.wait()
            by_leader: dict[int, list[TopicPartition]] = {}
            wanted = set(self.assignment) | {tp for tp, p in self._pending.items() if p}
            for tp in sorted(wanted, key=str):
                by_leader.setdefault(self.cluster.leader_of(tp), []).append(tp)
            leaderless = by_leader.pop(-1, None)
            started = clock.now_ms()
            received = [0]
            async with trio.open_nursery() as nursery:
                for leader, tps in sorted(by_leader.items()):
                    nursery.start_soon(self._share_fetch, leader, tps, received)
            if leaderless or (received[0] == 0 and clock.now_ms() == started):
                await self._sleep(RETRY_BACKOFF_MS if leaderless or not by_leader else 1)

    async def _share_fetch(self, leader: int, tps: list[TopicPartition], received: list[int]) -> None:
        assigned = tuple(tp for tp in tps if tp in self.assignment)
        epoch, known = self._sessions.get(leader, (0, ()))
        acks, sent = self._take_acks(tps)
        request = ShareFetchRequest(
            self.group_id,
            self.member_id,
            epoch,
            self.config.fetch_max_wait_ms,
            assigned if epoch == 0 else tuple(tp for tp in assigned if tp not in known),
            acks,
            () if epoch == 0 else tuple(tp for tp in known if tp not in assigned),
            MAX_RECORDS,
        )
        sent_ms = self.cluster.now()
        answer = await self._call(leader, request, "ShareFetch", self.config.fetch_max_wait_ms)
        if answer is None or answer.error is not Errors.NONE:
            self._sessions.pop(leader, None)
            error = Errors.NETWORK_EXCEPTION if answer is None else answer.error
            self._answered(sent, sent_ms, {tp: error for tp in sent})
            await self._sleep(RETRY_BACKOFF_MS)
            return
        self._sessions[leader] = (epoch + 1, assigned)
        self._receive(answer, sent, sent_ms, received)

    def _receive(
        self,
        answer: ShareFetchResponse,
        sent: dict[TopicPartition, list[tuple[int, int, AcknowledgeType]]],
        sent_ms: int,
        received: list[int],
    ) -> None:
        self._answered(sent, sent_ms, {tp: part.acknowledge_error for tp, part in answer.partitions.items()})
        now = self.cluster.now()
        for tp, part in sorted(answer.partitions.items(), key=lambda item: str(item[0])):
            if part.error is not Errors.NONE:
                self._record("ShareFetch", part.error)
                continue
            for run in part.acquired:
                for offset in range(run.first_offset, run.last_offset + 1):
                    delivery = Delivery(now, tp, offset, run.delivery_count)
                    self.deliveries.append(delivery)
                    if self.on_delivery is not None:
                        self.on_delivery(delivery)
                    self._pending.setdefault(tp, {})[offset] = (run.delivery_count, self._type_of(tp, offset))
                    received[0] += 1

    def _take_acks(
        self, tps: list[TopicPartition]
    ) -> tuple[dict[TopicPartition, tuple[AcknowledgementBatch, ...]], dict[TopicPartition, list]]:
        """The acknowledgements to send for ``tps`` (one batch per run of offsets), and what they say."""
        acks: dict[TopicPartition, tuple[AcknowledgementBatch, ...]] = {}
        sent: dict[TopicPartition, list[tuple[int, int, AcknowledgeType]]] = {}
        for tp in tps:
            pending = self._pending.pop(tp, None)
            if not pending:
                continue
            offsets = sorted(pending)
            batches: list[AcknowledgementBatch] = []
            start = offsets[0]
            for i, offset in enumerate(offsets):
                last = i + 1 == len(offsets) or offsets[i + 1] != offset + 1
                if last:
                    types = tuple(int(pending[o][1]) for o in range(start, offset + 1))
                    batches.append(
                        AcknowledgementBatch(start, offset, types[:1] if len(set(types)) == 1 else types)
                    )
                    if i + 1 < len(offsets):
                        start = offsets[i + 1]
            acks[tp] = tuple(batches)
            sent[tp] = [(o, pending[o][0], pending[o][1]) for o in offsets]
        return acks, sent

    def _answered(
        self,
        sent: dict[TopicPartition, list[tuple[int, int, AcknowledgeType]]],
        sent_ms: int,
        errors: dict[TopicPartition, Errors],
    ) -> None:
        now = self.cluster.now()
        for tp, items in sent.items():
            error = errors.get(tp, Errors.NONE)
            if error is not Errors.NONE:
                self._record("ShareAcknowledge", error)
            for offset, count, ack_type in items:
                ack = Acknowledgement(sent_ms, now, tp, offset, count, ack_type, error)
                self.acknowledgements.append(ack)
                if self.on_acknowledgement is not None:
                    self.on_acknowledgement(ack)

    # ---- helpers -------------------------------------------------------------------------------------------
    def _type_of(self, tp: TopicPartition, offset: int) -> AcknowledgeType:
        for rule in reversed(self.rules):
            if rule.offsets is not None and rule.matches(tp, offset):
                return rule.type
        for rule in reversed(self.rules):
            if rule.offsets is None and rule.matches(tp, offset):
                return rule.type
        return AcknowledgeType.ACCEPT

    def _has_pending(self) -> bool:
        return any(self._pending.values())

    async def _call(self, broker: int, message: Any, api: str, wait_ms: int = 0) -> Any:
        """The answer of ``broker`` (its error recorded), or None on a network error (recorded too)."""
        config = self.config
        timeout = max(wait_ms, config.request_timeout_ms) + config.response_grace_ms
        answer = await self.cluster.network.call(self.client_id, broker, message, timeout)
        lost = isinstance(answer, NetworkError)
        error = answer.error if lost else getattr(answer, "error", Errors.NONE)
        if error is not Errors.NONE:
            self._record(api, error)
        return None if lost else answer

    def _record(self, api: str, error: Errors) -> None:
        self.errors.append((api, error.name))

    async def _sleep(self, ms: int) -> None:
        clock = self.cluster.clock
        await clock.sleep_until(clock.now_ms() + ms)

    def _wake(self) -> None:
        self._changed.set()
