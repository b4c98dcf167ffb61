"""Kafka's framing: a 4-byte big-endian signed size, then that many bytes. Pure, no I/O.

``FrameReader`` is fed whatever bytes a socket delivers and hands back whole
frames (the payload, without the size), in order. It enforces Kafka's rules
for a receive (``NetworkReceive``): a negative size, or one larger than
``socket.request.max.bytes``, is an error, and so is anything fed after one.

Invariants:

- the concatenation of ``size + payload`` for every frame returned, followed
  by ``buffered`` bytes, equals everything fed so far (nothing lost, nothing
  invented, nothing reordered);
- the reader never holds more than ``4 + max_bytes`` bytes of a frame in the
  making plus one ``feed`` worth of data, so a peer cannot make it buffer
  without bound by announcing a huge frame.
"""

from __future__ import annotations

import struct

#: Kafka's default ``socket.request.max.bytes``
DEFAULT_MAX_BYTES = 104_857_600

_SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be a sequence of Kafka frames; the connection must close."""


class FrameReader:
    """Splits a byte stream into Kafka frames; ``max_bytes`` caps one frame's payload."""

    __slots__ = ("max_bytes", "_buffer", "_start", "_failed")

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._start = 0
        self._failed: FrameError | None = None

    @property
    def buffered(self) -> int:
        """Bytes fed but not yet returned in a frame."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> None:
        if self._failed is not None:
            raise self._failed
        if self._start and self._start >= len(self._buffer) // 2:
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    def next_frame(self) -> bytes | None:
        """The next whole frame's payload, or None until more bytes arrive.

        Raises ``FrameError`` once the next size is negative or above ``max_bytes``
        (and on every call after that).
        """
        if self._failed is not None:
            raise self._failed
        if self.buffered < 4:
            return None
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        if size < 0:
            self._failed = FrameError(f"invalid frame size {size}")
            raise self._failed
        if size > self.max_bytes:
            self._failed = FrameError(
                f"frame of {size} bytes exceeds socket.request.max.bytes ({self.max_bytes})"
            )
            raise self._failed
        end = self._start + 4 + size
        if len(self._buffer) < end:
            return None
        frame = bytes(self._buffer[self._start + 4 : end])
        self._start = end
        return frame

    def unfinished(self) -> str | None:
        """What an incomplete frame at the end of the stream looks like, or None if there is none."""
        buffered = self.buffered
        if buffered == 0:
            return None
        if buffered < 4:
            return f"{buffered} of the 4 bytes of a frame size"
        (size,) = _SIZE.unpack_from(self._buffer, self._start)
        return f"{buffered - 4} of a {size}-byte frame"

    def frames(self, data: bytes = b"") -> list[bytes]:
        """Feed ``data`` and return every frame now complete."""
        if data:
            self.feed(data)
        out = []
        while (frame := self.next_frame()) is not None:
            out.append(frame)
        return out


def frame(payload: bytes) -> bytes:
    """``payload`` with its size in front."""
    return _SIZE.pack(len(payload)) + payload
