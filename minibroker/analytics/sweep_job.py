"""``minibroker sweep``: every variant of a sweep runs as a Spark task.

The driver loads and validates the sweep (``sweepfile``) and builds each variant's
scenario; the variants are the elements of an RDD with one partition per variant,
and ``run_variants`` runs each with ``run_scenario`` inside the executor's Python
worker: virtual time, its own trio run, no state shared with any other task. A task
returns one row of metrics (``variant_metrics``) and, when the sweep asks for
traces, writes its trace to ``<out>/traces/variant-<index>.parquet`` (a path the
executors can write: local mode, or shared storage on a cluster).

A sweep of more than ``MAX_TASKS`` variants runs them in ``MAX_TASKS`` tasks of
consecutive variants (Spark's cost per task would dominate short variants).
``progress(done, total)`` is called from a watcher thread as tasks finish.

The collected rows are sorted by variant index. Every metric is a function of the
scenario and the seed alone (virtual time is deterministic), except ``wall_ms``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minibroker.analytics.sweepfile import METRICS, Sweep, Variant
from minibroker.scenario import RunResult, run_scenario

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TIMEOUT = "REQUEST_TIMED_OUT"
#: the most Spark tasks one sweep is split into
MAX_TASKS = 2_000
_GROUP = "minibroker-sweep"


def nearest_rank(values: list[int], fraction: float) -> int | None:
    """The smallest value with at least ``fraction`` of ``values`` at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-fraction * len(ordered) // 1))
    return ordered[int(rank) - 1]


def variant_metrics(result: RunResult) -> dict[str, Any]:
    """The sweep's figures for one finished run (see docs/pipeline.md for each)."""
    requests = result.requests
    produce = [r for r in requests if r.kind == "produce"]
    fetch = [r for r in requests if r.kind == "fetch"]
    timeouts = sum(1 for r in produce if TIMEOUT in r.errors.values())
    errors = sum(1 for r in produce if any(e != "NONE" for e in r.errors.values()))
    produce_latency = [r.latency_ms for r in produce if r.latency_ms is not None]
    fetch_latency = [r.latency_ms for r in fetch if r.latency_ms is not None]
    totals: dict[str, int] = {}
    for purgatories in result.purgatory_totals.values():
        for name, figures in purgatories.items():
            for key, value in figures.items():
                totals[f"{name}.{key}"] = totals.get(f"{name}.{key}", 0) + value
    passed = sum(1 for item in result.results if item.passed)
    metrics = {
        "requests": len(requests),
        "produce": len(produce),
        "fetch": len(fetch),
        "produce_ok": len(produce) - errors,
        "timeouts": timeouts,
        "timeout_rate": timeouts / len(produce) if produce else None,
        "errors": errors,
        "error_rate": errors / len(produce) if produce else None,
        "produce_p50": nearest_rank(produce_latency, 0.5),
        "produce_p99": nearest_rank(produce_latency, 0.99),
        "produce_max": max(produce_latency, default=None),
        "fetch_p50": nearest_rank(fetch_latency, 0.5),
        "fetch_p99": nearest_rank(fetch_latency, 0.99),
        "expirations": sum(v for k, v in totals.items() if k.endswith(".expirations")),
        "produce_expirations": totals.get("Produce.expirations", 0),
        "fetch_expirations": totals.get("Fetch.expirations", 0),
        "completions": sum(v for k, v in totals.items() if k.endswith(".completions")),
        "purges": sum(v for k, v in totals.items() if k.endswith(".purges")),
        "expectations_passed": passed,
        "expectations_failed": len(result.results) - passed,
        "end_ms": result.end_ms,
    }
    assert tuple(metrics) == METRICS
    return metrics


def run_variant(variant: Variant, trace_dir: str | None) -> dict[str, Any]:
    """Run one variant (in whatever process calls this) and return its row."""
    sinks = []
    trace_path = None
    if trace_dir is not None:
        from minibroker.trace import ParquetSink

        trace_path = str(Path(trace_dir) / f"variant-{variant.index:04d}.parquet")
        sinks.append(ParquetSink(trace_path))
    started = time.perf_counter()
    try:
        result = run_scenario(variant.scenario, seed=variant.seed, sinks=sinks)
    finally:
        for sink in sinks:
            sink.close()
    row: dict[str, Any] = {"variant": variant.index, **dict(variant.values), "seed": variant.seed}
    row.update(variant_metrics(result))
    row["events"] = result.trace_events if sinks else None
    row["trace"] = trace_path
    row["wall_ms"] = round((time.perf_counter() - started) * 1000, 1)
    return row


def run_variants(variants: Iterable[Variant], trace_dir: str | None = None) -> Iterator[dict[str, Any]]:
    """The Spark task: one row per variant of its partition."""
    for variant in variants:
        yield run_variant(variant, trace_dir)


def run_sweep(
    spark: SparkSession,
    sweep: Sweep,
    out: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """Every variant in a Spark task; the rows, by variant index."""
    variants = sweep.variants()
    trace_dir = None
    if sweep.trace:
        if out is None:
            raise ValueError("a sweep with trace = true needs an output directory")
        trace_dir = str((out / "traces").resolve())
        Path(trace_dir).mkdir(parents=True, exist_ok=True)
    context = spark.sparkContext
    tasks = max(1, min(len(variants), MAX_TASKS))
    rdd = context.parallelize(variants, numSlices=tasks)
    context.setJobGroup(_GROUP, f"sweep {sweep.name}: {len(variants)} variants")
    stop = threading.Event()
    watcher = None
    if progress is not None:
        watcher = threading.Thread(target=_watch, args=(context, tasks, progress, stop), daemon=True)
        watcher.start()
    try:
        rows = rdd.mapPartitions(lambda part: run_variants(part, trace_dir)).collect()
    finally:
        stop.set()
        if watcher is not None:
            watcher.join()
        context.setLocalProperty("spark.jobGroup.id", None)
    if progress is not None:
        progress(tasks, tasks)
    return sorted(rows, key=lambda row: row["variant"])


def _watch(context: Any, tasks: int, progress: Callable[[int, int], None], stop: threading.Event) -> None:
    """Report the sweep job's finished tasks twice a second until ``stop``."""
    tracker = context.statusTracker()
    while not stop.wait(0.5):
        done = 0
        for job in tracker.getJobIdsForGroup(_GROUP):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info else ():
                stage_info = tracker.getStageInfo(stage)
                done += stage_info.numCompletedTasks if stage_info else 0
        progress(min(done, tasks), tasks)


def columns(sweep: Sweep) -> list[str]:
    """The table's columns, in order."""
    return ["variant", *(axis.name for axis in sweep.axes), "seed", *METRICS, "events", "trace", "wall_ms"]


def write_table(sweep: Sweep, rows: list[dict[str, Any]], out: Path) -> Path:
    """``out/variants.parquet`` (pyarrow); axis columns keep their TOML type."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    names = columns(sweep)
    fields = []
    for name in names:
        sample = next((row[name] for row in rows if row.get(name) is not None), None)
        if name in ("timeout_rate", "error_rate", "wall_ms"):
            kind = pa.float64()
        elif isinstance(sample, bool):
            kind = pa.bool_()
        elif isinstance(sample, int) or name in METRICS or name in ("variant", "seed", "events"):
            kind = pa.int64()
        elif isinstance(sample, float):
            kind = pa.float64()
        else:
            kind = pa.string()
        fields.append(pa.field(name, kind))
    schema = pa.schema(fields)
    table = pa.table({name: [row.get(name) for row in rows] for name in names}, schema=schema)
    path = out / "variants.parquet"
    pq.write_table(table, path, compression="zstd")
    return path
