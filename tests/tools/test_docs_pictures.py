"""tools/docs_pictures.py: every picture in docs/ is one it draws, and the snapshot pictures are what
``minibroker snapshot`` draws today, byte for byte (the Spark-drawn ones:
tests/analytics/test_docs_pictures.py).

The snapshots are drawn in virtual time: rich's SVG export has fixed ids and no timestamp, and the PNGs
are that SVG rasterised by cairosvg, which writes no date either; two runs give the same bytes. The
PNGs' glyphs are the machine's ``monospace`` font: they are compared where that is DejaVu Sans Mono,
the font they were drawn with, and skipped (saying so) elsewhere; the SVGs are compared everywhere.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "docs_pictures.py"
spec = importlib.util.spec_from_file_location("docs_pictures", TOOL)
pictures = importlib.util.module_from_spec(spec)
sys.modules["docs_pictures"] = pictures
spec.loader.exec_module(pictures)

SNAPSHOTS = [name for name, job in pictures.PICTURES.items() if not job.spark]


def test_every_picture_in_docs_is_one_the_tool_draws():
    assert pictures.committed() == sorted(pictures.PICTURES)


def test_the_tool_draws_each_job_once_and_names_its_pictures():
    assert [job.name for job in pictures.JOBS] == [
        "snapshot timing_wheel_cascade",
        "snapshot group_stalled_member",
        "snapshot delay_wheel_vs_levels",
        "snapshot txn_read_committed_stalled",
        "analyze",
        "sweep",
    ]
    assert SNAPSHOTS == [
        "timing_wheel_cascade.svg",
        "timing_wheel_cascade.png",
        "group_stalled_member.svg",
        "delay_wheel_vs_levels.png",
        "txn_read_committed_stalled.png",
    ]


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    return pictures.draw(SNAPSHOTS, tmp_path_factory.mktemp("snapshots"))


def monospace() -> str | None:
    """The family fontconfig gives for ``monospace`` (what cairosvg draws the snapshots' text with)."""
    if shutil.which("fc-match") is None:
        return None
    found = subprocess.run(["fc-match", "--format=%{family}", "monospace"], capture_output=True, text=True)
    return found.stdout.split(",")[0] if found.returncode == 0 else None


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_the_committed_snapshot_is_what_the_tool_draws_today(drawn, name):
    if name.endswith(".png") and (font := monospace()) != "DejaVu Sans Mono":
        pytest.skip(f"docs/{name} was drawn with DejaVu Sans Mono; this machine's monospace is {font}")
    assert pictures.differing({name: drawn[name]}) == [], (
        f"docs/{name} is stale: python tools/docs_pictures.py --write --only {name}"
    )


def test_the_cascade_shows_every_purgatory_of_broker_0(drawn):
    svg = drawn["timing_wheel_cascade.svg"].read_text(encoding="utf-8")
    for purgatory in ("Produce", "Fetch", "DeleteRecords"):
        assert f">b0&#160;{purgatory}" in svg


def test_check_names_each_differing_picture_and_exits_1(tmp_path, monkeypatch, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "group_stalled_member.svg").write_text("<svg/>", encoding="utf-8")
    monkeypatch.setattr(pictures, "DOCS", docs)
    only = ["--only", "group_stalled_member.svg", "--only", "timing_wheel_cascade.svg"]
    assert pictures.main(["--check", *only]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"docs/{name} differs from what the tool draws (python tools/docs_pictures.py --write)"
        for name in ("timing_wheel_cascade.svg", "group_stalled_member.svg")
    ]
    assert pictures.main(["--write", *only]) == 0
    assert sorted(p.name for p in docs.iterdir()) == ["group_stalled_member.svg", "timing_wheel_cascade.svg"]
    assert pictures.main(["--check", *only]) == 0


def test_an_unknown_picture_is_one_line_and_exit_2():
    run = subprocess.run(
        [sys.executable, str(TOOL), "--check", "--only", "nope.png"],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.startswith("docs_pictures: --only nope.png: not a picture this tool draws (")
    assert len(run.stderr.splitlines()) == 1


def test_the_pngs_are_cairosvgs_even_with_rsvg_convert_on_path(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "rsvg-convert"
    fake.write_text("#!/bin/sh\necho 'not this converter' >&2\nexit 1\n", encoding="utf-8")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    drawn = pictures.draw(["delay_wheel_vs_levels.png"], tmp_path / "work")
    assert drawn["delay_wheel_vs_levels.png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert os.environ["PATH"].startswith(str(bin_dir))  # put back after drawing
