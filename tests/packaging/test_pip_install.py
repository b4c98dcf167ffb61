"""A plain, non-editable ``pip install`` of the checkout into a fresh venv: the CLI and its bundled scenarios.

Real parts: a new virtual environment, pip building the wheel with setuptools (build isolation,
as a user's ``pip install .`` does), and the installed ``minibroker`` script run from an empty
directory with no PYTHONPATH, so nothing can come from the checkout. Dependencies come from pip's
cache or the index; the test skips (saying so) only when pip cannot reach an index.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker.scenario.library import bundled_scenarios

ROOT = Path(__file__).resolve().parents[2]
#: what pip prints when it cannot reach the package index
OFFLINE = ("NewConnectionError", "Temporary failure in name resolution", "No matching distribution found")
#: not part of the source a user would install
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "runs"
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("pip-install")
    source = base / "src"
    shutil.copytree(ROOT, source, symlinks=True, ignore=SKIP)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_NO_INDEX")}
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 and any(marker in done.stderr for marker in OFFLINE):
        pytest.skip(f"pip could not reach a package index (offline): {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    shutil.rmtree(source)  # the installed package must not need its source tree
    return venv


def _minibroker(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [str(venv / "bin" / "minibroker"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_list_shows_the_bundled_scenarios_from_any_directory(installed, tmp_path):
    out = _minibroker(installed, tmp_path, "list")
    assert out.returncode == 0, out.stderr
    bundled = [path.stem for path in bundled_scenarios(ROOT / "scenarios")]
    shown = [
        line.split()[1]
        for line in out.stdout.splitlines()
        if line.startswith("│ ") and line.split()[1] != "│"
    ]
    assert shown == bundled
    assert "site-packages/minibroker/scenarios" in out.stdout


def test_run_a_bundled_scenario_by_name_from_any_directory(installed, tmp_path):
    out = _minibroker(installed, tmp_path, "run", "acks_all")
    assert out.returncode == 0, out.stderr
    assert (
        "│ messages-3-4 │ producer │ produce │      0 │     100 │       110 │      10 │ condition │"
        in out.stdout
    )
    assert out.stdout.rstrip().endswith("all expectations hold")
    assert _minibroker(installed, tmp_path, "run", "acks_all.toml", "--quiet").returncode == 0


def test_an_unknown_name_is_a_one_line_usage_error(installed, tmp_path):
    out = _minibroker(installed, tmp_path, "run", "acks_al")
    assert out.returncode == 2
    assert (
        out.stderr
        == "minibroker: acks_al: no such file, and no bundled scenario of that name (minibroker list)\n"
    )
