"""The report's charts drawn on two cores: a forked child draws some while this process draws the rest.

``draw(analysis, jobs)`` calls every job's ``function(analysis, path)`` and returns each
one's result (the PNG's path, or None when the chart had nothing to draw), exactly as calling
them in turn would: the charts do not depend on each other, and each writes only its own file.
The child (``os.fork``, Linux only) draws its share, sends which charts it drew through a
pipe and leaves with ``os._exit`` (nothing of this process's state runs again in it).
Whatever it does not report, because it failed, was killed or could not start, is drawn
here afterwards, so a failed child costs time, never a chart. A child that has not reported
``CHILD_WAIT_FACTOR`` times as long after the fork as this process took for its own share
(and at least ``CHILD_WAIT_S``) is killed: a child stuck on a lock another thread held at
the fork cannot hang ``analyze``. Elsewhere, or for one job, everything is drawn here.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: a chart job: the function drawing it from the Analysis, the PNG to write
Job = tuple[Callable[[Any, Path], Path | None], Path]
#: how long the child may take, as a multiple of this process's time for its own share ...
CHILD_WAIT_FACTOR = 10.0
#: ... and at least this many seconds
CHILD_WAIT_S = 60.0
#: the child's report is a few names and paths: a longer one is not read
_MAX_REPORT = 1 << 20


def split(names: list[str]) -> tuple[list[str], list[str]]:
    """(the child's share, this process's share): alternate names, so each gets about half."""
    return names[0::2], names[1::2]


def draw(analysis: Any, jobs: dict[str, Job]) -> dict[str, Path | None]:
    """Every job's result on ``analysis``, by name (module docstring)."""
    names = list(jobs)
    if len(names) < 2 or sys.platform != "linux":
        return {name: _run(analysis, jobs[name]) for name in names}
    theirs, ours = split(names)
    started = time.monotonic()
    child = _fork(analysis, jobs, theirs)
    try:
        results = {name: _run(analysis, jobs[name]) for name in ours}
    finally:  # the child is waited for even when a chart here fails
        ours_s = time.monotonic() - started
        deadline = started + max(CHILD_WAIT_S, CHILD_WAIT_FACTOR * ours_s)
        drawn = _collect(child, deadline) if child is not None else {}
    for name in theirs:
        if name not in drawn:
            results[name] = _run(analysis, jobs[name])
        else:
            results[name] = Path(drawn[name]) if drawn[name] else None
    return {name: results[name] for name in names}


def _run(analysis: Any, job: Job) -> Path | None:
    function, path = job
    return function(analysis, path)


def _fork(analysis: Any, jobs: dict[str, Job], names: list[str]) -> tuple[int, int] | None:
    """(pid, read end) of a child drawing ``names``; None if it cannot be started."""
    try:
        read, write = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        return None
    if pid:
        os.close(write)
        return pid, read
    status = 1
    try:  # the child: draw, report, leave without running anything of the parent's
        os.close(read)
        done = {}
        for name in names:
            path = _run(analysis, jobs[name])
            done[name] = str(path) if path is not None else ""
        with os.fdopen(write, "w") as pipe:
            json.dump(done, pipe)
        status = 0
    finally:
        os._exit(status)


def _readable(fd: int, seconds: float) -> bool:
    """Whether ``fd`` has data or its end within ``seconds`` (poll: no limit on the fd's number)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(1, math.ceil(seconds * 1000))))


def _collect(child: tuple[int, int], deadline: float) -> dict[str, str]:
    """What the child reported: name -> the PNG's path, or "" for no chart; {} if it failed.

    The report is written after the last chart, so a whole one is proof enough; the exit
    status is not read (where SIGCHLD is ignored the child is reaped before ``waitpid``).
    A child still running at ``deadline`` (``time.monotonic``), or when the wait is interrupted
    (Ctrl-C), is killed and reports nothing.
    """
    pid, read = child
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or size > _MAX_REPORT or not _readable(read, left):
                _kill(pid)
                chunks = []
                break
            chunk = os.read(read, 65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except BaseException:  # interrupted while waiting: the child is not waited for either
        _kill(pid)
        raise
    finally:
        os.close(read)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    try:
        drawn = json.loads(b"".join(chunks))
    except ValueError:
        return {}
    return drawn if isinstance(drawn, dict) else {}


def _kill(pid: int) -> None:
    """Kill the child (it may have left already); ``_collect`` still reaps it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
