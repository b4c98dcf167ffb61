"""``minibroker analyze``: the trace analytics job on Spark.

The job reads every trace once for per-trace figures (events, first and last time,
whether it has ``op.expire`` events), then once more for the events it needs
(``RELEVANT``), with the kind-specific ``data`` fields it uses parsed out; that
narrow projection is cached and feeds every table (``operations`` and
``timelines`` define them). Each result table is small and is collected to the
driver, where ``write_tables`` writes it as Parquet with pyarrow (so ``--out`` is a
driver-local directory on a cluster too) and ``report`` draws it.

Invariants: rows of every table are sorted by their key columns, so two runs over
the same traces give the same tables whatever the master or partitioning; a trace
is named by its path; ``tid`` (a hash of the path) never leaves the job.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from pyspark import StorageLevel
from pyspark.sql import functions as F

from minibroker.pipeline import delays, groups, operations, retries, timelines
from minibroker.pipeline.inputs import TraceInputs
from minibroker.pipeline.reader import read_traces

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
    *groups.KINDS,
    *retries.KINDS,
    *delays.KINDS,
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
    "skipped": ("trace", "problem"),
    "rebalances": ("trace", "broker", "group"),
    "retry_attempts": ("trace", "client", "outcome", "attempts"),
    "retry_dlt": ("trace", "client"),
    "delay_lateness": ("design",),
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
            "skipped": self.rows("skipped"),
            "retries": self.rows("retry_dlt"),
            "seconds": round(self.seconds, 3),
        }


# --- reading -----------------------------------------------------------------------------------
def read_events(spark: SparkSession, inputs: TraceInputs) -> DataFrame:
    """Every valid event of every trace, with ``trace`` (the file's path as Spark names it)."""
    return read_traces(spark, inputs).events


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
        _field("group", *groups.KINDS, cast=None).alias("group"),
        _field("state", "group.state", cast=None).alias("group_state"),
        _field("pending", "group.session.expire", cast=None).alias("pending"),
        _field("client", *retries.KINDS, cast=None).alias("client"),
        _field("origin", *retries.KINDS, cast=None).alias("origin"),
        _field("design", *delays.KINDS, cast=None).alias("design"),
        _field("lateness_ms", *delays.KINDS).alias("lateness_ms"),
    )


# --- the job -----------------------------------------------------------------------------------
def _collect(frame: DataFrame, name: str, trace_names: dict[int, str], limit: int | None = None) -> Table:
    keys = KEYS[name]
    if "tid" in frame.columns:
        columns = [("trace", "string")] + [
            (field.name, field.dataType.typeName()) for field in frame.schema.fields if field.name != "tid"
        ]
    else:
        columns = [(field.name, field.dataType.typeName()) for field in frame.schema.fields]
    if limit is not None:
        frame = frame.orderBy(*[k if k != "trace" else "tid" for k in keys]).limit(limit)
    rows = []
    for row in frame.collect():
        item = row.asDict()
        if "tid" in item:
            item = {"trace": trace_names[item.pop("tid")], **item}
        rows.append(item)
    rows.sort(key=lambda item: tuple(_sort_key(item[k]) for k in keys))
    return Table(columns, rows)


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, "") if value is None else (1, value)


def analyze(
    spark: SparkSession, inputs: TraceInputs, *, bucket_ms: int = 1000, audit_limit: int = 100_000
) -> Analysis:
    """Run the job over ``inputs``; every table collected (the audit up to ``audit_limit`` rows)."""
    if bucket_ms < 1:
        raise ValueError(f"bucket_ms must be >= 1, got {bucket_ms}")
    started = time.perf_counter()
    read = read_traces(spark, inputs)
    check = read.check()  # raises BadTrace for a file that is not a trace
    events = read.events
    columns = ["events", "skipped", "start_ms", "end_ms", "has_expire"]
    trace_table = Table(
        [("trace", "string"), *((c, "boolean" if c == "has_expire" else "long") for c in columns)],
        [{"trace": r["trace"], **{c: r[c] for c in columns}} for r in check.traces],
    )
    skipped_table = Table(
        [("trace", "string"), ("problem", "string"), ("rows", "long"), ("first", "string")],
        [attrs.asdict(item) for item in check.skipped],
    )
    stats = check.traces
    trace_names = {r["tid"]: r["trace"] for r in stats}
    traces = spark.createDataFrame(
        [(r["tid"], r["end_ms"], r["has_expire"]) for r in stats],
        "tid bigint, end_ms bigint, has_expire boolean",
    )
    rel = relevant(events).persist(StorageLevel.MEMORY_AND_DISK)
    ops = operations.operations(rel, traces).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        tables = {"traces": trace_table, "skipped": skipped_table}
        frames = {
            "operations": operations.summary(ops),
            "latency": operations.latency(ops),
            "rate": timelines.rate(rel, bucket_ms),
            "timer_precision": timelines.timer_precision(rel),
            "purgatory_size": timelines.purgatory_size(rel, bucket_ms),
            "hw": timelines.hw(rel, bucket_ms),
            "isr": timelines.isr(rel, bucket_ms),
            "rebalances": groups.rebalances(rel),
            "retry_attempts": retries.retry_attempts(retries.records(rel)),
            "retry_dlt": retries.retry_dlt(retries.records(rel)),
            "delay_lateness": delays.lateness(rel),
        }
        for name, frame in frames.items():
            tables[name] = _collect(frame, name, trace_names)
        audit = operations.audit(ops).persist(StorageLevel.MEMORY_AND_DISK)
        total = audit.count()
        tables["audit"] = _collect(audit, "audit", trace_names, audit_limit if total > audit_limit else None)
        audit.unpersist()
    finally:
        ops.unpersist()
        rel.unpersist()
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
