"""Idempotent producers: one partition replica's producer state (Kafka's ProducerStateManager).

Every batch an idempotent producer writes carries its producer id, epoch and the
sequence number of its first record. Per producer id a replica keeps the epoch
and the sequence ranges and offsets of the last ``BATCHES_TO_RETAIN`` (5) batches,
which is what lets the leader answer a retried batch with its original offsets
instead of appending it twice.

The leader checks each batch of a Produce before appending (``check``), in
Kafka's order:

- a batch whose epoch and first/last sequence equal a retained batch of the
  same producer is a duplicate: nothing is appended and the answer is that
  batch's first offset (Kafka's ``findDuplicateBatch``);
- an epoch below the producer's current one: INVALID_PRODUCER_EPOCH (Kafka has
  sent this, not PRODUCER_FENCED, on every Produce version since 2.7, KIP-588);
- a new epoch must start at sequence 0, unless the producer is unknown here
  (Kafka 2.5+ accepts an unknown producer at any sequence, KIP-360);
- the same epoch must continue at last sequence + 1 (wrapping after 2^31 - 1);
  anything else is OUT_OF_ORDER_SEQUENCE_NUMBER.

Every replica, leader or follower, records the batches it appends (``record``),
so a follower that becomes leader already knows the producers' last batches and
deduplication survives a failover. A truncated log rebuilds its state from the
batches it still holds (Kafka reloads from a snapshot and the log; we keep no
snapshots, the log is in memory). Producer ids never expire here
(``producer.id.expiration.ms`` is not modelled).

Transactions (KIP-98): a transactional batch opens its producer's transaction on
this partition at its first offset (``ongoing``) unless one is open already; a
transaction marker (a control batch the transaction coordinator has the leader
append, ``ABORT_MARKER`` or ``COMMIT_MARKER``) closes it, and an aborted one goes to
the aborted-transaction index (``aborted``: producer id, first offset, last offset =
the marker's offset; Kafka's ``TransactionIndex``). The first offset of the earliest
open transaction bounds the last stable offset (``first_unstable_offset``). Markers
and a group coordinator's transactional batch of TxnOffsetCommit offsets (sequence
``NO_SEQUENCE``) skip the sequence checks (Kafka's ``AppendOrigin.COORDINATOR``) but not the epoch one:
a marker older than the producer's epoch is INVALID_PRODUCER_EPOCH. Each producer keeps
the coordinator epoch of the last marker written for it (Kafka's
``ProducerStateEntry.coordinatorEpoch``); a marker from an older coordinator epoch, a
coordinator that lost its ``__transaction_state`` partition and does not know it yet, is
TRANSACTION_COORDINATOR_FENCED (``ProducerAppendInfo.checkCoordinatorEpoch``).

Partition verification (KIP-890): ``has_ongoing`` tells the leader whether a producer's
transaction is known to be open here at that epoch (then no verification is needed);
``verifying`` holds the entry of a verification in flight (Kafka's ``VerificationStateEntry``),
which the producer's next transactional batch or marker appended here clears: a batch verified
before a marker must not open a transaction after it. The entry keeps the lowest sequence (at the
highest epoch) verified meanwhile; while it is there, a batch starting above that sequence is
OUT_OF_ORDER_SEQUENCE_NUMBER (``ProducerAppendInfo.checkSequence``): of two sends verified at once,
the later one may not open the transaction before the earlier one.

Invariant: ``entries[pid].batches`` holds at most ``BATCHES_TO_RETAIN`` batches of
the entry's epoch, in append order; ``ongoing[pid]`` is an offset of this log at or
above every aborted transaction's first offset that ``pid`` had before it.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable

import attrs

from minibroker.common.errors import Errors
from minibroker.common.record_batch import ABORT_MARKER, ProducerBatch

#: Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN
BATCHES_TO_RETAIN = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: the sequence of a batch the coordinator writes for a producer (Kafka's RecordBatch.NO_SEQUENCE)
NO_SEQUENCE = -1
_MAX_SEQUENCE = 2**31 - 1


def last_sequence(first: int, last_offset_delta: int) -> int:
    """The sequence of a batch's last record; sequences wrap from 2^31 - 1 to 0 (Kafka's rule)."""
    if first > _MAX_SEQUENCE - last_offset_delta:
        return last_offset_delta - (_MAX_SEQUENCE - first) - 1
    return first + last_offset_delta


@attrs.frozen(slots=True)
class BatchMetadata:
    """A retained batch: its sequence range and where it was written."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@attrs.define(slots=True)
class ProducerEntry:
    epoch: int
    #: the coordinator epoch of the last marker written for this producer, -1 before any
    coordinator_epoch: int = -1
    batches: collections.deque[BatchMetadata] = attrs.Factory(
        lambda: collections.deque(maxlen=BATCHES_TO_RETAIN)
    )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, batch: ProducerBatch) -> BatchMetadata | None:
        if batch.epoch != self.epoch:
            return None
        for kept in self.batches:
            if kept.first_seq == batch.first_seq and kept.last_seq == batch.last_seq:
                return kept
        return None


@attrs.frozen(slots=True)
class AbortedTxn:
    """An aborted transaction on this partition: Kafka's ``AbortedTxn`` of the transaction index."""

    producer_id: int
    first_offset: int
    last_offset: int


@attrs.define(slots=True, eq=False)
class VerificationStateEntry:
    """A verification in flight for one producer (Kafka's ``VerificationStateEntry``); its identity is
    the guard a verified batch must still find when it is appended."""

    lowest_sequence: int
    epoch: int

    def update(self, sequence: int, epoch: int) -> None:
        """Kafka's ``maybeUpdateLowestSequenceAndEpoch``: a higher epoch starts over, the same one keeps
        the lowest sequence."""
        if epoch > self.epoch:
            self.lowest_sequence, self.epoch = sequence, epoch
        elif epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence


class ProducerStateError(Exception):
    """A batch the leader must refuse; ``error`` is what the producer is told."""

    def __init__(self, error: Errors, reason: str) -> None:
        super().__init__(reason)
        self.error = error


class ProducerStateManager:
    """Producer id -> its epoch and last five batches, for one replica of one partition."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}
        #: producer id -> first offset of its open transaction here
        self.ongoing: dict[int, int] = {}
        #: the aborted-transaction index, by marker offset
        self.aborted: list[AbortedTxn] = []
        #: producer id -> its partition verification in flight (KIP-890)
        self.verifying: dict[int, VerificationStateEntry] = {}

    def __len__(self) -> int:
        return len(self.entries)

    def check(self, batches: Iterable[ProducerBatch]) -> BatchMetadata | None:
        """Validate a Produce's batches before the leader appends them.

        Returns the retained batch when one of them is a duplicate (the caller answers with
        its offsets and appends nothing); raises ``ProducerStateError`` for a stale epoch or a
        sequence gap; returns None when every batch may be appended.
        """
        expected: dict[int, tuple[int, int]] = {}  # pid -> (epoch, last seq) after earlier batches here
        for batch in batches:
            entry = self.entries.get(batch.producer_id)
            if batch.control >= 0 or batch.first_seq == NO_SEQUENCE:
                self._check_coordinator_origin(batch, entry)
                continue
            if batch.producer_id not in expected:
                if entry is not None:
                    duplicate = entry.find_duplicate(batch)
                    if duplicate is not None:
                        return duplicate
                verification = self.verifying.get(batch.producer_id)
                if verification is not None and batch.first_seq > verification.lowest_sequence:
                    raise ProducerStateError(
                        Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                        f"producer {batch.producer_id} sends sequence {batch.first_seq} while sequence "
                        f"{verification.lowest_sequence} is being verified",
                    )
            epoch, last = expected.get(
                batch.producer_id,
                (entry.epoch, entry.last_seq) if entry is not None else (NO_PRODUCER_EPOCH, -1),
            )
            self._check_one(batch, epoch, last)
            expected[batch.producer_id] = (batch.epoch, batch.last_seq)
        return None

    @staticmethod
    def _check_coordinator_origin(batch: ProducerBatch, entry: ProducerEntry | None) -> None:
        """A marker, or a coordinator's transactional batch without a sequence (TxnOffsetCommit's
        offsets): Kafka's ``AppendOrigin.COORDINATOR`` checks the epoch and a marker's coordinator epoch."""
        if entry is None:
            return
        what = "a marker for producer" if batch.control >= 0 else "a coordinator's batch for producer"
        if batch.epoch < entry.epoch:
            raise ProducerStateError(
                Errors.INVALID_PRODUCER_EPOCH,
                f"{what} {batch.producer_id} has epoch {batch.epoch}, older than its epoch {entry.epoch}",
            )
        if batch.control >= 0 and batch.coordinator_epoch < entry.coordinator_epoch:
            raise ProducerStateError(
                Errors.TRANSACTION_COORDINATOR_FENCED,
                f"{what} {batch.producer_id} comes from coordinator epoch {batch.coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}",
            )

    @staticmethod
    def _check_one(batch: ProducerBatch, epoch: int, last: int) -> None:
        pid = batch.producer_id
        if batch.epoch < epoch:
            raise ProducerStateError(
                Errors.INVALID_PRODUCER_EPOCH,
                f"producer {pid} writes with epoch {batch.epoch}, older than its epoch {epoch}",
            )
        if batch.epoch != epoch:
            if batch.first_seq != 0 and epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid}'s new epoch {batch.epoch} starts at sequence {batch.first_seq}, not 0",
                )
            return
        in_sequence = batch.first_seq == last + 1 or (batch.first_seq == 0 and last == _MAX_SEQUENCE)
        if not in_sequence:
            raise ProducerStateError(
                Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid} epoch {epoch} sends sequence {batch.first_seq} after {last}",
            )

    def record(self, base_offset: int, batches: Iterable[ProducerBatch]) -> None:
        """Remember batches appended at ``base_offset`` (leader or follower; no checks)."""
        entries, ongoing = self.entries, self.ongoing
        for batch in batches:
            pid = batch.producer_id
            entry = entries.get(pid)
            if entry is None:
                entry = entries[pid] = ProducerEntry(batch.epoch)
            elif batch.epoch != entry.epoch:
                if batch.epoch < entry.epoch:
                    continue  # a replicated stale batch (Kafka only warns): keep the newer epoch
                entry.epoch = batch.epoch
                entry.batches.clear()
            if batch.control >= 0:
                entry.coordinator_epoch = max(entry.coordinator_epoch, batch.coordinator_epoch)
                self.verifying.pop(pid, None)
                first = self.ongoing.pop(pid, None)
                if first is not None and batch.control == ABORT_MARKER:
                    self.aborted.append(AbortedTxn(pid, first, base_offset + batch.first_delta))
                continue
            first_offset = base_offset + batch.first_delta
            if batch.transactional:
                self.verifying.pop(pid, None)  # the transaction is open here now
                if pid not in ongoing:
                    ongoing[pid] = first_offset
            entry.batches.append(
                BatchMetadata(batch.first_seq, batch.last_seq, first_offset, base_offset + batch.last_delta)
            )

    def rebuild(self, appended: Iterable[tuple[int, Iterable[ProducerBatch]]]) -> None:
        """Forget everything and replay (base offset, batches) pairs, e.g. after a truncation."""
        self.entries.clear()
        self.ongoing.clear()
        self.aborted.clear()
        self.verifying.clear()
        for base_offset, batches in appended:
            self.record(base_offset, batches)

    def start_verification(self, producer_id: int, sequence: int, epoch: int) -> VerificationStateEntry:
        """The producer's verification entry, created or updated with ``sequence`` at ``epoch``
        (Kafka's ``maybeCreateVerificationStateEntry``): verifications asked meanwhile share it."""
        verification = self.verifying.get(producer_id)
        if verification is None:
            verification = self.verifying[producer_id] = VerificationStateEntry(sequence, epoch)
        else:
            verification.update(sequence, epoch)
        return verification

    def has_ongoing(self, producer_id: int, epoch: int) -> bool:
        """Whether ``producer_id`` at ``epoch`` has a transaction open here (Kafka's
        ``hasOngoingTransaction``): its next transactional batch needs no verification."""
        entry = self.entries.get(producer_id)
        return producer_id in self.ongoing and entry is not None and entry.epoch == epoch

    def last_batch(self, producer_id: int) -> BatchMetadata | None:
        entry = self.entries.get(producer_id)
        return entry.batches[-1] if entry is not None and entry.batches else None

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction here (None when none is open)."""
        return min(self.ongoing.values()) if self.ongoing else None

    def aborted_between(self, start: int, end: int) -> list[AbortedTxn]:
        """Aborted transactions a read of ``[start, end)`` overlaps (Kafka's ``collectAbortedTxns``)."""
        return [t for t in self.aborted if t.last_offset >= start and t.first_offset < end]
