"""Decompressing a record batch's records, with a bound on the output: Kafka's codecs 1-4.

A v2 batch's attributes name its codec in their low three bits: 0 none, 1 gzip,
2 snappy, 3 lz4, 4 zstd (5-7 name nothing). Everything after the 61-byte batch
header is then one compressed stream of the records. ``decompress`` returns
that stream's bytes, or raises:

- ``DecompressionError`` when the bytes are not a complete stream of that codec
  (garbage, a cut-off stream, trailing bytes that are not another stream);
- ``DecompressedTooLarge`` when they would expand past ``limit`` bytes. Kafka has
  no such bound (it streams the records and keeps them); here a crafted batch of
  a few kilobytes must not be able to take gigabytes, so the output is counted
  as it is produced and decompression stops one byte past the limit.

Formats, as Kafka writes and reads them: gzip may hold several members back to
back; snappy is xerial-framed (a 16-byte header, then blocks each prefixed with
its int32 length) or, from some clients, one raw block; lz4 is one LZ4 frame;
zstd may hold several frames. The snappy, lz4 and zstd libraries are
kafka-python's own optional codecs (python-snappy, lz4, zstandard).
"""

from __future__ import annotations

import struct
import zlib

import lz4.frame
import snappy
import zstandard

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_HEADER = b"\x82SNAPPY\x00"
_XERIAL_HEADER_SIZE = 16
_BLOCK_SIZE = struct.Struct(">i")
_CHUNK = 65_536


class DecompressionError(Exception):
    """The bytes are not a complete stream of the codec the batch names."""


class DecompressedTooLarge(Exception):
    """The stream expands past the limit."""


def decompress(codec: int, data: bytes, limit: int) -> bytes:
    """The decompressed bytes of ``data`` under ``codec`` (1-4), at most ``limit`` of them."""
    decoder = _DECODERS[codec]
    try:
        return decoder(bytes(data), limit)
    except (DecompressionError, DecompressedTooLarge):
        raise
    except Exception as error:  # zlib.error, snappy.UncompressError, RuntimeError (lz4), ZstdError, ...
        raise DecompressionError(f"{type(error).__name__}: {error}") from None


def _too_large(limit: int) -> DecompressedTooLarge:
    return DecompressedTooLarge(f"decompress to more than {limit} bytes")


def _gzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    rest = data
    while rest:  # one gzip member per round
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = rest
        while not member.eof:
            out += member.decompress(pending, limit + 1 - len(out))  # max_length >= 1: 0 means unbounded
            if len(out) > limit:
                raise _too_large(limit)
            pending = member.unconsumed_tail
            if not member.eof and not pending:
                raise DecompressionError("the gzip stream ends before its last member does")
        rest = member.unused_data
    if not data:
        raise DecompressionError("no gzip stream at all")
    return bytes(out)


def _uvarint(data: bytes, pos: int) -> int:
    """Snappy's block preamble: the uncompressed length as an unsigned little-endian base-128 varint."""
    value = shift = 0
    for i in range(pos, min(pos + 5, len(data))):
        value |= (data[i] & 0x7F) << shift
        if data[i] < 0x80:
            return value
        shift += 7
    raise DecompressionError("a snappy block's length preamble is cut off or too long")


def _snappy(data: bytes, limit: int) -> bytes:
    if data[: len(_XERIAL_HEADER)] == _XERIAL_HEADER:
        blocks = []
        pos = _XERIAL_HEADER_SIZE
        while pos < len(data):
            if len(data) - pos < _BLOCK_SIZE.size:
                raise DecompressionError(f"a xerial snappy block length is cut off at {pos}")
            (size,) = _BLOCK_SIZE.unpack_from(data, pos)
            pos += _BLOCK_SIZE.size
            if size < 0 or pos + size > len(data):
                raise DecompressionError(f"a xerial snappy block of {size} bytes runs past the stream")
            blocks.append(data[pos : pos + size])
            pos += size
    else:
        blocks = [data]
    total = 0
    for block in blocks:
        total += _uvarint(block, 0)
        if total > limit:
            raise _too_large(limit)
    return b"".join(snappy.decompress(block) for block in blocks)


def _lz4(data: bytes, limit: int) -> bytes:
    frame = lz4.frame.LZ4FrameDecompressor()
    out = frame.decompress(data, max_length=limit + 1)
    while not frame.eof and not frame.needs_input and len(out) <= limit:
        out += frame.decompress(b"", max_length=limit + 1 - len(out))
    if len(out) > limit:
        raise _too_large(limit)
    if not frame.eof:
        raise DecompressionError("the lz4 frame is cut off")
    if frame.unused_data:
        raise DecompressionError(f"{len(frame.unused_data)} bytes follow the lz4 frame")
    return out


def _zstd(data: bytes, limit: int) -> bytes:
    # first count, bounded (a streaming reader stops quietly at a cut-off frame) ...
    reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
    total = 0
    while chunk := reader.read(_CHUNK):
        total += len(chunk)
        if total > limit:
            raise _too_large(limit)
    # ... then decompress frame by frame, which notices a cut-off frame; the output is now known small
    out = bytearray()
    rest = data
    while rest:
        frame = zstandard.ZstdDecompressor().decompressobj()
        out += frame.decompress(rest)
        if not frame.eof:
            raise DecompressionError("the zstd stream ends inside a frame")
        rest = frame.unused_data
    return bytes(out)


_DECODERS = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}
