"""RemoteLogManager: one broker's side of tiered storage (KIP-405): copies, local retention, remote reads.

Kafka's ``RemoteLogManager``
(https://github.com/apache/kafka/blob/trunk/storage/src/main/java/org/apache/kafka/server/log/remote/storage/RemoteLogManager.java),
its ``RemoteLogReader`` and the remote part of ``UnifiedLog``'s retention. Active only when the broker
sets ``remote.log.storage.system.enable`` and for topics with ``remote.storage.enable=true``.

- **Copy task** (Kafka's ``RLMCopyTask``), per partition this broker leads: first run when it becomes
  leader, then ``remote.log.manager.task.interval.ms`` after the previous run ended. A run copies, one
  after the other, every closed segment (never the active one) lying wholly below the last stable
  offset and past what the remote tier holds; each copy takes the copy latency. A failed copy ends
  the run (the next run tries again). Losing leadership stops the task.
- **Local retention**, every ``log.retention.check.interval.ms`` from broker start, on every replica
  of a remote-enabled topic: the oldest local segments already copied (their last offset at or below
  the tier's highest offset) are deleted while the log is larger than ``local.retention.bytes`` by at
  least that segment, or while the segment's newest record is older than ``local.retention.ms``. The
  log start offset stays; the local log start offset moves up.
- **Reads** (``RemoteLogReader``): a remote fetch or a remote offset lookup completes after the read
  latency, then calls back (the purgatory is checked there). A failure of the tier is a
  ``RemoteStorageException`` in Kafka, which is no API exception: the answer is
  UNKNOWN_SERVER_ERROR. An offset the tier does not hold is OFFSET_OUT_OF_RANGE.

Every copy, read and check is a task on the broker's one timer, as its purgatories' operations are,
so the virtual times are exact. Latency and fault come from the broker's settings at the moment a
copy or read starts (``minibroker.remote.storage.*``), so a ``config`` step can make the tier slow
or failing mid-run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from minibroker.broker.remote_storage_manager import RemoteStorageManager
from minibroker.broker.topic_configs import local_retention, remote_storage_enabled
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.common.record_batch import RecordBatch
from minibroker.timer import TimerTask

if TYPE_CHECKING:
    from minibroker.broker.config import BrokerConfig
    from minibroker.broker.log import Log
    from minibroker.broker.partition import Partition
    from minibroker.timer import Timer
    from minibroker.trace import Tracer


class RemoteLogHost(Protocol):
    """What the RemoteLogManager uses of its broker's ReplicaManager."""

    config: BrokerConfig
    timer: Timer
    tracer: Tracer
    partitions: dict[TopicPartition, Partition]
    topic_overrides: Callable[[str], dict[str, str]]

    def now(self) -> int: ...

    def emit(self, kind: str, **fields: Any) -> None: ...


class RemoteTask(TimerTask):
    """A copy, a read or a check on the broker's timer; traces name it by ``op_id``."""

    __slots__ = ("op_id",)

    def __init__(self, op_id: str, delay_ms: int, action: Callable[[], Any]) -> None:
        super().__init__(delay_ms, action)
        self.op_id = op_id


@attrs.frozen(slots=True)
class RemoteLogReadResult:
    """A remote read's outcome: batches, or an error (Kafka's ``RemoteLogReadResult``)."""

    batches: tuple[RecordBatch, ...] = ()
    error: Errors = Errors.NONE


@attrs.frozen(slots=True)
class RemoteOffsetResult:
    """A remote offset lookup's outcome: (timestamp, offset, its batch's leader epoch), None, or an error."""

    found: tuple[int, int, int] | None = None
    error: Errors = Errors.NONE


class RemoteLogManager:
    """Copy tasks per led partition, the local retention check, and remote reads, on the broker's timer."""

    def __init__(self, manager: RemoteLogHost, storage: RemoteStorageManager) -> None:
        self.manager = manager
        self.storage = storage
        self.copy_tasks: dict[TopicPartition, TimerTask] = {}
        self.retention_task: TimerTask | None = None
        #: remote reads and offset lookups started and not yet done
        self.reads_in_flight = 0

    # ---- switches ------------------------------------------------------------------------------------------
    @property
    def system_enabled(self) -> bool:
        return self.manager.config.remote_log_storage_system_enable

    def enabled_for(self, tp: TopicPartition) -> bool:
        """Tiered storage applies to ``tp``: the broker's switch and the topic's ``remote.storage.enable``."""
        return self.system_enabled and remote_storage_enabled(self.manager.topic_overrides(tp.topic))

    def _latency(self, base: int) -> int:
        config = self.manager.config
        return base + (config.remote_storage_slow_ms if config.remote_storage_fault == "slow" else 0)

    def _failing(self) -> bool:
        return self.manager.config.remote_storage_fault == "failing"

    def _schedule(self, label: str, delay_ms: int, action: Callable[[], Any]) -> TimerTask:
        task = RemoteTask(label, delay_ms, action)
        self.manager.timer.add(task)
        return task

    # ---- lifecycle -----------------------------------------------------------------------------------------
    def start(self) -> None:
        """Arm the local retention check (when the broker enables tiered storage)."""
        if self.system_enabled and self.retention_task is None:
            self.retention_task = self._schedule(
                "local-retention", self.manager.config.log_retention_check_interval_ms, self._retention_round
            )

    def on_leadership(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        """Start the copy task of a partition led here; stop it when leadership goes."""
        task = self.copy_tasks.pop(tp, None)
        if task is not None:
            task.cancel()
        if leader and self.enabled_for(tp):
            self.copy_tasks[tp] = self._schedule(f"remote-copy {tp}", 0, lambda: self._copy_round(tp, epoch))

    def on_topic_config(self, tp: TopicPartition) -> None:
        """The topic's configs changed: a partition led here starts (or stops) its copy task."""
        partition = self.manager.partitions.get(tp)
        leading = partition is not None and partition.is_leader and self.enabled_for(tp)
        if leading != (tp in self.copy_tasks):
            self.on_leadership(tp, leading, partition.leader_epoch if partition is not None else -1)

    # ---- copying -------------------------------------------------------------------------------------------
    def _leading(self, tp: TopicPartition, epoch: int) -> Log | None:
        partition = self.manager.partitions.get(tp)
        if partition is None or not partition.is_leader or partition.leader_epoch != epoch:
            return None
        return partition.log

    def _next_segment(self, tp: TopicPartition, log: Log) -> tuple[RecordBatch, ...] | None:
        """The batches of the next closed segment to copy (those past the tier's end), wholly below the
        LSO; None if there is none."""
        start = self.storage.highest_offset(tp) + 1
        lso = log.last_stable_offset
        for segment, following in zip(log.segments, log.segments[1:], strict=False):
            if following.base_offset > lso:
                return None
            # from the first batch past the tier's end: a new leader's segments may not line up with
            # the ones its predecessor copied (the batches do: every replica holds the same)
            batches = tuple(batch for batch in segment.batches if batch.base_offset >= start)
            if batches:
                return batches
        return None

    def _copy_round(self, tp: TopicPartition, epoch: int) -> None:
        log = self._leading(tp, epoch)
        if log is None:
            self.copy_tasks.pop(tp, None)
            return
        batches = self._next_segment(tp, log)
        if batches is None:
            self._next_round(tp, epoch)
            return
        latency = self._latency(self.manager.config.remote_storage_copy_latency_ms)
        failing = self._failing()
        self.copy_tasks[tp] = self._schedule(
            f"remote-copy {tp}", latency, lambda: self._copied(tp, epoch, batches, failing)
        )

    def _next_round(self, tp: TopicPartition, epoch: int) -> None:
        interval = self.manager.config.remote_log_manager_task_interval_ms
        self.copy_tasks[tp] = self._schedule(
            f"remote-copy {tp}", interval, lambda: self._copy_round(tp, epoch)
        )

    def _copied(self, tp: TopicPartition, epoch: int, batches: tuple[RecordBatch, ...], failed: bool) -> None:
        log = self._leading(tp, epoch)
        if log is None:
            self.copy_tasks.pop(tp, None)
            return
        manager = self.manager
        if failed or self.storage.highest_offset(tp) + 1 != batches[0].base_offset:
            if manager.tracer.enabled:
                manager.emit("remote.copy.failed", partition=str(tp), offset=batches[0].base_offset)
            self._next_round(tp, epoch)
            return
        segment = self.storage.copy_log_segment(tp, batches)
        log.highest_offset_in_remote_storage = segment.end_offset
        if manager.tracer.enabled:
            manager.emit(
                "remote.copy",
                partition=str(tp),
                start=segment.start_offset,
                end=segment.end_offset,
                bytes=segment.size,
            )
        self._copy_round(tp, epoch)

    # ---- local retention -----------------------------------------------------------------------------------
    def _retention_round(self) -> None:
        self.retention_task = self._schedule(
            "local-retention", self.manager.config.log_retention_check_interval_ms, self._retention_round
        )
        for tp, partition in self.manager.partitions.items():
            if self.enabled_for(tp):
                self.delete_local_segments(tp, partition.log)

    def delete_local_segments(self, tp: TopicPartition, log: Log) -> int:
        """Apply local retention to ``log`` (segments already copied only); return how many went."""
        highest = self.storage.highest_offset(tp)
        log.highest_offset_in_remote_storage = highest
        retention_ms, retention_bytes = local_retention(self.manager.topic_overrides(tp.topic))
        now = self.manager.now()
        deleted = 0
        while len(log.segments) > 1:
            segment = log.segments[0]
            if not segment.batches or log.segments[1].base_offset - 1 > highest:
                break
            total = sum(s.size for s in log.segments)
            by_size = retention_bytes >= 0 and total - segment.size >= retention_bytes
            newest = max(batch.append_time_ms for batch in segment.batches)
            by_time = retention_ms >= 0 and now - newest > retention_ms
            if not (by_size or by_time):
                break
            log.delete_local_segment()
            deleted += 1
            if self.manager.tracer.enabled:
                self.manager.emit(
                    "local_log_start",
                    partition=str(tp),
                    offset=log.local_log_start_offset,
                    log_start=log.log_start_offset,
                    cause="size" if by_size else "time",
                )
        return deleted

    # ---- reads (RemoteLogReader) ---------------------------------------------------------------------------
    def _read_task(self, label: str, read: Callable[[bool], Any]) -> None:
        """Run ``read(failing)`` after the read latency; ``failing`` is the fault when the read started."""
        failing = self._failing()
        self.reads_in_flight += 1

        def done() -> None:
            self.reads_in_flight -= 1
            read(failing)

        self._schedule(label, self._latency(self.manager.config.remote_storage_read_latency_ms), done)

    def async_read(
        self, tp: TopicPartition, offset: int, max_bytes: int, on_done: Callable[[RemoteLogReadResult], None]
    ) -> None:
        """Read the remote segment holding ``offset``; ``on_done`` gets the result after the read latency."""

        def read(failing: bool) -> None:
            segment = None if failing else self.storage.segment_for(tp, offset)
            if failing:
                result = RemoteLogReadResult(error=Errors.UNKNOWN_SERVER_ERROR)
            elif segment is None:
                result = RemoteLogReadResult(error=Errors.OFFSET_OUT_OF_RANGE)
            else:
                result = RemoteLogReadResult(self.storage.fetch_log_segment(segment, offset, max_bytes))
            if self.manager.tracer.enabled:
                records = sum(batch.count for batch in result.batches)
                self.manager.emit(
                    "remote.read", partition=str(tp), offset=offset, records=records, error=result.error.name
                )
            on_done(result)

        self._read_task(f"remote-read {tp}", read)

    def async_offset_read(
        self,
        tp: TopicPartition,
        target_ms: int,
        log: Log,
        search_local: Callable[[], tuple[int, int, int] | None],
        on_done: Callable[[RemoteOffsetResult], None],
    ) -> None:
        """Kafka's ``asyncOffsetRead``: the first offset stamped ``target_ms`` or later, remote tier first
        (from the log start offset), then the local log; ``on_done`` gets it after the read latency."""

        def read(failing: bool) -> None:
            if failing:
                result = RemoteOffsetResult(error=Errors.UNKNOWN_SERVER_ERROR)
            else:
                found = self.storage.find_offset_by_timestamp(tp, target_ms, log.log_start_offset)
                result = RemoteOffsetResult(found if found is not None else search_local())
            if self.manager.tracer.enabled:
                offset = result.found[1] if result.found else -1
                self.manager.emit(
                    "remote.offset_read",
                    partition=str(tp),
                    timestamp=target_ms,
                    offset=offset,
                    error=result.error.name,
                )
            on_done(result)

        self._read_task(f"remote-offset-read {tp}", read)
