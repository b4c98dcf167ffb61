"""Single key presses from the terminal, read by a trio task.

``cbreak(fd)`` turns off echo and line buffering (signals stay on, so Ctrl-C is
still SIGINT) and restores the saved terminal attributes on the way out, however
the block ends. ``read_keys(fd, handle)`` waits until ``fd`` is readable (trio's
I/O wait: no thread, no change to the descriptor's blocking mode), reads what
is there and calls ``handle(key)`` for each key; escape sequences (arrows,
function keys) are dropped. It returns at end of input.
"""

from __future__ import annotations

import contextlib
import os
import re
import termios
import tty
from collections.abc import Awaitable, Callable, Iterator

import trio

#: CSI / SS3 sequences and lone escapes: keys the TUI does not use
_ESCAPES = re.compile(r"\x1b(\[[0-?]*[ -/]*[@-~]|O.|.)?", re.DOTALL)


@contextlib.contextmanager
def cbreak(fd: int) -> Iterator[None]:
    """Keys without echo or Enter while in the block; the terminal's attributes restored after."""
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd, termios.TCSANOW)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def split_keys(data: bytes) -> list[str]:
    """The keys in what one read returned, escape sequences removed."""
    text = _ESCAPES.sub("", data.decode("utf-8", errors="ignore"))
    return list(text)


async def read_keys(fd: int, handle: Callable[[str], Awaitable[None]]) -> None:
    """Call ``handle`` for every key typed on ``fd`` until end of input."""
    while True:
        await trio.lowlevel.wait_readable(fd)
        data = os.read(fd, 256)
        if not data:
            return
        for key in split_keys(data):
            await handle(key)
