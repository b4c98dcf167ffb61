"""One partition replica's log in files: ``FileLogStore`` writes it, ``load_log`` recovers it.

A partition's directory (``<topic>-<partition>``, as Kafka names it) holds its segments
(``segment_file``) and its ``leader-epoch-checkpoint``. Writes follow the in-memory ``Log``
through its ``LogStore`` hooks:

- an appended batch is one ``write`` to the active segment's ``.log`` (then its index entry):
  from then on it is in the OS page cache and survives the process's death (SIGKILL);
  it reaches the disk when the OS writes it back, or at once with ``flush.messages`` /
  ``flush.ms`` (an fsync after that many messages, or that long after the first unflushed
  one), as Kafka's ``UnifiedLog.flush``;
- a segment rolls where the in-memory log rolls (``segment.bytes``); truncation cuts the
  files at the same batch; segments wholly below a new log start offset are deleted;
- the leader epoch cache is rewritten (temporary file and rename) whenever it changes;
- a producer state snapshot (``producer_snapshot``) is written when a segment rolls.

``load_log`` is Kafka's ``LogLoader`` recovery, run on every segment (the process may have
died at any byte): each segment is read while its batches are whole, CRC-valid and follow
one another; at the first that is not, the segment is truncated there and later segments
are deleted, each with a one-line note. Indexes are checked and rebuilt when missing or
wrong; the epoch cache is the checkpoint's entries below the recovered log end plus the
epochs the batches themselves carry; producer state is the newest snapshot with the batches
after it replayed (or, without one, every batch replayed), as Kafka's ``ProducerStateManager``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable

from minibroker.broker.log import Log, RecordBatch, Segment
from minibroker.broker.producer_state import ProducerStateManager
from minibroker.sim.storage import segment_file
from minibroker.sim.storage.checkpoints import CheckpointError, read_epochs, write_epochs
from minibroker.sim.storage.producer_snapshot import (
    delete_snapshots_after,
    read_snapshot,
    snapshot_offsets,
    write_snapshot,
)

EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

Note = Callable[[str], None]


class FileLogStore:
    """Writes one ``Log``'s changes to its directory; ``flush`` fsyncs what is not yet on disk."""

    def __init__(
        self,
        directory: str,
        clock: Callable[[], int],
        flush_messages: int | None = None,
        flush_ms: int | None = None,
        origin_ms: int = 0,
    ) -> None:
        self.directory = directory
        #: the wall-clock time (ms since the Unix epoch) of the log's time 0: append times are stored
        #: as wall-clock times, so they keep their meaning in the next process, whose clock starts at 0
        self.origin_ms = origin_ms
        self.clock = clock
        self.flush_messages = flush_messages
        self.flush_ms = flush_ms
        self.unflushed = 0
        self.unflushed_since: int | None = None
        self.flushes = 0
        #: called after segments below a new log start offset are deleted (the broker's checkpoint)
        self.on_start_moved: Callable[[], None] = lambda: None
        #: the leader epoch cache as last checkpointed
        self.epochs_written: list[tuple[int, int]] | None = None
        self._base = -1
        self._log_fd = -1
        self._index_fd = -1
        self._position = 0

    # --- the active segment ------------------------------------------------------------------
    def open_segment(self, base_offset: int, position: int) -> None:
        """Append to segment ``base_offset`` from byte ``position`` on (its files are made if missing)."""
        self.close()
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        self._log_fd = os.open(os.path.join(self.directory, segment_file.log_name(base_offset)), flags, 0o644)
        self._index_fd = os.open(
            os.path.join(self.directory, segment_file.index_name(base_offset)), flags, 0o644
        )
        self._base = base_offset
        self._position = position

    def close(self) -> None:
        for fd in (self._log_fd, self._index_fd):
            if fd >= 0:
                os.close(fd)
        self._log_fd = self._index_fd = -1

    # --- LogStore ----------------------------------------------------------------------------
    def appended(self, log: Log, batch: RecordBatch) -> None:
        base = log.segments[-1].base_offset
        if base != self._base:
            if self.flush_messages is not None or self.flush_ms is not None:
                self.flush()  # Kafka flushes a rolled segment
            self.open_segment(base, 0)
            rolled = True
        else:
            rolled = False
        entry = segment_file.encode(batch, self.origin_ms)
        os.write(self._log_fd, entry)
        os.write(self._index_fd, segment_file.index_entry(batch.base_offset, base, self._position))
        self._position += len(entry)
        self.unflushed += batch.count
        if self.unflushed_since is None:
            self.unflushed_since = self.clock()
        if self.flush_messages is not None and self.unflushed >= self.flush_messages:
            self.flush()
        if rolled:
            write_snapshot(self.directory, log.log_end_offset, log.producer_state)

    def truncated(self, log: Log) -> None:
        empty = log.log_end_offset == log.log_start_offset
        delete_snapshots_after(self.directory, -1 if empty else log.log_end_offset)
        keep = set(log.segment_bases)
        for base in self.segment_bases():
            if base not in keep:
                self.remove_segment(base)
        last = log.segments[-1]
        if last.base_offset not in self.segment_bases():
            self.open_segment(last.base_offset, 0)
            return
        index_path = os.path.join(self.directory, segment_file.index_name(last.base_offset))
        with open(index_path, "rb") as f:
            index = segment_file.read_index(f.read(), last.base_offset)
        kept = [(offset, position) for offset, position in index if offset < log.log_end_offset]
        cut = index[len(kept)][1] if len(kept) < len(index) else self._file_size(last.base_offset)
        os.truncate(os.path.join(self.directory, segment_file.log_name(last.base_offset)), cut)
        os.truncate(index_path, len(kept) * 8)
        self.open_segment(last.base_offset, cut)

    def start_offset_moved(self, log: Log) -> None:
        keep = set(log.segment_bases)
        self.on_start_moved()  # the checkpoint first: a death in between leaves the records hidden
        for base in self.segment_bases():
            if base not in keep:
                self.remove_segment(base)

    def epochs_changed(self, log: Log) -> None:
        if log.epochs != self.epochs_written:
            self.epochs_written = list(log.epochs)
            write_epochs(os.path.join(self.directory, EPOCH_CHECKPOINT), self.epochs_written, self.syncs)

    # --- flushing ----------------------------------------------------------------------------
    @property
    def syncs(self) -> bool:
        """Whether writes are fsynced (``flush.messages`` or ``flush.ms`` set)."""
        return self.flush_messages is not None or self.flush_ms is not None

    def flush_due(self, now_ms: int) -> bool:
        return (
            self.flush_ms is not None
            and self.unflushed_since is not None
            and now_ms - self.unflushed_since >= self.flush_ms
        )

    def flush(self) -> None:
        """fsync the active segment and its index (Kafka's ``LogSegment.flush``)."""
        if self._log_fd >= 0:
            os.fsync(self._log_fd)
            os.fsync(self._index_fd)
        self.unflushed = 0
        self.unflushed_since = None
        self.flushes += 1

    # --- files -------------------------------------------------------------------------------
    def segment_bases(self) -> list[int]:
        return sorted(
            int(name[:-4])
            for name in os.listdir(self.directory)
            if name.endswith(".log") and name[:-4].isdigit()
        )

    def _file_size(self, base: int) -> int:
        return os.path.getsize(os.path.join(self.directory, segment_file.log_name(base)))

    def remove_segment(self, base: int) -> None:
        if base == self._base:
            self.close()
            self._base = -1
        for name in (segment_file.log_name(base), segment_file.index_name(base)):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.directory, name))


def load_log(
    directory: str,
    segment_bytes: int,
    store: FileLogStore,
    *,
    log_start_offset: int = 0,
    high_watermark: int = 0,
    note: Note,
) -> Log:
    """Recover the log in ``directory`` (see the module docstring) and attach ``store`` to it."""
    log = Log(segment_bytes)
    where = os.path.basename(directory)
    segments: list[Segment] = []
    bases = store.segment_bases()
    expected: int | None = None
    for i, base in enumerate(bases):
        name = segment_file.log_name(base)
        if expected is not None and base != expected:
            note(f"{where}/{name}: starts at offset {base}, not at the log end {expected}; deleted")
            _remove_all(store, bases[i:], where, note, first_noted=True)
            break
        log_path = os.path.join(directory, name)
        with open(log_path, "rb") as f:
            data = f.read()
        scan = segment_file.read_entries(data, base, store.origin_ms)
        if scan.problem is not None:
            note(
                f"{where}/{name}: {scan.problem}; truncated to the last valid batch "
                f"(position {scan.valid_bytes}, {len(data) - scan.valid_bytes} bytes dropped)"
            )
            os.truncate(log_path, scan.valid_bytes)
        _check_index(directory, base, scan, where, note)
        if scan.batches or not segments:
            segment = Segment(base)
            for batch in scan.batches:
                segment.push(batch)
            segments.append(segment)
            expected = scan.batches[-1].next_offset if scan.batches else base
        else:
            store.remove_segment(base)  # rolled, then nothing written to it: nothing to keep
        if scan.problem is not None:
            _remove_all(store, bases[i + 1 :], where, note)
            break
    if not segments:
        segments = [Segment(0)]
        store.open_segment(0, 0)
    else:
        last = segments[-1]
        store.open_segment(last.base_offset, _size(directory, last.base_offset))
    log.segments = segments
    log.segment_bases = [s.base_offset for s in segments]
    log.log_end_offset = (
        segments[-1].batches[-1].next_offset if segments[-1].batches else segments[-1].base_offset
    )
    log.log_start_offset = min(max(log_start_offset, segments[0].base_offset), log.log_end_offset)
    log.high_watermark = max(log.log_start_offset, min(high_watermark, log.log_end_offset))
    batches = log.batches()
    log.producer_state = _producer_state(directory, batches, log.log_end_offset, where, note)
    log.epochs = _epochs(directory, batches, log.log_end_offset, where, note)
    store.epochs_written = list(log.epochs)
    log.store = store
    return log


def _remove_all(
    store: FileLogStore, bases: list[int], where: str, note: Note, first_noted: bool = False
) -> None:
    for i, base in enumerate(bases):
        if i or not first_noted:
            note(f"{where}/{segment_file.log_name(base)}: deleted (it follows a truncated segment)")
        store.remove_segment(base)


def _size(directory: str, base: int) -> int:
    return os.path.getsize(os.path.join(directory, segment_file.log_name(base)))


def _producer_state(
    directory: str, batches: list[RecordBatch], log_end: int, where: str, note: Note
) -> ProducerStateManager:
    """The newest usable snapshot at or below the log end, with the batches from its offset replayed."""
    for offset in reversed([o for o in snapshot_offsets(directory) if o <= log_end]):
        try:
            state = read_snapshot(directory, offset)
        except ValueError as error:
            note(f"{where}/{error}; ignored")
            continue
        for batch in batches:
            if batch.base_offset >= offset and batch.producers:
                state.record(batch.base_offset, batch.producers)
        return state
    state = ProducerStateManager()
    state.rebuild((b.base_offset, b.producers) for b in batches if b.producers)
    return state


def _check_index(directory: str, base: int, scan: segment_file.Scan, where: str, note: Note) -> None:
    path = os.path.join(directory, segment_file.index_name(base))
    wanted = b"".join(segment_file.index_entry(b.base_offset, base, p) for b, p in segment_file.entries(scan))
    try:
        with open(path, "rb") as f:
            have: bytes | None = f.read()
    except FileNotFoundError:
        have = None
    if have == wanted:
        return
    if have is None:
        note(f"{where}/{segment_file.index_name(base)}: missing; rebuilt from the segment")
    elif not (wanted.startswith(have) or have.startswith(wanted)):
        note(f"{where}/{segment_file.index_name(base)}: does not match the segment; rebuilt")
    # an index one write behind its segment (a death between the two writes), or ahead of a segment cut
    # at its last valid batch, is made to match quietly
    with open(path, "wb") as f:
        f.write(wanted)


def _epochs(
    directory: str, batches: list[RecordBatch], log_end: int, where: str, note: Note
) -> list[tuple[int, int]]:
    """The checkpoint's epochs that start at or below the log end, merged with the batches' own."""
    try:
        stored = read_epochs(os.path.join(directory, EPOCH_CHECKPOINT)) or []
    except CheckpointError as error:
        note(f"{where}: {error}; the leader epoch cache is rebuilt from the batches")
        stored = []
    starts: dict[int, int] = {}
    for epoch, start in stored:
        if start <= log_end:
            starts[epoch] = start
    for batch in batches:
        starts[batch.leader_epoch] = min(starts.get(batch.leader_epoch, batch.base_offset), batch.base_offset)
    merged: list[tuple[int, int]] = []
    for epoch, start in sorted(starts.items()):
        if merged and start < merged[-1][1]:
            continue  # an epoch cannot start before the one it follows
        merged.append((epoch, start))
    return merged
