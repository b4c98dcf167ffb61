"""FileWheel: one copy of the single-level file-backed timing wheel (seed 002's third design).

``slots`` slots of ``tick_ms`` each (7200 x 1000 ms: two hours). Time is cut into
ticks; tick ``k`` covers due times in ``((k-1)*tick, k*tick]`` and lives in slot
``k mod slots``, one append-only file per slot (``wheel_format.py``), created on
the first append. The pointer is the last tick whose slot was handled completely;
tick ``k`` fires at time ``k*tick``, so a message is never early and at most one
tick (less 1 ms) late.

Firing tick ``k``: the slot's log is renamed ``.firing`` (appends made meanwhile
start a new log), read whole, deduplicated by message id, and split: messages due
by ``k`` are forwarded, later ones (delays longer than the wheel: the slot is
shared by every revolution) are *rolled*, appended again to the slot of their due
tick, as RocketMQ's timer does. Each forwarded or rolled id is appended to
``.done``; when all are done the ``.firing`` file, then the ``.done`` file, are
deleted and the pointer advances (written by rename).

Crash safety (a process killed at any instant; every write is flushed to the OS
before it counts): an acknowledged append is in its slot's file; a restart fires
every tick from the pointer on, a leftover ``.firing`` first, skipping the ids in
its ``.done``. So a message is forwarded twice only if it was being forwarded at
the crash (forwarded, not yet in ``.done``); a roll interrupted the same way
writes a second copy into the same target slot, where the dedup drops it.

Memory does not grow with held messages: they are on disk. Open append handles
are kept only for slots within ``open_window`` ticks ahead of the pointer; an
append further ahead opens, writes and closes the file (the seed's lazy loading).
Firing reads one slot at a time. Pure and synchronous: no trio; the caller drives
``due_ticks``/``fire`` from its clock.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from typing import BinaryIO

import attrs

from minibroker.delay.headers import DelayedMessage
from minibroker.delay.wheel_format import (
    KIND_DONE,
    KIND_MESSAGES,
    Damage,
    encode_done,
    encode_message,
    file_header,
    read_done,
    read_messages,
)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


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
    ) -> None:
        if slots < 1 or tick_ms < 1 or open_window < 0:
            raise ValueError("a wheel needs slots >= 1, tick_ms >= 1 and open_window >= 0")
        self.directory = os.fspath(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.slots = slots
        self.tick_ms = tick_ms
        self.open_window = open_window
        self.on_damage = on_damage
        self.damages: list[Damage] = []
        self._handles: dict[int, tuple[int, BinaryIO]] = {}  # slot -> (tick it was opened for, file)
        self.pointer: int | None = self._read_pointer()
        #: the tick being fired, if any: appends meanwhile go after it
        self.firing: int | None = None

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

    def _read(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    # --- writing ---------------------------------------------------------------------------------
    def start(self, now_ms: int) -> None:
        """A new wheel's pointer is the tick of ``now_ms``; a recovered one keeps its own."""
        if self.pointer is None:
            self._write_pointer(now_ms // self.tick_ms)

    def tick_for(self, due_ms: int) -> int:
        """The tick a message due at ``due_ms`` is written to (the next one if that has passed)."""
        assert self.pointer is not None, "start() the wheel first"
        after = self.pointer if self.firing is None else self.firing
        return max(_ceil_div(due_ms, self.tick_ms), after + 1)

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

    def _write(self, slot: int, tick: int, data: bytes) -> None:
        assert self.pointer is not None
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
        firing = self._path(slot, "firing")
        if not os.path.exists(firing):
            try:
                os.replace(self._path(slot, "log"), firing)
            except FileNotFoundError:
                return SlotFiring(self, tick, slot, [], [], set())
        damages: list[Damage] = []
        data = self._read(firing) or b""
        messages = read_messages(data, firing, damages)
        done_data = self._read(self._path(slot, "done"))
        done = read_done(done_data, self._path(slot, "done"), damages) if done_data else set()
        self._report(damages)
        forward, roll, seen = [], [], set(done)
        for message in messages:
            if message.message_id in seen:
                continue
            seen.add(message.message_id)
            (forward if _ceil_div(message.due_ms, self.tick_ms) <= tick else roll).append(message)
        return SlotFiring(self, tick, slot, forward, roll, done)

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
        for _, f in self._handles.values():
            f.close()
        self._handles.clear()


class SlotFiring:
    """One tick being handled: ``forward`` (due) and ``roll`` (later) messages, not yet done."""

    def __init__(
        self,
        wheel: FileWheel,
        tick: int,
        slot: int,
        forward: list[DelayedMessage],
        roll: list[DelayedMessage],
        done: set[str],
    ) -> None:
        self.wheel = wheel
        self.tick = tick
        self.slot = slot
        self.forward = forward
        self.roll = roll
        self.done = done
        self._done_file: BinaryIO | None = None

    def mark_done(self, message_ids: Iterable[str]) -> None:
        """Record ids as forwarded (or rolled), flushed: a restart will not send them again."""
        ids = [i for i in message_ids if i not in self.done]
        if not ids:
            return
        if self._done_file is None:
            path = self.wheel._path(self.slot, "done")
            self._done_file = self.wheel._open_append(path, KIND_DONE, self.slot)
        self._done_file.write(b"".join(encode_done(i) for i in ids))
        self._done_file.flush()
        self.done.update(ids)

    def roll_all(self) -> None:
        """Append the later messages to their slots, then mark them done."""
        if self.roll:
            self.wheel.append(self.roll)
            self.mark_done(m.message_id for m in self.roll)

    def complete(self) -> None:
        """Delete the slot's firing and done files and advance the pointer to this tick."""
        if self._done_file is not None:
            self._done_file.close()
        for suffix in ("firing", "done"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(self.wheel._path(self.slot, suffix))
        self.wheel._write_pointer(self.tick)
        self.wheel.firing = None
        self.wheel._close_behind()
