"""SharePartitionManager: one broker's share partitions, share sessions and ShareFetch purgatory (KIP-932).

Kafka's class: https://github.com/apache/kafka/blob/trunk/core/src/main/java/kafka/server/share/SharePartitionManager.java
with the parts of ``ReplicaManager`` and ``KafkaApis`` that serve ShareFetch (78) and ShareAcknowledge (79):

- A share partition (``SharePartition``) exists per (group, partition) on the partition's leader, made on the
  first ShareFetch that names it. Its window starts where ``share.auto.offset.reset`` says (``latest``, the
  default: the high watermark, or the LSO under ``share.isolation.level=read_committed``; ``earliest``: the
  log start offset). Its locks last ``share.record.lock.duration.ms`` (the group's) or
  ``group.share.record.lock.duration.ms`` (the broker's).
- A ShareFetch first checks its share session (``ShareSessionCache``), then applies the acknowledgements it
  carries, then acquires for the member from every partition of its session. When nothing is acquirable it
  waits in the ShareFetch purgatory as a ``DelayedShareFetch`` for up to ``max_wait_ms``; records released
  or a lock expiring check its group keys, a rising high watermark its partition keys.
- A session closed (epoch -1), or replaced (epoch 0), releases the records its member held.
- With a persister, acknowledgements are answered (by ShareAcknowledge, or in a ShareFetch's answer) only
  once the share coordinator has written them; a failed write's error is the partition's acknowledge error.
- A state write refused with FENCED_STATE_EPOCH (the group's offsets were altered or deleted since the
  share partition was read) drops the share partition with its locks; the next ShareFetch reads the new
  state (Kafka's SharePartitionManager does the same on a fenced share partition).
- Losing leadership drops the partition's share partitions with their locks (without a share coordinator
  their state is not persisted; see docs/kafka-model.md, "Share groups").

Trace events: ``share.fetch`` (a ShareFetch answered: acquired count and cause), ``share.session``, and the
share partitions' own (``share.init``, ``share.acquire``, ``share.ack``, ``share.accept``,
``share.lock.expire``, ``share.archive``, ``share.spso``); the purgatory emits its ``op.*`` events under
the name ``ShareFetch``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.broker.partition import PartitionError
from minibroker.broker.share.delayed_share_fetch import (
    DelayedShareFetch,
    DelayedShareFetchGroupKey,
    DelayedShareFetchPartitionKey,
    watch_keys,
)
from minibroker.broker.share.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchPartitionData,
    ShareFetchRequest,
    ShareFetchResponse,
)
from minibroker.broker.share.persister import Persister
from minibroker.broker.share.share_partition import AcknowledgementBatch, SharePartition
from minibroker.broker.share.share_session_cache import CLOSE_EPOCH, OPEN_EPOCH, ShareSessionCache
from minibroker.common.errors import Errors
from minibroker.common.messages import HIGH_WATERMARK, TXN_COMMITTED, TopicPartition
from minibroker.purgatory import DelayedOperationPurgatory


class SharePartitionManager:
    """Serves ShareFetch and ShareAcknowledge for the partitions ``manager`` (a ReplicaManager) leads."""

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.broker_id = manager.broker_id
        self.tracer = manager.tracer
        self.purgatory: DelayedOperationPurgatory[DelayedShareFetch] = DelayedOperationPurgatory(
            "ShareFetch",
            manager.timer,
            broker_id=manager.broker_id,
            purge_interval=manager.config.fetch_purge_interval,
            tracer=manager.tracer,
        )
        manager.reaper.add_hook(self.purgatory.maybe_purge)
        manager.high_watermark_listeners.append(self.on_high_watermark)
        manager.leadership_listeners.append(self.on_leadership)
        self.sessions = ShareSessionCache()
        self.share_partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        #: a group's config overrides (GROUP resource configs); the broker points this at the cluster's
        self.group_configs: Callable[[str], dict[str, str]] = lambda group_id: {}
        #: where share-partition state is kept (the share coordinators); None keeps it in memory only
        self.persister: Persister | None = None
        #: per share partition: [write in flight, waiters of the next write, waiters of the one in flight]
        self._writes: dict[tuple[str, TopicPartition], list[Any]] = {}

    # ---- entry points --------------------------------------------------------------------------------------
    def handle(self, message: Any, respond: Callable[[Any], object]) -> None:
        if isinstance(message, ShareFetchRequest):
            self.share_fetch(message, respond)
        else:
            self.share_acknowledge(message, respond)

    def share_fetch(
        self, request: ShareFetchRequest, respond: Callable[[ShareFetchResponse], object]
    ) -> None:
        self.manager.share_fetch_purgatory = self.purgatory  # the figures list it from now on
        group, member, epoch = request.group_id, request.member_id, request.session_epoch
        error, session = self.sessions.check(group, member, epoch)
        if error is not Errors.NONE:
            self._emit("share.fetch", group=group, member=member, error=error.name, count=0, cause="session")
            respond(ShareFetchResponse(error, {}))
            return
        acknowledged = {
            tp: self._acknowledge(group, member, tp, b) for tp, b in request.acknowledgements.items()
        }
        after_acks = self._once_written(group, acknowledged)
        if epoch == CLOSE_EPOCH:
            self._close_session(group, member)
            after_acks(
                lambda: respond(
                    ShareFetchResponse(
                        Errors.NONE,
                        {tp: ShareFetchPartitionData(acknowledge_error=e) for tp, e in acknowledged.items()},
                    )
                )
            )
            return
        if epoch == OPEN_EPOCH:
            self._close_session(group, member)
            session = self.sessions.open(group, member, list(request.partitions))
            self._emit("share.session", group=group, member=member, epoch=0, count=len(session.partitions))
        else:
            assert session is not None
            session.epoch += 1
            forgotten = set(request.forgotten)
            for tp in forgotten:
                sp = self.share_partitions.get((group, tp))
                if sp is not None:
                    sp.release_member(member)
            session.partitions = [tp for tp in session.partitions if tp not in forgotten]
            session.partitions.extend(tp for tp in request.partitions if tp not in session.partitions)
        partitions = list(session.partitions)
        lock_ms = self._lock_duration(group)

        def ready() -> bool:
            return any(self._acquirable(group, tp) for tp in partitions)

        def complete(cause: str) -> None:
            left = request.max_records
            data: dict[TopicPartition, ShareFetchPartitionData] = {}
            for tp in partitions:
                part = self._acquire(group, member, tp, left)
                left -= sum(r.last_offset - r.first_offset + 1 for r in part.acquired)
                if (
                    part.acquired
                    or part.error is not Errors.NONE
                    or tp in request.partitions
                    or tp in acknowledged
                ):
                    data[tp] = part
            count = sum(r.last_offset - r.first_offset + 1 for p in data.values() for r in p.acquired)
            self._emit(
                "share.fetch",
                group=group,
                member=member,
                error="NONE",
                count=count,
                cause=cause,
                op=request.request_id,
            )

            def answer() -> None:
                for tp, ack_error in acknowledged.items():
                    part = data.get(tp, ShareFetchPartitionData())
                    data[tp] = ShareFetchPartitionData(
                        part.error, ack_error, part.acquired, part.batches, part.leader_id, part.leader_epoch
                    )
                respond(ShareFetchResponse(Errors.NONE, data, lock_ms, cause))

            after_acks(answer)

        operation = DelayedShareFetch(
            max(0, request.max_wait_ms), ready, complete, op_id=request.request_id or None
        )
        if request.max_wait_ms <= 0 or not partitions or request.max_records <= 0:
            operation.force_complete()
            return
        self.purgatory.try_complete_else_watch(operation, watch_keys(group, partitions))

    def share_acknowledge(
        self, request: ShareAcknowledgeRequest, respond: Callable[[ShareAcknowledgeResponse], object]
    ) -> None:
        group, member, epoch = request.group_id, request.member_id, request.session_epoch
        error, session = self.sessions.check(group, member, epoch)
        if error is Errors.NONE and epoch == OPEN_EPOCH:
            error = Errors.INVALID_SHARE_SESSION_EPOCH  # only a ShareFetch opens a session
        if error is not Errors.NONE:
            respond(ShareAcknowledgeResponse(error, {}))
            return
        results = {tp: self._acknowledge(group, member, tp, b) for tp, b in request.acknowledgements.items()}
        if epoch == CLOSE_EPOCH:
            self._close_session(group, member)
        elif session is not None:
            session.epoch += 1
        self._once_written(group, results)(lambda: respond(ShareAcknowledgeResponse(Errors.NONE, results)))

    def _once_written(
        self, group_id: str, results: dict[TopicPartition, Errors]
    ) -> Callable[[Callable[[], object]], None]:
        """Wait for the writes of the acknowledgements just applied (``results``: partition -> error, updated
        with a failed write's error); the function returned runs its argument once they are all in."""
        waiting = {tp for tp, error in results.items() if error is Errors.NONE and self.persister is not None}
        then: list[Callable[[], object]] = []

        def written(tp: TopicPartition, error: Errors) -> None:
            results[tp] = error
            waiting.discard(tp)
            if not waiting and then:
                then.pop()()

        for tp in sorted(waiting, key=str):
            self._persist_then(group_id, tp, lambda error, tp=tp: written(tp, error))

        def run_after(action: Callable[[], object]) -> None:
            if waiting:
                then.append(action)
            else:
                action()

        return run_after

    # ---- events from the replica manager -------------------------------------------------------------------
    def on_high_watermark(self, tp: TopicPartition) -> None:
        self.purgatory.check_and_complete(DelayedShareFetchPartitionKey(tp.topic, tp.partition))

    def on_leadership(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        if leader:
            return
        for key in [key for key in self.share_partitions if key[1] == tp]:
            self.share_partitions.pop(key).close()
        self.purgatory.check_and_complete(DelayedShareFetchPartitionKey(tp.topic, tp.partition))

    # ---- share partitions ----------------------------------------------------------------------------------
    def share_partition(self, group_id: str, tp: TopicPartition) -> SharePartition:
        """The share partition of ``group_id`` on ``tp``, made (and its window started) on first use;
        raises ``PartitionError`` when ``tp`` is not led here."""
        partition = self.manager.partition(tp)
        if partition is None:
            raise PartitionError(self.manager._lookup_error(tp))
        partition.require_leader()
        key = (group_id, tp)
        sp = self.share_partitions.get(key)
        if sp is None:
            config = self.manager.config
            sp = SharePartition(
                group_id,
                tp,
                self.manager.timer,
                self.manager.now,
                lock_duration_ms=self._lock_duration(group_id),
                delivery_count_limit=config.group_share_delivery_count_limit,
                max_record_locks=config.group_share_partition_max_record_locks,
                on_release=self._released,
                on_change=self._changed,
                tracer=self.tracer,
                broker_id=self.broker_id,
            )
            sp.append_time = lambda offset: self._append_time(tp, offset)
            self.share_partitions[key] = sp
            if self.persister is None:
                self._start_window(sp)
            else:
                self.persister.read(group_id, tp, lambda error, state: self._read(sp, error, state))
        return sp

    def _start_window(self, sp: SharePartition) -> None:
        """``share.auto.offset.reset``: ``earliest`` is the log start offset, else the readable end."""
        partition = self.manager.partition(sp.tp)
        if self.group_configs(sp.group_id).get("share.auto.offset.reset", "latest") == "earliest":
            sp.initialize(partition.log.log_start_offset)
        else:
            sp.initialize(partition.max_offset(self._isolation(sp.group_id)))

    def _read(self, sp: SharePartition, error: Errors, state: Any) -> None:
        """The share coordinator answered the read of ``sp``: restore it, or start it afresh."""
        key = (sp.group_id, sp.tp)
        if self.share_partitions.get(key) is not sp:
            return  # dropped meanwhile (leadership moved)
        if error is not Errors.NONE:
            del self.share_partitions[key]  # the next ShareFetch reads again
            self._emit("share.init", group=sp.group_id, partition=str(sp.tp), error=error.name)
        elif state is None:
            self._start_window(sp)
        else:
            sp.restore(state)
        self._released(sp)

    def _changed(self, sp: SharePartition) -> None:
        if self.persister is not None:
            self._persist_then(sp.group_id, sp.tp, None)

    def _persist_then(
        self, group_id: str, tp: TopicPartition, waiter: Callable[[Errors], Any] | None
    ) -> None:
        """Write the share partition's state (one write in flight per partition; changes made meanwhile go
        out together in the next); ``waiter(error)`` hears the write that includes the change so far."""
        key = (group_id, tp)
        slot = self._writes.setdefault(key, [False, [], [], False])
        if waiter is not None and slot[0] and not slot[3]:
            slot[2].append(waiter)  # nothing changed since the write in flight started: it has it all
            return
        if waiter is not None:
            slot[1].append(waiter)
        slot[3] = True  # dirty
        if not slot[0]:
            self._write(key, slot)

    def _write(self, key: tuple[str, TopicPartition], slot: list[Any]) -> None:
        sp = self.share_partitions.get(key)
        if sp is None or self.persister is None:
            for waiter in slot[1]:
                waiter(Errors.NOT_LEADER_OR_FOLLOWER)
            self._writes.pop(key, None)
            return
        slot[0], slot[2], slot[1], slot[3] = True, slot[1], [], False

        def done(error: Errors) -> None:
            slot[0] = False
            if error is Errors.FENCED_STATE_EPOCH and self.share_partitions.get(key) is sp:
                self.share_partitions.pop(key).close()
                self._emit("share.init", group=key[0], partition=str(key[1]), error=error.name)
            waiters, slot[2] = slot[2], []
            for waiter in waiters:
                waiter(error)
            if slot[3]:
                self._write(key, slot)
            elif not slot[1]:
                self._writes.pop(key, None)

        self.persister.write(key[0], key[1], sp.snapshot(), done)

    def _append_time(self, tp: TopicPartition, offset: int) -> int | None:
        """When this leader's log took the record at ``offset`` (None when it no longer holds it)."""
        partition = self.manager.partition(tp)
        if partition is None or not partition.log.log_start_offset <= offset < partition.log.log_end_offset:
            return None
        batches = partition.log.read(offset, 1, offset + 1).batches
        return batches[0].append_time_ms if batches else None

    def _acquirable(self, group_id: str, tp: TopicPartition) -> bool:
        """True when ``tp`` can acquire a record for the group, or answers with an error."""
        try:
            sp = self.share_partition(group_id, tp)
        except PartitionError:
            return True
        return sp.can_acquire(self.manager.partition(tp).max_offset(self._isolation(group_id)))

    def _acquire(
        self, group_id: str, member_id: str, tp: TopicPartition, max_records: int
    ) -> ShareFetchPartitionData:
        try:
            sp = self.share_partition(group_id, tp)
        except PartitionError as failure:
            return ShareFetchPartitionData(failure.error, leader_id=self._leader_of(tp))
        partition = self.manager.partition(tp)
        read_end = partition.max_offset(self._isolation(group_id))
        config = self.manager.config  # a group or broker config may have changed since the last fetch
        sp.lock_duration_ms = self._lock_duration(group_id)
        sp.delivery_count_limit = config.group_share_delivery_count_limit
        sp.max_record_locks = config.group_share_partition_max_record_locks
        sp.move_start(partition.log.log_start_offset)
        acquired = sp.acquire(member_id, max_records, read_end) if max_records > 0 else []
        batches: tuple = ()
        if acquired:
            first = min(r.first_offset for r in acquired)
            last = max(r.last_offset for r in acquired)
            read = partition.log.read(first, 2**31 - 1, last + 1)
            batches = tuple(
                batch
                for batch in read.batches
                if any(
                    batch.base_offset <= r.last_offset and r.first_offset < batch.next_offset
                    for r in acquired
                )
            )
        return ShareFetchPartitionData(
            acquired=tuple(acquired),
            batches=batches,
            leader_id=self.broker_id,
            leader_epoch=partition.leader_epoch,
        )

    def _acknowledge(
        self, group_id: str, member_id: str, tp: TopicPartition, batches: tuple[AcknowledgementBatch, ...]
    ) -> Errors:
        if not batches:
            return Errors.NONE
        try:
            sp = self.share_partition(group_id, tp)
        except PartitionError as failure:
            return failure.error
        return sp.acknowledge(member_id, batches)

    def _released(self, sp: SharePartition) -> None:
        self.purgatory.check_and_complete(
            DelayedShareFetchGroupKey(sp.group_id, sp.tp.topic, sp.tp.partition)
        )

    def _close_session(self, group_id: str, member_id: str) -> None:
        session = self.sessions.close(group_id, member_id)
        if session is None:
            return
        self._emit("share.session", group=group_id, member=member_id, epoch=-1, count=len(session.partitions))
        for tp in session.partitions:
            sp = self.share_partitions.get((group_id, tp))
            if sp is not None:
                sp.release_member(member_id)

    def _lock_duration(self, group_id: str) -> int:
        override = self.group_configs(group_id).get("share.record.lock.duration.ms")
        return (
            int(override) if override is not None else self.manager.config.group_share_record_lock_duration_ms
        )

    def _isolation(self, group_id: str) -> str:
        level = self.group_configs(group_id).get("share.isolation.level", "read_uncommitted")
        return TXN_COMMITTED if level == "read_committed" else HIGH_WATERMARK

    def _leader_of(self, tp: TopicPartition) -> int:
        partition = self.manager.partition(tp)
        return partition.leader_id if partition is not None else -1

    def _emit(self, kind: str, **fields: Any) -> None:
        if self.tracer.enabled:
            self.tracer.emit(kind, broker=self.broker_id, **fields)
