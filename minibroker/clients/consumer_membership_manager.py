"""A consumer's group membership under KIP-848's consumer protocol (``group.protocol = consumer``), as
Kafka's ``ConsumerMembershipManager`` and ``ConsumerHeartbeatRequestManager`` run it.

``ConsumerMembershipManager(consumer, topics).run`` (a trio task) keeps two loops:

- *heartbeat*: ConsumerGroupHeartbeat to the coordinator, the first one at once with epoch 0
  (the member id is the client's own, derived from its client id so runs repeat), the
  subscription, ``max.poll.interval.ms`` as the rebalance timeout and no owned partitions;
  then one every answered ``heartbeat_interval_ms`` after the last answer, and at once when
  reconciliation has changed what the member owns (the acknowledgement); a coordinator error
  (COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR, ...) holds the next one, an acknowledgement
  or a join included, for ``retry.backoff.ms``;
- *fetch*: while polling, fetch the owned partitions again as soon as each fetch returns,
  committing every ``auto.commit.interval.ms`` (not waiting for the answer).

An answer with an assignment is the whole set the member may own now. Reconciling it, when
the application polls: stop fetching the partitions that left it and commit their positions
(auto commit on, as ``onPartitionsRevoked``), read the committed offsets of the new ones
(``auto.offset.reset`` where there are none; a lookup refused for the member's id or epoch
is tried again ``retry.backoff.ms`` later, never in the same instant), then heartbeat at once
with the owned partitions. FENCED_MEMBER_EPOCH and UNKNOWN_MEMBER_ID drop every partition without a commit
(``onPartitionsLost``) and join again with epoch 0.

``stall`` stops polling: fetches stop and a revocation waits (a slow ``onPartitionsRevoked``)
while heartbeats go on, so the coordinator's rebalance timeout fences the member. ``hang``
stops heartbeats too: the session timeout fences it. A fenced member joins again once it
polls. ``leave`` commits (auto commit on) and heartbeats with epoch -1 (-2 for a static member).

Invariant: the consumer fetches exactly ``owned``; a partition leaves ``owned`` before the
heartbeat acknowledging its revocation is sent.

Deviations from the Java client: no proactive leave when ``max.poll.interval.ms`` passes
without a poll; no retries of a failed commit; the coordinator is looked up from the
controller's state instead of FindCoordinator; every heartbeat after the first sends only
the owned partitions when they changed (the Java client also resends unchanged fields
after an error).
"""

from __future__ import annotations

import uuid
from typing import Any

import trio

from minibroker.clients.consumer_coordinator import (
    _COORDINATOR,
    RETRY_BACKOFF_MS,
    GroupConsumer,
    GroupMembership,
)
from minibroker.common.errors import Errors
from minibroker.common.messages import NetworkError, TopicPartition
from minibroker.coordinator.group import messages as m

_REJOIN = {Errors.FENCED_MEMBER_EPOCH, Errors.UNKNOWN_MEMBER_ID}
_MEMBER_IDS = uuid.UUID("8f5c4f0e-3b4b-4d59-9c59-6a3f6c1c0848")


def member_id_of(group_id: str, client_id: str) -> str:
    """The member id a client brings (ConsumerGroupHeartbeat v1), reproducible from its names."""
    return str(uuid.uuid5(_MEMBER_IDS, f"{group_id}/{client_id}"))


class ConsumerMembershipManager:
    """One consumer's membership of ``consumer.config.group_id`` (consumer protocol), of ``topics``."""

    def __init__(self, consumer: GroupConsumer, topics: list[str]) -> None:
        self.consumer = consumer
        self.cluster = consumer.cluster
        self.config = consumer.config
        self.group_id = consumer.config.group_id
        self.topics = list(topics)
        self.member_id = member_id_of(self.group_id, consumer.client_id)
        self.member_epoch = 0
        #: the partitions the member fetches (and acknowledged or is about to)
        self.owned: set[TopicPartition] = set()
        #: the last assignment answered, not yet reconciled (None: nothing to do)
        self.target: set[TopicPartition] | None = None
        self.polling = True
        self.heartbeating = True
        self.left = False
        self.failed: Errors | None = None
        #: every error the member was answered, by API: [(ms, api, error name)]
        self.errors: list[tuple[int, str, str]] = []
        self._joining = True
        self._ack = False
        self._reconciling = False
        self._next_heartbeat = 0
        #: after a coordinator error no heartbeat goes out before this, not even an acknowledgement
        self._retry_at = 0
        self._next_commit = 0
        self._changed = trio.Event()
        self._scope: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None

    # --- application controls ----------------------------------------------------------------
    #: as the classic membership's: ``stall`` stops (or resumes) polling, so fetches and revocations
    #: wait while heartbeats go on; ``hang`` stops (or resumes) polling and heartbeating
    stall = GroupMembership.stall
    hang = GroupMembership.hang

    async def leave(self) -> None:
        """Commit (auto commit on), heartbeat with epoch -1 (-2 static), then stop every loop."""
        self.left = True
        if self.member_epoch > 0:
            if self.config.enable_auto_commit and self.owned:
                await self._commit()
            epoch = -2 if self._instance() is not None else -1
            coordinator = self.cluster.coordinator_for(self.group_id)
            self._emit("member.leave", member=self.member_id)
            if coordinator >= 0:
                request = m.ConsumerGroupHeartbeatRequest(
                    self.group_id, self.member_id, epoch, self._instance(), client_id=self.consumer.client_id
                )
                await self._call(coordinator, request, "ConsumerGroupHeartbeat")
        self._drop(self.owned)
        if self._scope is not None:
            self._scope.cancel()

    async def commit(self) -> Errors:
        """Commit the current positions and wait for the answer (the first partition error, or NONE)."""
        return await self._commit()

    # --- the loops ---------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            self._scope = scope
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._heartbeats)
                nursery.start_soon(self._reconciliations)
                nursery.start_soon(self._fetches)
                task_status.started()

    async def _heartbeats(self) -> None:
        clock = self.cluster.clock
        while True:
            # a fenced member joins again once its application polls (onPartitionsLost runs in poll)
            await self._until(
                lambda: (
                    self.heartbeating
                    and (self.polling or not self._joining)
                    and self.failed is None
                    and not self.left
                )
            )
            due = self._retry_at if self._ack else self._next_heartbeat
            if clock.now_ms() < due:
                self._changed = trio.Event() if self._changed.is_set() else self._changed
                with trio.move_on_at(clock.to_seconds(due)):
                    await self._changed.wait()
                continue
            coordinator = self.cluster.coordinator_for(self.group_id)
            if coordinator < 0:
                await self._sleep(RETRY_BACKOFF_MS)
                continue
            await self._heartbeat(coordinator)

    async def _heartbeat(self, coordinator: int) -> None:
        joining = self._joining
        owned = None
        if joining or self._ack:
            owned = _pairs(self.owned)
        self._ack = False
        request = m.ConsumerGroupHeartbeatRequest(
            self.group_id,
            self.member_id,
            0 if joining else self.member_epoch,
            self._instance(),
            rebalance_timeout_ms=self.config.max_poll_interval_ms if joining else -1,
            subscribed_topic_names=tuple(self.topics) if joining else None,
            server_assignor=(self.config.group_remote_assignor or None) if joining else None,
            owned_partitions=owned,
            client_id=self.consumer.client_id,
            client_host=self.consumer.client_id,
        )
        if joining:
            self._emit("member.join", member=self.member_id)
        answer = await self._call(coordinator, request, "ConsumerGroupHeartbeat")
        if self.left:
            return
        if answer is None:
            self._ack = self._ack or owned is not None  # sent again after the backoff
            return
        self._next_heartbeat = self.cluster.now() + max(answer.heartbeat_interval_ms, 1)
        if answer.error in _REJOIN:
            self._emit("member.lost", member=self.member_id, partitions=_labels(self.owned))
            self._drop(self.owned)
            self.member_epoch, self.target, self._joining = 0, None, True
            self._next_heartbeat = 0
        elif answer.error is Errors.COORDINATOR_LOAD_IN_PROGRESS or answer.error in _COORDINATOR:
            # retried after retry.backoff.ms, as the heartbeat request manager's backoff holds even an
            # acknowledgement (a join's heartbeat carries its owned partitions anyway)
            self._next_heartbeat = self._retry_at = self.cluster.now() + RETRY_BACKOFF_MS
            self._ack = self._ack or (owned is not None and not joining)
        elif answer.error is not Errors.NONE:
            self.failed = answer.error  # GROUP_MAX_SIZE_REACHED, UNSUPPORTED_ASSIGNOR, ...
            self._emit("member.failed", error=answer.error.name)
        else:
            self._joining = False
            self.member_epoch = answer.member_epoch
            if answer.assignment is not None:
                self.target = {TopicPartition(t, p) for t, ps in answer.assignment for p in ps}
        self._wake()

    async def _reconciliations(self) -> None:
        while True:
            await self._until(
                lambda: self.target is not None and self.polling and not self._joining and self.failed is None
            )
            target, self.target = self.target, None
            assert target is not None
            self._reconciling = True
            try:
                await self._reconcile(target)
            finally:
                self._reconciling = False
                self._wake()

    async def _reconcile(self, target: set[TopicPartition]) -> None:
        """Revoke what left the assignment (commit first), take on what joined it, then acknowledge."""
        epoch = self.member_epoch
        revoked = self.owned - target
        added = target - self.owned
        if revoked:
            if self.config.enable_auto_commit:
                await self._commit(revoked)
            self._drop(revoked)
            self._emit("member.revoked", member=self.member_id, generation=epoch, partitions=_labels(revoked))
        if added:
            positions = await self._committed(added)
            if positions is None or self._joining or self.member_epoch != epoch:
                # fenced (or a newer assignment) meanwhile: the next assignment says what to take
                if not self._joining and self.target is None:
                    self.target = target
                return
            for tp in sorted(added):
                self.consumer.assign([tp], positions[tp])
            self.owned |= added
        self._emit(
            "member.assigned",
            member=self.member_id,
            generation=epoch,
            partitions=_labels(self.owned),
            added=_labels(added),
            revoked=_labels(revoked),
        )
        if revoked or added:
            now = self.cluster.now()
            if self._next_commit <= now:
                self._next_commit = now + self.config.auto_commit_interval_ms
            self._ack = True

    async def _committed(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int] | None:
        """The committed offsets (else ``auto.offset.reset``) of ``partitions``; None if fenced meanwhile."""
        wanted: dict[str, list[int]] = {}
        for tp in sorted(partitions):
            wanted.setdefault(tp.topic, []).append(tp.partition)
        while True:
            if self._joining or self.left:
                return None
            coordinator = self.cluster.coordinator_for(self.group_id)
            if coordinator < 0:
                await self._sleep(RETRY_BACKOFF_MS)
                continue
            topics = tuple((t, tuple(ps)) for t, ps in wanted.items())
            group = m.OffsetFetchGroup(self.group_id, topics, self.member_id, self.member_epoch)
            # require_stable, as the Java consumer's OffsetFetch always asks: the answer comes after the
            # group's offset writes already in the log, never from before one of them
            fetch = m.OffsetFetchRequest((group,), require_stable=True)
            answer = await self._call(coordinator, fetch, "OffsetFetch")
            if answer is None:
                continue
            result = answer.groups[0]
            if result.error is not Errors.NONE:
                self._record("OffsetFetch", result.error)
                # every failed lookup backs off retry.backoff.ms, as Kafka's request managers do: a
                # member fenced before its heartbeat hears it asks again only after the backoff
                await self._sleep(RETRY_BACKOFF_MS)
                if result.error in _REJOIN or result.error is Errors.STALE_MEMBER_EPOCH:
                    return None
                continue
            if any(o.error is Errors.UNSTABLE_OFFSET_COMMIT for o in result.offsets):
                self._record("OffsetFetch", Errors.UNSTABLE_OFFSET_COMMIT)  # a transaction's offsets pend
                await self._sleep(RETRY_BACKOFF_MS)
                continue
            committed = {TopicPartition(o.topic, o.partition): o.offset for o in result.offsets}
            return {tp: self._start_of(tp, committed.get(tp, -1)) for tp in partitions}

    def _start_of(self, tp: TopicPartition, committed: int) -> int:
        return committed if committed >= 0 else self._reset_offset(tp)

    async def _fetches(self) -> None:
        consumer = self.consumer
        clock = self.cluster.clock
        while True:
            await self._until(lambda: self.polling and not self._reconciling and bool(consumer.positions))
            requests = consumer.fetch()
            for request in requests:
                await request.wait()
            if (
                self.config.enable_auto_commit
                and clock.now_ms() >= self._next_commit
                and self.owned
                and not self._reconciling
            ):
                self._next_commit = clock.now_ms() + self.config.auto_commit_interval_ms
                self._background(self._commit)
            instant = all(r.latency_ms == 0 for r in requests)
            if instant and all(not any(r.records.values()) for r in requests):
                await clock.sleep_until(clock.now_ms() + 1)  # no spinning in one virtual instant

    # --- requests ----------------------------------------------------------------------------
    async def _commit(self, partitions: set[TopicPartition] | None = None) -> Errors:
        """Commit the positions of ``partitions`` (default: every owned one) at the member's epoch."""
        positions = {
            tp: offset
            for tp, offset in self.consumer.positions.items()
            if tp in self.owned and (partitions is None or tp in partitions)
        }
        if not positions or self.member_epoch <= 0:
            return Errors.NONE
        coordinator = self.cluster.coordinator_for(self.group_id)
        if coordinator < 0:
            return Errors.COORDINATOR_NOT_AVAILABLE
        offsets = tuple(m.CommitOffset(tp.topic, tp.partition, o) for tp, o in sorted(positions.items()))
        request = m.OffsetCommitRequest(
            self.group_id, offsets, self.member_epoch, self.member_id, self._instance()
        )
        self._emit("member.commit", offsets={str(tp): o for tp, o in sorted(positions.items())})
        answer = await self._call(coordinator, request, "OffsetCommit")
        if answer is None:
            return Errors.NETWORK_EXCEPTION
        errors = [error for _, _, error in answer.partitions if error is not Errors.NONE]
        if errors:
            self._record("OffsetCommit", errors[0])
            return errors[0]
        return Errors.NONE

    async def _call(self, broker: int, message: Any, api: str) -> Any:
        """Send to ``broker`` and wait; None (and a backoff) on a network error."""
        timeout = self.config.request_timeout_ms + self.config.response_grace_ms
        answer = await self.cluster.network.call(self.consumer.client_id, broker, message, timeout)
        if isinstance(answer, NetworkError):
            self._record(api, answer.error)
            await self._sleep(RETRY_BACKOFF_MS)
            return None
        error = getattr(answer, "error", Errors.NONE)
        if error is not Errors.NONE:
            self._record(api, error)
        return answer

    # --- helpers -----------------------------------------------------------------------------
    def _drop(self, partitions: set[TopicPartition]) -> None:
        """Stop fetching ``partitions``; a fetch answer still on its way for them is ignored."""
        self.consumer.unassign(sorted(partitions))
        self.owned -= partitions

    # the classic membership's helpers, on the attributes both keep (cluster, consumer, config,
    # group_id, errors, _changed, _nursery): tracing, error records, waiting and sleeping
    _instance = GroupMembership._instance
    _record = GroupMembership._record
    _emit = GroupMembership._emit
    _background = GroupMembership._background
    _wake = GroupMembership._wake
    _until = GroupMembership._until
    _sleep = GroupMembership._sleep
    _reset_offset = GroupMembership._reset_offset


def _pairs(partitions: set[TopicPartition]) -> m.TopicPartitions:
    topics: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return tuple((t, tuple(ps)) for t, ps in topics.items())


def _labels(partitions: set[TopicPartition]) -> list[str]:
    return [str(tp) for tp in sorted(partitions)]
