"""LogManager: one broker's logs by partition, each with its files (Kafka's ``LogManager``).

It is the broker's ``logs`` mapping when the cluster has a data dir: a log the
ReplicaManager creates (``setdefault``) gets a fresh directory and a ``FileLogStore``; a
log it drops (``pop``: a deleted topic) loses its directory. ``load`` recovers every
partition directory of the broker's directory on start. Besides the partitions the
broker's directory holds its high watermarks (``replication-offset-checkpoint``, written
every ``replica.high.watermark.checkpoint.interval.ms`` and on a clean stop, as Kafka's
ReplicaManager does) and log start offsets (``log-start-offset-checkpoint``, written at
once when one moves, so records deleted by DeleteRecords stay deleted).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable

from minibroker.broker.log import Log
from minibroker.common.messages import TopicPartition
from minibroker.sim.storage.checkpoints import CheckpointError, read_offsets, write_offsets
from minibroker.sim.storage.file_log import FileLogStore, Note, load_log
from minibroker.sim.storage.producer_snapshot import write_snapshot

HW_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_CHECKPOINT = "log-start-offset-checkpoint"

#: (flush.messages, flush.ms) of a topic; None: leave it to the OS
FlushSettings = Callable[[str], tuple[int | None, int | None]]


def partition_dir_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


class LogManager(dict[TopicPartition, Log]):
    """A broker's logs, kept in ``directory``; a dict, so the broker uses it as its in-memory map."""

    def __init__(
        self, directory: str, clock: Callable[[], int], flush: FlushSettings, note: Note, origin_ms: int = 0
    ) -> None:
        super().__init__()
        self.origin_ms = origin_ms
        self.directory = directory
        self.clock = clock
        self.flush_settings = flush
        self.note = note
        os.makedirs(directory, exist_ok=True)

    def _store(self, tp: TopicPartition) -> FileLogStore:
        flush_messages, flush_ms = self.flush_settings(tp.topic)
        store = FileLogStore(
            os.path.join(self.directory, partition_dir_name(tp)),
            self.clock,
            flush_messages,
            flush_ms,
            self.origin_ms,
        )
        store.on_start_moved = self.write_log_start_offsets
        return store

    def load(self, known: Callable[[TopicPartition], bool], segment_bytes: int) -> None:
        """Recover every partition directory of a known partition; note and leave any other."""
        high_watermarks = self._read(HW_CHECKPOINT)
        log_starts = self._read(LOG_START_CHECKPOINT)
        where = os.path.basename(self.directory)
        for name in sorted(os.listdir(self.directory)):
            path = os.path.join(self.directory, name)
            if not os.path.isdir(path) or name == "wheel":
                continue
            tp = parse_partition_dir(name)
            if tp is None or not known(tp):
                self.note(f"{where}/{name}: not a partition of the stored cluster; left as it is")
                continue
            store = self._store(tp)
            self[tp] = load_log(
                path,
                segment_bytes,
                store,
                log_start_offset=log_starts.get(tp, 0),
                high_watermark=high_watermarks.get(tp, 0),
                note=lambda line, where=where: self.note(f"{where}/{line}"),
            )

    def _read(self, name: str) -> dict[TopicPartition, int]:
        try:
            return read_offsets(os.path.join(self.directory, name))
        except CheckpointError as error:
            self.note(f"{error}; ignored")
            return {}

    # --- the dict the ReplicaManager uses ------------------------------------------------------
    def setdefault(self, tp: TopicPartition, default: Log | None = None) -> Log:  # type: ignore[override]
        log = self.get(tp)
        if log is not None:
            return log
        assert default is not None and default.log_end_offset == 0, "a new log starts empty"
        path = os.path.join(self.directory, partition_dir_name(tp))
        shutil.rmtree(path, ignore_errors=True)  # files of an earlier topic of the same name
        os.makedirs(path)
        store = self._store(tp)
        store.open_segment(default.segments[-1].base_offset, 0)
        default.store = store
        self[tp] = default
        return default

    def pop(self, tp: TopicPartition, *default: Log | None) -> Log | None:  # type: ignore[override]
        log = super().pop(tp, *default)
        if isinstance(log, Log) and isinstance(log.store, FileLogStore):
            log.store.close()
            log.store = None
            shutil.rmtree(os.path.join(self.directory, partition_dir_name(tp)), ignore_errors=True)
        return log

    # --- checkpoints and flushes ---------------------------------------------------------------
    def stores(self) -> list[FileLogStore]:
        return [log.store for log in self.values() if isinstance(log.store, FileLogStore)]

    def write_high_watermarks(self, sync: bool = False) -> None:
        offsets = {tp: log.high_watermark for tp, log in self.items()}
        write_offsets(os.path.join(self.directory, HW_CHECKPOINT), offsets, sync)

    def write_log_start_offsets(self) -> None:
        offsets = {tp: log.log_start_offset for tp, log in self.items() if log.log_start_offset > 0}
        write_offsets(
            os.path.join(self.directory, LOG_START_CHECKPOINT), offsets, any(s.syncs for s in self.stores())
        )

    def flush_due(self, now_ms: int) -> None:
        """fsync every log whose oldest unflushed message is ``flush.ms`` old (Kafka's log flusher)."""
        for store in self.stores():
            if store.flush_due(now_ms):
                store.flush()

    def close(self) -> None:
        """A clean stop: snapshot producer state, flush every log, checkpoint the high watermarks."""
        for log in self.values():
            if isinstance(log.store, FileLogStore):
                write_snapshot(log.store.directory, log.log_end_offset, log.producer_state)
                log.store.flush()
                log.store.close()
        self.write_high_watermarks(sync=True)
