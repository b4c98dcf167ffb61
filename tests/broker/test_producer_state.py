"""Producer state: retries answered with their offsets, gaps and stale epochs refused, truncation rebuilds."""

from __future__ import annotations

import attrs
import pytest

from minibroker.broker.log import Log
from minibroker.broker.producer_state import (
    BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerBatch,
    ProducerStateError,
    ProducerStateManager,
    last_sequence,
)
from minibroker.common.errors import Errors
from minibroker.common.record_batch import ABORT_MARKER, COMMIT_MARKER


def batch(seq: int, records: int = 1, pid: int = 1000, epoch: int = 0) -> ProducerBatch:
    return ProducerBatch(pid, epoch, seq, last_sequence(seq, records - 1), 0, records - 1)


def append(log: Log, producer: ProducerBatch) -> int:
    """Append as the leader would after a clean check; return the base offset."""
    assert log.producer_state.check([producer]) is None
    records = producer.last_delta + 1
    return log.append_as_leader(records, 10 * records, 0, 0, producers=(producer,)).base_offset


def refusal(state: ProducerStateManager, producer: ProducerBatch) -> tuple[Errors, str]:
    with pytest.raises(ProducerStateError) as refused:
        state.check([producer])
    return refused.value.error, str(refused.value)


def test_a_retried_batch_is_answered_with_its_first_offset_among_the_last_five():
    log = Log()
    log.append_as_leader(3, 30, 0, 0)  # records of no producer first: offsets 0-2
    bases = [append(log, batch(seq, records=2)) for seq in range(0, 12, 2)]  # six batches of two
    assert bases == [3, 5, 7, 9, 11, 13]
    state = log.producer_state
    assert state.check([batch(2, records=2)]) == BatchMetadata(2, 3, 5, 6)
    assert state.check([batch(10, records=2)]) == BatchMetadata(10, 11, 13, 14)
    # the first batch fell out of the five retained: its retry is no duplicate, and out of sequence
    assert refusal(state, batch(0, records=2)) == (
        Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
        "producer 1000 epoch 0 sends sequence 0 after 11",
    )
    # the same first sequence with another length is not the same batch
    assert refusal(state, batch(10, records=1))[0] is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert len(state.entries[1000].batches) == BATCHES_TO_RETAIN


def test_a_gap_a_stale_epoch_and_a_new_epoch_not_at_zero_are_refused_as_kafka_refuses_them():
    log = Log()
    append(log, batch(0, epoch=3))
    state = log.producer_state
    assert refusal(state, batch(2, epoch=3)) == (
        Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
        "producer 1000 epoch 3 sends sequence 2 after 0",
    )
    assert refusal(state, batch(1, epoch=2)) == (
        Errors.INVALID_PRODUCER_EPOCH,
        "producer 1000 writes with epoch 2, older than its epoch 3",
    )
    assert refusal(state, batch(5, epoch=4)) == (
        Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
        "producer 1000's new epoch 4 starts at sequence 5, not 0",
    )
    assert state.check([batch(1, epoch=3)]) is None
    assert state.check([batch(0, epoch=4)]) is None
    # a producer this replica never saw is taken at any sequence (KIP-360)
    assert state.check([batch(77, pid=2000)]) is None
    # several batches in one produce: each continues the one before it
    assert state.check([batch(1, epoch=3), batch(2, epoch=3)]) is None
    with pytest.raises(ProducerStateError):
        state.check([batch(1, epoch=3), batch(3, epoch=3)])


def test_a_new_epoch_forgets_the_old_epochs_batches():
    log = Log()
    append(log, batch(0, epoch=0))
    append(log, batch(0, epoch=1))
    entry = log.producer_state.entries[1000]
    assert (entry.epoch, list(entry.batches)) == (1, [BatchMetadata(0, 0, 1, 1)])
    assert log.producer_state.check([batch(0, epoch=1)]) == BatchMetadata(0, 0, 1, 1)


def test_sequences_wrap_after_the_largest_int32():
    top = 2**31 - 1
    assert last_sequence(top - 1, 3) == 1
    log = Log()
    append(log, batch(top - 1, records=2))
    assert log.producer_state.entries[1000].last_seq == top
    assert log.producer_state.check([batch(0)]) is None
    assert refusal(log.producer_state, batch(1))[0] is Errors.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_follower_records_replicated_batches_and_a_truncation_rebuilds_the_state():
    leader, follower = Log(), Log()
    for seq in range(3):
        append(leader, batch(seq))
    for copied in leader.batches():
        follower.append(copied)  # what the fetcher does with the leader's batches
    assert follower.producer_state.check([batch(2)]) == BatchMetadata(2, 2, 2, 2)
    assert follower.truncate_to(2) == 1
    # the batch at offset 2 is gone: its retry is now the next batch in sequence, not a duplicate
    assert follower.producer_state.check([batch(2)]) is None
    assert follower.producer_state.check([batch(1)]) == BatchMetadata(1, 1, 1, 1)


def test_a_marker_from_an_older_coordinator_epoch_is_transaction_coordinator_fenced():
    state = ProducerStateManager()
    data = ProducerBatch(1000, 0, 0, 0, transactional=True)
    state.record(0, [data])
    state.record(1, [ProducerBatch(1000, 0, -1, -1, 0, 0, True, ABORT_MARKER, coordinator_epoch=4)])
    assert state.entries[1000].coordinator_epoch == 4
    stale = ProducerBatch(1000, 0, -1, -1, 0, 0, True, COMMIT_MARKER, coordinator_epoch=3)
    error, reason = refusal(state, stale)
    assert (error, reason) == (
        Errors.TRANSACTION_COORDINATOR_FENCED,
        "a marker for producer 1000 comes from coordinator epoch 3, older than 4",
    )
    # the same or a newer coordinator epoch passes
    assert state.check([attrs.evolve(stale, coordinator_epoch=4)]) is None


def test_while_a_verification_is_in_flight_a_batch_above_its_lowest_sequence_is_out_of_order():
    log = Log()
    state = log.producer_state
    txn = attrs.evolve(batch(5), transactional=True)
    entry = state.start_verification(1000, 5, 0)
    assert state.start_verification(1000, 0, 0) is entry  # verifications meanwhile share the entry
    assert state.start_verification(1000, 3, 0).lowest_sequence == 0  # the lowest one is kept
    assert refusal(state, txn) == (
        Errors.OUT_OF_ORDER_SEQUENCE_NUMBER,
        "producer 1000 sends sequence 5 while sequence 0 is being verified",
    )
    append(log, attrs.evolve(batch(0, records=5), transactional=True))
    assert state.verifying == {}  # the transaction is open here: its next batches are checked as usual
    append(log, txn)
    # a higher epoch starts the lowest sequence over
    entry = state.start_verification(1000, 7, 0)
    entry.update(2, 1)
    assert (entry.lowest_sequence, entry.epoch) == (2, 1)
    entry.update(1, 0)
    assert (entry.lowest_sequence, entry.epoch) == (2, 1)
