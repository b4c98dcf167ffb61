"""DataDir: a cluster kept in a directory, so that it survives the death of its process.

Layout (``serve --data-dir DIR``)::

    DIR/cluster.json                       the controller's metadata (cluster_metadata)
    DIR/broker-<id>/replication-offset-checkpoint   high watermarks
    DIR/broker-<id>/log-start-offset-checkpoint     log start offsets moved by DeleteRecords
    DIR/broker-<id>/<topic>-<partition>/   one replica's log (file_log): segments, indexes,
                                           leader-epoch-checkpoint
    DIR/broker-<id>/wheel/                 the file wheel's files ([delay_wheel], its own format)

``open`` checks the directory (missing: made; a regular file, unreadable, or holding
files minibroker did not write: ``StorageError``, one line). The cluster calls ``load``
before its brokers start (restoring the stored topics and partition states, recovering
every log) and ``started`` after (telling each broker its partitions, and running the
log flusher and the high watermark checkpoints until the cluster stops, when every log is
flushed and checkpointed).

A cluster restored from a data dir keeps its broker count: a different count is refused
(``check``). Topics are kept; a topic asked for again with the same partitions and
replication factor is the stored one, with a different layout it is refused.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

import trio

from minibroker.broker.config import BrokerConfig
from minibroker.broker.topic_configs import INT64_MAX
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC, TransactionMetadata
from minibroker.sim.cluster import Cluster
from minibroker.sim.storage import cluster_metadata
from minibroker.sim.storage.file_log import Note
from minibroker.sim.storage.log_manager import LogManager

_BROKER_DIR = re.compile(r"broker-\d+")
#: producer ids are handed out in blocks of this many; a block is stored before its first id is used
PRODUCER_ID_BLOCK = 1000
FIRST_PRODUCER_ID = 1000
#: how often the flusher looks for logs due a ``flush.ms`` flush, in ms
FLUSH_CHECK_MS = 100


class StorageError(Exception):
    """A data dir that cannot be used: one line naming it and why."""


def _stderr_note(line: str) -> None:
    print(f"minibroker serve: {line}", file=sys.stderr, flush=True)


class DataDir:
    """A cluster's files under ``path``; see the module docstring."""

    def __init__(self, path: str, stored: dict[str, Any] | None, note: Note = _stderr_note) -> None:
        self.path = path
        self.stored = stored
        self.note = note
        self.cluster: Cluster | None = None
        self.managers: dict[int, LogManager] = {}
        self.next_producer_id = int(stored["next_producer_id"]) if stored else FIRST_PRODUCER_ID
        self._producer_ids: ProducerIdBlocks | None = None

    # --- opening ---------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str, note: Note = _stderr_note) -> DataDir:
        """Check ``path`` (made if missing) and read its metadata; ``StorageError`` says why not."""
        if os.path.exists(path) and not os.path.isdir(path):
            raise StorageError(f"--data-dir {path!r} is a file; expected a directory")
        try:
            os.makedirs(path, exist_ok=True)
            names = os.listdir(path)
        except OSError as error:
            raise StorageError(f"--data-dir {path!r}: {error.strerror or error}") from None
        if not os.access(path, os.R_OK | os.W_OK | os.X_OK):
            raise StorageError(f"--data-dir {path!r}: not readable and writable")
        strangers = sorted(
            n
            for n in names
            if n not in (cluster_metadata.FILE, cluster_metadata.FILE + ".tmp")
            and not (_BROKER_DIR.fullmatch(n) and os.path.isdir(os.path.join(path, n)))
        )
        if strangers:
            raise StorageError(
                f"--data-dir {path!r} holds {', '.join(strangers[:3])}{', ...' if len(strangers) > 3 else ''}"
                f": expected an empty directory or one written by minibroker serve --data-dir"
            )
        try:
            stored = cluster_metadata.read(os.path.join(path, cluster_metadata.FILE))
        except cluster_metadata.MetadataError as error:
            raise StorageError(f"--data-dir: {error}") from None
        return cls(path, stored, note)

    def check(self, brokers: int, topics: Iterable[tuple[str, int, int]]) -> None:
        """Refuse (``StorageError``) a broker count or topic layout other than the stored one."""
        if self.stored is None:
            return
        if brokers != self.stored["brokers"]:
            raise StorageError(
                f"--data-dir {self.path!r} holds a cluster of {self.stored['brokers']} brokers, not "
                f"{brokers}: start it with {self.stored['brokers']} brokers or use another directory"
            )
        stored = cluster_metadata.layouts(self.stored)
        for name, partitions, rf in topics:
            have = stored.get(name)
            if have is not None and have != (partitions, rf):
                raise StorageError(
                    f"--data-dir {self.path!r} holds topic {name!r} with {have[0]} partitions and "
                    f"replication factor {have[1]}, not {partitions} and {rf}"
                )

    # --- the cluster's life ------------------------------------------------------------------------
    def load(self, cluster: Cluster) -> None:
        """Before the brokers start: restore the stored metadata, recover every broker's logs."""
        self.cluster = cluster
        origin_ms = round(time.time() * 1000) - cluster.now()  # as the wire server dates records
        if self.stored is not None:
            cluster_metadata.restore(cluster, self.stored)
            self._restore_offsets_topic(cluster)
        for broker in cluster.brokers:
            manager = LogManager(
                os.path.join(self.path, f"broker-{broker.broker_id}"),
                cluster.now,
                lambda topic, config=broker.config: self._flush_settings(topic, config),
                self.note,
                origin_ms,
            )
            manager.load(cluster.known, broker.config.log_segment_bytes)
            broker.logs = manager
            self.managers[broker.broker_id] = manager
        self.next_producer_id = max(self.next_producer_id, self._highest_producer_id() + 1)
        for broker in cluster.brokers:
            broker.producer_ids = self.producer_ids  # the transaction coordinators' ids come from the blocks
            broker.clock_origin_ms = origin_ms  # __transaction_state's times are wall-clock times
        cluster.controller.on_change = self.save
        cluster.on_metadata_change = self.save
        self.save()

    def _highest_producer_id(self) -> int:
        """The highest producer id the logs know: their producers, and the producer ids (current and
        previous) of every transactional id in ``__transaction_state``, even one that never wrote."""
        highest = FIRST_PRODUCER_ID - 1
        for manager in self.managers.values():
            for tp, log in manager.items():
                highest = max(highest, *log.producer_state.entries, FIRST_PRODUCER_ID - 1)
                if tp.topic != TRANSACTION_STATE_TOPIC:
                    continue
                for value in (v for batch in log.batches() for v in batch.values or ()):
                    try:
                        meta = TransactionMetadata.from_record(value)
                    except (ValueError, KeyError, TypeError, AttributeError):
                        continue
                    if isinstance(meta, TransactionMetadata):
                        highest = max(highest, meta.producer_id, meta.last_producer_id)
        return highest

    def _restore_offsets_topic(self, cluster: Cluster) -> None:
        spec = cluster.topics.get(OFFSETS_TOPIC)
        if spec is not None:
            for broker in cluster.brokers:
                broker.offsets_partitions = lambda n=spec.partitions: n

    async def started(self, cluster: Cluster, nursery: trio.Nursery) -> None:
        """After the brokers start: each learns its restored partitions; the flusher runs."""
        for tp, state in list(cluster.controller.state.items()):
            for broker in sorted(state.replicas, key=lambda b: b != state.leader):
                if cluster.is_alive(broker):
                    cluster.controller.apply_direct(broker, state)
            cluster.controller.elect_if_offline(tp)  # stored while its replicas were down: they are up now
        await nursery.start(self._flusher, cluster)

    async def _flusher(self, cluster: Cluster, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        interval = cluster.brokers[0].config.replica_high_watermark_checkpoint_interval_ms
        last = cluster.now()
        task_status.started()
        try:
            while True:
                await trio.sleep(FLUSH_CHECK_MS / 1000)
                now = cluster.now()
                for manager in self.managers.values():
                    manager.flush_due(now)
                if now - last >= interval:
                    last = now
                    for manager in self.managers.values():
                        manager.write_high_watermarks()
        finally:
            self.close()

    def close(self) -> None:
        """A clean stop: every log flushed, every high watermark checkpointed, the metadata saved."""
        for manager in self.managers.values():
            manager.close()
        self.save()

    def save(self) -> None:
        if self.cluster is not None:
            cluster_metadata.write(
                os.path.join(self.path, cluster_metadata.FILE),
                cluster_metadata.snapshot(self.cluster, self._block_end()),
            )

    def _block_end(self) -> int:
        return self._producer_ids.block_end if self._producer_ids is not None else self.next_producer_id

    # --- producer ids ------------------------------------------------------------------------------
    @property
    def producer_ids(self) -> ProducerIdBlocks:
        """Producer ids for InitProducerId (the wire server's and every transaction coordinator's),
        never one handed out before this data dir's last stop."""
        if self._producer_ids is None:
            self._producer_ids = ProducerIdBlocks(self.next_producer_id, self.save)
        return self._producer_ids

    # --- settings ----------------------------------------------------------------------------------
    def _topic_setting(self, topic: str, name: str) -> str | None:
        assert self.cluster is not None
        return self.cluster.topic_overrides(topic).get(name)

    def _flush_settings(self, topic: str, config: BrokerConfig) -> tuple[int | None, int | None]:
        messages = int(self._topic_setting(topic, "flush.messages") or config.log_flush_interval_messages)
        ms = int(self._topic_setting(topic, "flush.ms") or config.log_flush_interval_ms)
        return (messages if messages < INT64_MAX else None, ms if ms < INT64_MAX else None)


class ProducerIdBlocks:
    """Producer ids in blocks (Kafka's ``ProducerIdsBlock``); a block is saved before its first id is used."""

    def __init__(self, first: int, save: Callable[[], None]) -> None:
        self.next = first
        self.block_end = first
        self.save = save

    def __iter__(self) -> ProducerIdBlocks:
        return self

    def __next__(self) -> int:
        if self.next >= self.block_end:
            self.block_end = self.next + PRODUCER_ID_BLOCK
            self.save()
        producer_id = self.next
        self.next += 1
        return producer_id
