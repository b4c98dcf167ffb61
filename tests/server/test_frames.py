"""The frame reader: Hypothesis over arbitrary splits of valid streams, and every invalid size."""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.server.frames import FrameError, FrameReader, frame

payloads = st.lists(st.binary(max_size=300), max_size=20)


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


@given(payloads, st.lists(st.integers(min_value=0), max_size=30))
def test_any_split_of_a_valid_stream_gives_back_the_frames_in_order(frames, cuts):
    stream = b"".join(frame(p) for p in frames)
    reader = FrameReader(max_bytes=300)
    out = []
    for chunk in _chunks(stream, cuts):
        out.extend(reader.frames(chunk))
    assert out == frames
    assert reader.buffered == 0


@given(payloads, st.binary(min_size=1, max_size=3))
def test_an_incomplete_tail_stays_buffered(frames, tail):
    reader = FrameReader(max_bytes=300)
    assert reader.frames(b"".join(frame(p) for p in frames) + tail) == frames
    assert reader.buffered == len(tail)


@given(payloads, st.integers(min_value=-(2**31), max_value=-1))
def test_a_negative_size_fails_after_the_frames_before_it(frames, size):
    reader = FrameReader(max_bytes=300)
    reader.feed(b"".join(frame(p) for p in frames) + struct.pack(">i", size) + b"rest")
    assert [reader.next_frame() for _ in frames] == frames
    with pytest.raises(FrameError, match=f"invalid frame size {size}"):
        reader.next_frame()
    with pytest.raises(FrameError):  # and for good: the stream cannot be resynchronised
        reader.feed(frame(b"ok"))


@given(st.integers(min_value=301, max_value=2**31 - 1))
def test_a_size_above_the_limit_fails_before_the_payload_arrives(size):
    reader = FrameReader(max_bytes=300)
    reader.feed(struct.pack(">i", size))
    with pytest.raises(FrameError) as failure:
        reader.next_frame()
    assert str(failure.value) == f"frame of {size} bytes exceeds socket.request.max.bytes (300)"


def test_the_limit_itself_is_allowed_and_an_empty_frame_is_a_frame():
    reader = FrameReader(max_bytes=5)
    assert reader.frames(frame(b"12345") + frame(b"")) == [b"12345", b""]


def test_default_limit_is_kafkas_socket_request_max_bytes():
    assert FrameReader().max_bytes == 104_857_600
