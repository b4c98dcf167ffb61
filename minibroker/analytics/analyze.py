"""``minibroker analyze``: the trace analytics job on Spark.

The job reads the traces once: the rows of the kinds it uses (``RELEVANT``) and the
rows that may be bad, with the ``data`` fields it uses (``FIELDS``) parsed once
(``TraceRead.narrow``), projected to narrow typed columns and kept (``kept.keep``: one
shuffle on the operations' key, whose files every table reads). Two actions
follow: the first writes what is kept and collects its tally, from which, with the Parquet
footers, ``TraceRead.check`` gives the per-trace figures and the skipped rows (a
file no footer vouches for gets one more pass over its rows); the second computes
every table at once as a union of small aggregates (``collect_all``): the timelines
(``timelines``), the consumer groups (``groups``), the transactions (``transactions``) and
an operations histogram from which the operations and latency tables are finished on the
driver (``operations``).
The audit's rows, when there are any, are a third action. Result tables are small:
``write_tables`` writes them as Parquet with pyarrow (so ``--out`` is a driver-local
directory on a cluster too) and ``report`` draws them.

Invariants: rows of every table are sorted by their key columns, so two runs over
the same traces give the same tables whatever the master or partitioning; a trace
is named by its path; ``tid`` (a hash of the path) never leaves the job.
"""

from __future__ import annotations

import functools
import json
import time
from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from pyspark.sql import functions as F

from minibroker.analytics import (
    delayed_messages,
    groups,
    operations,
    retries,
    share_groups,
    timelines,
    transactions,
)
from minibroker.analytics.inputs import TraceInputs
from minibroker.analytics.kept import keep, release
from minibroker.analytics.keys import KEYS
from minibroker.analytics.problems import field_column, of_kinds, sql_text
from minibroker.analytics.reader import read_traces

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

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
    *delayed_messages.KINDS,
    *transactions.KINDS,
    *share_groups.KINDS,
)

#: the kinds most events are of: the tables that read none of them scan a copy of the other kinds' rows
BULK = ("op.create", "op.complete", "hw")
#: how that copy is partitioned: evenly (``seq`` is unique in a trace), and not as the kept rows are
#: (Spark would drop a shuffle that repeats its input's partitioning, and every rare table would scan
#: all kept rows)
RARE_KEY = ("tid", "seq")

#: the tables in the order the report lists them
ORDER = (
    "traces",
    "skipped",
    "operations",
    "latency",
    "rate",
    "timer_precision",
    "purgatory_size",
    "hw",
    "isr",
    "rebalances",
    "transactions",
    "lso_lag",
    "retry_attempts",
    "retry_dlt",
    "delay_lateness",
    "share_groups",
    "audit",
)


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
#: the ``data`` fields the tables read, by the kinds whose events carry them
FIELDS: dict[str, tuple[str, ...]] = {
    "delay_ms": ("op.create",),
    "expiration": ("timer.fire",),
    "watched": ("purge",),
    "num_delayed": ("purge",),
    "hw": ("hw", "lso"),
    "lso": ("lso",),
    "isr": timelines.ISR_KINDS,
    "fault": ("fault",),
    "ops": ("op.cancel",),
    "group": (*groups.KINDS, *share_groups.KINDS),
    "state": ("group.state", "txn.state", "group.consumer.state"),
    "txn": transactions.TXN_KINDS,
    "pending": ("group.session.expire",),
    "reason": ("group.consumer.fence",),
    "client": retries.KINDS,
    "origin": retries.KINDS,
    "design": delayed_messages.KINDS,
    "lateness_ms": delayed_messages.KINDS,
    "delivery_count": ("share.acquire",),
    "latency_ms": ("share.accept",),
}
#: columns renamed
_NAMES = {"ops": "cancelled", "latency_ms": "accept_ms"}
#: the kept rows hold the fields in four shared columns, ``n*`` for the fields the tables use as
#: whole numbers and ``s*`` for those they read as JSON text: the fields of one column are carried
#: by different kinds, so a row has at most one of them
SLOTS = {
    "n1": ("delay_ms", "expiration", "watched", "hw", "lateness_ms", "delivery_count", "latency_ms"),
    "n2": ("num_delayed", "lso"),
    "s1": ("isr", "fault", "ops", "group", "client", "design", "txn"),
    "s2": ("state", "pending", "origin", "reason"),
}
_SQL_TYPE = {"n": "BIGINT", "s": "STRING"}
_BASE = ("tid", "trace", "seq", "time_ms", "kind", "broker", "purgatory", "op", "cause", "partition", "count")


def relevant(narrow: DataFrame) -> DataFrame:
    """``narrow``'s rows as they are kept: ``tid``, the ``data`` fields typed in ``SLOTS``.

    Keeps ``trace`` and ``problem`` for ``TraceRead.tally``, not the position columns (reading
    Parquet row numbers costs, and ``check`` finds a bad row's place in its own pass); the
    tables read ``named(kept)``. Rows are kept narrow because every table's scan copies them whole.
    A field's ``narrow`` column is already null on rows of other kinds than its own (``FIELDS``,
    which the checks' fields do not widen), so a slot is the first of its fields that is not null.
    """
    slots = [
        F.expr(
            "COALESCE("
            + ", ".join(f"CAST(`{field_column(name)}` AS {_SQL_TYPE[slot[0]]})" for name in names)
            + ")"
        ).alias(slot)
        for slot, names in SLOTS.items()
    ]
    return narrow.select(F.xxhash64("trace").alias("tid"), *_BASE[1:], *slots, "problem")


def named(kept: DataFrame) -> DataFrame:
    """The valid rows of ``kept`` as the tables read them: each field by its name (null on rows of
    other kinds), and ``op_kind`` on ``op.*`` events."""
    fields = [
        F.expr(of_kinds(FIELDS[name], slot)).alias(_NAMES.get(name, name))
        for slot, names in SLOTS.items()
        for name in names
    ]
    op_kind = F.expr(f"CASE WHEN startswith(kind, 'op.') THEN {operations.OP_KIND} END")
    # a skipped op.* row that names its operation stays as an ``op.skipped`` row: the operation
    # is then left out of the audit (what would decide its problems is unknown)
    op_events = ", ".join(map(sql_text, operations.OP_EVENTS))
    kind = F.expr(
        f"CASE WHEN problem IS NULL THEN kind WHEN kind IN ({op_events}) "
        "AND broker IS NOT NULL AND purgatory IS NOT NULL AND op IS NOT NULL "
        f"THEN {sql_text(operations.SKIPPED)} END"
    )
    rows = kept.withColumn("kind", kind).filter(F.col("kind").isNotNull())
    return rows.select(*_BASE, op_kind.alias("op_kind"), *fields)


# --- the job -----------------------------------------------------------------------------------
def collect_all(frames: dict[str, DataFrame]) -> dict[str, list[dict[str, Any]]]:
    """Every frame's rows in one action: a union of the rows as JSON text, tagged by frame name.

    For small frames only (the driver holds them all); whole numbers come back as int,
    doubles as float, nulls as None.
    """
    tagged = [
        frame.select(
            F.lit(name).alias("table"),
            F.to_json(F.struct(*frame.columns), {"ignoreNullFields": "false"}).alias("row"),
        )
        for name, frame in frames.items()
    ]
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in frames}
    for item in functools.reduce(lambda a, b: a.unionAll(b), tagged).collect():
        rows[item["table"]].append(json.loads(item["row"]))
    return rows


def _table(
    name: str, columns: list[tuple[str, str]], rows: list[dict[str, Any]], trace_names: dict[int, str]
) -> Table:
    """A Table of ``rows`` sorted by ``name``'s keys, ``tid`` turned into the trace's name."""
    keys = KEYS[name]
    if any(column == "tid" for column, _ in columns):
        columns = [("trace", "string")] + [(c, kind) for c, kind in columns if c != "tid"]
        rows = [{"trace": trace_names[row.pop("tid")], **row} for row in rows]
    rows.sort(key=lambda item: tuple(_sort_key(item[k]) for k in keys))
    return Table(columns, rows)


def _columns(frame: DataFrame) -> list[tuple[str, str]]:
    return [(field.name, field.dataType.typeName()) for field in frame.schema.fields]


def _sort_key(value: Any) -> tuple[int, Any]:
    return (0, "") if value is None else (1, value)


def _traces_frame(spark: SparkSession, stats: list[dict[str, Any]]) -> DataFrame:
    """``tid``, ``end_ms``, ``has_expire`` per trace, as an inline table (no job to build it)."""
    values = [
        f"({int(r['tid'])}L, {int(r['end_ms'])}L, {str(bool(r['has_expire'])).lower()})"
        for r in stats
        if r["tid"] is not None and r["end_ms"] is not None
    ] or ["(CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), false)"]
    return spark.sql(f"SELECT * FROM VALUES {', '.join(values)} AS traces(tid, end_ms, has_expire)")


def analyze(
    spark: SparkSession, inputs: TraceInputs, *, bucket_ms: int = 1000, audit_limit: int = 100_000
) -> Analysis:
    """Run the job over ``inputs``; every table collected (the audit up to ``audit_limit`` rows)."""
    if bucket_ms < 1:
        raise ValueError(f"bucket_ms must be >= 1, got {bucket_ms}")
    started = time.perf_counter()
    read = read_traces(spark, inputs)
    kept = keep(relevant(read.narrow(RELEVANT, FIELDS)), operations.KEY)
    rare = None
    try:
        check = read.check(read.tally(kept).collect())  # BadTrace for a file that is no trace
        columns = ["events", "skipped", "start_ms", "end_ms", "has_expire"]
        tables = {
            "traces": Table(
                [("trace", "string"), *((c, "boolean" if c == "has_expire" else "long") for c in columns)],
                [{"trace": r["trace"], **{c: r[c] for c in columns}} for r in check.traces],
            ),
            "skipped": Table(
                [("trace", "string"), ("problem", "string"), ("rows", "long"), ("first", "string")],
                [attrs.asdict(item) for item in check.skipped],
            ),
        }
        trace_names = {r["tid"]: r["trace"] for r in check.traces if r["tid"] is not None}
        rel = named(kept)
        # the tables that read only kinds other than BULK's scan their own smaller copy
        rare = keep(rel.filter(~F.col("kind").isin(*BULK)), RARE_KEY)
        ops = operations.operations(rel, _traces_frame(spark, check.traces), rare)
        per_record = retries.records(rare)  # planned once for both retry tables
        frames = {
            "histogram": operations.histogram(ops),
            "rate": timelines.rate(rel, bucket_ms),
            "timer_precision": timelines.timer_precision(rare),
            "purgatory_size": timelines.purgatory_size(rel, bucket_ms, rare),
            "hw": timelines.hw(rel, bucket_ms),
            "isr": timelines.isr(rare, bucket_ms),
            "rebalances": groups.rebalances(rare),
            "transactions": transactions.transactions(rare),
            "lso_lag": transactions.lso_lag(rare, _traces_frame(spark, check.traces)),
            "retry_attempts": retries.retry_attempts(per_record),
            "retry_dlt": retries.retry_dlt(per_record),
            "delay_lateness": delayed_messages.lateness(rare),
            "share_groups": share_groups.share_groups(rare),
        }
        collected = collect_all(frames)
        histogram = collected.pop("histogram")
        for name, rows in collected.items():
            tables[name] = _table(name, _columns(frames[name]), rows, trace_names)
        tables["operations"] = _table(
            "operations", operations.SUMMARY_COLUMNS, operations.summary_rows(histogram), trace_names
        )
        tables["latency"] = _table(
            "latency", operations.LATENCY_COLUMNS, operations.latency_rows(histogram), trace_names
        )
        total = operations.audit_total(histogram)
        audit = operations.audit(ops)
        rows = []
        if total:
            keys = [k if k != "trace" else "tid" for k in KEYS["audit"]]
            limited = audit.orderBy(*keys).limit(audit_limit) if total > audit_limit else audit
            rows = [row.asDict() for row in limited.collect()]
        tables["audit"] = _table("audit", _columns(audit), rows, trace_names)
    finally:
        for frame in (kept, rare):
            if frame is not None:  # a Spark that died has its own error to tell; stopping removes shuffles
                with suppress(Exception):
                    release(frame)
    tables = {name: tables[name] for name in ORDER}
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
