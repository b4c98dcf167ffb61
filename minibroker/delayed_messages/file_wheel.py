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

Crash safety (a process killed at any instant; every write is flushed to the OS
before it counts): an acknowledged append is in its slot's file; a restart fires
every tick from the pointer on, a leftover ``.firing`` first, from its ``F``
offset, rolling only what lies after ``R``. So a message is forwarded twice only
if its batch was being forwarded at the crash. A roll writes an intent (the
target logs' sizes) before it appends and ``R`` after; a crash in between is
undone when the wheel is opened (the targets are cut back to those sizes), so a
roll never leaves a second copy behind. Duplicate ids a client wrote itself are
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
from collections.abc import Callable, Iterable
from typing import BinaryIO

import attrs

from minibroker.delayed_messages.headers import DelayedMessage
from minibroker.delayed_messages.slot_firing import SlotFiring, ceil_div
from minibroker.delayed_messages.wheel_format import (
    HEADER_SIZE,
    KIND_MESSAGES,
    Damage,
    Progress,
    encode_message,
    encode_rolled,
    file_header,
    read_progress,
)


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
        self.damages: list[Damage] = []
        self._handles: dict[int, tuple[int, BinaryIO]] = {}  # slot -> (tick it was opened for, file)
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
        self._undo_interrupted_rolls()

    # --- files -----------------------------------------------------------------------------------
    def _path(self, slot: int, suffix: str) -> str:
        return os.path.join(self.directory, f"slot-{slot:05d}.{suffix}")

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

    def _open_append(self, path: str, kind: int, slot: int) -> BinaryIO:
        f = open(path, "ab")  # noqa: SIM115 (kept open across appends within the window)
        if f.tell() == 0:
            f.write(file_header(kind, slot, self.tick_ms))
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
        return max(ceil_div(due_ms, self.tick_ms), after + 1)

    def append(self, messages: Iterable[DelayedMessage]) -> None:
        """Write ``messages`` to their slots and flush: when this returns they survive a crash."""
        by_slot: dict[int, list[bytes]] = {}
        ticks: dict[int, int] = {}
        for message in messages:
            tick = self.tick_for(message.due_ms)
            slot = tick % self.slots
            by_slot.setdefault(slot, []).append(encode_message(message))
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
        f = self._open_append(self._path(slot, "log"), KIND_MESSAGES, slot)
        f.write(data)
        f.flush()
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
        if not os.path.exists(firing):
            try:
                os.replace(self._path(slot, "log"), firing)
            except FileNotFoundError:
                return SlotFiring(self, tick, slot, None, Progress())
        return SlotFiring(self, tick, slot, firing, self._progress(slot))

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
