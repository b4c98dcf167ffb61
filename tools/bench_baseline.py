"""Time this tree against an earlier commit in one run: alternating pairs of the same command.

This machine's speed drifts by a third within minutes, so a figure from an earlier
session does not compare with one from now. ``pairs`` runs a command from a
baseline commit and from this tree one after the other, the order swapped every
pair, so both see the same spells; ``summary`` gives this tree ÷ baseline.

``checkout(rev, root, into)`` writes the commit's files (``git archive``) to a
directory: the baseline runs from there with the same interpreter and packages.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


class BaselineError(Exception):
    """The baseline cannot be used; ``str()`` is the one-line reason."""


def resolve(rev: str, root: Path) -> str:
    """The full commit id ``rev`` names in the git checkout at ``root``."""
    try:
        found = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
            capture_output=True,
            text=True,
        )
    except OSError as error:
        raise BaselineError(f"--baseline needs git: {error.strerror}") from None
    if found.returncode != 0:
        raise BaselineError(f"--baseline {rev}: not a commit of the git checkout at {root}")
    return found.stdout.strip()


def checkout(commit: str, root: Path, into: Path) -> Path:
    """The files of ``commit`` written under ``into`` (created); returns ``into``."""
    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", commit], capture_output=True)
    if archive.returncode != 0:
        reason = archive.stderr.decode(errors="replace").strip().splitlines()
        raise BaselineError(f"--baseline {commit[:12]}: git archive failed: {(reason or ['?'])[-1]}")
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def pairs(count: int, run: Callable[[str], float]) -> list[dict[str, float]]:
    """``count`` pairs of ``run("baseline")`` and ``run("current")`` (seconds each), the order
    swapped every pair (baseline first in the first)."""
    done = []
    for index in range(count):
        order = ("baseline", "current") if index % 2 == 0 else ("current", "baseline")
        seconds = {side: run(side) for side in order}
        done.append(
            {
                "baseline_s": seconds["baseline"],
                "current_s": seconds["current"],
                "ratio": round(seconds["current"] / seconds["baseline"], 3),
            }
        )
    return done


def summary(done: list[dict[str, float]]) -> dict[str, Any]:
    """This tree ÷ baseline over all pairs (total against total), and the pairs' lowest and highest."""
    ratios = [pair["ratio"] for pair in done]
    baseline = sum(pair["baseline_s"] for pair in done)
    current = sum(pair["current_s"] for pair in done)
    return {
        "baseline_total_s": round(baseline, 2),
        "current_total_s": round(current, 2),
        "ratio": round(current / baseline, 3),
        "ratio_min": min(ratios),
        "ratio_max": max(ratios),
    }
