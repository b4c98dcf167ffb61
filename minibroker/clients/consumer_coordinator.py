"""A consumer's group membership: the classic protocol from the client side, as the Java consumer runs it.

``GroupMembership(consumer, topics).run`` (a trio task) keeps three loops:

- *coordinate*: whenever a (re)join is needed and the application is polling, find the
  coordinator (the leader of the group's ``__consumer_offsets`` partition), commit the
  current positions if auto commit is on (``onJoinPrepare``), give up the assignment
  (eager protocol), JoinGroup (a first MEMBER_ID_REQUIRED answer is followed by a second
  join at once), compute the assignment if elected leader, SyncGroup, then fetch the
  committed offsets of the new partitions (``auto.offset.reset`` where there are none);
- *heartbeat*: every ``heartbeat.interval.ms`` after the last one, while the member has a
  generation and is not joining. REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION and
  UNKNOWN_MEMBER_ID (which also forgets the member id) make it rejoin;
- *fetch*: while polling, fetch the assigned partitions again as soon as each fetch
  returns, and commit every ``auto.commit.interval.ms`` (not waiting for the answer).

``stall`` stops polling (fetches and rejoins) but not heartbeats: a rebalance started
meanwhile waits for the member until the coordinator's rebalance timeout removes it.
``hang`` stops heartbeats too: the session timeout evicts it. ``leave`` sends LeaveGroup.

Deviations from the Java client: no proactive LeaveGroup when ``max.poll.interval.ms``
passes without a poll (so the coordinator's rebalance timeout is what removes a stalled
member); no retries of a failed commit; coordinator lookups read the controller's state
(as the emulator's clients learn leaders) instead of sending FindCoordinator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol

import trio

from minibroker.broker.config import ConsumerConfig
from minibroker.clients.request import ClientContext, ClientRequest
from minibroker.common.errors import Errors
from minibroker.common.messages import NetworkError, TopicPartition
from minibroker.coordinator.group import consumer_protocol as cp
from minibroker.coordinator.group import messages as m


class GroupConsumer(Protocol):
    """What a membership uses of its consumer (``clients.consumer.Consumer``): positions and fetches."""

    client_id: str
    cluster: ClientContext
    config: ConsumerConfig
    positions: dict[TopicPartition, int]

    def assign(self, partitions: Iterable[TopicPartition], offset: int = 0) -> None: ...

    def unassign(self, partitions: Iterable[TopicPartition]) -> None: ...

    def fetch(self, name: str | None = None) -> list[ClientRequest]: ...


#: Java's retry.backoff.ms
RETRY_BACKOFF_MS = 100
_REJOIN = {Errors.REBALANCE_IN_PROGRESS, Errors.ILLEGAL_GENERATION, Errors.UNKNOWN_MEMBER_ID}
_COORDINATOR = {
    Errors.NOT_COORDINATOR,
    Errors.COORDINATOR_NOT_AVAILABLE,
    Errors.COORDINATOR_LOAD_IN_PROGRESS,
    Errors.NETWORK_EXCEPTION,
    Errors.REQUEST_TIMED_OUT,
}


class GroupMembership:
    """One consumer's membership of ``consumer.config.group_id``, subscribed to ``topics``."""

    def __init__(self, consumer: GroupConsumer, topics: list[str]) -> None:
        self.consumer = consumer
        self.cluster = consumer.cluster
        self.config = consumer.config
        self.group_id = consumer.config.group_id
        self.topics = list(topics)
        self.member_id = ""
        self.generation = -1
        self.leader = ""
        self.assigned: list[TopicPartition] = []
        self.joining = False
        self.need_rejoin = True
        self.polling = True
        self.heartbeating = True
        self.left = False
        self.failed: Errors | None = None
        #: every error the member was answered, by API: [(ms, api, error name)]
        self.errors: list[tuple[int, str, str]] = []
        self._changed = trio.Event()
        self._last_heartbeat = 0
        self._next_commit = 0
        self._scope: trio.CancelScope | None = None
        self._nursery: trio.Nursery | None = None

    # --- application controls ----------------------------------------------------------------
    def stall(self, stalled: bool = True) -> None:
        """Stop (or resume) polling; heartbeats go on."""
        self.polling = not stalled
        self._emit("member.stall" if stalled else "member.resume")
        self._wake()

    def hang(self, hung: bool = True) -> None:
        """Stop (or resume) polling and heartbeating, like a process that froze."""
        self.polling = self.heartbeating = not hung
        self._emit("member.hang" if hung else "member.resume")
        self._wake()

    async def leave(self) -> None:
        """LeaveGroup (if a member), then stop every loop."""
        self.left = True
        if self.member_id:
            coordinator = self.cluster.coordinator_for(self.group_id)
            request = m.LeaveGroupRequest(self.group_id, (m.LeavingMember(self.member_id, self._instance()),))
            self._emit("member.leave", member=self.member_id)
            if coordinator >= 0:
                await self._call(coordinator, request, "LeaveGroup")
        self._give_up_assignment()
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
                nursery.start_soon(self._coordinate)
                nursery.start_soon(self._heartbeats)
                nursery.start_soon(self._fetches)
                task_status.started()

    async def _coordinate(self) -> None:
        while True:
            await self._until(lambda: self.need_rejoin and self.polling and self.failed is None)
            self.joining = True
            try:
                await self._join_and_sync()
            finally:
                self.joining = False
                self._wake()

    async def _join_and_sync(self) -> None:
        coordinator = self.cluster.coordinator_for(self.group_id)
        if coordinator < 0:
            await self._sleep(RETRY_BACKOFF_MS)
            return
        if self.assigned and self.config.enable_auto_commit and self.generation >= 0:
            await self._commit_before_rejoin()
        self._give_up_assignment()
        strategy = self.config.partition_assignment_strategy
        request = m.JoinGroupRequest(
            self.group_id,
            self.member_id,
            self.config.session_timeout_ms,
            self.config.max_poll_interval_ms,
            "consumer",
            ((strategy, cp.encode_subscription(self.topics)),),
            self._instance(),
            self.consumer.client_id,
            self.consumer.client_id,
        )
        self._emit("member.join", member=self.member_id)
        joined = await self._call(coordinator, request, "JoinGroup", self.config.max_poll_interval_ms)
        if joined is None:
            return
        if joined.error is Errors.MEMBER_ID_REQUIRED:
            self.member_id = joined.member_id
            return
        if joined.error is not Errors.NONE:
            await self._rejoin_after(joined.error)
            return
        self.member_id, self.generation, self.leader = joined.member_id, joined.generation_id, joined.leader
        assignments: tuple[tuple[str, bytes], ...] = ()
        if joined.leader == joined.member_id:
            subscriptions = {x.member_id: cp.subscribed_topics(x.metadata) for x in joined.members}
            plan = cp.assign(joined.protocol_name or strategy, subscriptions, self._partitions_of)
            assignments = tuple((member, cp.encode_assignment(plan[member])) for member in sorted(plan))
        sync = m.SyncGroupRequest(
            self.group_id,
            self.generation,
            self.member_id,
            assignments,
            self._instance(),
            "consumer",
            joined.protocol_name,
        )
        synced = await self._call(coordinator, sync, "SyncGroup")
        if synced is None:
            return
        if synced.error is not Errors.NONE:
            await self._rejoin_after(synced.error)
            return
        self.need_rejoin = False
        now = self.cluster.now()
        self._last_heartbeat = now
        self._next_commit = now + self.config.auto_commit_interval_ms
        self.assigned = [TopicPartition(t, p) for t, p in cp.decode_assignment(synced.assignment)]
        self._emit(
            "member.assigned",
            member=self.member_id,
            generation=self.generation,
            partitions=[str(tp) for tp in self.assigned],
            leader=self.leader == self.member_id,
        )
        await self._initialise_positions(coordinator)

    async def _commit_before_rejoin(self) -> None:
        """onJoinPrepare's synchronous commit, retried after retry.backoff.ms on a coordinator error
        until it succeeds or max.poll.interval.ms (the rebalance timeout) has passed, as the Java
        consumer's commitSync. One attempt let a chaos run's member fetch its old committed offset
        while its newer commit was still being written, then commit that old offset: backward."""
        deadline = self.cluster.now() + self.config.max_poll_interval_ms
        while await self._commit() in _COORDINATOR:
            if self.cluster.now() + RETRY_BACKOFF_MS >= deadline:
                return
            await self._sleep(RETRY_BACKOFF_MS)

    async def _initialise_positions(self, coordinator: int) -> None:
        if not self.assigned:
            return
        wanted = {}
        for tp in self.assigned:
            wanted.setdefault(tp.topic, []).append(tp.partition)
        # require_stable, as the Java consumer asks: answered after the group's offset writes in the log
        request = m.OffsetFetchRequest(
            (m.OffsetFetchGroup(self.group_id, tuple((t, tuple(ps)) for t, ps in wanted.items())),),
            require_stable=True,
        )
        # asked again (after retry.backoff.ms, of the coordinator of the moment) until answered, as the
        # Java consumer does: starting from auto.offset.reset because the coordinator did not answer
        # would commit that offset over the group's (scenarios/regressions/offset_fetch_retried.toml)
        fetched = await self._call_while_loading(coordinator, request, "OffsetFetch")
        while fetched is None or any(
            o.error is Errors.UNSTABLE_OFFSET_COMMIT for g in fetched.groups for o in g.offsets
        ):
            if fetched is not None:  # a transaction's offsets pend (KIP-447): asked again after the backoff
                await self._sleep(RETRY_BACKOFF_MS)
            if self.need_rejoin or self.failed is not None:
                return  # the positions come with the next assignment
            coordinator = self.cluster.coordinator_for(self.group_id)
            if coordinator < 0:
                await self._sleep(RETRY_BACKOFF_MS)
                continue
            fetched = await self._call_while_loading(coordinator, request, "OffsetFetch")
        committed = {TopicPartition(o.topic, o.partition): o.offset for o in fetched.groups[0].offsets}
        for tp in self.assigned:
            offset = committed.get(tp, -1)
            if offset < 0:
                offset = self._reset_offset(tp)
            self.consumer.assign([tp], offset)
        self._wake()

    def _reset_offset(self, tp: TopicPartition) -> int:
        leader = self.cluster.leader_of(tp)
        log = self.cluster.brokers[leader].logs.get(tp) if leader >= 0 else None
        if log is None:
            return 0
        return log.log_start_offset if self.config.auto_offset_reset == "earliest" else log.high_watermark

    async def _heartbeats(self) -> None:
        while True:
            await self._until(
                lambda: (
                    self.generation >= 0 and not self.joining and self.heartbeating and self.failed is None
                )
            )
            due = self._last_heartbeat + self.config.heartbeat_interval_ms
            if self.cluster.now() < due:
                await self.cluster.clock.sleep_until(due)
                continue
            coordinator = self.cluster.coordinator_for(self.group_id)
            self._last_heartbeat = self.cluster.now()
            if coordinator < 0:
                continue
            request = m.HeartbeatRequest(self.group_id, self.generation, self.member_id, self._instance())
            answer = await self._call(coordinator, request, "Heartbeat")
            if answer is not None and answer.error is Errors.COORDINATOR_LOAD_IN_PROGRESS:
                # as Java's heartbeat thread: a failed heartbeat, sent again retry.backoff.ms after it failed
                retry_at = self.cluster.now() + RETRY_BACKOFF_MS
                self._last_heartbeat = retry_at - self.config.heartbeat_interval_ms
            elif answer is not None and answer.error is not Errors.NONE:
                self._on_error(answer.error)

    async def _fetches(self) -> None:
        consumer = self.consumer
        clock = self.cluster.clock
        while True:
            await self._until(lambda: self.polling and not self.need_rejoin and bool(consumer.positions))
            requests = consumer.fetch()
            for request in requests:
                await request.wait()
            if (
                self.config.enable_auto_commit
                and clock.now_ms() >= self._next_commit
                and not self.need_rejoin
            ):
                self._next_commit = clock.now_ms() + self.config.auto_commit_interval_ms
                self._background(self._commit)  # the positions when it is sent, not when scheduled
            instant = all(r.latency_ms == 0 for r in requests)
            if instant and all(not any(r.records.values()) for r in requests):
                # an instant answer without records (an error such as NOT_LEADER_OR_FOLLOWER from a
                # broker that has not heard it leads): don't spin in one virtual instant
                await clock.sleep_until(clock.now_ms() + 1)

    # --- requests ----------------------------------------------------------------------------
    async def _commit(self) -> Errors:
        """Commit the positions of the moment each request is sent, a retry after
        COORDINATOR_LOAD_IN_PROGRESS too: a commit never carries positions older than one sent
        before it (else chaos seed 2026 runs 5100 and 9136, replayed by tests/chaos/test_long_run_findings.py,
        would write stale snapshots over newer offsets)."""
        while True:
            positions = dict(self.consumer.positions)
            if not positions or self.generation < 0:
                return Errors.NONE
            coordinator = self.cluster.coordinator_for(self.group_id)
            if coordinator < 0:
                return Errors.COORDINATOR_NOT_AVAILABLE
            offsets = tuple(
                m.CommitOffset(tp.topic, tp.partition, offset) for tp, offset in sorted(positions.items())
            )
            request = m.OffsetCommitRequest(
                self.group_id, offsets, self.generation, self.member_id, self._instance()
            )
            self._emit("member.commit", offsets={str(tp): o for tp, o in sorted(positions.items())})
            answer = await self._call(coordinator, request, "OffsetCommit")
            if answer is None:
                return Errors.NETWORK_EXCEPTION
            if m.refused_while_loading(answer):  # retriable: the Java client commits again
                self._record("OffsetCommit", Errors.COORDINATOR_LOAD_IN_PROGRESS)
                await self._sleep(RETRY_BACKOFF_MS)
                continue
            errors = [error for _, _, error in answer.partitions if error is not Errors.NONE]
            if errors:
                self._on_error(errors[0], rejoin_only=True)
                return errors[0]
            return Errors.NONE

    async def _call(self, broker: int, message: Any, api: str, wait_ms: int = 0) -> Any:
        """Send to ``broker`` and wait; None (and a backoff) on a network error."""
        timeout = max(wait_ms, self.config.request_timeout_ms) + self.config.response_grace_ms
        answer = await self.cluster.network.call(self.consumer.client_id, broker, message, timeout)
        if isinstance(answer, NetworkError):
            self._record(api, answer.error)
            await self._sleep(RETRY_BACKOFF_MS)
            return None
        error = getattr(answer, "error", Errors.NONE)
        if error is not Errors.NONE:
            self._record(api, error)
        return answer

    async def _call_while_loading(self, broker: int, message: Any, api: str) -> Any:
        """``_call``, sent again after retry.backoff.ms while the coordinator answers
        COORDINATOR_LOAD_IN_PROGRESS (retriable: the Java client retries commits and offset fetches)."""
        answer = await self._call(broker, message, api)
        while answer is not None and m.refused_while_loading(answer):
            self._record(api, Errors.COORDINATOR_LOAD_IN_PROGRESS)  # a per-partition / per-group error
            await self._sleep(RETRY_BACKOFF_MS)
            answer = await self._call(broker, message, api)
        return answer

    async def _rejoin_after(self, error: Errors) -> None:
        """A failed JoinGroup/SyncGroup: rejoin, after retry.backoff.ms when the coordinator failed."""
        self._on_error(error)
        if error in _COORDINATOR:
            await self._sleep(RETRY_BACKOFF_MS)

    def _on_error(self, error: Errors, rejoin_only: bool = False) -> None:
        if error is Errors.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            self.generation = -1
        if error in _REJOIN or error in _COORDINATOR:
            self.need_rejoin = True
        elif not rejoin_only:
            self.failed = (
                error  # INVALID_SESSION_TIMEOUT, INCONSISTENT_GROUP_PROTOCOL, FENCED_INSTANCE_ID, ...
            )
            self._emit("member.failed", error=error.name)
        self._wake()

    # --- helpers -----------------------------------------------------------------------------
    def _give_up_assignment(self) -> None:
        """Revoke the assignment: positions go, and a fetch answer still on its way for them is ignored
        (else a late answer would put the position back, and two members would consume one partition:
        scenarios/regressions/revoked_partition_late_fetch.toml)."""
        self.consumer.unassign(self.assigned)
        self.assigned = []

    def _partitions_of(self, topic: str) -> int:
        spec = self.cluster.topics.get(topic)
        return spec.partitions if spec is not None else 0

    def _instance(self) -> str | None:
        return self.config.group_instance_id or None

    def _record(self, api: str, error: Errors) -> None:
        self.errors.append((self.cluster.now(), api, error.name))
        self._emit("member.error", api=api, error=error.name)

    def _emit(self, kind: str, **fields: Any) -> None:
        tracer = self.cluster.tracer
        if tracer.enabled:
            tracer.emit(kind, client=self.consumer.client_id, group=self.group_id, **fields)

    def _background(self, fn: Callable[..., Any], *args: Any) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)

    def _wake(self) -> None:
        self._changed.set()

    async def _until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            self._changed = trio.Event() if self._changed.is_set() else self._changed
            await self._changed.wait()

    async def _sleep(self, ms: int) -> None:
        await self.cluster.clock.sleep_until(self.cluster.now() + ms)
