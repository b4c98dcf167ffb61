"""Operations from trace events: one row per operation, its latency, and the exactly-once audit.

An operation is identified by ``(trace, broker, op)``: op ids are unique within a
broker within a run, and a trace file is one run. Its row gathers the
``op.create``, ``op.complete`` and ``op.expire`` events with that identity:

- ``created_ms``/``created_seq``/``delay_ms``: its (first) ``op.create``; ``creations``
  counts them; ``deadline_ms = created_ms + delay_ms``;
- ``completions``: its ``op.complete`` events; the first one (lowest ``seq``) gives
  ``completed_ms``, ``cause`` and ``latency_ms = completed_ms - created_ms``;
- ``expirations``: its ``op.expire`` events (``on_expiration`` ran).

Operation kind (``op_kind``): ``produce`` for the Produce purgatory; in the Fetch
purgatory ``follower-fetch`` when the op id is ``b<N>-replica-fetch-<n>`` and
``consumer-fetch`` otherwise; any other purgatory's name in lower case.

Status, in this order: ``completed`` (at least one ``op.complete``), ``cancelled``
(named by an ``op.cancel``), ``crashed`` (a ``fault`` event with fault ``crash`` or
``shutdown`` on its broker after its ``op.create``), ``waiting`` (its deadline is at
or after the trace's last event: still in the purgatory when the run ended), else
``lost``.

The audit (docs/pipeline.md) lists one row per operation and problem:

- ``completed 0 times``: status ``lost``;
- ``completed 2+ times``: ``completions >= 2``;
- ``on_expiration without on_complete``: an ``op.expire`` with no ``op.complete`` of
  cause ``expiry`` before it (by ``seq``);
- ``on_expiration 2+ times``: ``expirations >= 2``;
- ``expiry without on_expiration``: the first ``op.complete`` has cause ``expiry`` but
  no ``op.expire`` follows, in a trace that has ``op.expire`` events at all (older
  traces do not);
- ``created 2+ times`` / ``no op.create``: the identity is broken (an op id reused, a cut trace).

An operation with a skipped row (``op.skipped``: an ``op.*`` row the reader refused that still
names its broker, purgatory and op, such as an ``op.create`` whose ``delay_ms`` does not fit)
has no audit problem: what would decide them is unknown, and skipped rows never change the
exit status. It is counted like any other operation otherwise.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F

from minibroker.analytics.problems import sql_text

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999))
#: the causes an op.complete has; any other is counted as "other"
CAUSES = ("condition", "expiry", "leadership")
STATUSES = ("completed", "cancelled", "crashed", "waiting", "lost")
PROBLEMS = (
    "completed 0 times",
    "completed 2+ times",
    "on_expiration without on_complete",
    "on_expiration 2+ times",
    "expiry without on_expiration",
    "created 2+ times",
    "no op.create",
)
#: the events that make an operation's row
OP_EVENTS = ("op.create", "op.complete", "op.expire")
#: the kind a skipped row of ``OP_EVENTS`` takes in the relevant rows (``analyze.named``)
SKIPPED = "op.skipped"
FOLLOWER_FETCH = r"^b[0-9]+-replica-fetch-[0-9]+$"
#: an operation's identity: the columns its events are grouped on
KEY = ("tid", "broker", "purgatory", "op")


#: SQL: the operation kind of a row's ``purgatory`` and ``op``: produce, follower-fetch,
#: consumer-fetch (or the purgatory's name in lower case)
OP_KIND = (
    "CASE WHEN purgatory = 'Produce' THEN 'produce' "
    f"WHEN purgatory = 'Fetch' AND op RLIKE {sql_text(FOLLOWER_FETCH)} THEN 'follower-fetch' "
    "WHEN purgatory = 'Fetch' THEN 'consumer-fetch' ELSE lower(purgatory) END"
)
#: SQL: an ``op.complete``'s cause as a number (``CAUSES`` from 1; any other cause, or none, after them)
_CAUSE_CODE = (
    "CASE cause "
    + " ".join(f"WHEN {sql_text(cause)} THEN {number}" for number, cause in enumerate(CAUSES, 1))
    + f" ELSE {len(CAUSES) + 1} END"
)
#: per column of an operation row, the aggregate over its events that gives it
_AGGREGATES = {
    "creations": "sum(CAST(kind = 'op.create' AS BIGINT))",
    "created_seq": "min(CASE WHEN kind = 'op.create' THEN seq END)",
    "created_ms": "min(CASE WHEN kind = 'op.create' THEN time_ms END)",
    "delay_ms": "max(CASE WHEN kind = 'op.create' THEN delay_ms END)",
    "completions": "sum(CAST(kind = 'op.complete' AS BIGINT))",
    "completed_ms": "min(CASE WHEN kind = 'op.complete' THEN time_ms END)",
    "first": f"min(CASE WHEN kind = 'op.complete' THEN seq * 8 + {_CAUSE_CODE} END)",
    "expirations": "sum(CAST(kind = 'op.expire' AS BIGINT))",
    "expire_seq": "min(CASE WHEN kind = 'op.expire' THEN seq END)",
    "expiry_seq": "min(CASE WHEN kind = 'op.complete' AND cause = 'expiry' THEN seq END)",
    "skips": f"sum(CAST(kind = {sql_text(SKIPPED)} AS BIGINT))",
}
_STATUS = (
    "CASE WHEN completions > 0 THEN 'completed' WHEN is_cancelled THEN 'cancelled' "
    "WHEN crash_seq > created_seq THEN 'crashed' WHEN created_ms + delay_ms >= end_ms THEN 'waiting' "
    "ELSE 'lost' END"
)
_CAUSE = (
    "CASE first % 8 "
    + " ".join(f"WHEN {number} THEN {sql_text(cause)}" for number, cause in enumerate(CAUSES, 1))
    + " ELSE 'other' END"
)


def operations(events: DataFrame, traces: DataFrame, rare: DataFrame | None = None) -> DataFrame:
    """One row per (tid, broker, purgatory, op); ``events`` is the pipeline's relevant events.

    ``rare``, when given, holds at least the ``fault`` and ``op.cancel`` events of ``events``
    (a smaller frame to scan for them).

    ``traces`` has ``tid``, ``end_ms`` and ``has_expire`` per trace. Every aggregate is
    over whole numbers (the first completion is ``min(seq * 8 + cause code)``, its time
    the smallest completion time, as time never decreases with seq), so Spark keeps a
    hash aggregation. The purgatory is part of the key: an op id whose events name two
    purgatories becomes two rows, one of them without its ``op.create``. Expressions are
    SQL text: one call into the JVM each.
    """
    ops = (
        events.filter(F.expr(f"kind IN ({', '.join(map(sql_text, (*OP_EVENTS, SKIPPED)))})"))
        .groupBy(*KEY)
        .agg(*(F.expr(value).alias(name) for name, value in _AGGREGATES.items()))
        .filter(F.expr("creations + completions + expirations > 0"))  # not skipped rows alone
    )
    rare = events if rare is None else rare
    crashes = (
        rare.filter(F.expr("kind = 'fault' AND fault IN ('crash', 'shutdown')"))
        .groupBy("tid", "broker")
        .agg(F.max("seq").alias("crash_seq"))
    )
    cancelled = (
        rare.filter(F.expr("kind = 'op.cancel'"))
        .select("tid", "broker", F.expr("explode(from_json(cancelled, 'array<string>')) AS op"))
        .distinct()
        .withColumn("is_cancelled", F.lit(True))
    )
    ops = (
        ops.withColumn("op_kind", F.expr(OP_KIND))  # one per operation, not per event
        .join(F.broadcast(traces.select("tid", "end_ms", "has_expire")), "tid", "left")
        .join(F.broadcast(crashes), ["tid", "broker"], "left")
        .join(F.broadcast(cancelled), ["tid", "broker", "op"], "left")
    )
    return ops.select(
        "tid",
        "broker",
        "purgatory",
        "op_kind",
        "op",
        "creations",
        "created_seq",
        "created_ms",
        "delay_ms",
        F.expr("created_ms + delay_ms AS deadline_ms"),
        "completions",
        "completed_ms",
        F.expr(f"CASE WHEN first IS NOT NULL THEN {_CAUSE} END AS cause"),
        F.expr("completed_ms - created_ms AS latency_ms"),
        "expirations",
        "expire_seq",
        "expiry_seq",
        "has_expire",
        "skips",
        F.expr(f"{_STATUS} AS status"),
    )


#: per audit problem (``PROBLEMS``, in order), SQL: the condition on an operation row that it applies
#: (never to an operation with a skipped row)
_PROBLEM_CONDITIONS = tuple(
    f"skips = 0 AND ({condition})"
    for condition in (
        "status = 'lost'",
        "completions >= 2",
        "expirations >= 1 AND (expiry_seq IS NULL OR expiry_seq > expire_seq)",
        "expirations >= 2",
        "has_expire AND cause = 'expiry' AND expirations = 0",
        "creations >= 2",
        "created_seq IS NULL",
    )
)


def problems(ops: DataFrame) -> Column:
    """The audit's problems of one operation row, as an array without nulls."""
    found = ", ".join(
        f"CASE WHEN {condition} THEN {sql_text(text)} END"
        for condition, text in zip(_PROBLEM_CONDITIONS, PROBLEMS, strict=True)
    )
    return F.expr(f"filter(array({found}), item -> item IS NOT NULL)")


def audit(ops: DataFrame) -> DataFrame:
    """One row per (operation, problem)."""
    return ops.select(
        "tid",
        "broker",
        "purgatory",
        "op_kind",
        "op",
        "created_ms",
        "deadline_ms",
        "completions",
        "expirations",
        "status",
        F.explode(problems(ops)).alias("problem"),
    )


def histogram(ops: DataFrame) -> DataFrame:
    """Operations counted per (purgatory, op_kind, status, cause, problems, created, latency_ms).

    ``problems`` has bit ``i`` set for ``PROBLEMS[i]``; ``created`` says the operation
    has its ``op.create``; ``latency_ms`` is null unless it completed and was created.
    A few rows per distinct latency: ``summary_rows``, ``latency_rows`` and
    ``audit_total`` finish the tables from it exactly.
    """
    bits = " + ".join(
        f"CASE WHEN {condition} THEN {1 << i} ELSE 0 END" for i, condition in enumerate(_PROBLEM_CONDITIONS)
    )
    return ops.groupBy(
        "purgatory",
        "op_kind",
        "status",
        "cause",
        F.expr(bits).alias("problems"),
        F.expr("created_seq IS NOT NULL").alias("created"),
        F.expr("CASE WHEN completions > 0 AND created_ms IS NOT NULL THEN latency_ms END").alias(
            "latency_ms"
        ),
    ).agg(F.count(F.lit(1)).alias("operations"))


#: the tables ``summary_rows`` and ``latency_rows`` make: (column, Spark type name)
SUMMARY_COLUMNS = [
    ("purgatory", "string"),
    ("op_kind", "string"),
    ("created", "long"),
    *((status, "long") for status in STATUSES),
    *((cause, "long") for cause in CAUSES),
    ("with_problems", "long"),
    ("expiry_rate", "double"),
]
LATENCY_COLUMNS = [
    ("purgatory", "string"),
    ("op_kind", "string"),
    ("cause", "string"),
    ("count", "long"),
    *((name, "long") for name, _ in PERCENTILES),
    ("max", "long"),
    ("mean", "double"),
]


def audit_total(histogram_rows: list[dict[str, Any]]) -> int:
    """Audit rows in all: one per operation and problem."""
    return sum(row["operations"] * bin(row["problems"]).count("1") for row in histogram_rows)


def summary_rows(histogram_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (purgatory, op_kind): operations by status and by cause, expiry rate, operations with problems."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for item in histogram_rows:
        key = (item["purgatory"], item["op_kind"])
        row = rows.setdefault(
            key,
            {"purgatory": key[0], "op_kind": key[1], **{name: 0 for name, _ in SUMMARY_COLUMNS[2:-1]}},
        )
        count = item["operations"]
        row["created"] += count if item["created"] else 0
        row[item["status"]] += count
        if item["cause"] in CAUSES:
            row[item["cause"]] += count
        row["with_problems"] += count if item["problems"] else 0
    for row in rows.values():
        row["expiry_rate"] = row["expiry"] / row["completed"] if row["completed"] else None
    return list(rows.values())


def latency_rows(histogram_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Completion latency per (purgatory, op_kind, cause), plus cause ``all``.

    Percentiles are nearest-rank: the ``ceil(p * count)``-th smallest latency, exact.
    """
    groups: dict[tuple[str, str, str], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for item in histogram_rows:
        if item["latency_ms"] is None:
            continue
        for cause in (item["cause"], "all"):
            groups[(item["purgatory"], item["op_kind"], cause)][item["latency_ms"]] += item["operations"]
    rows = []
    for (purgatory, kind, cause), counts in groups.items():
        ordered = sorted(counts.items())
        total = sum(counts.values())
        row = {"purgatory": purgatory, "op_kind": kind, "cause": cause, "count": total}
        for name, fraction in PERCENTILES:
            rank, seen = max(1, math.ceil(fraction * total)), 0
            for latency, count in ordered:
                seen += count
                if seen >= rank:
                    row[name] = latency
                    break
        row["max"] = ordered[-1][0]
        row["mean"] = sum(latency * count for latency, count in ordered) / total
        rows.append(row)
    return rows
