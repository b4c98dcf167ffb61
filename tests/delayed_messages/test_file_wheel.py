"""The file wheel on real files: slots, precision, rolls, dedup, the open-file window, damage reports."""

from __future__ import annotations

import os
import tracemalloc

import pytest

from minibroker.delayed_messages.file_wheel import FileWheel
from minibroker.delayed_messages.headers import DelayedMessage
from minibroker.delayed_messages.wheel_format import HEADER_SIZE, WheelFormatError, file_header, read_messages


def msg(i, due, **kw):
    return DelayedMessage(f"m{i}", "orders", 0, due, 0, None, b"v%d" % i, **kw)


def run_until(wheel, now):
    """Fire every due tick up to ``now``: (tick, ids) forwarded per tick."""
    out = []
    for tick in wheel.due_ticks(now):
        firing = wheel.fire(tick)
        ids = []
        while batch := firing.next_batch():
            ids += [m.message_id for m in batch]
            firing.checkpoint()
        if ids:
            out.append((tick, ids))
        firing.complete()
    return out


def test_messages_fire_at_the_end_of_their_tick_never_early(tmp_path):
    wheel = FileWheel(tmp_path, slots=10, tick_ms=1000)
    wheel.start(0)
    wheel.append([msg(1, 1000), msg(2, 1001), msg(3, 1999), msg(4, 2000), msg(5, 9500)])
    assert sorted(os.listdir(tmp_path)) == ["pointer", "slot-00000.log", "slot-00001.log", "slot-00002.log"]
    assert run_until(wheel, 999) == []
    assert run_until(wheel, 1000) == [(1, ["m1"])]
    assert run_until(wheel, 2000) == [(2, ["m2", "m3", "m4"])]
    assert run_until(wheel, 10_000) == [(10, ["m5"])]
    assert sorted(os.listdir(tmp_path)) == ["pointer"]  # every fired slot's files are gone


def test_long_delays_roll_until_their_revolution(tmp_path):
    wheel = FileWheel(tmp_path, slots=10, tick_ms=100)  # the wheel spans 1 s
    wheel.start(0)
    wheel.append([msg(1, 3_050), msg(2, 1_000)])  # 3.05 s: three revolutions and a half
    assert run_until(wheel, 1_000) == [(10, ["m2"])]
    assert run_until(wheel, 3_000) == []
    assert os.listdir(tmp_path).count("slot-00001.log") == 1  # rolled into its slot again
    assert run_until(wheel, 3_100) == [(31, ["m1"])]


def test_a_message_due_in_the_past_goes_to_the_next_tick(tmp_path):
    wheel = FileWheel(tmp_path, slots=10, tick_ms=100)
    wheel.start(500)
    wheel.append([msg(1, 10)])
    assert run_until(wheel, 600) == [(6, ["m1"])]


def test_a_slot_is_deduplicated_by_message_id(tmp_path):
    wheel = FileWheel(tmp_path, slots=10, tick_ms=100)
    wheel.start(0)
    wheel.append([msg(1, 100), msg(1, 100), msg(2, 100)])
    assert run_until(wheel, 100) == [(1, ["m1", "m2"])]


def test_only_slots_within_the_window_stay_open(tmp_path):
    wheel = FileWheel(tmp_path, slots=100, tick_ms=10, open_window=5)
    wheel.start(0)
    wheel.append([msg(i, 10 * i) for i in range(1, 51)])  # ticks 1..50
    assert wheel.view().open_files == 5
    assert wheel.view().slots_with_messages == 50
    run_until(wheel, 30)
    assert wheel.view().open_files == 2  # ticks 4 and 5 (opened when within the window)
    assert wheel.view().slots_with_messages == 47


def test_a_restart_refires_the_interrupted_slot_and_skips_what_is_done(tmp_path):
    wheel = FileWheel(tmp_path, slots=10, tick_ms=100, batch=1)
    wheel.start(0)
    wheel.append([msg(1, 100), msg(2, 100), msg(3, 100)])
    firing = wheel.fire(1)
    assert [m.message_id for m in firing.next_batch()] == ["m1"]
    firing.checkpoint()  # m1 forwarded
    assert [m.message_id for m in firing.next_batch()] == ["m2"]  # in flight when the process died
    wheel.append([msg(4, 150)])  # written during the firing: goes to the next tick
    again = FileWheel(tmp_path, slots=10, tick_ms=100)
    again.start(10_000)
    assert again.pointer == 0
    assert run_until(again, 200) == [(1, ["m2", "m3"]), (2, ["m4"])]


def test_a_corrupt_record_is_reported_with_path_and_offset_and_only_it_is_skipped(tmp_path):
    reports = []
    wheel = FileWheel(tmp_path, slots=10, tick_ms=100, on_damage=reports.append)
    wheel.start(0)
    wheel.append([msg(1, 100)])
    wheel.append([msg(2, 100)])
    wheel.append([msg(3, 100)])
    path = tmp_path / "slot-00001.log"
    data = bytearray(path.read_bytes())
    size = (len(data) - HEADER_SIZE) // 3
    second = HEADER_SIZE + size
    data[second + 20] ^= 0xFF  # a byte inside the second record's payload
    path.write_bytes(bytes(data) + b"\xa5\x00\x00")  # and a torn write at the end
    wheel2 = FileWheel(tmp_path, slots=10, tick_ms=100, on_damage=reports.append)
    assert run_until(wheel2, 100) == [(1, ["m1", "m3"])]
    firing_path = os.path.join(tmp_path, "slot-00001.firing")
    assert [(r.path, r.offset, r.reason) for r in reports] == [
        (firing_path, second, "crc mismatch"),
        (firing_path, len(data), "cut off inside the record header"),
    ]
    assert str(reports[0]) == f"{firing_path}: damaged record at byte {second} (crc mismatch), skipped"


def test_a_file_of_another_version_is_refused_with_its_path(tmp_path):
    with pytest.raises(WheelFormatError, match=r"x.log: format version 9, this minibroker reads 1 and 2"):
        read_messages(b"MBDW\x00\x09" + file_header(1, 0, 1)[6:], "x.log", [])
    with pytest.raises(WheelFormatError, match=r"x.log: not a wheel file"):
        read_messages(b"garbage-garbage-garbage", "x.log", [])


def test_a_version_1_done_file_is_refused_with_its_path(tmp_path):
    wheel = FileWheel(tmp_path, slots=10, tick_ms=100)
    wheel.start(0)
    wheel.append([msg(1, 100)])
    os.replace(tmp_path / "slot-00001.log", tmp_path / "slot-00001.firing")  # its firing had begun
    (tmp_path / "slot-00001.done").write_bytes(b"MBDW\x00\x01" + file_header(2, 1, 100)[6:])
    with pytest.raises(WheelFormatError, match=r"00001.done: format version 1, this minibroker reads 2$"):
        FileWheel(tmp_path, slots=10, tick_ms=100)


def test_a_slot_is_streamed_in_batches_with_bounded_memory(tmp_path):
    """20,000 messages in one slot: firing holds one read block and one batch, not the slot."""
    wheel = FileWheel(tmp_path, slots=10, tick_ms=100, batch=50, read_bytes=4096, dedup_window=100)
    wheel.start(0)
    for start in range(0, 20_000, 1000):
        wheel.append(
            [
                DelayedMessage(f"m{i}", "orders", 0, 100, 0, None, bytes(200))
                for i in range(start, start + 1000)
            ]
        )
    assert os.path.getsize(tmp_path / "slot-00001.log") > 4_000_000
    firing = wheel.fire(1)
    tracemalloc.start()
    sizes, ids = [], []
    while batch := firing.next_batch():
        sizes.append(len(batch))
        ids += [m.message_id for m in batch]
        firing.checkpoint()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    firing.complete()
    assert sizes == [50] * 400
    assert ids == [f"m{i}" for i in range(20_000)]  # file order, each once
    # the ids list above is the test's own (about 1.3 MB); firing itself adds a block, a batch, the window
    assert peak < 1_300_000 + 400_000, peak


class Crash(Exception):
    """The process dies here."""


def test_a_roll_torn_by_a_crash_is_undone_when_the_wheel_opens(tmp_path, monkeypatch):
    wheel = FileWheel(tmp_path, slots=10, tick_ms=100, batch=2)  # the wheel spans 1 s
    wheel.start(0)
    wheel.append([msg(i, 1_100) for i in range(5)] + [msg(9, 100)])  # m0..m4 roll from tick 1 to tick 11
    firing = wheel.fire(1)
    rolled = []
    real = firing._append_progress

    def crash_before_the_second_roll_is_recorded(record):
        if record[9:10] == b"R":
            rolled.append(record)
            if len(rolled) == 2:
                raise Crash  # m2, m3 are appended to slot 1's new log, their R record is not
        real(record)

    monkeypatch.setattr(firing, "_append_progress", crash_before_the_second_roll_is_recorded)
    with pytest.raises(Crash):
        firing.next_batch()
    monkeypatch.undo()
    firing.close()
    wheel.close()
    torn = (tmp_path / "slot-00001.log").stat().st_size
    again = FileWheel(tmp_path, slots=10, tick_ms=100, batch=2, dedup_window=0)  # no dedup to hide copies
    assert (tmp_path / "slot-00001.log").stat().st_size < torn  # m2, m3 cut off the log
    assert run_until(again, 1_100) == [(1, ["m9"]), (11, ["m0", "m1", "m2", "m3", "m4"])]


def _record_ends(path):
    """The byte offsets where each whole record of a slot file ends."""
    from minibroker.delayed_messages.wheel_format import RecordStream

    with open(path, "rb") as f:
        return [end for _, end, _ in RecordStream(f, str(path), [], HEADER_SIZE)]


def _crash_state(directory):
    """A wheel as a kill leaves it: tick 1 firing (m0, m1 forwarded, m2 in flight, m3 and the later m9
    not reached), tick 2's log holding m4..m6. The process dies without closing anything."""
    wheel = FileWheel(directory, slots=10, tick_ms=100, batch=1)
    wheel.start(0)
    wheel.append([msg(0, 100), msg(1, 100), msg(9, 1_100), msg(2, 100), msg(3, 100)])
    wheel.append([msg(4, 200), msg(5, 200), msg(6, 200)])
    firing = wheel.fire(1)
    for _ in range(2):
        assert len(firing.next_batch()) == 1
        firing.checkpoint()
    assert len(firing.next_batch()) == 1  # m2: the roll of m9 passed on the way is recorded too


@pytest.mark.parametrize("suffix", ["firing", "done", "log"])
def test_a_file_cut_at_any_byte_opens_and_loses_only_what_the_cut_removed(tmp_path, suffix):
    """Every file kind cut at every byte (a write torn by a kill, or a file half created): the wheel
    opens, a message appended after the restart is delivered, and every message whose record lies
    wholly before the cut (all of them, for a cut progress file) is delivered."""
    import shutil

    base = tmp_path / "base"
    _crash_state(base)
    name = {"firing": "slot-00001.firing", "done": "slot-00001.done", "log": "slot-00002.log"}[suffix]
    size = (base / name).stat().st_size
    ends = _record_ends(base / name)
    ids = {"firing": ["m0", "m1", "m9", "m2", "m3"], "log": ["m4", "m5", "m6"]}
    for cut in range(size + 1):
        directory = tmp_path / f"cut-{cut}"
        shutil.copytree(base, directory)
        os.truncate(directory / name, cut)
        repairs = []
        wheel = FileWheel(directory, slots=10, tick_ms=100, batch=1, on_repair=repairs.append)
        assert bool(repairs) == (cut < HEADER_SIZE), (cut, repairs)
        wheel.append([msg(7, 200)])  # after the restart, behind the cut record
        delivered = [m for _, batch in run_until(wheel, 1_100) for m in batch]
        if suffix == "done":  # progress lost: forwarded again, nothing lost
            kept = {"m2", "m3", "m4", "m5", "m6", "m9"}
        else:
            whole = ids[suffix][: sum(end <= cut for end in ends)]
            kept = set(whole) | set(ids["log" if suffix == "firing" else "firing"][2:])
            kept -= {"m0", "m1"}  # forwarded before the kill (their progress is intact)
            if suffix == "firing":
                kept.add("m9")  # rolled before the kill: in tick 11's log
        assert kept | {"m7"} <= set(delivered), (cut, delivered)
        assert set(delivered) <= {f"m{i}" for i in range(10)}
        assert sorted(os.listdir(directory)) == ["pointer"], cut


def test_leftover_temporary_files_are_removed_with_a_note(tmp_path):
    wheel = FileWheel(tmp_path, slots=10, tick_ms=100)
    wheel.start(0)
    wheel.append([msg(1, 100)])
    (tmp_path / "slot-00002.log.tmp").write_bytes(file_header(1, 2, 100)[:7])
    (tmp_path / "pointer.tmp").write_text("")
    repairs = []
    again = FileWheel(tmp_path, slots=10, tick_ms=100, on_repair=repairs.append)
    assert repairs == [
        f"{tmp_path}/slot-00002.log.tmp: a file whose creation was cut off (never acknowledged), removed"
    ]
    assert sorted(os.listdir(tmp_path)) == ["pointer", "slot-00001.log"]
    assert run_until(again, 100) == [(1, ["m1"])]
