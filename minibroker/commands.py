"""The scenario commands of the CLI: ``run``, ``check`` and ``list``."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table
from rich.text import Text

from minibroker.cliutil import MAX_SEED, UsageError, add_data_dir_options, seed, speed, with_data_dir
from minibroker.scenario import Scenario, ScenarioError, load_scenario, run_scenario
from minibroker.scenario.library import bundled_scenarios, library_dirs, resolve


def add_parsers(commands: argparse._SubParsersAction) -> dict[str, Callable[[argparse.Namespace], int]]:
    """``run``, ``check`` and ``list``."""
    run_parser = commands.add_parser(
        "run",
        help="run a scenario and check its expectations",
        description="Run a TOML scenario on an emulated cluster (virtual time unless --speed/--realtime); "
        "exit 0 if every expectation holds, 1 if one fails, 2 on bad input.",
    )
    run_parser.add_argument(
        "file", metavar="FILE.toml", help="a scenario file, or the name of a bundled one (minibroker list)"
    )
    run_parser.add_argument(
        "--seed",
        type=seed,
        help=f"the seed for same-instant scheduling, 0..{MAX_SEED} (default: the file's)",
    )
    pace = run_parser.add_mutually_exclusive_group()
    pace.add_argument(
        "--speed",
        type=speed,
        help="run at this multiple of real time, 0.001..1000000 (default: virtual, instant)",
    )
    pace.add_argument("--realtime", action="store_true", help="run in real time (--speed 1)")
    run_parser.add_argument(
        "--trace",
        metavar="PATH",
        help="write every event to PATH (.jsonl, or .parquet with the parquet extra)",
    )
    run_parser.add_argument(
        "--json", action="store_true", help="print a machine-readable summary instead of tables"
    )
    run_parser.add_argument(
        "--quiet", action="store_true", help="print nothing but failures; the exit status tells"
    )
    add_data_dir_options(run_parser)
    run_parser.add_argument(
        "--tui",
        action="store_true",
        help="watch it live: timing wheel, delay queue, purgatories, ISR (keys: space pause, n step, "
        "+/- speed, b broker, q quit); default speed plays the scenario in about 20 s; "
        "plain frames when stdout is not a terminal",
    )
    check_parser = commands.add_parser(
        "check",
        help="validate scenarios without running them",
        description="Load and validate scenario files without running them; print how many steps and "
        "expectations each has, or its problems one per line. Exit 0 if all are valid, 2 if one is not.",
    )
    check_parser.add_argument(
        "files", metavar="FILE.toml", nargs="+", help="scenario files, or names of bundled ones"
    )
    list_parser = commands.add_parser(
        "list",
        help="show the bundled scenarios",
        description="List the scenarios of a directory with what each shows (the bundled ones by default).",
    )
    list_parser.add_argument(
        "--dir", help="where to look (default: ./scenarios if there is one, else the bundled scenarios)"
    )
    return {"run": run, "check": check, "list": list_scenarios}


def _load(name: str) -> Scenario:
    path = resolve(name)
    if not path.exists() and path.parent == Path(".") and path.suffix != ".toml":
        raise UsageError(f"{name}: no such file, and no bundled scenario of that name (minibroker list)")
    try:
        return load_scenario(path)
    except ScenarioError as error:
        raise UsageError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    scenario = with_data_dir(_load(args.file), args)
    if args.tui:
        from minibroker.tui.app import run_tui

        return run_tui(scenario, args)
    speed = 1.0 if args.realtime else args.speed
    sinks = []
    trace = None
    if args.trace:
        from minibroker.trace import open_sink

        try:
            trace = open_sink(args.trace)
        except (ValueError, RuntimeError, OSError) as error:
            raise UsageError(f"--trace: {error}") from None
        sinks.append(trace)
    err_console = Console(stderr=True)
    show_progress = not (args.quiet or args.json) and err_console.is_terminal
    try:
        with progress_bar(err_console, scenario, show_progress) as progress:
            result = run_scenario(scenario, seed=args.seed, speed=speed, sinks=sinks, progress=progress)
    except ScenarioError as error:  # what the run needs and cannot reach (a redis backend's server)
        raise UsageError(str(error)) from None
    finally:
        if trace is not None:
            trace.close()
    if args.json:
        from minibroker.report import as_json

        print(json.dumps(as_json(result), indent=2, sort_keys=True))
    elif args.quiet:
        for item in result.results:
            if not item.passed:
                print(f"FAIL {item.where}: expected {item.expected}; seen {item.seen}", file=sys.stderr)
    else:
        from minibroker.report import render

        console = Console() if Console().is_terminal else Console(width=120)
        render(result, console)
        if trace is not None:
            console.print(f"trace: {trace.events:,} events written to {args.trace}")
    return 0 if result.passed else 1


@contextlib.contextmanager
def progress_bar(
    console: Console, scenario: Scenario, enabled: bool
) -> Iterator[Callable[[int], None] | None]:
    """A rich progress bar in virtual milliseconds, or nothing."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, Progress, TextColumn

    total = scenario.end_ms or max(1, scenario.last_step_ms)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f} / {task.total:,.0f} ms virtual"),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(scenario.name, total=total)
        yield lambda now: bar.update(task, completed=min(now, total))


def check(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.files:
        try:
            scenario = load_scenario(resolve(path))
        except ScenarioError as error:
            for problem in error.problems:
                print(f"minibroker: {problem}", file=sys.stderr)
            failed += 1
            continue
        print(f"ok {path}: {len(scenario.steps)} steps, {len(scenario.expectations)} expectations")
    return 2 if failed else 0


def list_scenarios(args: argparse.Namespace) -> int:
    if args.dir and not Path(args.dir).is_dir():
        raise UsageError(f"list: no directory {args.dir!r}")
    dirs = library_dirs(args.dir)
    if not dirs:
        raise UsageError("list: no scenarios/ directory here and none bundled; pass --dir")
    table = Table(title=f"scenarios in {dirs[0]}", title_justify="left")
    paths = bundled_scenarios(dirs[0])
    here = Path.cwd().resolve()
    # a file under the current directory by its relative path, a bundled one by the name run takes
    names = [str(p.relative_to(here)) if p.is_relative_to(here) else p.stem for p in paths]
    # file names whole (they are what one types), the descriptions wrap
    table.add_column("scenario", no_wrap=True, min_width=max(map(len, names), default=8))
    table.add_column("what it shows")
    for path, shown in zip(paths, names, strict=True):
        try:  # Text: a description is not markup
            table.add_row(Text(shown), Text(load_scenario(path).description))
        except ScenarioError as error:
            table.add_row(Text(shown), Text(f"invalid: {error.problems[0]}", style="red"))
    Console().print(table)
    return 0
