"""``minibroker snapshot`` and ``run --tui`` without a terminal: files, plain output, one-line errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

from minibroker.cli import main
from minibroker.tui import png
from tests.tui.helpers import ACKS_ALL, CASCADE


def test_snapshot_writes_an_svg_of_the_frame(tmp_path, capsys):
    out = tmp_path / "cascade.svg"
    assert main(["snapshot", CASCADE, "--at", "200", "--svg", str(out)]) == 0
    assert capsys.readouterr().err == f"wrote {out}\n"
    svg = out.read_text(encoding="utf-8")
    assert svg.startswith('<svg class="rich-terminal" xml:space="preserve"')
    assert "minibroker&#160;snapshot&#160;timing_wheel_cascade.toml&#160;--at&#160;200" in svg
    assert "task-450&#160;→&#160;L3&#160;slot&#160;1" in svg
    # the same command gives the same picture
    again = tmp_path / "again.svg"
    assert main(["snapshot", CASCADE, "--at", "200", "--svg", str(again)]) == 0
    assert again.read_text(encoding="utf-8") == svg


def test_snapshot_png(tmp_path, capsys):
    if png.converter() is None:
        pytest.skip("no SVG converter here (rsvg-convert or cairosvg)")
    out = tmp_path / "cascade.png"
    assert main(["snapshot", CASCADE, "--at", "345", "--png", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert capsys.readouterr().err.startswith(f"wrote {out} (")


def test_png_without_a_converter_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(png, "converter", lambda: None)
    assert main(["snapshot", CASCADE, "--at", "200", "--png", str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().err == f"minibroker: {png.MISSING}\n"


def test_snapshot_prints_the_frame_without_files(capsys):
    assert main(["snapshot", ACKS_ALL, "--at", "105", "--broker", "1"]) == 0
    out = capsys.readouterr().out
    assert "timing wheel · broker 1 · kafka timer" in out
    assert "t = 105 ms virtual" in out


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--at", "10", "--broker", "3"],
            "minibroker: snapshot: --broker 3: the scenario has brokers 0..2\n",
        ),
        (["--at", "10", "--width", "40"], "minibroker: snapshot: --width must be at least 60 columns\n"),
        (["--at", "10", "--svg", "/nonexistent/dir/x.svg"], None),
    ],
)
def test_snapshot_errors_are_one_line(args, error, capsys):
    assert main(["snapshot", CASCADE, *args]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    if error is not None:
        assert err == error
    else:
        assert err.startswith("minibroker: --svg: cannot write /nonexistent/dir/x.svg: ")


def test_snapshot_usage_errors_exit_2_without_traceback(tmp_path):
    missing = subprocess.run(
        [sys.executable, "-m", "minibroker", "snapshot", CASCADE], capture_output=True, text=True
    )
    assert missing.returncode == 2
    assert "the following arguments are required: --at" in missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text("[cluster]\nbrokers = 0\n")
    out = subprocess.run(
        [sys.executable, "-m", "minibroker", "snapshot", str(bad), "--at", "1"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr
