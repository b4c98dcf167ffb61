"""``minibroker analyze``: the trace analytics job on Spark.

The whole job is ONE Spark action. Two passes over the traces feed it: the per-trace
figures (events, first and last time, whether it has ``op.expire`` events), which read
only ``kind`` and ``time_ms``, and the events the tables need (``RELEVANT``) with the
kind-specific ``data`` fields parsed out and the operation kind computed once; that
narrow projection is cached, and so are the operations built from it (``operations``
and ``timelines`` define the tables). Every table is small; they are collected together
(``_collect_all``) to the driver, where ``write_tables`` writes them as Parquet with
pyarrow (so ``--out`` is a driver-local directory on a cluster too) and ``report``
draws them. No Python UDF runs on events.

Invariants: rows of every table are sorted by their key columns, so two runs over
the same traces give the same tables whatever the master or partitioning; a trace
is named by its path; ``tid`` (a hash of the path) never leaves the job.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from pyspark import StorageLevel
from pyspark.sql import functions as F

from minibroker.pipeline import operations, timelines
from minibroker.pipeline.inputs import SCHEMA_DDL, TraceInputs, display_name
from minibroker.trace import COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

RELEVANT = (
    "op.create",
    "op.complete",
    "op.expire",
    "op.cancel",
    "timer.fire",
    "purge",
    "hw",
    *timelines.ISR_KINDS,
    "fault",
)
#: each table's key columns: rows are sorted by them
KEYS = {
    "traces": ("trace",),
    "operations": ("purgatory", "op_kind"),
    "latency": ("purgatory", "op_kind", "cause"),
    "rate": ("bucket_ms", "purgatory", "op_kind"),
    "timer_precision": ("delta_ms",),
    "purgatory_size": ("trace", "broker", "purgatory", "bucket_ms"),
    "hw": ("trace", "partition", "bucket_ms"),
    "isr": ("trace", "partition", "bucket_ms"),
    "audit": ("trace", "broker", "op", "problem"),
}


@attrs.define
class Table:
    """A collected result: ``columns`` are (name, Spark type name), ``rows`` dicts in key order."""

    columns: list[tuple[str, str]]
    rows: list[dict[str, Any]]


@attrs.define
class Analysis:
    bucket_ms: int
    tables: dict[str, Table]
    #: audit problems in all (the ``audit`` table holds at most ``audit_limit`` of them)
    audit_total: int
    seconds: float = 0.0

    @property
    def events(self) -> int:
        return sum(row["events"] for row in self.tables["traces"].rows)

    def rows(self, name: str) -> list[dict[str, Any]]:
        return self.tables[name].rows

    def timer_summary(self) -> dict[str, Any]:
        """fires, min/p50/p99/max/mean of fire time - expiration, from the histogram (exact)."""
        histogram = [(row["delta_ms"], row["fires"]) for row in self.rows("timer_precision")]
        fires = sum(count for _, count in histogram)
        if not fires:
            return {"fires": 0}
        summary: dict[str, Any] = {"fires": fires, "min": histogram[0][0], "max": histogram[-1][0]}
        for name, fraction in (("p50", 0.5), ("p99", 0.99)):
            rank, seen = max(1, -(-fraction * fires // 1)), 0
            for delta, count in histogram:
                seen += count
                if seen >= rank:
                    summary[name] = delta
                    break
        summary["mean"] = sum(delta * count for delta, count in histogram) / fires
        return summary

    def audit_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows("audit"):
            counts[row["problem"]] = counts.get(row["problem"], 0) + 1
        return counts

    def as_json(self) -> dict[str, Any]:
        return {
            "bucket_ms": self.bucket_ms,
            "traces": self.rows("traces"),
            "events": self.events,
            "operations": self.rows("operations"),
            "latency": self.rows("latency"),
            "timer_precision": self.timer_summary(),
            "audit": {"problems": self.audit_total, "by_problem": self.audit_counts()},
            "seconds": round(self.seconds, 3),
        }


# --- reading -----------------------------------------------------------------------------------
def read_events(spark: SparkSession, inputs: TraceInputs) -> DataFrame:
    """Every event of every trace, with ``trace`` (the file's path as Spark names it)."""
    frames = []
    columns = [F.col(name) for name in (*COLUMNS, "data")]
    trace = F.col("_metadata.file_path").alias("trace")
    if inputs.jsonl:
        frames.append(spark.read.schema(SCHEMA_DDL).json(list(inputs.jsonl)).select(*columns, trace))
    if inputs.parquet:
        frames.append(spark.read.schema(SCHEMA_DDL).parquet(*inputs.parquet).select(*columns, trace))
    if not frames:
        raise ValueError("no trace to read")
    return functools.reduce(lambda a, b: a.unionByName(b), frames)


def _field(name: str, *kinds: str, cast: str | None = "bigint") -> Column:
    """``data``'s field ``name`` for events of ``kinds`` (JSON text when ``cast`` is None), else null."""
    value = F.get_json_object("data", f"$.{name}")
    return F.when(F.col("kind").isin(*kinds), value if cast is None else value.cast(cast))


def relevant(events: DataFrame) -> DataFrame:
    """The events the tables use, with ``tid`` and the ``data`` fields they need as columns."""
    return events.filter(F.col("kind").isin(*RELEVANT)).select(
        F.xxhash64("trace").alias("tid"),
        "seq",
        "time_ms",
        "kind",
        "broker",
        "purgatory",
        "op",
        "cause",
        "partition",
        "count",
        F.when(F.col("kind").startswith("op."), operations.op_kind(F.col("purgatory"), F.col("op"))).alias(
            "op_kind"
        ),
        _field("delay_ms", "op.create").alias("delay_ms"),
        _field("expiration", "timer.fire").alias("expiration"),
        _field("watched", "purge").alias("watched"),
        _field("num_delayed", "purge").alias("num_delayed"),
        _field("hw", "hw").alias("hw"),
        _field("isr", *timelines.ISR_KINDS, cast=None).alias("isr"),
        _field("fault", "fault", cast=None).alias("fault"),
        _field("ops", "op.cancel", cast=None).alias("cancelled"),
    )


# --- the job -----------------------------------------------------------------------------------
def trace_stats(events: DataFrame) -> DataFrame:
    """Per trace: ``tid``, its path, events, unreadable lines, first and last time, has_expire.

    It reads only ``kind`` and ``time_ms`` (Parquet's column pruning keeps this pass cheap).
    """
    return events.groupBy("trace").agg(
        F.xxhash64("trace").alias("tid"),
        F.count(F.lit(1)).alias("events"),
        F.sum(F.col("kind").isNull().cast("long")).alias("unreadable"),
        F.min("time_ms").alias("start_ms"),
        F.max("time_ms").alias("end_ms"),
        F.coalesce(F.max((F.col("kind") == "op.expire").cast("int")) == 1, F.lit(False)).alias("has_expire"),
    )


def _ordered(frame: DataFrame, name: str) -> DataFrame:
    return frame.orderBy(*[k if k != "trace" else "tid" for k in KEYS[name]])


def _collect_all(frames: dict[str, DataFrame]) -> dict[str, tuple[list[tuple[str, str]], list[dict]]]:
    """Every frame in ONE Spark action: a union by name (columns of one name share one type).

    One action lets Spark run the tables' independent stages side by side and plan once,
    instead of one job (and its scheduling round trips) per table.
    """
    columns = {
        name: [(f.name, f.dataType.typeName()) for f in frame.schema.fields] for name, frame in frames.items()
    }
    tagged = [frame.withColumn("_table", F.lit(name)) for name, frame in frames.items()]
    union = functools.reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True), tagged)
    rows: dict[str, list[dict]] = {name: [] for name in frames}
    for row in union.collect():
        item = row.asDict()
        name = item["_table"]
        rows[name].append({column: item[column] for column, _ in columns[name]})
    return {name: (columns[name], rows[name]) for name in frames}


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, "") if value is None else (1, value)


def _table(name: str, columns: list[tuple[str, str]], rows: list[dict], trace_names: dict[int, str]) -> Table:
    """A collected frame as a Table: ``tid`` becomes ``trace`` (first column), rows in key order."""
    if any(column == "tid" for column, _ in columns):
        columns = [("trace", "string")] + [c for c in columns if c[0] != "tid"]
        rows = [{"trace": trace_names[row.pop("tid")], **row} for row in rows]
    keys = KEYS[name]
    rows.sort(key=lambda item: tuple(_sort_key(item[k]) for k in keys))
    return Table(columns, rows)


def analyze(
    spark: SparkSession, inputs: TraceInputs, *, bucket_ms: int = 1000, audit_limit: int = 100_000
) -> Analysis:
    """Run the job over ``inputs``; every table collected (the audit up to ``audit_limit`` rows).

    One Spark action computes everything: the per-trace pass and the relevant events (read
    once, cached) feed every table, collected together (``_collect_all``).
    """
    if bucket_ms < 1:
        raise ValueError(f"bucket_ms must be >= 1, got {bucket_ms}")
    started = time.perf_counter()
    events = read_events(spark, inputs)
    stats = trace_stats(events)
    rel = relevant(events).persist(StorageLevel.MEMORY_AND_DISK)
    # summary, latency, the audit's rows and its count all read the operations: compute them once
    ops = operations.operations(rel, stats).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        audit = operations.audit(ops)
        frames = {
            "traces": stats,
            "operations": operations.summary(ops),
            "latency": operations.latency(ops),
            "rate": timelines.rate(rel, bucket_ms),
            "timer_precision": timelines.timer_precision(rel),
            "purgatory_size": timelines.purgatory_size(rel, bucket_ms),
            "hw": timelines.hw(rel, bucket_ms),
            "isr": timelines.isr(rel, bucket_ms),
            "audit": _ordered(audit, "audit").limit(audit_limit),
            "audit_total": audit.agg(F.count(F.lit(1)).alias("problems")),
        }
        collected = _collect_all(frames)
    finally:
        ops.unpersist()
        rel.unpersist()
    columns, stat_rows = collected.pop("traces")
    trace_names = {}
    for row in stat_rows:
        row["trace"] = trace_names[row.pop("tid")] = display_name(row["trace"])
    total = collected.pop("audit_total")[1][0]["problems"]
    tables = {"traces": _table("traces", [c for c in columns if c[0] != "tid"], stat_rows, {})}
    for name, (columns, rows) in collected.items():
        tables[name] = _table(name, columns, rows, trace_names)
    return Analysis(bucket_ms, tables, total, time.perf_counter() - started)


# --- output ------------------------------------------------------------------------------------
_ARROW = {"long": "int64", "integer": "int64", "double": "float64", "string": "string", "boolean": "bool_"}


def write_tables(analysis: Analysis, out: Path) -> list[Path]:
    """Each table as ``out/<name>.parquet`` (pyarrow, zstd); returns the paths written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, table in analysis.tables.items():
        schema = pa.schema(
            [(column, getattr(pa, _ARROW.get(kind, "string"))()) for column, kind in table.columns]
        )
        columns = {column: [row.get(column) for row in table.rows] for column, _ in table.columns}
        arrow = pa.table(columns, schema=schema)
        path = out / f"{name}.parquet"
        pq.write_table(arrow, path, compression="zstd")
        written.append(path)
    return written
