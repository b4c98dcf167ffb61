"""The file store of one log and its recovery: what is written is read back, and a damaged tail is cut
at the last valid batch (at every byte of the last batch, a flipped CRC byte, a missing index, an
empty file), each with one note."""

from __future__ import annotations

import json
import os
import zlib

import pytest

from minibroker.broker.log import Log
from minibroker.broker.producer_state import ProducerBatch
from minibroker.common.record_batch import ABORT_MARKER, COMMIT_MARKER
from minibroker.sim.storage import segment_file
from minibroker.sim.storage.file_log import EPOCH_CHECKPOINT, FileLogStore, load_log
from minibroker.sim.storage.producer_snapshot import read_snapshot, snapshot_offsets


def open_log(directory, notes=None, segment_bytes=100, **kw):
    notes = [] if notes is None else notes
    return load_log(
        str(directory), segment_bytes, FileLogStore(str(directory), lambda: 0), note=notes.append, **kw
    )


def batch_view(log: Log):
    return [(b.base_offset, b.count, b.leader_epoch, b.values, b.raw, b.producers) for b in log.batches()]


def write_some(directory, batches=6, segment_bytes=100) -> Log:
    log = open_log(directory, segment_bytes=segment_bytes)
    for i in range(batches):
        log.append_as_leader(
            2,
            30,
            i // 2,
            1000 + i,
            values=(b"k%d" % i, b""),
            raw=bytes(range(i + 3)),
            producers=(ProducerBatch(1000, 0, 2 * i, 2 * i + 1, 0, 1),),
        )
    log.store.close()
    return log


def test_a_written_log_is_read_back_with_its_segments_epochs_and_producers(tmp_path):
    written = write_some(tmp_path)
    notes: list[str] = []
    log = open_log(tmp_path, notes, high_watermark=7)
    assert notes == []
    assert batch_view(log) == batch_view(written)
    assert log.segment_bases == written.segment_bases == [0, 6]
    assert (log.log_end_offset, log.high_watermark, log.epochs) == (12, 7, [(0, 0), (1, 4), (2, 8)])
    assert log.producer_state.last_batch(1000).last_offset == 11


def test_truncation_and_a_new_epoch_without_records_survive_a_reload(tmp_path):
    log = write_some(tmp_path)
    log = open_log(tmp_path)
    log.truncate_to(7)  # inside the batch at 6: the whole batch goes
    log.record_epoch_start(5)
    log.append_as_leader(1, 10, 5, 0, values=(b"after",))
    log.store.close()
    again = open_log(tmp_path)
    assert batch_view(again) == batch_view(log)
    assert (again.log_end_offset, again.epochs) == (7, [(0, 0), (1, 4), (5, 6)])


def test_a_new_log_start_offset_deletes_the_segments_below_it(tmp_path):
    log = write_some(tmp_path)
    log = open_log(tmp_path)
    log.maybe_increment_log_start_offset(8)
    assert sorted(n for n in os.listdir(tmp_path) if n.endswith(".log")) == [segment_file.log_name(6)]
    log.store.close()
    assert open_log(tmp_path, log_start_offset=8).log_start_offset == 8


def last_segment(tmp_path):
    return tmp_path / segment_file.log_name(6)


def test_a_tail_cut_at_every_byte_of_the_last_batch_is_truncated_to_the_batch_before(tmp_path):
    write_some(tmp_path)
    path = last_segment(tmp_path)
    whole = path.read_bytes()
    scan = segment_file.read_entries(whole, 6)
    last_start = scan.positions[-1]
    expected = open_log(tmp_path)
    expected.store.close()
    for cut in range(last_start, len(whole)):
        path.write_bytes(whole[:cut])
        notes: list[str] = []
        log = open_log(tmp_path, notes)
        log.store.close()
        assert log.log_end_offset == 10, cut
        assert batch_view(log) == batch_view(expected)[:-1]
        assert os.path.getsize(path) == last_start
        if cut == last_start:
            assert notes == []  # a cut between batches is a clean end
        else:
            assert len(notes) == 1 and "truncated to the last valid batch" in notes[0], (cut, notes)


def test_a_flipped_crc_byte_drops_that_batch_and_every_later_one(tmp_path):
    write_some(tmp_path)
    first = tmp_path / segment_file.log_name(0)
    data = bytearray(first.read_bytes())
    second = segment_file.read_entries(bytes(data), 0).positions[1]
    data[second + 12 + 5] ^= 0xFF  # a byte of the stored CRC of the batch at offset 2
    first.write_bytes(bytes(data))
    notes: list[str] = []
    log = open_log(tmp_path, notes)
    assert log.log_end_offset == 2
    assert notes == [
        f"{tmp_path.name}/{segment_file.log_name(0)}: CRC mismatch in the batch at offset 2; truncated to "
        f"the last valid batch (position {second}, {len(data) - second} bytes dropped)",
        f"{tmp_path.name}/{segment_file.log_name(6)}: deleted (it follows a truncated segment)",
    ]
    assert log.epochs == [(0, 0)]  # the checkpoint's later epochs start past the recovered end


def test_a_missing_index_is_rebuilt_with_a_note(tmp_path):
    write_some(tmp_path)
    index = tmp_path / segment_file.index_name(0)
    wanted = index.read_bytes()
    index.unlink()
    notes: list[str] = []
    log = open_log(tmp_path, notes)
    assert notes == [f"{tmp_path.name}/{segment_file.index_name(0)}: missing; rebuilt from the segment"]
    assert index.read_bytes() == wanted and log.log_end_offset == 12


def test_an_empty_segment_file_is_an_empty_log(tmp_path):
    (tmp_path / segment_file.log_name(0)).write_bytes(b"")
    notes: list[str] = []
    log = open_log(tmp_path, notes)
    assert (log.log_end_offset, log.batches(), log.epochs) == (0, [], [])
    log.append_as_leader(1, 5, 0, 0, values=(b"x",))
    log.store.close()
    assert open_log(tmp_path).log_end_offset == 1


def test_a_garbled_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path):
    write_some(tmp_path)
    (tmp_path / EPOCH_CHECKPOINT).write_text("not a checkpoint")
    notes: list[str] = []
    log = open_log(tmp_path, notes)
    assert log.epochs == [(0, 0), (1, 4), (2, 8)]
    assert len(notes) == 1 and "leader epoch cache is rebuilt" in notes[0]


@pytest.mark.parametrize("flush_messages", [1, 3])
def test_flush_messages_fsyncs_after_that_many_messages(tmp_path, flush_messages):
    store = FileLogStore(str(tmp_path), lambda: 0, flush_messages=flush_messages)
    log = load_log(str(tmp_path), 1000, store, note=lambda line: None)
    for _ in range(6):
        log.append_as_leader(1, 5, 0, 0, values=(b"x",))
    assert store.flushes == 6 // flush_messages


def test_flush_ms_is_due_that_long_after_the_oldest_unflushed_message(tmp_path):
    now = [0]
    store = FileLogStore(str(tmp_path), lambda: now[0], flush_ms=50)
    log = load_log(str(tmp_path), 1000, store, note=lambda line: None)
    now[0] = 10
    log.append_as_leader(1, 5, 0, 0, values=(b"x",))
    now[0] = 40
    log.append_as_leader(1, 5, 0, 0, values=(b"y",))
    assert (store.flush_due(59), store.flush_due(60)) == (False, True)
    store.flush()
    assert (store.flushes, store.flush_due(10_000)) == (1, False)


def test_append_times_are_stored_as_wall_clock_times_and_read_relative_to_the_new_start(tmp_path):
    log = load_log(str(tmp_path), 1000, FileLogStore(str(tmp_path), lambda: 0, origin_ms=50_000), note=print)
    log.append_as_leader(1, 5, 0, 700, values=(b"x",))  # at 50_700 ms on the wall clock
    log.store.close()
    later = load_log(
        str(tmp_path), 1000, FileLogStore(str(tmp_path), lambda: 0, origin_ms=60_000), note=print
    )
    assert [b.append_time_ms for b in later.batches()] == [-9_300]


def test_a_producer_snapshot_keeps_producers_whose_batches_deleterecords_removed(tmp_path):
    log = open_log(tmp_path)
    for i in range(3):  # producer 1000 fills the first segment (3 x 30 of 100 bytes)
        log.append_as_leader(1, 30, 0, 0, producers=(ProducerBatch(1000, 0, i, i),))
    for i in range(3):  # producer 2000's first batch rolls a segment: a snapshot at offset 4
        log.append_as_leader(1, 30, 0, 0, producers=(ProducerBatch(2000, 0, i, i),))
    assert snapshot_offsets(str(tmp_path)) == [4]
    log.maybe_increment_log_start_offset(3)  # the first segment is deleted
    log.store.close()
    again = open_log(tmp_path, log_start_offset=3)
    assert (again.log_start_offset, again.producer_state.last_batch(1000).last_offset) == (3, 2)
    assert again.producer_state.last_batch(2000).last_offset == 5
    again.store.close()
    (tmp_path / "00000000000000000004.snapshot").unlink()
    without = open_log(tmp_path, log_start_offset=3)
    assert without.producer_state.last_batch(1000) is None  # rebuilt from the batches left


def test_a_truncation_deletes_the_snapshots_past_the_new_end(tmp_path):
    write_some(tmp_path)
    log = open_log(tmp_path)
    assert snapshot_offsets(str(tmp_path)) == [8]  # written when the segment at 6 rolled
    log.truncate_to(8)
    assert snapshot_offsets(str(tmp_path)) == [8]
    log.truncate_to(7)
    assert (snapshot_offsets(str(tmp_path)), log.log_end_offset) == ([], 6)


def txn_batch(pid: int, seq: int) -> ProducerBatch:
    return ProducerBatch(pid, 0, seq, seq, transactional=True)


def marker(pid: int, control: int) -> ProducerBatch:
    return ProducerBatch(pid, 0, -1, -1, transactional=True, control=control, coordinator_epoch=4)


def transactions(log: Log) -> tuple:
    state = log.producer_state
    epochs = {pid: e.coordinator_epoch for pid, e in state.entries.items()}
    return (
        epochs,
        dict(state.ongoing),
        [(t.producer_id, t.first_offset, t.last_offset) for t in state.aborted],
    )


@pytest.mark.parametrize("snapshot", [True, False])
def test_open_committed_and_aborted_transactions_are_read_back(tmp_path, snapshot):
    log = open_log(tmp_path)
    for pid, seq in ((1000, 0), (2000, 0), (1000, 1)):  # offsets 0-2 in the first segment
        log.append_as_leader(1, 30, 0, 0, producers=(txn_batch(pid, seq),))
    log.append_as_leader(1, 30, 0, 0, producers=(marker(1000, COMMIT_MARKER),))  # 3: rolls a segment
    log.append_as_leader(1, 30, 0, 0, producers=(marker(2000, ABORT_MARKER),))  # 4
    log.append_as_leader(1, 30, 0, 0, producers=(txn_batch(3000, 0),))  # 5: open
    log.store.close()
    assert snapshot_offsets(str(tmp_path)) == [4]
    if not snapshot:
        (tmp_path / "00000000000000000004.snapshot").unlink()
    again = open_log(tmp_path)
    assert (
        transactions(again) == transactions(log) == ({1000: 4, 2000: 4, 3000: -1}, {3000: 5}, [(2000, 1, 4)])
    )
    assert [b.producers for b in again.batches()] == [b.producers for b in log.batches()]


def test_a_snapshot_without_transactions_reads_as_having_none(tmp_path):
    body = {"offset": 2, "producers": [[1000, 3, [[0, 1, 0, 1]]]]}
    crc = zlib.crc32(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())
    (tmp_path / "00000000000000000002.snapshot").write_text(json.dumps({**body, "crc": crc}))
    state = read_snapshot(str(tmp_path), 2)
    assert (
        state.entries[1000].epoch,
        state.entries[1000].coordinator_epoch,
        state.ongoing,
        state.aborted,
    ) == (
        3,
        -1,
        {},
        [],
    )
    assert state.last_batch(1000).last_offset == 1
