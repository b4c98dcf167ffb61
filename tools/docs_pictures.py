"""Draw every picture in docs/ with minibroker's own commands, so that none can go stale.

    python tools/docs_pictures.py --check           # exit 1 naming each picture that differs
    python tools/docs_pictures.py --write           # redraw them in place
    python tools/docs_pictures.py --write --only timing_wheel_cascade.svg

Each picture is what one command draws today (the commands are listed in ``JOBS``):

- ``minibroker snapshot``: the TUI's view at a virtual time (timing_wheel_cascade.svg/.png,
  group_stalled_member.svg, delay_wheel_vs_levels.png);
- ``minibroker analyze`` (1 s buckets) over the traces of every bundled scenario, each written by
  ``minibroker run scenarios/NAME.toml --trace NAME.parquet``: the analyze-*.png charts;
- ``minibroker sweep scenarios/sweeps/lag_timeout_min_isr.toml``: sweep_lag_timeout_error_rate.png.

The commands run in this process through ``minibroker.cli.main`` (so a caller's SparkSession is
reused). Everything is drawn in virtual time, so the files are byte-identical from run to run: rich's
SVG export has fixed ids, matplotlib writes no software or date metadata and uses its own fonts.
The snapshot PNGs are rasterised by cairosvg even where ``rsvg-convert`` is on PATH (which
``snapshot`` would prefer), with the machine's ``monospace`` font: the committed ones were drawn with
DejaVu Sans Mono (``fc-match monospace``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
SCENARIOS = ROOT / "scenarios"
#: the analyze charts' time buckets
BUCKET_MS = 1000


@dataclass(frozen=True)
class Job:
    """One command that draws some of the pictures: ``argv(work dir)``, then picture -> file it wrote."""

    name: str
    argv: Callable[[Path], list[str]]
    pictures: dict[str, str]
    spark: bool = False


def _snapshot(scenario: str, at_ms: int, *extra: str, svg: str | None = None, png: str | None = None) -> Job:
    def argv(work: Path) -> list[str]:
        args = ["snapshot", str(SCENARIOS / f"{scenario}.toml"), "--at", str(at_ms), *extra]
        if svg:
            args += ["--svg", str(work / svg)]
        if png:
            args += ["--png", str(work / png)]
        return args

    return Job(f"snapshot {scenario}", argv, {name: name for name in (svg, png) if name})


def _analyze(work: Path) -> list[str]:
    traces = work / "traces"
    traces.mkdir(exist_ok=True)
    for scenario in sorted(SCENARIOS.glob("*.toml")):
        minibroker("run", str(scenario), "--trace", str(traces / f"{scenario.stem}.parquet"), "--quiet")
    return ["analyze", str(traces), "--out", str(work / "analysis"), "--bucket-ms", str(BUCKET_MS)]


def _sweep(work: Path) -> list[str]:
    return ["sweep", str(SCENARIOS / "sweeps" / "lag_timeout_min_isr.toml"), "--out", str(work / "sweep")]


JOBS = [
    _snapshot("timing_wheel_cascade", 345, svg="timing_wheel_cascade.svg", png="timing_wheel_cascade.png"),
    _snapshot("group_stalled_member", 24000, svg="group_stalled_member.svg"),
    _snapshot(
        "delay_wheel_vs_levels", 19000, "--width", "150", "--events", "6", png="delay_wheel_vs_levels.png"
    ),
    _snapshot("txn_read_committed_stalled", 15000, png="txn_read_committed_stalled.png"),
    Job(
        "analyze",
        _analyze,
        {
            f"analyze-{chart.replace('_', '-')}.png": f"analysis/{chart}.png"
            for chart in ("latency", "purgatory_size", "hw", "isr", "rebalances", "lso_lag")
        },
        spark=True,
    ),
    Job(
        "sweep",
        _sweep,
        {"sweep_lag_timeout_error_rate.png": "sweep/heatmap-1-error_rate_lag_ms_request_timeout_ms.png"},
        spark=True,
    ),
]
PICTURES = {name: job for job in JOBS for name in job.pictures}


class CommandFailed(RuntimeError):
    """A minibroker command that exited non-zero while drawing."""


def minibroker(*args: str) -> str:
    """Run ``minibroker ARGS`` in this process; its stdout, or CommandFailed naming the command."""
    from minibroker.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    if code != 0:
        shown = " ".join(args)
        raise CommandFailed(f"minibroker {shown} exited {code}: {err.getvalue().strip() or out.getvalue()}")
    return out.getvalue()


@contextlib.contextmanager
def _cairosvg_only() -> Iterator[None]:
    """PATH without rsvg-convert while drawing, so that every PNG is cairosvg's."""
    path = os.environ.get("PATH", "")
    kept = [d for d in path.split(os.pathsep) if d and not (Path(d) / "rsvg-convert").exists()]
    os.environ["PATH"] = os.pathsep.join(kept)
    try:
        yield
    finally:
        os.environ["PATH"] = path


def draw(names: Iterable[str], work: Path) -> dict[str, Path]:
    """Draw the pictures ``names`` under ``work``, each job once: picture name -> the file drawn."""
    names = list(names)
    drawn: dict[str, Path] = {}
    for job in JOBS:
        wanted = [name for name in names if name in job.pictures]
        if not wanted:
            continue
        directory = work / job.name.replace(" ", "-")
        directory.mkdir(parents=True, exist_ok=True)
        with _cairosvg_only():
            minibroker(*job.argv(directory))
        for name in wanted:
            path = directory / job.pictures[name]
            if not path.is_file():
                raise CommandFailed(f"{job.name} drew no {job.pictures[name]} (for docs/{name})")
            drawn[name] = path
    return drawn


def differing(drawn: dict[str, Path], docs: Path | None = None) -> list[str]:
    """The pictures whose committed file in ``docs`` (docs/) is missing or not byte-equal to the one drawn."""
    docs = docs or DOCS
    return [
        name
        for name, path in drawn.items()
        if not (docs / name).is_file() or (docs / name).read_bytes() != path.read_bytes()
    ]


def committed(docs: Path | None = None) -> list[str]:
    """Every picture file in ``docs`` (docs/)."""
    docs = docs or DOCS
    return sorted(path.name for pattern in ("*.png", "*.svg") for path in docs.glob(pattern))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="exit 1 naming each picture that differs")
    action.add_argument("--write", action="store_true", help="redraw the pictures in docs/ in place")
    parser.add_argument(
        "--only", metavar="NAME", action="append", help="only this picture, e.g. timing_wheel_cascade.svg"
    )
    args = parser.parse_args(argv)
    names = args.only or list(PICTURES)
    if unknown := [name for name in names if name not in PICTURES]:
        print(
            f"docs_pictures: --only {unknown[0]}: not a picture this tool draws ({', '.join(PICTURES)})",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(ROOT))  # this tree's minibroker
    with tempfile.TemporaryDirectory(prefix="docs-pictures-") as work:
        try:
            drawn = draw(names, Path(work))
        except CommandFailed as error:
            print(f"docs_pictures: {error}", file=sys.stderr)
            return 2
        if args.write:
            for name, path in drawn.items():
                shutil.copyfile(path, DOCS / name)
                print(f"wrote docs/{name}")
            return 0
        stale = differing(drawn)
        for name in stale:
            print(f"docs/{name} differs from what the tool draws (python tools/docs_pictures.py --write)")
        return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
