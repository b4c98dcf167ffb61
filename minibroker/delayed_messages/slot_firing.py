"""SlotFiring: one tick of a FileWheel being fired, its slot file streamed in batches.

The progress rules (``R``/``F`` offsets, roll intents) are the wheel's: see ``file_wheel.py``.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, BinaryIO

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
    encode_rolled,
)

if TYPE_CHECKING:
    from minibroker.delayed_messages.file_wheel import FileWheel


def ceil_div(a: int, b: int) -> int:
    """``ceil(a / b)`` in integers: the tick a message due at ``a`` ms belongs to, with ``b`` ms ticks."""
    return -(-a // b)


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
            self._done_file = self.wheel._open_append(path, KIND_DONE, self.slot)
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

    def checkpoint(self) -> None:
        """Record everything passed so far as forwarded, flushed: a restart will not send it again."""
        self._append_progress(encode_forwarded(self.position))

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
        self.wheel._close_behind()
