"""Charts drawn in two processes give what drawing them in turn gives, even when the child fails."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from minibroker.analytics import drawing


def _writer(text: str):
    """A chart function that writes ``text`` and the pid that drew it, or draws nothing for ""."""

    def chart(analysis: object, path: Path) -> Path | None:
        if not text:
            return None
        path.write_text(f"{text} {os.getpid()}")
        return path

    return chart


def _jobs(tmp_path: Path, texts: dict[str, str]) -> dict[str, drawing.Job]:
    return {name: (_writer(text), tmp_path / f"{name}.txt") for name, text in texts.items()}


TEXTS = {"latency": "a", "rate": "b", "timer": "", "purgatory": "c", "hw": "d", "isr": ""}


@pytest.mark.skipif(sys.platform != "linux", reason="the charts are drawn in a forked child on Linux only")
def test_a_child_draws_its_share_and_the_results_are_those_of_drawing_in_turn(tmp_path: Path) -> None:
    results = drawing.draw(None, _jobs(tmp_path, TEXTS))

    assert list(results) == list(TEXTS)  # the callers' order
    assert results == {name: (tmp_path / f"{name}.txt" if text else None) for name, text in TEXTS.items()}
    theirs, ours = drawing.split(list(TEXTS))
    assert theirs == ["latency", "timer", "hw"] and ours == ["rate", "purgatory", "isr"]
    pids = {name: int(path.read_text().split()[1]) for name, path in results.items() if path}
    assert pids["rate"] == pids["purgatory"] == os.getpid()
    assert pids["latency"] == pids["hw"] != os.getpid()  # drawn by the child
    assert not (tmp_path / "timer.txt").exists() and not (tmp_path / "isr.txt").exists()


@pytest.mark.skipif(sys.platform != "linux", reason="the charts are drawn in a forked child on Linux only")
def test_what_a_failing_child_did_not_draw_is_drawn_here(tmp_path: Path) -> None:
    parent = os.getpid()

    def fails_in_child(analysis: object, path: Path) -> Path | None:
        if os.getpid() != parent:
            raise RuntimeError("the child fails")
        path.write_text("drawn here")
        return path

    jobs = _jobs(tmp_path, TEXTS)
    jobs["latency"] = (fails_in_child, tmp_path / "latency.txt")
    results = drawing.draw(None, jobs)

    assert results["latency"] == tmp_path / "latency.txt"
    assert (tmp_path / "latency.txt").read_text() == "drawn here"
    assert int((tmp_path / "hw.txt").read_text().split()[1]) == os.getpid()  # redrawn here too
    assert results["timer"] is None and results["rate"] == tmp_path / "rate.txt"


@pytest.mark.skipif(sys.platform != "linux", reason="the charts are drawn in a forked child on Linux only")
def test_a_child_reaped_before_it_is_waited_for_still_counts(tmp_path: Path) -> None:
    # a parent process that ignores SIGCHLD passes that on: children are reaped by the kernel
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        results = drawing.draw(None, _jobs(tmp_path, TEXTS))
    finally:
        signal.signal(signal.SIGCHLD, previous)

    assert results == {name: (tmp_path / f"{name}.txt" if text else None) for name, text in TEXTS.items()}
    assert int((tmp_path / "latency.txt").read_text().split()[1]) != os.getpid()  # the child's


@pytest.mark.skipif(sys.platform != "linux", reason="the charts are drawn in a forked child on Linux only")
def test_a_child_that_hangs_is_killed_and_its_charts_drawn_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = os.getpid()
    pid_file = tmp_path / "child.pid"

    def hangs_in_child(analysis: object, path: Path) -> Path | None:
        if os.getpid() != parent:
            pid_file.write_text(str(os.getpid()))
            time.sleep(600)  # a lock that never comes
        path.write_text("drawn here")
        return path

    monkeypatch.setattr(drawing, "CHILD_WAIT_S", 0.5)
    jobs = _jobs(tmp_path, TEXTS)
    jobs["latency"] = (hangs_in_child, tmp_path / "latency.txt")
    started = time.monotonic()
    results = drawing.draw(None, jobs)

    # real time: the child gets 0.5 s (this process draws its share in far less); 10 s is slack
    assert time.monotonic() - started < 10
    assert results["latency"] == tmp_path / "latency.txt"
    assert (tmp_path / "latency.txt").read_text() == "drawn here"
    assert int((tmp_path / "hw.txt").read_text().split()[1]) == os.getpid()  # redrawn here
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid_file.read_text()), 0)


@pytest.mark.skipif(sys.platform != "linux", reason="the charts are drawn in a forked child on Linux only")
def test_an_interrupted_wait_kills_the_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parent = os.getpid()
    pid_file = tmp_path / "child.pid"

    def hangs_in_child(analysis: object, path: Path) -> Path | None:
        if os.getpid() != parent:
            pid_file.write_text(str(os.getpid()))
            time.sleep(600)
        return None

    def interrupted(fd: int, seconds: float) -> bool:
        raise KeyboardInterrupt  # Ctrl-C reaching this process alone, while it waits for the child

    def waits_for_the_child(analysis: object, path: Path) -> Path | None:
        deadline = time.monotonic() + 5
        while not (pid_file.exists() and pid_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.01)
        return None

    monkeypatch.setattr(drawing, "_readable", interrupted)
    jobs = _jobs(tmp_path, TEXTS)
    jobs["latency"] = (hangs_in_child, tmp_path / "latency.txt")  # the child's
    jobs["rate"] = (waits_for_the_child, tmp_path / "rate.txt")  # this process's, first
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        drawing.draw(None, jobs)

    assert time.monotonic() - started < 10  # real time: no wait for the 600 s child; 10 s is slack
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(pid_file.read_text()), 0)


@pytest.mark.skipif(sys.platform != "linux", reason="poll is how the child is waited for on Linux")
def test_the_wait_works_for_a_descriptor_above_select_s_limit() -> None:
    import fcntl
    import resource

    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] <= 1100:
        pytest.skip("this process may not open descriptor 1100 (ulimit -n is at most 1100)")
    read, write = os.pipe()
    high = fcntl.fcntl(read, fcntl.F_DUPFD, 1100)  # select() refuses descriptors from 1024 on
    try:
        assert drawing._readable(high, 0.01) is False
        os.write(write, b"x")
        assert drawing._readable(high, 0.01) is True
    finally:
        for fd in (read, write, high):
            os.close(fd)


def test_without_fork_every_chart_is_drawn_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drawing.sys, "platform", "darwin")
    monkeypatch.setattr(drawing.os, "fork", lambda: pytest.fail("forked"))

    results = drawing.draw(None, _jobs(tmp_path, TEXTS))

    assert [name for name, path in results.items() if path] == ["latency", "rate", "purgatory", "hw"]
    assert {int(path.read_text().split()[1]) for path in results.values() if path} == {os.getpid()}
