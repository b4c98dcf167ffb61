"""The seeded fuzz corpus: every hostile file is checked or refused in bounded lines, time and memory.

``check`` runs in-process over the whole corpus (fast: loading only); a sample of the files it
accepts is also run, to show that what ``check`` accepts ``run`` runs (exit 0 or 1); a few of
the worst files go through the real program in a subprocess, under a memory limit, for the exit
status and the absence of a traceback end to end.
"""

from __future__ import annotations

import contextlib
import io
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minibroker.cli import main
from minibroker.scenario import load_scenario
from minibroker.scenario.loader.budget import projected_events
from minibroker.scenario.loader.limits import MAX_PROBLEMS
from tests.scenario.corpus import corpus

ROOT = Path(__file__).resolve().parents[2]
SEED = 20_261_124
CASES = corpus(SEED, 300)
#: a generous bound per file, only to catch a hang: loading one takes milliseconds to a second
CHECK_SECONDS = 20
#: runs of accepted files are sampled among those projected small (the budget itself is tested apart)
RUN_SAMPLE = 6
SMALL_RUN = 20_000


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_bytes(data)
    return path


def _events(path: Path) -> int:
    background, requests, _ = projected_events(load_scenario(path))
    return background + requests


def test_the_corpus_is_seeded_and_hostile():
    assert corpus(SEED, 40) == CASES[:40]
    texts = [data for _, data in CASES]
    assert len(set(texts)) > 250
    assert any(b"minibroker.timer.wheel.size" in t for t in texts)
    assert any(b"\xff\xfe" in t for t in texts)


@pytest.fixture(scope="module")
def checked(tmp_path_factory) -> list[tuple[str, Path, int, str, str, float]]:
    """Every case written to a file and checked: (name, path, exit status, stdout, stderr, seconds)."""
    folder = tmp_path_factory.mktemp("corpus")
    results = []
    for name, data in CASES:
        path = _write(folder, name, data)
        started = time.monotonic()
        code, out, err = _cli(["check", str(path)])
        results.append((name, path, code, out, err, time.monotonic() - started))
    return results


def test_check_accepts_or_refuses_every_case_in_bounded_lines(checked):
    accepted = 0
    for name, path, code, out, err, seconds in checked:
        assert seconds < CHECK_SECONDS, name
        assert "Traceback" not in out + err, name
        if code == 0:
            assert out.startswith(f"ok {path}: "), name
            accepted += 1
            continue
        assert code == 2, name
        lines = err.splitlines()
        assert 1 <= len(lines) <= MAX_PROBLEMS + 1, name
        for line in lines:
            assert line.startswith(f"minibroker: {path}") or line.startswith("minibroker: ... and "), line
            assert len(line) <= 1000 + len(f"minibroker: {path}:99999: "), name
    assert len(checked) - accepted > 150 and accepted >= 10, accepted
    # memory stayed bounded over the whole corpus (a wheel of one bucket took 1.6 GB in 20 s)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss < 1_500_000  # KiB


def test_what_check_accepts_run_runs(checked):
    small = [path for _, path, code, *_ in checked if code == 0 and _events(path) <= SMALL_RUN]
    assert len(small) >= RUN_SAMPLE
    for path in small[:: len(small) // RUN_SAMPLE][:RUN_SAMPLE]:
        code, out, err = _cli(["run", "--quiet", str(path)])
        assert code in (0, 1), (path, err)
        assert "Traceback" not in out + err


WORST = {
    "wheel of one bucket": (
        b'"minibroker.timer.wheel.size" = 1',
        "cluster.config.minibroker.timer.wheel.size",
    ),
    "a day too far": (b"end_ms = 1000000000", "scenario.end_ms"),
    "1000 deep": (b"x = " + b"{a = " * 1000 + b"1" + b"}" * 1000, "nested more than 32 deep"),
    "invalid UTF-8": (b'x = "\xff"', "not UTF-8: byte 0xff"),
}


@pytest.mark.parametrize("name", WORST)
def test_the_worst_files_through_the_real_program(tmp_path, name):
    line, expected = WORST[name]
    text = (ROOT / "scenarios" / "acks_all.toml").read_bytes()
    if line.startswith(b"end_ms"):
        data = text.replace(b"[scenario]\n", b"[scenario]\n" + line + b"\n", 1)
    elif b"wheel" in line:
        data = text.replace(b"[cluster]\n", b"[cluster]\nconfig = { " + line + b" }\n", 1)
    else:
        data = text + b"\n" + line + b"\n"
    path = _write(tmp_path, "worst", data)

    def limit_memory() -> None:  # 2 GiB of address space: enough for the program, not for a runaway
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))

    done = subprocess.run(
        [sys.executable, "-m", "minibroker", "run", str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=limit_memory,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"minibroker: {path}") and expected in lines[0]
