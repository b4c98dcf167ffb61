"""The file wheel's on-disk format, version 2 (the only place that knows it).

A wheel directory holds, per slot ``i`` (five digits):

- ``slot-i.log``: the slot's messages, appended; ``slot-i.firing``: the same file
  renamed when the pointer reaches the slot (so new appends start a fresh log);
- ``slot-i.done``: the firing slot's progress, appended checkpoints;
- ``pointer``: the last tick whose slot was completely handled (decimal text,
  replaced atomically by rename).

Every ``.log``/``.firing``/``.done`` file starts with a 16-byte header::

    magic b"MBDW" | version u16 | kind u16 (1 messages, 2 progress) | slot u32 | tick_ms u32

followed by records, each::

    0xA5 | length u32 | crc32 u32 (zlib, of the payload) | payload (length bytes)

A message payload: ``due_ms i64 | timestamp_ms i64 | real_partition i32 (-1: none) |
id | topic`` (each ``u16 length + UTF-8``) ``| key | value`` (each ``i32 length,
-1: null, + bytes``) ``| header count u16`` and per header ``u16 length + UTF-8 name,
i32 length + value``. Progress payloads (offsets are byte offsets in the ``.firing``
file): ``"R" u64`` every later message before the offset is rolled; ``"F" u64`` every
due message before it is forwarded; ``"I" count u32, (slot u32, size u64) * count``
a roll is about to append to these slots' logs, which had these sizes (undone on
open when no ``"R"`` follows it). Integers are big-endian.

Version 1 (the same messages; ``.done`` held forwarded ids) message files are read;
a version 1 ``.done`` file is refused with its path.

Reading never trusts a record it cannot check: a record whose crc does not
match, or whose framing is impossible, is reported (``path``, byte offset) and
skipped by searching forward for the next record that checks out; so is a
record cut off by the end of the data it announces (a write interrupted by a
crash: records appended after the restart follow it and are read). Everything
else of the file is read. Files are streamed in
bounded blocks (``RecordStream``), never read whole.
"""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Iterator
from typing import BinaryIO

import attrs

from minibroker.delayed_messages.headers import DelayedMessage

VERSION = 2
#: versions whose message files this version reads (their record format is the same)
READS_MESSAGES_OF = (1, 2)
MAGIC = b"MBDW"
KIND_MESSAGES = 1
KIND_DONE = 2
_FILE_HEADER = struct.Struct(">4sHHII")
HEADER_SIZE = _FILE_HEADER.size
_RECORD = struct.Struct(">BII")
RECORD_OVERHEAD = _RECORD.size
RECORD_MAGIC = 0xA5
#: no record is larger (a length above it is a broken frame, not a huge message)
MAX_RECORD = 64 * 1024 * 1024
_FIXED = struct.Struct(">qqi")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_U64 = struct.Struct(">Q")
_MAGIC_BYTE = bytes([0xA5])


class WheelFormatError(ValueError):
    """A file that is not a wheel file of this version at all (its header is wrong)."""


@attrs.frozen
class Damage:
    """A record that could not be read: where, and why."""

    path: str
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: damaged record at byte {self.offset} ({self.reason}), skipped"


def file_header(kind: int, slot: int, tick_ms: int) -> bytes:
    return _FILE_HEADER.pack(MAGIC, VERSION, kind, slot, tick_ms)


def check_header(data: bytes, path: str, kind: int) -> None:
    if len(data) < HEADER_SIZE:
        raise WheelFormatError(f"{path}: {len(data)} bytes, shorter than the {HEADER_SIZE}-byte header")
    magic, version, found_kind, _, _ = _FILE_HEADER.unpack_from(data)
    if magic != MAGIC:
        raise WheelFormatError(f"{path}: not a wheel file (magic {magic!r})")
    readable = READS_MESSAGES_OF if kind == KIND_MESSAGES else (VERSION,)
    if version not in readable:
        raise WheelFormatError(
            f"{path}: format version {version}, this minibroker reads {' and '.join(map(str, readable))}"
        )
    if found_kind != kind:
        raise WheelFormatError(f"{path}: file kind {found_kind}, expected {kind}")


def frame(payload: bytes) -> bytes:
    return _RECORD.pack(RECORD_MAGIC, len(payload), zlib.crc32(payload)) + payload


def _text(value: str) -> bytes:
    raw = value.encode()
    return _U16.pack(len(raw)) + raw


def _blob(value: bytes | None) -> bytes:
    return _I32.pack(-1) if value is None else _I32.pack(len(value)) + value


def encode_message(m: DelayedMessage) -> bytes:
    """A framed message record."""
    parts = [
        _FIXED.pack(m.due_ms, m.timestamp_ms, -1 if m.real_partition is None else m.real_partition),
        _text(m.message_id),
        _text(m.real_topic),
        _blob(m.key),
        _blob(m.value),
        _U16.pack(len(m.headers)),
    ]
    for name, value in m.headers:
        parts.append(_text(name))
        parts.append(_blob(value))
    return frame(b"".join(parts))


class _Cursor:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("field runs past the record")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def text(self) -> str:
        (n,) = _U16.unpack(self.take(2))
        return self.take(n).decode()

    def blob(self) -> bytes | None:
        (n,) = _I32.unpack(self.take(4))
        return None if n == -1 else self.take(n)


def decode_head(payload: bytes) -> tuple[int, str]:
    """(due_ms, message id) of a message payload, without decoding the rest (ValueError if short)."""
    if len(payload) < _FIXED.size + 2:
        raise ValueError("shorter than a message's fixed fields")
    (due,) = _I64.unpack_from(payload)
    (n,) = _U16.unpack_from(payload, _FIXED.size)
    start = _FIXED.size + 2
    if start + n > len(payload):
        raise ValueError("field runs past the record")
    return due, payload[start : start + n].decode()


def decode_message(payload: bytes) -> DelayedMessage:
    cursor = _Cursor(payload)
    due, timestamp, partition = _FIXED.unpack(cursor.take(_FIXED.size))
    message_id = cursor.text()
    topic = cursor.text()
    key = cursor.blob()
    value = cursor.blob()
    (count,) = _U16.unpack(cursor.take(2))
    headers = tuple((cursor.text(), cursor.blob() or b"") for _ in range(count))
    if cursor.pos != len(payload):
        raise ValueError("bytes left after the last header")
    real_partition = None if partition < 0 else partition
    return DelayedMessage(message_id, topic, real_partition, due, timestamp, key, value, headers)


def _frame_at(data: bytes, pos: int) -> tuple[int, bytes | None, str]:
    """(end, payload or None, reason) of the record at ``pos``; end -1: cut off by the end of data."""
    if len(data) - pos < RECORD_OVERHEAD:
        return -1, None, "cut off inside the record header"
    magic, length, crc = _RECORD.unpack_from(data, pos)
    if magic != RECORD_MAGIC or length > MAX_RECORD:
        return pos + 1, None, "not a record header"
    end = pos + RECORD_OVERHEAD + length
    if end > len(data):
        return -1, None, f"cut off: {length} bytes announced, {len(data) - pos - RECORD_OVERHEAD} present"
    payload = data[pos + RECORD_OVERHEAD : end]
    if zlib.crc32(payload) != crc:
        return end, None, "crc mismatch"
    return end, payload, ""


class RecordStream:
    """The checked records of an open file from byte ``start``, read ``block`` bytes at a time.

    Memory is one block plus the record being read (a record is at most ``MAX_RECORD``), whatever
    the file's size. Iterating yields ``(offset, end, payload)``; damaged records go to ``damages``
    (path, byte offset) and are skipped by searching forward for the next record that checks out,
    a record cut off by the end of the file too (records appended after a torn one are read).
    """

    def __init__(
        self, f: BinaryIO, path: str, damages: list[Damage], start: int, block: int = 1 << 20
    ) -> None:
        self.f = f
        self.path = path
        self.damages = damages
        self.block = max(block, RECORD_OVERHEAD)
        f.seek(start)
        self.base = start  # the file offset of buf[0]
        self.buf = b""
        self.eof = False

    def _fill(self, end: int) -> None:
        """Read until the buffer reaches file offset ``end`` (or the file ends)."""
        while self.base + len(self.buf) < end and not self.eof:
            chunk = self.f.read(max(self.block, end - self.base - len(self.buf)))
            if chunk:
                self.buf += chunk
            else:
                self.eof = True

    def _drop_before(self, pos: int) -> None:
        if pos - self.base >= self.block:
            self.buf = self.buf[pos - self.base :]
            self.base = pos

    def _frame(self, pos: int) -> tuple[int, bytes | None, str]:
        """``_frame_at`` for file offset ``pos``, reading as much of the file as the record needs."""
        self._fill(pos + RECORD_OVERHEAD)
        rel = pos - self.base
        if len(self.buf) - rel >= RECORD_OVERHEAD:
            magic, length, _ = _RECORD.unpack_from(self.buf, rel)
            if magic == RECORD_MAGIC and length <= MAX_RECORD:
                self._fill(pos + RECORD_OVERHEAD + length)
                rel = pos - self.base
        end, payload, reason = _frame_at(self.buf, rel)
        return (end if end < 0 else end + self.base), payload, reason

    def _resync(self, start: int) -> int | None:
        """The next offset from ``start`` holding a record that checks out, or None."""
        pos = start
        while True:
            self._fill(pos + 1)
            found = self.buf.find(_MAGIC_BYTE, pos - self.base)
            if found == -1:
                if self.eof:
                    return None
                pos = self.base + len(self.buf)
                self._drop_before(pos)
                continue
            candidate = self.base + found
            if self._frame(candidate)[1] is not None:
                return candidate
            pos = candidate + 1

    def __iter__(self) -> Iterator[tuple[int, int, bytes]]:
        pos = self.base
        while True:
            self._drop_before(pos)
            self._fill(pos + 1)
            if pos >= self.base + len(self.buf):
                return
            end, payload, reason = self._frame(pos)
            if payload is not None:
                yield pos, end, payload
                pos = end
                continue
            self.damages.append(Damage(self.path, pos, reason))
            found = self._resync(pos + 1)
            if found is None:
                return
            pos = found


def iter_payloads(data: bytes, path: str, damages: list[Damage]) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of every checked record after the file header; damaged ones go to ``damages``."""
    for offset, _, payload in RecordStream(io.BytesIO(data), path, damages, HEADER_SIZE):
        yield offset, payload


def decode_checked(offset: int, payload: bytes, path: str, damages: list[Damage]) -> DelayedMessage | None:
    """The message of a checked record, or None (reported) when it does not decode."""
    try:
        return decode_message(payload)
    except (ValueError, struct.error, UnicodeDecodeError) as error:
        damages.append(Damage(path, offset, f"passes its crc but does not decode: {error}"))
        return None


def read_messages(data: bytes, path: str, damages: list[Damage]) -> list[DelayedMessage]:
    """The messages of a slot file's bytes; unreadable records are reported in ``damages``."""
    check_header(data, path, KIND_MESSAGES)
    out = []
    for offset, payload in iter_payloads(data, path, damages):
        message = decode_checked(offset, payload, path, damages)
        if message is not None:
            out.append(message)
    return out


@attrs.frozen
class Progress:
    """A firing slot's progress (its ``.done`` file): every later message before ``rolled_to`` is
    rolled, every due one before ``forwarded_to`` forwarded; ``intent``: a roll begun and not
    finished (slot -> size of its log before the roll), or None."""

    rolled_to: int = HEADER_SIZE
    forwarded_to: int = HEADER_SIZE
    intent: tuple[tuple[int, int], ...] | None = None


def encode_rolled(offset: int) -> bytes:
    return frame(b"R" + _U64.pack(offset))


def encode_forwarded(offset: int) -> bytes:
    return frame(b"F" + _U64.pack(offset))


def encode_intent(sizes: dict[int, int]) -> bytes:
    pairs = b"".join(_U32.pack(slot) + _U64.pack(size) for slot, size in sizes.items())
    return frame(b"I" + _U32.pack(len(sizes)) + pairs)


def read_progress(f: BinaryIO, path: str, damages: list[Damage]) -> Progress:
    """The last checkpoints of an open ``.done`` file (streamed: memory does not grow with it)."""
    check_header(f.read(HEADER_SIZE), path, KIND_DONE)
    rolled = forwarded = HEADER_SIZE
    intent = None
    for offset, _, payload in RecordStream(f, path, damages, HEADER_SIZE, 64 * 1024):
        kind, body = payload[:1], payload[1:]
        if kind in (b"R", b"F") and len(body) == _U64.size:
            (value,) = _U64.unpack(body)
            if kind == b"R":
                rolled, intent = value, None
            else:
                forwarded = value
        elif kind == b"I" and len(body) >= _U32.size:
            (count,) = _U32.unpack_from(body)
            if len(body) != _U32.size + count * 12:
                damages.append(Damage(path, offset, "a roll intent of the wrong length"))
                continue
            intent = tuple(
                (_U32.unpack_from(body, 4 + 12 * i)[0], _U64.unpack_from(body, 8 + 12 * i)[0])
                for i in range(count)
            )
        else:
            damages.append(Damage(path, offset, f"not a progress record ({kind!r})"))
    return Progress(rolled, forwarded, intent)
