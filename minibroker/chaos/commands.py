"""``minibroker chaos``: random fault schedules, Kafka's guarantees checked, failures shrunk to scenarios.

Exit status: 0 no violation (losses the profile expects are reported, not
failures); 1 a violation; 2 bad input or Spark unavailable.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from minibroker.cliutil import MAX_SEED, UsageError, out_dir, whole_number
from minibroker.extras import require

if TYPE_CHECKING:
    from minibroker.chaos.distribute import Job

MAX_RUNS = 10_000_000


def add_parsers(commands: argparse._SubParsersAction) -> dict[str, Callable[[argparse.Namespace], int]]:
    from minibroker.chaos.profiles import PROFILES

    parser = commands.add_parser(
        "chaos",
        help="run random fault schedules and check Kafka's guarantees after each",
        description="Generate random clusters, clients, load and fault schedules; run each in virtual "
        "time; check Kafka's guarantees (replication, groups, transactions, compaction); shrink failing "
        "runs to scenario files that `minibroker run` replays. Exit 1 if a guarantee broke, 2 on bad input.",
    )
    numbers = (  # (flag, minimum, maximum, noun, default, help)
        ("--runs", 1, MAX_RUNS, "a number of runs", 100, "how many schedules (default 100)"),
        (
            "--seed",
            0,
            MAX_SEED,
            "a seed",
            0,
            f"run i is a pure function of (profile, seed, i, duration); 0..{MAX_SEED} (default 0)",
        ),
        (
            "--duration-ms",
            100,
            3_600_000,
            "a duration in ms",
            2000,
            "virtual ms of load and faults per run; then healing and checks (default 2000)",
        ),
        (
            "--shrink",
            0,
            100,
            "a number of runs",
            3,
            "shrink at most this many failing runs, one per invariant first (default 3)",
        ),
        ("--shrink-budget", 1, 100_000, "a number of runs", 200, "runs one shrink may spend (default 200)"),
    )
    for flag, low, high, noun, default, text in numbers:
        parser.add_argument(flag, type=whole_number(low, high, noun), default=default, help=text)
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default="default",
        help="which faults and acks the runs use, see docs/chaos.md (default default)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--workers",
        type=whole_number(1, 1024, "a number of processes"),
        help="processes to run on (default: the CPU count)",
    )
    where.add_argument(
        "--master", help="run as Spark tasks on this master (local[N], spark://HOST:PORT, ...)"
    )
    parser.add_argument(
        "--out",
        default="chaos-out",
        metavar="DIR",
        help="where chaos.md, runs.jsonl and shrunk/*.toml go (default chaos-out)",
    )
    return {"chaos": chaos_command}


def chaos_command(args: argparse.Namespace) -> int:
    from rich.console import Console

    from minibroker.chaos.distribute import Job, RunSummary
    from minibroker.chaos.failures import shrink_failures
    from minibroker.chaos.report import ChaosReport, print_report, write_markdown, write_runs

    out = out_dir(args.out)
    job = Job(args.profile, args.seed, args.duration_ms)
    console = Console(stderr=True)
    where, source, unavailable = _runner(job, args)
    started = time.perf_counter()
    summaries: list[RunSummary] = []
    try:
        _collect(source, args.runs, summaries, console)
    except unavailable as error:
        raise UsageError(str(error)) from None
    summaries.sort(key=lambda s: s.index)
    report = ChaosReport(
        args.profile, args.seed, args.duration_ms, where, time.perf_counter() - started, summaries
    )
    report.shrunk = shrink_failures(report, out / "shrunk", args.shrink, args.shrink_budget, console)
    report.wall_s = time.perf_counter() - started
    stdout = Console() if Console().is_terminal else Console(width=140)
    print_report(report, stdout)
    command = (
        "minibroker " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "minibroker chaos"
    )
    write_markdown(report, out / "chaos.md", command)
    write_runs(report, out / "runs.jsonl")
    stdout.print(f"report: {out / 'chaos.md'}, {out / 'runs.jsonl'}")
    return 1 if report.violations else 0


def _runner(job: Job, args: argparse.Namespace) -> tuple[str, Iterator, type[Exception]]:
    """Where the runs go (Spark tasks or worker processes), their summaries, and the error that means
    the runner could not start (a usage error: exit 2)."""
    from minibroker.chaos.distribute import run_local, run_spark

    if args.master:
        require("spark", "--master")
        from minibroker.analytics.spark_checks import SparkUnavailable

        return f"Spark {args.master}", run_spark(job, args.runs, args.master), SparkUnavailable
    workers = args.workers or os.cpu_count() or 1
    where = f"{workers} worker process{'es' if workers > 1 else ''}"
    return where, run_local(job, args.runs, workers), RuntimeError  # e.g. a worker process that cannot start


def _collect(source: Iterator, runs: int, summaries: list, console) -> None:
    """Gather summaries with a progress bar and a live count of violations (when stderr is a terminal)."""
    if not console.is_terminal:
        summaries.extend(source)
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("chaos"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("0 violations", total=runs)
        violations = 0
        for summary in source:
            summaries.append(summary)
            violations += len(summary.violations)
            bar.update(task, advance=1, description=f"{violations} violations")
