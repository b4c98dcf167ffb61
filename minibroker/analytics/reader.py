"""Reading traces into Spark with every row checked: bad rows skipped and counted, non-traces refused.

``read_traces(spark, inputs)`` checks every file before Spark reads it and every row
as Spark reads it; ``TraceRead.check()`` runs the one pass that counts them.
``TraceRead.narrow(kinds, fields)`` is the job's read: only the rows of ``kinds`` and
the rows that may be bad, with the ``data`` fields parsed once; ``check(facts)`` then
counts from its tally and the Parquet footers, without a pass over every row, when a
footer proves what a pass would find (``inputs.footer_facts``: row count, no null
``seq``/``time_ms``/``kind``, ``time_ms`` range) and the narrow rows of that file have
no problem; every other file (JSONL, no statistics, a bad row) gets the full pass.

Rows: each gets its ``problem`` (``problems``: null for a valid event).

Files (raise ``BadTrace``, one line naming the file): before the read, what
``inputs.check_files`` refuses (empty files, Parquet files that are not traces);
after the pass, a file without a single valid event (a JSON file of something else,
random bytes named ``.jsonl``, only blank lines).

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

from minibroker.analytics.inputs import (
    SCHEMA_DDL,
    BadTrace,
    TraceInputs,
    check_files,
    display_name,
    footer_facts,
    row_group,
)
from minibroker.analytics.problems import CORRUPT, NEEDED_FIELDS, NEEDS, merged_fields, with_problem
from minibroker.trace import COLUMNS

__all__ = ["BadTrace", "Skipped", "TraceCheck", "TraceRead", "read_traces"]

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


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
            "value", f"{SCHEMA_DDL}, `{CORRUPT}` string", {"columnNameOfCorruptRecord": CORRUPT}
        ).alias("e"),
        "trace",
        "_block",
        "_pos",
    )
    return parsed.select(
        *(F.col(f"e.{name}").alias(name) for name in (*_TRACE_COLUMNS, CORRUPT)), "trace", "_block", "_pos"
    )


def _parquet(spark: SparkSession, paths: tuple[str, ...]) -> DataFrame:
    return (
        spark.read.schema(SCHEMA_DDL)
        .parquet(*paths)
        .select(
            *_TRACE_COLUMNS,
            F.lit(None).cast("string").alias(CORRUPT),
            F.col("_metadata.file_path").alias("trace"),
            F.lit(-1).cast("long").alias("_block"),
            F.col("_metadata.row_index").alias("_pos"),
        )
    )


@attrs.define
class TraceRead:
    """The traces' rows as read, ``base``: the trace columns, ``data``, ``trace`` (the file as
    Spark names it), ``_corrupt_record`` and the position columns ``_block``/``_pos``.

    ``rows`` adds each row's ``problem``; ``events`` are the valid rows with what
    ``analyze`` has always read: the trace columns, ``data`` and ``trace``.
    """

    spark: SparkSession
    inputs: TraceInputs
    base: DataFrame
    _offsets: dict[tuple[str, int], tuple[int, int]] | None = None

    @property
    def rows(self) -> DataFrame:
        return with_problem(self.base, NEEDED_FIELDS).select(
            *_TRACE_COLUMNS, "trace", "problem", "_block", "_pos"
        )

    @property
    def events(self) -> DataFrame:
        return self.rows.filter(F.col("problem").isNull()).select(*_TRACE_COLUMNS, "trace")

    def narrow(self, kinds: tuple[str, ...], fields: dict[str, tuple[str, ...]]) -> DataFrame:
        """The rows of ``kinds`` and every row that may have a problem, with its ``problem``.

        ``fields`` (a ``data`` field's name: the kinds that carry it) are parsed once per
        row into ``field_column(name)`` as JSON text, and the checks read them there.
        A row of another kind can only lack ``seq``, ``time_ms`` or ``kind`` or be an
        unparsed JSONL line: the filter keeps those, so ``tally(narrow)`` sees every bad row.
        """
        kind = F.col("kind")
        maybe_bad = (
            F.col("seq").isNull() | F.col("time_ms").isNull() | kind.isNull() | F.col(CORRUPT).isNotNull()
        )
        picked = self.base.filter(kind.isin(*dict.fromkeys((*kinds, *NEEDS))) | maybe_bad)
        return with_problem(picked, merged_fields(fields))

    def tally(self, frame: DataFrame | None = None) -> DataFrame:
        """Per (trace, problem, split): rows, first and last time, any ``op.expire``, first ``_pos``, tid.

        Over ``rows`` unless ``frame`` (``narrow``'s) is given. Small (a row per trace,
        reason and JSONL split) and hash-aggregated: every buffer is a whole number.
        A ``frame`` without the position columns (what ``analyze`` keeps: reading Parquet
        row numbers costs) gives split -1 and first 0: ``check(facts)`` needs no position
        from it, as a file with a bad row gets the full pass, which finds them. A ``frame``
        with a ``tid`` column (``xxhash64(trace)``) gives it as it is, not hashed again per row.
        """
        frame = self.rows if frame is None else frame
        block, first = (
            ("_block", F.min("_pos"))
            if "_pos" in frame.columns
            else (F.lit(-1).cast("long").alias("_block"), F.lit(0).cast("long"))
        )
        return frame.groupBy("trace", "problem", block).agg(
            F.count(F.lit(1)).alias("rows"),
            F.min("time_ms").alias("start_ms"),
            F.max("time_ms").alias("end_ms"),
            F.max((F.col("kind") == "op.expire").cast("int")).alias("expire"),
            first.alias("first"),
            F.max("tid" if "tid" in frame.columns else F.xxhash64("trace")).alias("tid"),
        )

    def check(self, facts: list[Any] | None = None) -> TraceCheck:
        """Per-trace figures and skipped rows; BadTrace if a file has no valid event.

        Without ``facts`` every file is tallied (one pass over all its rows). With
        ``facts``, the rows of ``tally(narrow(...))``, a local Parquet file whose footer
        vouches for it (``footer_facts``) and whose narrow rows have no problem is
        counted from its footer (events, first and last time) and the facts (any
        ``op.expire``, tid); only the other files are tallied.
        """
        if facts is None:
            return self._judge(_combine(self.tally().collect()))
        by_file: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for group in _combine(facts):
            by_file[display_name(group["trace"])].append(group)
        vouched = {}
        for path in self.inputs.parquet:
            footer = footer_facts(path)
            if footer is not None and all(g["problem"] is None for g in by_file[display_name(path)]):
                vouched[path] = footer
        rest = TraceInputs(self.inputs.jsonl, tuple(p for p in self.inputs.parquet if p not in vouched))
        groups = []
        if rest.count:
            groups = _combine(TraceRead(self.spark, rest, _frame(self.spark, rest)).tally().collect())
        for path, footer in vouched.items():
            valid = by_file[display_name(path)]
            groups.append(
                {
                    "trace": valid[0]["trace"] if valid else path,
                    "problem": None,
                    "rows": footer.rows,
                    "start_ms": footer.start_ms,
                    "end_ms": footer.end_ms,
                    "expire": valid[0]["expire"] if valid else 0,
                    "first": (-1, 0),
                    "tid": valid[0]["tid"] if valid else None,
                }
            )
        return self._judge(groups)

    def _judge(self, groups: list[dict[str, Any]]) -> TraceCheck:
        traces: dict[str, dict[str, Any]] = {}
        bad: list[dict[str, Any]] = []
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

    def _where(self, row: dict[str, Any]) -> str:
        block, position = row["first"]
        if block < 0:
            group = row_group(row["trace"], position)
            return f"row {position}" + (f" (row group {group})" if group is not None else "")
        before, first = self._jsonl_offsets().get((row["trace"], block), (0, position))
        return f"line {before + position - first + 1}"


def _combine(groups: list[Any]) -> list[dict[str, Any]]:
    """``tally`` rows merged per (trace, problem); ``first`` is the (split, position) of the first row."""
    merged: dict[tuple[str, str | None], dict[str, Any]] = {}
    for row in groups:
        place = (row["_block"], row["first"])
        item = merged.get((row["trace"], row["problem"]))
        if item is None:
            merged[(row["trace"], row["problem"])] = {
                "trace": row["trace"],
                "problem": row["problem"],
                "rows": row["rows"],
                "start_ms": row["start_ms"],
                "end_ms": row["end_ms"],
                "expire": row["expire"] or 0,
                "first": place,
                "tid": row["tid"],
            }
            continue
        item["rows"] += row["rows"]
        item["start_ms"] = min(
            (x for x in (item["start_ms"], row["start_ms"]) if x is not None), default=None
        )
        item["end_ms"] = max((x for x in (item["end_ms"], row["end_ms"]) if x is not None), default=None)
        item["expire"] = max(item["expire"], row["expire"] or 0)
        item["first"] = min(item["first"], place)
    return list(merged.values())


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
    return TraceRead(spark, inputs, _frame(spark, inputs))


def _frame(spark: SparkSession, inputs: TraceInputs) -> DataFrame:
    frames = []
    if inputs.jsonl:
        frames.append(_jsonl(spark, inputs.jsonl))
    if inputs.parquet:
        frames.append(_parquet(spark, inputs.parquet))
    return functools.reduce(lambda a, b: a.unionByName(b), frames)
