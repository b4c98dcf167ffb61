"""Helpers for the TUI tests: frames of bundled scenarios rendered to a recording Console."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console, RenderableType

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
CASCADE = str(SCENARIOS / "timing_wheel_cascade.toml")
ACKS_ALL = str(SCENARIOS / "acks_all.toml")


def text_of(renderable: RenderableType, width: int = 120, height: int = 25) -> list[str]:
    """The lines ``renderable`` shows at ``width`` columns (a Layout fills ``height``), right-stripped."""
    console = Console(width=width, height=height, record=True, file=io.StringIO())
    console.print(renderable)
    return [line.rstrip() for line in console.export_text().splitlines()]


def recording_console(width: int, height: int) -> Console:
    return Console(width=width, height=height, record=True, file=io.StringIO())
