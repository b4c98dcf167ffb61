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
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

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
FOLLOWER_FETCH = r"^b[0-9]+-replica-fetch-[0-9]+$"


def op_kind(purgatory: Column, op: Column) -> Column:
    """produce, follower-fetch, consumer-fetch (or the purgatory's name in lower case)."""
    return (
        F.when(purgatory == "Produce", F.lit("produce"))
        .when((purgatory == "Fetch") & op.rlike(FOLLOWER_FETCH), F.lit("follower-fetch"))
        .when(purgatory == "Fetch", F.lit("consumer-fetch"))
        .otherwise(F.lower(purgatory))
    )


def _cause_code(cause: Column) -> Column:
    code = F.lit(len(CAUSES) + 1)  # any other cause
    for number, name in enumerate(CAUSES, 1):
        code = F.when(cause == name, F.lit(number)).otherwise(code)
    return code


def _cause_name(code: Column) -> Column:
    name = F.lit("other")
    for number, cause in enumerate(CAUSES, 1):
        name = F.when(code == number, F.lit(cause)).otherwise(name)
    return name


def operations(events: DataFrame, traces: DataFrame) -> DataFrame:
    """One row per (tid, broker, purgatory, op); ``events`` is the pipeline's relevant events.

    ``traces`` has ``tid``, ``end_ms`` and ``has_expire`` per trace. Every aggregate is
    over whole numbers (the first completion is ``min(seq * 8 + cause code)``, its time
    the smallest completion time, as time never decreases with seq), so Spark keeps a
    hash aggregation. The purgatory is part of the key: an op id whose events name two
    purgatories becomes two rows, one of them without its ``op.create``.
    """
    kind = F.col("kind")
    create, complete, expire = kind == "op.create", kind == "op.complete", kind == "op.expire"
    ops = (
        events.filter(kind.isin("op.create", "op.complete", "op.expire"))
        .groupBy("tid", "broker", "purgatory", "op", "op_kind")  # op_kind: a function of purgatory, op
        .agg(
            F.sum(create.cast("long")).alias("creations"),
            F.min(F.when(create, F.col("seq"))).alias("created_seq"),
            F.min(F.when(create, F.col("time_ms"))).alias("created_ms"),
            F.max(F.when(create, F.col("delay_ms"))).alias("delay_ms"),
            F.sum(complete.cast("long")).alias("completions"),
            F.min(F.when(complete, F.col("time_ms"))).alias("completed_ms"),
            F.min(F.when(complete, F.col("seq") * 8 + _cause_code(F.col("cause")))).alias("first"),
            F.sum(expire.cast("long")).alias("expirations"),
            F.min(F.when(expire, F.col("seq"))).alias("expire_seq"),
            F.min(F.when(complete & (F.col("cause") == "expiry"), F.col("seq"))).alias("expiry_seq"),
        )
    )
    crashes = (
        events.filter((kind == "fault") & F.col("fault").isin("crash", "shutdown"))
        .groupBy("tid", "broker")
        .agg(F.max("seq").alias("crash_seq"))
    )
    cancelled = (
        events.filter(kind == "op.cancel")
        .select("tid", "broker", F.explode(F.from_json("cancelled", "array<string>")).alias("op"))
        .distinct()
        .withColumn("is_cancelled", F.lit(True))
    )
    ops = (
        ops.join(F.broadcast(traces.select("tid", "end_ms", "has_expire")), "tid", "left")
        .join(F.broadcast(crashes), ["tid", "broker"], "left")
        .join(F.broadcast(cancelled), ["tid", "broker", "op"], "left")
    )
    completed_ms = F.col("completed_ms")
    deadline = F.col("created_ms") + F.col("delay_ms")
    status = (
        F.when(F.col("completions") > 0, "completed")
        .when(F.col("is_cancelled"), "cancelled")
        .when(F.col("crash_seq") > F.col("created_seq"), "crashed")
        .when(deadline >= F.col("end_ms"), "waiting")
        .otherwise("lost")
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
        deadline.alias("deadline_ms"),
        "completions",
        completed_ms.alias("completed_ms"),
        F.when(F.col("first").isNotNull(), _cause_name(F.col("first") % 8)).alias("cause"),
        (completed_ms - F.col("created_ms")).alias("latency_ms"),
        "expirations",
        "expire_seq",
        "expiry_seq",
        "has_expire",
        status.alias("status"),
    )


def problems(ops: DataFrame) -> Column:
    """The audit's problems of one operation row, as an array without nulls."""
    c = F.col
    found = F.array(
        F.when(c("status") == "lost", F.lit(PROBLEMS[0])),
        F.when(c("completions") >= 2, F.lit(PROBLEMS[1])),
        F.when(
            (c("expirations") >= 1) & (c("expiry_seq").isNull() | (c("expiry_seq") > c("expire_seq"))),
            F.lit(PROBLEMS[2]),
        ),
        F.when(c("expirations") >= 2, F.lit(PROBLEMS[3])),
        F.when(
            c("has_expire") & (c("cause") == "expiry") & (c("expirations") == 0),
            F.lit(PROBLEMS[4]),
        ),
        F.when(c("creations") >= 2, F.lit(PROBLEMS[5])),
        F.when(c("created_seq").isNull(), F.lit(PROBLEMS[6])),
    )
    return F.filter(found, lambda item: item.isNotNull())


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


def _percentile(column: str, fraction: float) -> Column:
    return F.expr(f"percentile_disc({fraction}) WITHIN GROUP (ORDER BY {column})").cast("long")


def latency(ops: DataFrame) -> DataFrame:
    """Completion latency per (purgatory, op_kind, cause), plus cause ``all``.

    Percentiles are nearest-rank (the smallest latency with at least p of them at or
    below it): Spark's ``percentile_disc``, exact.
    """
    done = ops.filter((F.col("completions") > 0) & F.col("created_ms").isNotNull())
    stats = [
        F.count(F.lit(1)).alias("count"),
        *(_percentile("latency_ms", p).alias(name) for name, p in PERCENTILES),
        F.max("latency_ms").alias("max"),
        F.avg("latency_ms").alias("mean"),
    ]
    by_cause = done.groupBy("purgatory", "op_kind", "cause").agg(*stats)
    overall = done.groupBy("purgatory", "op_kind").agg(*stats).withColumn("cause", F.lit("all"))
    return by_cause.unionByName(overall)


def summary(ops: DataFrame) -> DataFrame:
    """Per (purgatory, op_kind): operations by status and by cause, expiry rate, problem count."""
    c = F.col
    counts = [F.sum((c("status") == status).cast("long")).alias(status) for status in STATUSES]
    counts += [F.sum(c("cause").eqNullSafe(cause).cast("long")).alias(cause) for cause in CAUSES]
    return (
        ops.groupBy("purgatory", "op_kind")
        .agg(
            F.sum(c("created_seq").isNotNull().cast("long")).alias("created"),
            *counts,
            F.sum((F.size(problems(ops)) > 0).cast("long")).alias("with_problems"),
        )
        .withColumn("expiry_rate", F.when(c("completed") > 0, c("expiry") / c("completed")).cast("double"))
    )
