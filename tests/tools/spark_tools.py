"""The Spark bench tools run as a user runs them: a subprocess, no stdin, no class archive."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_tool(script: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``tools/<script> args`` with this interpreter; its exit status, stdout and stderr."""
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "MINIBROKER_SPARK_CDS": "0"},  # no 180 MB class archive for a test
    )
