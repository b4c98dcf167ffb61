"""The real ``minibroker run --tui`` on a pseudo-terminal: the screen (kept by pyte), keys, and the
terminal given back as it was, after ``q`` and after Ctrl-C.

These run in real time; every wait is bounded (``TIMEOUT_S``) and the scenarios are short or fast.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable

import pytest

from tests.tui.helpers import ACKS_ALL, CASCADE, ROOT, SCENARIOS

pyte = pytest.importorskip("pyte")

TIMEOUT_S = 20.0
ENTER_ALT_SCREEN, LEAVE_ALT_SCREEN, SHOW_CURSOR = b"\x1b[?1049h", b"\x1b[?1049l", b"\x1b[?25h"


class Terminal:
    """``minibroker ARGS`` with a pty as its controlling terminal, 120×45."""

    def __init__(self, *args: str, cols: int = 120, rows: int = 45) -> None:
        self.master, self.slave = pty.openpty()
        fcntl.ioctl(self.slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.attrs_before = termios.tcgetattr(self.slave)
        self.screen = pyte.Screen(cols, rows)
        self.stream = pyte.ByteStream(self.screen)
        self.raw = bytearray()
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env["TERM"] = "xterm-256color"
        slave = self.slave

        def controlling_terminal() -> None:  # after setsid: the pty becomes the session's terminal
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        self.process = subprocess.Popen(
            [sys.executable, "-m", "minibroker", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            env=env,
            start_new_session=True,
            preexec_fn=controlling_terminal,  # the test process has one thread
        )

    def text(self) -> str:
        return "\n".join(line.rstrip() for line in self.screen.display)

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # the child closed its side
            return False
        self.raw += data
        self.stream.feed(data)
        return bool(data)

    def wait_for(self, predicate: Callable[[str], bool], what: str) -> str:
        """The screen once ``predicate`` holds and the frame being drawn is complete (output paused)."""
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            if predicate(self.text()):
                while self._read(0.15):  # the rest of the frame
                    pass
                if predicate(self.text()):
                    return self.text()
            self._read(0.05)
        raise AssertionError(f"timed out waiting for {what}; screen:\n{self.text()}")

    def press(self, keys: bytes) -> None:
        os.write(self.master, keys)

    def finish(self) -> int:
        """Wait for the exit status, reading the rest of the output."""
        deadline = time.monotonic() + TIMEOUT_S
        while self.process.poll() is None and time.monotonic() < deadline:
            self._read(0.05)
        while self._read(0.05):
            pass
        if self.process.poll() is None:
            self.process.kill()
            raise AssertionError(f"minibroker did not exit; screen:\n{self.text()}")
        return self.process.returncode

    def close(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture
def terminal():
    opened: list[Terminal] = []

    def start(*args: str, cols: int = 120, rows: int = 45) -> Terminal:
        opened.append(Terminal(*args, cols=cols, rows=rows))
        return opened[-1]

    yield start
    for term in opened:
        term.close()


def test_watch_pause_step_and_quit(terminal):
    term = terminal("run", CASCADE, "--tui", "--speed", "0.05")
    term.wait_for(lambda s: " running ×0.05 (1 s = 50 ms)" in s and "delay queue" in s, "the first frame")
    term.press(b" ")
    term.wait_for(lambda s: " paused ×0.05" in s, "the pause")
    term.press(b"n")  # the next instant where something happens: 340 ms, the 350 ms task cascades
    screen = term.wait_for(lambda s: " t = 340 ms virtual" in s, "the step to 340 ms")
    lines = screen.splitlines()
    assert lines[2] == " space pause · n step · +/- speed · b broker · q quit"  # too wide for line 2
    assert lines[5].startswith(
        "│ L1    1 ▸ ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  1  ·  ·  ·  ·  ·  ·  ·  ·  ·        20"
    )
    assert lines[6].startswith(
        "│ L2   20   ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·  ·▸ ·  ·  ·       400"
    )
    assert lines[7].startswith("│ L3  400 ▸ ·  1  ·")
    assert "t-0             0      0  0,1,2  b0* 2/0  b1 1/0 paused  b2 1/0 paused" in screen
    term.press(b"b")
    term.wait_for(lambda s: "timing wheel · broker 1 ·" in s, "broker 1")
    term.press(b"q")
    assert term.finish() == 0  # a user quit, nothing failed so far
    assert term.raw.count(ENTER_ALT_SCREEN) == 1 and term.raw.count(LEAVE_ALT_SCREEN) == 1
    assert term.raw.rindex(SHOW_CURSOR) > term.raw.index(ENTER_ALT_SCREEN)
    assert "expectations · 3 passed · 0 failed · 7 to come" in screen
    assert (  # the quit line counts what the last frame counted
        b"minibroker: quit at 340 ms (virtual), before the scenario ended; "
        b"expectations: 3 passed, 0 failed, 7 to come"
    ) in term.raw
    assert termios.tcgetattr(term.slave) == term.attrs_before


def test_a_finished_run_waits_for_q_then_prints_the_summary(terminal):
    term = terminal("run", ACKS_ALL, "--tui", "--speed", "2")
    screen = term.wait_for(lambda s: "finished   all expectations hold — q to quit" in s, "the end")
    assert "t-0             0      0  0,1,2  b0* 5/5  b1 5/3  b2 5/3" in screen
    assert "expectations · 6 passed · 0 failed · 0 to come" in screen
    term.press(b"q")
    assert term.finish() == 0
    after = term.raw[term.raw.index(LEAVE_ALT_SCREEN) :]
    assert b"all expectations hold" in after and b"partitions at the end" in after
    assert termios.tcgetattr(term.slave) == term.attrs_before


def test_ctrl_c_restores_the_terminal(terminal):
    term = terminal("run", str(SCENARIOS / "purge_interval.toml"), "--tui")
    term.wait_for(lambda s: " running ×0.25" in s, "the first frame")
    term.press(b"\x03")
    assert term.finish() == 130
    assert b"minibroker: interrupted" in term.raw[term.raw.index(LEAVE_ALT_SCREEN) :]
    assert term.raw.rindex(SHOW_CURSOR) > term.raw.index(ENTER_ALT_SCREEN)
    assert termios.tcgetattr(term.slave) == term.attrs_before


def test_an_80x24_terminal_shows_the_keys_the_events_and_the_expectations(terminal):
    term = terminal("run", ACKS_ALL, "--tui", "--speed", "0.05", cols=80, rows=24)
    term.wait_for(lambda s: " running ×0.05" in s and "── expectations" in s, "the first frame")
    term.press(b" ")
    screen = term.wait_for(lambda s: " paused ×0.05" in s, "the pause")
    lines = screen.splitlines()
    assert len(lines) == 24
    assert lines[2] == " space pause · n step · +/- speed · b broker · q quit"
    assert lines[4].split()[1:4] == ["tick", "ms", "0"]  # one line per level under the slot numbers
    assert lines[5].startswith("│ L1 ") and lines[6].startswith("│ L2 ")
    assert any(line.startswith("b0 Produce  watched ") for line in lines)
    events = next(n for n, line in enumerate(lines) if line.startswith("── events · latest of "))
    expectations = next(n for n, line in enumerate(lines) if line.startswith("── expectations · "))
    assert expectations - events >= 3  # at least two events shown
    assert lines[expectations + 1].startswith(("· expect[0] ", "✓ expect[0] "))
    term.press(b"q")
    assert term.finish() == 0
