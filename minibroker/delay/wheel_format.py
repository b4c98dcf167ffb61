"""The file wheel's on-disk format, version 1 (the only place that knows it).

A wheel directory holds, per slot ``i`` (five digits):

- ``slot-i.log``: the slot's messages, appended; ``slot-i.firing``: the same file
  renamed when the pointer reaches the slot (so new appends start a fresh log);
- ``slot-i.done``: ids of the firing slot's messages already forwarded or rolled;
- ``pointer``: the last tick whose slot was completely handled (decimal text,
  replaced atomically by rename).

Every ``.log``/``.firing``/``.done`` file starts with a 16-byte header::

    magic b"MBDW" | version u16 | kind u16 (1 messages, 2 done ids) | slot u32 | tick_ms u32

followed by records, each::

    0xA5 | length u32 | crc32 u32 (zlib, of the payload) | payload (length bytes)

A message payload: ``due_ms i64 | timestamp_ms i64 | real_partition i32 (-1: none) |
id | topic`` (each ``u16 length + UTF-8``) ``| key | value`` (each ``i32 length,
-1: null, + bytes``) ``| header count u16`` and per header ``u16 length + UTF-8 name,
i32 length + value``. A done payload is the message id's UTF-8 bytes. Integers
are big-endian.

Reading never trusts a record it cannot check: a record whose crc does not
match, or whose framing is impossible, is reported (``path``, byte offset) and
skipped by searching forward for the next record that checks out; a record cut
off by the end of the file (a write interrupted by a crash) is reported and
ends the file. Everything else of the file is read.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

import attrs

from minibroker.delay.headers import DelayedMessage

VERSION = 1
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
    if version != VERSION:
        raise WheelFormatError(f"{path}: format version {version}, this minibroker reads {VERSION}")
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


def encode_done(message_id: str) -> bytes:
    return frame(message_id.encode())


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


def iter_payloads(data: bytes, path: str, damages: list[Damage]) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of every checked record after the file header; damaged ones go to ``damages``."""
    pos = HEADER_SIZE
    while pos < len(data):
        end, payload, reason = _frame_at(data, pos)
        if payload is not None:
            yield pos, payload
            pos = end
            continue
        damages.append(Damage(path, pos, reason))
        found = _resync(data, pos + 1)
        if found is None:
            return
        pos = found


def _resync(data: bytes, start: int) -> int | None:
    """The next position from ``start`` holding a record that checks out, or None."""
    pos = data.find(bytes([RECORD_MAGIC]), start)
    while pos != -1:
        _, payload, _ = _frame_at(data, pos)
        if payload is not None:
            return pos
        pos = data.find(bytes([RECORD_MAGIC]), pos + 1)
    return None


def read_messages(data: bytes, path: str, damages: list[Damage]) -> list[DelayedMessage]:
    """The messages of a slot file's bytes; unreadable records are reported in ``damages``."""
    check_header(data, path, KIND_MESSAGES)
    out = []
    for offset, payload in iter_payloads(data, path, damages):
        try:
            out.append(decode_message(payload))
        except (ValueError, struct.error, UnicodeDecodeError) as error:
            damages.append(Damage(path, offset, f"passes its crc but does not decode: {error}"))
    return out


def read_done(data: bytes, path: str, damages: list[Damage]) -> set[str]:
    check_header(data, path, KIND_DONE)
    out = set()
    for offset, payload in iter_payloads(data, path, damages):
        try:
            out.add(payload.decode())
        except UnicodeDecodeError:
            damages.append(Damage(path, offset, "a done id is not UTF-8"))
    return out
