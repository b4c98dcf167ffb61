"""Retry figures from trace events: attempts per record and time to the DLT.

A record is identified by ``(trace, client, origin)``: ``origin`` (``<topic>-<partition>@<offset>``)
is where the retrying consumer ``client`` first consumed it, kept through every redelivery. Its
``attempts`` are its ``retry.deliver`` events; ``first_ms`` is the time of the first one. Its outcome
is that of its first ``retry.processed`` or ``retry.dead`` event (lowest ``seq``), else ``pending``
(still being retried when the trace ends); ``time_to_dlt_ms`` = the ``retry.dead`` event's time -
``first_ms``.

- ``retry_attempts``: per (trace, client, outcome, attempts): ``records``.
- ``retry_dlt``: per (trace, client): ``records``, ``processed``, ``dead``, ``pending``, and the
  nearest-rank p50 / p99 and the max of ``time_to_dlt_ms`` over dead records (null without any).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

ENDS = ("retry.processed", "retry.dead")
KINDS = ("retry.deliver", *ENDS)
OUTCOMES = ("processed", "dead", "pending")


def nearest_rank(column: str, fraction: float) -> Column:
    return F.expr(f"percentile_disc({fraction}) WITHIN GROUP (ORDER BY {column})").cast("long")


def records(rel: DataFrame) -> DataFrame:
    """One row per record: tid, client, origin, attempts, first_ms, outcome, end_ms."""
    keys = ("tid", "client", "origin")
    events = rel.filter(F.col("kind").isin(*KINDS))
    delivered = (
        events.filter(F.col("kind") == "retry.deliver")
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).alias("attempts"), F.min("time_ms").alias("first_ms"))
    )
    first_end = (
        events.filter(F.col("kind").isin(*ENDS))
        .groupBy(*keys)
        .agg(F.min_by(F.struct("kind", "time_ms"), "seq").alias("end"))
        .select(
            *keys,
            F.when(F.col("end.kind") == "retry.dead", "dead").otherwise("processed").alias("outcome"),
            F.col("end.time_ms").alias("end_ms"),
        )
    )
    return delivered.join(first_end, list(keys), "left").fillna("pending", ["outcome"])


def retry_attempts(per_record: DataFrame) -> DataFrame:
    return per_record.groupBy("tid", "client", "outcome", "attempts").agg(F.count(F.lit(1)).alias("records"))


def retry_dlt(per_record: DataFrame) -> DataFrame:
    to_dlt = F.when(F.col("outcome") == "dead", F.col("end_ms") - F.col("first_ms"))
    return (
        per_record.withColumn("time_to_dlt_ms", to_dlt)
        .groupBy("tid", "client")
        .agg(
            F.count(F.lit(1)).alias("records"),
            *(F.count(F.when(F.col("outcome") == o, 1)).alias(o) for o in OUTCOMES),
            nearest_rank("time_to_dlt_ms", 0.5).alias("p50_ms"),
            nearest_rank("time_to_dlt_ms", 0.99).alias("p99_ms"),
            F.max("time_to_dlt_ms").alias("max_ms"),
        )
    )
