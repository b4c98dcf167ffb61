"""FileWheel: one copy of a single-level timing wheel kept in files, one file per slot.

Arbitrary delays (not rounded up to a level), as RocketMQ's timer store does (RIP-43,
https://github.com/apache/rocketmq/blob/develop/store/src/main/java/org/apache/rocketmq/store/timer/TimerMessageStore.java),
with one log file per slot instead of RocketMQ's single timer log.

``slots`` slots of ``tick_ms`` each (7200 x 1000 ms: two hours). Time is cut into
ticks; tick ``k`` covers due times in ``((k-1)*tick, k*tick]`` and lives in slot
``k mod slots``, one append-only file per slot (``wheel_format.py``), created on
the first append. The pointer is the last tick whose slot was handled completely;
tick ``k`` fires at time ``k*tick``, so a message is never early and at most one
tick (less 1 ms) late.

Firing tick ``k``: the slot's log is renamed ``.firing`` (appends made meanwhile
start a new log) and *streamed* in file order (``RecordStream``: one block of
``read_bytes`` at a time), ``batch`` due messages at a time. Messages due by
``k`` are forwarded; later ones (delays longer than the wheel: the slot is shared
by every revolution) are *rolled*, appended again to the slot of their due tick,
as RocketMQ's timer does. Progress goes to ``.done`` as byte offsets into the
``.firing`` file: ``R`` (every later message before it rolled) and ``F`` (every
due message before it forwarded). When the stream ends, the ``.firing`` file,
then the ``.done`` file, are deleted and the pointer advances (written by rename).

Crash safety (a process killed at any instant, at any byte of any write; every
write is flushed to the OS before it counts): a file is created whole, its header
and first records written to ``<name>.tmp`` and renamed, so no file exists
without its header (a leftover ``.tmp`` held nothing acknowledged and is removed
on open, as is a file shorter than a header that an older writer left, each
with a one-line note); a record torn at the end of a file is skipped by the
reader, which resumes at the next record that checks out, so appends made after
the restart are read past it. An acknowledged append is in its slot's file; a restart fires
every tick from the pointer on, a leftover ``.firing`` first, from its ``F``
offset, rolling only what lies after ``R``. So a message is forwarded twice only
if its batch was being forwarded at the crash. A roll writes an intent (the
target logs' sizes) before it appends and ``R`` after; a crash in between is
undone when the wheel is opened (the targets are cut back to those sizes), so a
roll never leaves a second copy behind. Completing a tick deletes ``.firing``
first: a ``.done`` without its ``.firing`` is a completed firing's leftover and is
deleted, never read as the progress of the slot's next file. While a leftover
``.firing`` waits to be fired again, appends for its tick go to the next tick, so
they are not left behind it for a revolution. Duplicate ids a client wrote itself are
dropped when within ``dedup_window`` records of each other in a slot.

Memory is bounded by settings, not by held messages: they are on disk, and
firing holds one read block, one batch of due messages, one batch of rolls and
the last ``dedup_window`` ids, however many messages a slot holds. Open append
handles are kept only for slots within ``open_window`` ticks ahead of the
pointer; an append further ahead opens, writes and closes the file (slots are
opened lazily: a two-hour wheel never holds 7200 open files). Pure and synchronous: no trio; the caller drives
``due_ticks``/``fire`` from its clock.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import BinaryIO

import attrs

from minibroker.delayed_messages.headers import DelayedMessage
from minibroker.delayed_messages.wheel_format import (
    HEADER_SIZE,
    KIND_DONE,
    KIND_MESSAGES,
    Damage,
    Progress,
    RecordStream,
    check_header,
    decode_checked,
    decode_head,
    encode_forwarded,
    encode_intent,
    encode_message,
    encode_rolled,
    file_header,
    read_progress,
)


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` in integers: the tick a message due at ``a`` ms belongs to, with ``b`` ms ticks."""
    return -(-a // b)


def _note_on_stderr(line: str) -> None:
    print(f"minibroker: delay wheel: {line}", file=sys.stderr, flush=True)


@attrs.frozen
class WheelView:
    """What a wheel holds, for the TUI and reports."""

    pointer: int
    slot: int
    slots_with_messages: int
    open_files: int
    bytes_on_disk: int


class FileWheel:
    """One wheel copy in ``directory``; ``on_damage`` hears of every unreadable record."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        slots: int = 7200,
        tick_ms: int = 1000,
        open_window: int = 60,
        on_damage: Callable[[Damage], None] | None = None,
        *,
        on_repair: Callable[[str], None] | None = None,
        batch: int = 100,
        read_bytes: int = 1 << 20,
        dedup_window: int = 10_000,
    ) -> None:
        if slots < 1 or tick_ms < 1 or open_window < 0 or batch < 1 or read_bytes < 1 or dedup_window < 0:
            raise ValueError(
                "a wheel needs slots, tick_ms, batch, read_bytes >= 1 and open_window, dedup_window >= 0"
            )
        self.batch = batch
        self.read_bytes = read_bytes
        self.dedup_window = dedup_window
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.slots = slots
        self.tick_ms = tick_ms
        self.open_window = open_window
        self.on_damage = on_damage
        #: hears of every file repaired on open (one line each); default: a line on stderr
        self.on_repair = on_repair or _note_on_stderr
        self.damages: list[Damage] = []
        self._handles: dict[int, tuple[int, BinaryIO]] = {}  # slot -> (tick it was opened for, file)
        self._repair_files()
        self.pointer: int | None = self._read_pointer()
        #: the pointer as last written to disk (behind ``pointer`` after ticks with no files)
        self._saved_pointer = self.pointer
        with os.scandir(self.directory) as entries:
            #: slots that have a log or firing file: firing any other slot needs no file system call
            self._slots_with_files = {
                int(e.name[5:10])
                for e in entries
                if e.name.startswith("slot-") and e.name.endswith((".log", ".firing"))
            }
        #: the tick being fired, if any: appends meanwhile go after it
        self.firing: int | None = None
        #: the tick of a ``.firing`` file a killed process left, until it is fired again: appends skip it
        self._leftover_tick: int | None = None
        self._undo_interrupted_rolls()
        self._find_leftover_firing()

    # --- files -----------------------------------------------------------------------------------
    def _path(self, slot: int, suffix: str) -> str:
        return os.path.join(self.directory, f"slot-{slot:05d}.{suffix}")

    def _repair_files(self) -> None:
        """Make every file a crash left behind readable: remove ``.tmp`` files (a file being created,
        never acknowledged), files shorter than their header (an older writer's torn creation) and
        ``.done`` files without their ``.firing`` (a completed firing's leftover)."""
        with os.scandir(self.directory) as entries:
            names = sorted(e.name for e in entries if e.is_file())
        present = set(names)
        for name in names:
            path = os.path.join(self.directory, name)
            if name.endswith(".tmp"):
                os.remove(path)
                if name.startswith("slot-"):
                    self.on_repair(f"{path}: a file whose creation was cut off (never acknowledged), removed")
                continue
            if not name.startswith("slot-") or not name.endswith((".log", ".firing", ".done")):
                continue
            size = os.path.getsize(path)
            if size < HEADER_SIZE:
                os.remove(path)
                self.on_repair(f"{path}: {size} bytes, a header cut off by a crash (no record), removed")
            elif name.endswith(".done") and name.replace(".done", ".firing") not in present:
                os.remove(path)  # the slot's next .firing must not be read with these offsets

    def _find_leftover_firing(self) -> None:
        if self.pointer is None:
            return
        for slot in self._slots_with_files:
            if os.path.exists(self._path(slot, "firing")):
                # the first tick after the pointer that lives in this slot: the one being fired at the crash
                tick = self.pointer + 1 + (slot - self.pointer - 1) % self.slots
                if self._leftover_tick is None or tick < self._leftover_tick:
                    self._leftover_tick = tick

    def _read_pointer(self) -> int | None:
        try:
            with open(os.path.join(self.directory, "pointer")) as f:
                return int(f.read().strip())
        except FileNotFoundError:
            return None
        except ValueError as error:
            raise ValueError(f"{self.directory}/pointer: not a tick number ({error})") from None

    def _write_pointer(self, tick: int) -> None:
        path = os.path.join(self.directory, "pointer")
        with open(path + ".tmp", "w") as f:
            f.write(str(tick))
        os.replace(path + ".tmp", path)
        self.pointer = self._saved_pointer = tick

    def _advance_pointer(self, tick: int, had_files: bool) -> None:
        """Move the pointer to ``tick``: on disk only when its slot had files. A pointer left behind
        after empty ticks costs a restart nothing but firing those empty slots again."""
        if had_files:
            self._write_pointer(tick)
        else:
            self.pointer = tick

    def _open_append(self, path: str, kind: int, slot: int, data: bytes) -> BinaryIO:
        """Append ``data`` to ``path`` and flush; a new file is written whole to ``<path>.tmp`` (header
        and ``data``) and renamed, so it never exists without its header. The handle stays open."""
        if os.path.exists(path):
            f = open(path, "ab")  # noqa: SIM115 (kept open across appends within the window)
            f.write(data)
            f.flush()
            return f
        f = open(path + ".tmp", "wb")  # noqa: SIM115 (renamed, then kept open like the above)
        f.write(file_header(kind, slot, self.tick_ms) + data)
        f.flush()
        os.replace(path + ".tmp", path)  # the handle follows the file
        return f

    def _report(self, damages: list[Damage]) -> None:
        for damage in damages:
            self.damages.append(damage)
            if self.on_damage is not None:
                self.on_damage(damage)

    def _progress(self, slot: int) -> Progress:
        damages: list[Damage] = []
        path = self._path(slot, "done")
        try:
            with open(path, "rb") as f:
                progress = read_progress(f, path, damages)
        except FileNotFoundError:
            progress = Progress()
        self._report(damages)
        return progress

    def _undo_interrupted_rolls(self) -> None:
        """Cut the target logs of a roll the last process began and did not finish back to their
        sizes before it (nothing else can have appended since: the roll was synchronous)."""
        with os.scandir(self.directory) as entries:
            names = [e.name for e in entries if e.name.startswith("slot-") and e.name.endswith(".done")]
        for name in names:
            slot = int(name[5:10])
            progress = self._progress(slot)
            if progress.intent is None:
                continue
            for target, size in progress.intent:
                path = self._path(target, "log")
                if size <= HEADER_SIZE:
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(path)
                elif os.path.exists(path):
                    os.truncate(path, size)
            with open(self._path(slot, "done"), "ab") as f:
                f.write(encode_rolled(progress.rolled_to))  # the intent is settled

    # --- writing ---------------------------------------------------------------------------------
    def start(self, now_ms: int) -> None:
        """A new wheel's pointer is the tick of ``now_ms``; a recovered one keeps its own."""
        if self.pointer is None:
            self._write_pointer(now_ms // self.tick_ms)

    def tick_for(self, due_ms: int) -> int:
        """The tick a message due at ``due_ms`` is written to (the next one if that has passed)."""
        assert self.pointer is not None, "start() the wheel first"
        after = self.pointer if self.firing is None else self.firing
        tick = max(ceil_div(due_ms, self.tick_ms), after + 1)
        return tick + 1 if tick == self._leftover_tick else tick

    def append(self, messages: Iterable[DelayedMessage], encoded: Sequence[bytes] | None = None) -> None:
        """Write ``messages`` to their slots and flush: when this returns they survive a crash.
        ``encoded``: their records (``encode_message``), when the caller has them already (a write to
        every copy encodes once)."""
        by_slot: dict[int, list[bytes]] = {}
        ticks: dict[int, int] = {}
        for i, message in enumerate(messages):
            tick = self.tick_for(message.due_ms)
            slot = tick % self.slots
            by_slot.setdefault(slot, []).append(encode_message(message) if encoded is None else encoded[i])
            ticks[slot] = min(ticks.get(slot, tick), tick)
        for slot, records in by_slot.items():
            self._write(slot, ticks[slot], b"".join(records))

    def log_sizes(self, messages: Iterable[DelayedMessage]) -> dict[int, int]:
        """The sizes of the logs ``append(messages)`` would write to (0: no log yet)."""
        sizes: dict[int, int] = {}
        for message in messages:
            slot = self.tick_for(message.due_ms) % self.slots
            if slot not in sizes:
                held = self._handles.get(slot)
                if held is not None:
                    sizes[slot] = held[1].tell()
                else:
                    try:
                        sizes[slot] = os.path.getsize(self._path(slot, "log"))
                    except FileNotFoundError:
                        sizes[slot] = 0
        return sizes

    def _write(self, slot: int, tick: int, data: bytes) -> None:
        assert self.pointer is not None
        self._slots_with_files.add(slot)
        held = self._handles.get(slot)
        if held is not None:
            held[1].write(data)
            held[1].flush()
            return
        f = self._open_append(self._path(slot, "log"), KIND_MESSAGES, slot, data)
        if tick - self.pointer <= self.open_window:
            self._handles[slot] = (tick, f)
        else:
            f.close()

    def _close_behind(self) -> None:
        """Close the handles of slots the pointer has reached."""
        assert self.pointer is not None
        for slot, (tick, f) in list(self._handles.items()):
            if tick <= self.pointer:
                f.close()
                del self._handles[slot]

    # --- firing ----------------------------------------------------------------------------------
    def due_ticks(self, now_ms: int) -> range:
        """Ticks whose time has come (``k * tick_ms <= now_ms``) and that are not yet handled."""
        assert self.pointer is not None, "start() the wheel first"
        return range(self.pointer + 1, now_ms // self.tick_ms + 1)

    def next_tick_ms(self) -> int:
        assert self.pointer is not None
        return (self.pointer + 1) * self.tick_ms

    def fire(self, tick: int) -> SlotFiring:
        """Begin handling ``tick``'s slot (it must be the pointer's next tick)."""
        assert self.pointer is not None and tick == self.pointer + 1, f"fire {tick} after {self.pointer}"
        slot = tick % self.slots
        self.firing = tick
        held = self._handles.pop(slot, None)
        if held is not None:
            held[1].close()
        if slot not in self._slots_with_files:
            return SlotFiring(self, tick, slot, None, Progress())
        firing = self._path(slot, "firing")
        if os.path.exists(firing):  # left by a killed process: go on from its progress
            return SlotFiring(self, tick, slot, firing, self._progress(slot))
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._path(slot, "done"))  # a completed firing's, if any: not this file's progress
        try:
            os.replace(self._path(slot, "log"), firing)
        except FileNotFoundError:
            return SlotFiring(self, tick, slot, None, Progress())
        return SlotFiring(self, tick, slot, firing, Progress())

    def view(self) -> WheelView:
        slots = 0
        size = 0
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if entry.name.startswith("slot-"):
                    size += entry.stat().st_size
                    slots += entry.name.endswith(".log")
        pointer = self.pointer if self.pointer is not None else -1
        return WheelView(pointer, pointer % self.slots, slots, len(self._handles), size)

    def close(self) -> None:
        """Close the append handles and save the pointer."""
        for _, f in self._handles.values():
            f.close()
        self._handles.clear()
        self.save_pointer()

    def save_pointer(self) -> None:
        """Write the pointer to disk if it moved over empty ticks since (not while a tick is firing)."""
        if self.pointer is not None and self.pointer != self._saved_pointer and self.firing is None:
            self._write_pointer(self.pointer)


# --- firing one tick ------------------------------------------------------------------------------
class SlotFiring:
    """One tick being handled, streamed from its ``.firing`` file in batches.

    ``next_batch()`` gives the next (at most ``batch``) due messages in file order, rolling the
    later ones it passes; ``checkpoint()`` records them forwarded. A hot standby copy calls
    ``follow(ids)`` instead, to pass the same messages in its own file. ``forwarded`` and
    ``rolled`` count what this object handled.
    """

    def __init__(self, wheel: FileWheel, tick: int, slot: int, path: str | None, progress: Progress) -> None:
        self.wheel = wheel
        self.tick = tick
        self.slot = slot
        self.rolled_to = progress.rolled_to
        self.position = progress.forwarded_to
        self.forwarded = 0
        self.rolled = 0
        #: the stream has ended: every due message was returned, every later one rolled
        self.exhausted = path is None
        self._file: BinaryIO | None = None
        self._done_file: BinaryIO | None = None
        self._peeked: tuple[int, int, int, str, bytes] | None = None
        self._records: Iterator[tuple[int, int, int, str, bytes]] = iter(())
        if path is not None:
            self._file = open(path, "rb")  # noqa: SIM115 (streamed until complete() or close())
            check_header(self._file.read(HEADER_SIZE), path, KIND_MESSAGES)
            self._records = self._messages(path, max(self.position, HEADER_SIZE))

    def _messages(self, path: str, start: int) -> Iterator[tuple[int, int, int, str, bytes]]:
        """(offset, end, due_ms, id, payload) from ``start``, without ids seen within the dedup window.
        Only the due time and id are decoded here: a standby passes most messages without more."""
        assert self._file is not None
        damages: list[Damage] = []
        window = self.wheel.dedup_window
        recent: deque[str] = deque()
        seen: set[str] = set()
        for offset, end, payload in RecordStream(self._file, path, damages, start, self.wheel.read_bytes):
            if damages:  # records the stream skipped before this one
                self.wheel._report(damages)
                damages.clear()
            try:
                due_ms, message_id = decode_head(payload)
            except (ValueError, UnicodeDecodeError) as error:
                self.wheel._report([Damage(path, offset, f"passes its crc but does not decode: {error}")])
                continue
            if message_id in seen:
                continue
            if window:
                seen.add(message_id)
                recent.append(message_id)
                if len(recent) > window:
                    seen.discard(recent.popleft())
            yield offset, end, due_ms, message_id, payload
        self.wheel._report(damages)

    def _decode(self, offset: int, payload: bytes) -> DelayedMessage | None:
        damages: list[Damage] = []
        message = decode_checked(offset, payload, self.wheel._path(self.slot, "firing"), damages)
        self.wheel._report(damages)
        return message

    def _append_progress(self, record: bytes) -> None:
        if self._done_file is None:
            path = self.wheel._path(self.slot, "done")
            self._done_file = self.wheel._open_append(path, KIND_DONE, self.slot, record)
            return
        self._done_file.write(record)
        self._done_file.flush()

    def _roll(self, messages: list[DelayedMessage], through: int) -> None:
        """Append later messages to their slots: intent, append, ``R`` (synchronous, undone if torn)."""
        if not messages:
            return
        self._append_progress(encode_intent(self.wheel.log_sizes(messages)))
        self.wheel.append(messages)
        self._append_progress(encode_rolled(through))
        self.rolled_to = through
        self.rolled += len(messages)

    def _advance(self, limit: int, wanted: set[str] | None) -> list[DelayedMessage]:
        """Up to ``limit`` due messages (only ``wanted`` ids, stopping at another), rolling later ones.
        A standby (``wanted`` given) returns no messages, only passes them: it never decodes them."""
        due: list[DelayedMessage] = []
        passed = 0
        roll: list[DelayedMessage] = []
        tick_ms = self.wheel.tick_ms
        while passed < limit:
            item = self._peeked or next(self._records, None)
            self._peeked = None
            if item is None:
                self.exhausted = True
                break
            offset, end, due_ms, message_id, payload = item
            if ceil_div(due_ms, tick_ms) > self.tick:
                self.position = end
                if offset >= self.rolled_to and (message := self._decode(offset, payload)) is not None:
                    roll.append(message)
                    if len(roll) >= self.wheel.batch:
                        self._roll(roll, end)
                        roll = []
                continue
            if wanted is not None and message_id not in wanted:
                self._peeked = item
                break
            passed += 1
            self.position = end
            if wanted is None and (message := self._decode(offset, payload)) is not None:
                due.append(message)
        self._roll(roll, self.position)
        return due

    def next_batch(self) -> list[DelayedMessage]:
        """The next due messages (at most the wheel's ``batch``); [] when the slot is exhausted."""
        due = self._advance(self.wheel.batch, None)
        self.forwarded += len(due)
        return due

    def checkpoint(self, position: int | None = None) -> None:
        """Record everything passed so far (or before byte ``position``, where a batch returned earlier
        ended) as forwarded, flushed: a restart will not send it again."""
        self._append_progress(encode_forwarded(self.position if position is None else position))

    def follow(self, ids: Iterable[str]) -> None:
        """A standby's step: pass the due messages ``ids`` (rolling later ones on the way), checkpoint."""
        wanted = set(ids)
        self._advance(len(wanted), wanted)
        self.forwarded += len(wanted)
        self.checkpoint()

    def close(self) -> None:
        """Stop without completing (a failover): the files stay for the next ``fire``."""
        for f in (self._file, self._done_file):
            if f is not None:
                f.close()
        self._file = self._done_file = None

    def complete(self) -> None:
        """Roll what is left, delete the slot's firing and done files and advance the pointer."""
        while not self.exhausted:  # a standby: roll its rest (a due message only it has was lost
            self._advance(self.wheel.batch, set())  # by the active copy, which reported the damage)
            self._peeked = None
        self.close()
        had_files = self.slot in self.wheel._slots_with_files
        if had_files:
            for suffix in ("firing", "done"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(self.wheel._path(self.slot, suffix))
            if not os.path.exists(self.wheel._path(self.slot, "log")):  # a roll may have made a new one
                self.wheel._slots_with_files.discard(self.slot)
        self.wheel._advance_pointer(self.tick, had_files)
        self.wheel.firing = None
        if self.wheel._leftover_tick == self.tick:
            self.wheel._leftover_tick = None
        self.wheel._close_behind()
