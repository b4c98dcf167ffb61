"""The Spark commands of the CLI: ``analyze`` and ``sweep``.

pyspark is imported only inside the handlers, so ``minibroker --help`` stays fast.
Exit status: 0 done; 1 ``analyze`` found exactly-once problems; 2 bad input (no
trace matched, a file that is not a trace, an invalid sweep file or setting, a sweep
over ``--max-variants``), no usable Java, a master that is unreachable, is not a
master or gives no executor within ``--spark-timeout``, or a Spark job that failed
on its input: always one line on stderr, no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minibroker.cliutil import MAX_MS, UsageError, out_dir, positive_number, whole_number
from minibroker.extras import require

if TYPE_CHECKING:
    from minibroker.analytics.inputs import TraceInputs

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "2g"
#: the largest sweep run without --max-variants (a grid grows as the product of its axes)
MAX_VARIANTS = 10_000
#: the most --max-variants may allow: a grid's variants are listed in the driver's memory
MAX_GRID = 1_000_000


_bucket = whole_number(1, MAX_MS, "a whole number of ms")


def _spark_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--master",
        default=None,
        help=f"Spark master: local[N], local[*] (default {DEFAULT_MASTER}, embedded; or spark.master of "
        "--spark-defaults), spark://HOST:PORT, k8s://URL, yarn",
    )
    parser.add_argument(
        "--driver-memory",
        default=None,
        metavar="SIZE",
        help=f"Spark driver memory (default {DEFAULT_DRIVER_MEMORY}, or spark.driver.memory of --conf)",
    )
    parser.add_argument(
        "--conf",
        action="append",
        metavar="KEY=VALUE",
        help="a Spark setting, as spark-submit takes it (repeatable; wins over --spark-defaults)",
    )
    parser.add_argument(
        "--spark-defaults", metavar="FILE", help="a spark-defaults.conf file of settings ('KEY VALUE' lines)"
    )
    parser.add_argument(
        "--spark-timeout",
        type=positive_number("a number of seconds", 0.001, 86_400),
        default=None,
        metavar="S",
        help="seconds Spark has to start and, on a cluster, to get its first executor (default 60)",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON summary instead of tables")


def add_parsers(commands: argparse._SubParsersAction) -> dict[str, Callable[[argparse.Namespace], int]]:
    """``analyze`` and ``sweep``."""
    analyze = commands.add_parser(
        "analyze",
        help="analyse traces on Spark: latency, audit, timer precision, timelines",
        description="Analyse traces (JSONL or Parquet files, directories, globs) with PySpark; write "
        "Parquet tables, report.md and PNG charts to DIR. Exit 1 if the exactly-once audit finds "
        "a problem, 2 on bad input or when Spark cannot run.",
    )
    analyze.add_argument(
        "traces", metavar="TRACE", nargs="+", help="trace files (JSONL or Parquet), directories or globs"
    )
    analyze.add_argument("--out", required=True, metavar="DIR", help="where the tables and report go")
    analyze.add_argument(
        "--bucket-ms", type=_bucket, default=1000, help="time bucket of the timelines (default 1000)"
    )
    _spark_options(analyze)
    sweep = commands.add_parser(
        "sweep",
        help="run a grid of scenario variants as Spark tasks",
        description="Run every variant of a sweep file (a base scenario and a grid of settings) as a "
        "Spark task; write variants.parquet, sweep.md and heatmaps to DIR.",
    )
    sweep.add_argument(
        "file", metavar="SWEEP.toml", help="a sweep file: a base scenario and a grid of settings"
    )
    sweep.add_argument("--out", required=True, metavar="DIR", help="where the table and report go")
    sweep.add_argument("--trace", action="store_true", help="write every variant's trace (Parquet)")
    sweep.add_argument(
        "--max-variants",
        type=whole_number(1, MAX_GRID, "a whole number of variants"),
        default=MAX_VARIANTS,
        metavar="N",
        help=f"refuse a grid of more variants than N, 1..{MAX_GRID:,} (default {MAX_VARIANTS:,})",
    )
    _spark_options(sweep)
    return {"analyze": analyze_command, "sweep": sweep_command}


@contextmanager
def _spark(
    command: str,
    args: argparse.Namespace,
    out: Path,
    inputs: TraceInputs | None = None,
) -> Iterator[Any]:
    """The session, with every way Spark can fail turned into one line for exit status 2.

    With ``inputs`` (analyze), shuffle partitions and code generation are sized from them;
    the latter is restored at the end, for a session that outlives the command (one already
    running in-process).
    """
    from minibroker.analytics.session import START_TIMEOUT, spark_session
    from minibroker.analytics.sizing import restore, size_codegen, size_shuffle
    from minibroker.analytics.spark_checks import SparkUnavailable

    settings = _settings(command, args)
    log = out / "spark.log"
    try:
        with spark_session(
            args.master or settings.get("spark.master", DEFAULT_MASTER),
            app_name=f"minibroker {command}",
            driver_memory=args.driver_memory
            or (None if "spark.driver.memory" in settings else DEFAULT_DRIVER_MEMORY),
            log_path=log,
            conf=settings,
            start_timeout=args.spark_timeout or START_TIMEOUT,
        ) as spark:
            replaced = {}
            if inputs is not None:
                size_shuffle(spark, inputs.local_bytes, settings)
                replaced = size_codegen(spark, inputs, settings)
            try:
                yield spark
            except Exception as error:
                _raise_if_spark_error(command, error, log)
                raise
            finally:
                if replaced:  # a Spark that died cannot be set: what it failed with is what counts
                    with suppress(Exception):
                        restore(spark, replaced)
    except SparkUnavailable as error:
        raise UsageError(f"{command}: {error}") from None


def _settings(command: str, args: argparse.Namespace) -> dict[str, str]:
    """The user's Spark settings (--spark-defaults, then --conf), or a one-line UsageError."""
    from minibroker.analytics.settings import SettingsError, spark_settings

    try:
        return spark_settings(args.conf, args.spark_defaults)
    except SettingsError as error:
        raise UsageError(f"{command}: {error}") from None


def _raise_if_spark_error(command: str, error: Exception, log: Path) -> None:
    from py4j.protocol import Py4JError
    from pyspark.errors import PySparkException

    from minibroker.analytics.spark_checks import spark_failure

    if isinstance(error, (PySparkException, Py4JError)):
        if "ARITHMETIC_OVERFLOW" in str(error):  # a time or delay too large to add to another
            raise UsageError(
                f"{command}: a time_ms or delay_ms in the traces overflows 64-bit arithmetic (a deadline "
                f"or a time difference); expected times and delays below 2^62 ms (Spark's log: {log})"
            ) from None
        raise UsageError(
            f"{command}: Spark failed: {spark_failure(str(error))[:400]} (Spark's log: {log})"
        ) from None


def _command_line() -> str:
    return "minibroker " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else "minibroker"


def _import_writers() -> None:
    """Import what writes the results (pyarrow, matplotlib): a second's work done while Spark starts."""
    for name in ("pyarrow.parquet", "matplotlib.figure", "matplotlib.backends.backend_agg"):
        importlib.import_module(name)


def _write_results(analysis: Any, out: Path) -> Path:
    """The Parquet tables, report.md and charts; returns the report's path."""
    from minibroker.analytics.analyze import write_tables
    from minibroker.analytics.report import analysis_report

    write_tables(analysis, out)
    return analysis_report(analysis, out, _command_line())


def analyze_command(args: argparse.Namespace) -> int:
    require("spark")
    from minibroker.analytics.inputs import NoTraces, resolve

    try:
        inputs = resolve(args.traces)
    except NoTraces as error:
        raise UsageError(f"analyze: {error}") from None
    out = out_dir(args.out)
    background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="minibroker-analyze")
    background.submit(_import_writers)  # while the JVM starts: Python waits for it, idle
    with _spark("analyze", args, out, inputs) as spark:
        from minibroker.analytics.analyze import analyze
        from minibroker.analytics.reader import BadTrace

        try:
            analysis = analyze(spark, inputs, bucket_ms=args.bucket_ms)
        except BadTrace as error:
            raise UsageError(f"analyze: {error}") from None
        master = spark.sparkContext.master
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 0)
        splits = int(spark.conf.get("spark.sql.files.minPartitionNum", None) or 0)
        codegen = spark.conf.get("spark.sql.codegen.wholeStage", None) != "false"
        written = background.submit(_write_results, analysis, out)  # while Spark stops
    try:
        report = written.result()
    finally:
        background.shutdown()
    if args.json:
        print(
            json.dumps(
                {
                    **analysis.as_json(),
                    "report": str(report),
                    "spark": {
                        "master": master,
                        "shuffle_partitions": partitions,
                        "read_partitions": splits,
                        "codegen": codegen,
                    },
                },
                indent=2,
                sort_keys=True,
                default=str,
            )
        )
    else:
        from rich.console import Console

        from minibroker.analytics.summary import print_analysis

        console = Console() if Console().is_terminal else Console(width=130)
        print_analysis(analysis, console, master)
        console.print(f"tables, report and charts in {out}/ (report: {report})")
    return 1 if analysis.audit_total else 0


def sweep_command(args: argparse.Namespace) -> int:
    require("spark")
    from minibroker.analytics.sweepfile import load_sweep
    from minibroker.scenario import ScenarioError

    try:
        sweep = load_sweep(args.file)
    except ScenarioError as error:
        raise UsageError(str(error)) from None
    if sweep.count > args.max_variants:
        raise UsageError(
            f"sweep: {args.file}: {sweep.count:,} variants ({sweep.shape()}) is more than --max-variants "
            f"{args.max_variants:,}; shrink the grid, or raise --max-variants to run them all"
        )
    problem = sweep.over_budget()
    if problem is not None:
        raise UsageError(f"sweep: {problem}")
    if args.trace:
        import attrs

        sweep = attrs.evolve(sweep, trace=True)
    out = out_dir(args.out)
    from rich.console import Console

    started = time.perf_counter()
    with _spark("sweep", args, out) as spark:
        from minibroker.analytics.sweep_job import run_sweep

        # once Spark is up (a failed start stays one line), before the first variant runs
        print(f"sweep {sweep.name}: {sweep.count:,} variants ({sweep.shape()})", file=sys.stderr, flush=True)
        errors = Console(stderr=True)
        with _progress_bar(errors, sweep.count) as progress:
            rows = run_sweep(spark, sweep, out, progress)
        master = spark.sparkContext.master
    seconds = time.perf_counter() - started
    from minibroker.analytics.report import sweep_report
    from minibroker.analytics.sweep_job import columns, write_table

    table = write_table(sweep, rows, out)
    report = sweep_report(sweep, rows, columns(sweep), out, _command_line())
    if args.json:
        summary = {"sweep": sweep.name, "variants": rows, "table": str(table), "report": str(report)}
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
    else:
        from minibroker.analytics.summary import print_sweep

        console = Console() if Console().is_terminal else Console(width=130)
        print_sweep(sweep, rows, console, seconds, master)
        console.print(f"table {table}, report {report}")
    return 0


@contextmanager
def _progress_bar(console: Any, variants: int) -> Iterator[Callable[[int, int], None]]:
    """A bar of the sweep's variants on ``console`` (stderr, a terminal); yields ``update(done, total)``.

    Tasks are counted, and shown as variants: a task runs ``variants / tasks`` of them.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not console.is_terminal:  # a log file or a pipe: the count line said enough
        yield lambda done, total: None
        return
    with Progress(
        TextColumn("variants"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("sweep", total=variants)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=variants if done >= total else done * variants // max(total, 1))

        yield update
