"""Keys: escape sequences dropped, reading through trio's I/O wait, the terminal mode restored."""

from __future__ import annotations

import os
import pty
import termios

import pytest
import trio

from minibroker.tui.keys import cbreak, read_keys, split_keys


def test_split_keys_drops_escape_sequences():
    assert split_keys(b" n+\x1b[A-\x1b[1;5Cb\x1bOPq\x1b") == [" ", "n", "+", "-", "b", "q"]
    assert split_keys("é".encode()) == ["é"]


async def test_read_keys_until_end_of_input():
    read_end, write_end = os.pipe()
    seen = []

    async def handle(key: str) -> None:
        seen.append(key)

    try:
        os.write(write_end, b"n\x1b[Ab")
        os.close(write_end)
        with trio.fail_after(5):
            await read_keys(read_end, handle)
    finally:
        os.close(read_end)
    assert seen == ["n", "b"]


def test_cbreak_restores_the_terminal_even_on_error():
    master, slave = pty.openpty()
    try:
        before = termios.tcgetattr(slave)
        with pytest.raises(RuntimeError), cbreak(slave):
            during = termios.tcgetattr(slave)
            assert not during[3] & termios.ECHO and not during[3] & termios.ICANON
            assert during[3] & termios.ISIG  # Ctrl-C still interrupts
            raise RuntimeError("boom")
        assert termios.tcgetattr(slave) == before
    finally:
        os.close(master)
        os.close(slave)
