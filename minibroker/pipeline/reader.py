"""Reading traces into Spark with every row checked: bad rows skipped and counted, non-traces refused.

``read_traces(spark, inputs)`` checks every file before Spark reads it and every row
as Spark reads it; ``TraceRead.check()`` runs the one pass that counts them.

Files (raise ``BadTrace``, one line naming the file): before the read, what
``inputs.check_files`` refuses (empty files, Parquet files that are not traces);
after the pass, a file without a single valid event (a JSON file of something else,
random bytes named ``.jsonl``, only blank lines).

Rows: ``problem`` is null for a valid event, else the first of these that applies:

- JSONL only: ``not a JSON object``; ``COLUMN is not a whole number`` (or ``not a
  list of strings``, ``not a string``);
- ``seq missing or null``, ``time_ms missing or null``, ``kind missing or null``;
- ``KIND without FIELD`` for the fields the analysis needs of ``KIND`` (``NEEDS``):
  an ``op.create`` without ``delay_ms`` would otherwise be a false "completed 0
  times", an ``op.complete`` without ``op`` a phantom operation.

Blank JSONL lines are neither events nor problems. Events of kinds the analysis does
not use, known or not, are valid events: they count in ``events`` and nothing else.

Where: a skipped row is located by its 1-based line (JSONL) or its 0-based row and
row group (Parquet). Lines are computed in Spark without a Python pass: a row's
position is its file split's offset (``_metadata.file_block_start``) and its index
in the split (``monotonically_increasing_id`` differences: a split is read by one
task, in order); the lines of the earlier splits of the file are counted only when
some JSONL row was skipped.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import attrs
from pyspark.sql import functions as F

from minibroker.pipeline.inputs import SCHEMA_DDL, BadTrace, TraceInputs, check_files, display_name, row_group
from minibroker.pipeline.timelines import ISR_KINDS
from minibroker.trace import COLUMNS
from minibroker.trace.sinks import INT_COLUMNS

__all__ = ["BadTrace", "Skipped", "TraceCheck", "TraceRead", "problem_column", "read_traces"]

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_OP = ("broker", "purgatory", "op")
#: per kind, the columns and ``data`` fields (``data.NAME``; ``#`` = a whole number) the analysis needs
NEEDS: dict[str, tuple[str, ...]] = {
    "op.create": (*_OP, "data.delay_ms#"),
    "op.complete": _OP,
    "op.expire": _OP,
    "timer.fire": ("data.expiration#",),
    "purge": ("broker", "purgatory"),
    "hw": ("partition", "data.hw#"),
    **{kind: ("partition", "data.isr") for kind in ISR_KINDS},
}
_CORRUPT = "_corrupt_record"
_WHOLE = r"^-?[0-9]{1,18}$"


@attrs.frozen
class Skipped:
    """Rows of one trace skipped for one reason: how many, and where the first one is."""

    trace: str
    problem: str
    rows: int
    first: str


@attrs.frozen
class TraceCheck:
    """The pass's result: per-trace figures of the valid events, and what was skipped."""

    #: per trace, by display name: events (valid), skipped, start_ms, end_ms, has_expire, and
    #: ``path`` (as Spark names it) and ``tid`` (``xxhash64(path)``, the jobs' compact trace key)
    traces: list[dict[str, Any]]
    skipped: list[Skipped]


# --- rows --------------------------------------------------------------------------------------
def _need(kind: str, need: str) -> tuple[Column, str]:
    """(a condition true when the row lacks ``need``, the problem's text)."""
    whole = need.endswith("#")
    name = need.rstrip("#")
    if name.startswith("data."):
        field = name[len("data.") :]
        value = F.get_json_object("data", f"$.{field}")
        missing = value.isNull() | (~value.rlike(_WHOLE) if whole else F.lit(False))
        return missing, f"{kind} without {field}" + (" (a whole number)" if whole else "")
    return F.col(name).isNull(), f"{kind} without {name}"


def problem_column() -> Column:
    """The row's problem (module docstring) over the trace columns and ``_corrupt_record``."""
    kind = F.col("kind")
    rules: list[tuple[Column, str]] = [
        (F.col(name).isNull(), f"{name} missing or null") for name in ("seq", "time_ms", "kind")
    ]
    for event_kind, needs in NEEDS.items():
        for need in needs:
            lacks, text = _need(event_kind, need)
            rules.append(((kind == event_kind) & lacks, text))
    problem = F.lit(None).cast("string")
    for condition, text in reversed(rules):
        problem = F.when(condition, F.lit(text)).otherwise(problem)
    return F.when(F.col(_CORRUPT).isNotNull(), _corrupt_problem()).otherwise(problem)


def _corrupt_problem() -> Column:
    """Why Spark's JSON parser flagged the line: not an object, or the first column of another type."""
    line = F.col(_CORRUPT)
    problem = F.lit("not a trace event")
    for name in reversed((*COLUMNS, "data")):
        expected = (
            "a whole number" if name in INT_COLUMNS else "a list of strings" if name == "keys" else "a string"
        )
        raw = F.get_json_object(line, f"$.{name}")
        problem = F.when(
            raw.isNotNull() & F.col(name).isNull(), F.lit(f"{name} is not {expected}")
        ).otherwise(problem)
    is_object = F.from_json(line, "map<string,string>").isNotNull() & F.trim(line).startswith("{")
    return F.when(is_object, problem).otherwise(F.lit("not a JSON object"))


_TRACE_COLUMNS = [*COLUMNS, "data"]


def _jsonl(spark: SparkSession, paths: tuple[str, ...]) -> DataFrame:
    lines = spark.read.text(list(paths)).select(
        "value",
        F.col("_metadata.file_path").alias("trace"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_pos"),
    )
    parsed = lines.filter(F.trim("value") != "").select(
        F.from_json(
            "value", f"{SCHEMA_DDL}, `{_CORRUPT}` string", {"columnNameOfCorruptRecord": _CORRUPT}
        ).alias("e"),
        "trace",
        "_block",
        "_pos",
    )
    return parsed.select(
        *(F.col(f"e.{name}").alias(name) for name in (*_TRACE_COLUMNS, _CORRUPT)), "trace", "_block", "_pos"
    )


def _parquet(spark: SparkSession, paths: tuple[str, ...]) -> DataFrame:
    return (
        spark.read.schema(SCHEMA_DDL)
        .parquet(*paths)
        .select(
            *_TRACE_COLUMNS,
            F.lit(None).cast("string").alias(_CORRUPT),
            F.col("_metadata.file_path").alias("trace"),
            F.lit(-1).cast("long").alias("_block"),
            F.col("_metadata.row_index").alias("_pos"),
        )
    )


@attrs.define
class TraceRead:
    """Every row of the traces with its ``problem``; ``events`` are the valid ones.

    ``rows`` has the trace columns, ``data``, ``trace`` (the file as Spark names it),
    ``problem``, and the position columns ``_block``/``_pos``. ``events`` has what
    ``analyze`` has always read: the trace columns, ``data`` and ``trace``.
    """

    spark: SparkSession
    inputs: TraceInputs
    rows: DataFrame
    _offsets: dict[tuple[str, int], tuple[int, int]] | None = None

    @property
    def events(self) -> DataFrame:
        return self.rows.filter(F.col("problem").isNull()).select(*_TRACE_COLUMNS, "trace")

    def tally(self) -> DataFrame:
        """Per (trace, problem): rows, first and last time, any ``op.expire``, the first row's place, tid.

        Small (a row per trace and reason): collect it alone (``check()``) or with other
        results in one action, and hand the rows to ``check(rows)``.
        """
        return self.rows.groupBy("trace", "problem").agg(
            F.count(F.lit(1)).alias("rows"),
            F.min("time_ms").alias("start_ms"),
            F.max("time_ms").alias("end_ms"),
            F.max((F.col("kind") == "op.expire").cast("int")).alias("expire"),
            F.min(F.struct("_block", "_pos")).alias("first"),
            F.first(F.xxhash64("trace")).alias("tid"),
        )

    def check(self, groups: list[Any] | None = None) -> TraceCheck:
        """Per-trace figures and skipped rows from ``tally()``'s rows (collected here when not given).

        BadTrace if a file has no valid event.
        """
        if groups is None:
            groups = self.tally().collect()
        traces: dict[str, dict[str, Any]] = {}
        bad: list[Any] = []
        for row in groups:
            item = traces.setdefault(
                row["trace"],
                {
                    "tid": row["tid"],
                    "events": 0,
                    "skipped": 0,
                    "start_ms": None,
                    "end_ms": None,
                    "has_expire": False,
                },
            )
            if row["problem"] is None:
                item.update(
                    events=row["rows"],
                    start_ms=row["start_ms"],
                    end_ms=row["end_ms"],
                    has_expire=bool(row["expire"]),
                )
            else:
                item["skipped"] += row["rows"]
                bad.append(row)
        for path in (*self.inputs.jsonl, *self.inputs.parquet):
            if not any(_same_file(path, trace) for trace in traces):
                raise BadTrace(f"{display_name(path)} holds no event: expected a trace (see docs/trace.md)")
        for trace, item in sorted(traces.items(), key=lambda pair: display_name(pair[0])):
            if item["events"] == 0:
                reasons = sorted((r for r in bad if r["trace"] == trace), key=lambda r: -r["rows"])
                detail = "; ".join(
                    f"{r['rows']:,} {r['problem']} (first at {self._where(r)})" for r in reasons[:3]
                )
                raise BadTrace(f"{display_name(trace)} has no valid trace event: {detail}")
        skipped = [
            Skipped(display_name(r["trace"]), r["problem"], r["rows"], self._where(r))
            for r in sorted(bad, key=lambda r: (display_name(r["trace"]), r["problem"]))
        ]
        rows = [
            {"trace": display_name(path), "path": path, **item}
            for path, item in sorted(traces.items(), key=lambda pair: display_name(pair[0]))
        ]
        return TraceCheck(rows, skipped)

    def _jsonl_offsets(self) -> dict[tuple[str, int], tuple[int, int]]:
        """Per (JSONL file, split offset): (lines of the earlier splits, the split's first ``_pos``)."""
        if self._offsets is not None:
            return self._offsets
        splits = (
            _jsonl_lines(self.spark, self.inputs.jsonl)
            .groupBy("trace", "_block")
            .agg(F.count(F.lit(1)).alias("lines"), F.min("_pos").alias("first"))
            .collect()
        )
        by_file: dict[str, list[Any]] = defaultdict(list)
        for split in splits:
            by_file[split["trace"]].append(split)
        offsets = {}
        for trace, items in by_file.items():
            before = 0
            for split in sorted(items, key=lambda s: s["_block"]):
                offsets[(trace, split["_block"])] = (before, split["first"])
                before += split["lines"]
        self._offsets = offsets
        return offsets

    def _where(self, row: Any) -> str:
        block, position = row["first"]["_block"], row["first"]["_pos"]
        if block < 0:
            group = row_group(row["trace"], position)
            return f"row {position}" + (f" (row group {group})" if group is not None else "")
        before, first = self._jsonl_offsets().get((row["trace"], block), (0, position))
        return f"line {before + position - first + 1}"


def _same_file(path: str, spark_path: str) -> bool:
    return display_name(spark_path) == display_name(path) or spark_path == path


def _jsonl_lines(spark: SparkSession, paths: tuple[str, ...]) -> DataFrame:
    return spark.read.text(list(paths)).select(
        F.col("_metadata.file_path").alias("trace"),
        F.col("_metadata.file_block_start").alias("_block"),
        F.monotonically_increasing_id().alias("_pos"),
    )


def read_traces(spark: SparkSession, inputs: TraceInputs) -> TraceRead:
    """Check the files (BadTrace) and return their rows, each with its ``problem``."""
    if not inputs.count:
        raise ValueError("no trace to read")
    check_files(spark, inputs)
    frames = []
    if inputs.jsonl:
        frames.append(_jsonl(spark, inputs.jsonl))
    if inputs.parquet:
        frames.append(_parquet(spark, inputs.parquet))
    rows = functools.reduce(lambda a, b: a.unionByName(b), frames)
    rows = rows.select(*_TRACE_COLUMNS, "trace", problem_column().alias("problem"), "_block", "_pos")
    return TraceRead(spark, inputs, rows)
