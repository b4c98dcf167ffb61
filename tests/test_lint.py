"""ruff is part of the suite: a lint error or an unformatted file fails the tests like any regression."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _ruff() -> str:
    """The ruff installed with the test extra (pinned: formatting differs between releases), else PATH's."""
    beside = Path(sys.executable).with_name("ruff")
    ruff = str(beside) if beside.exists() else shutil.which("ruff") or str(beside)
    if not Path(ruff).exists():
        pytest.fail("ruff is not installed: install the test extra (pip install -e '.[test]')")
    return ruff


def test_ruff_is_clean():
    out = subprocess.run([_ruff(), "check", "--no-cache", str(ROOT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_python_files_are_formatted():
    out = subprocess.run([_ruff(), "format", "--check", str(ROOT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
