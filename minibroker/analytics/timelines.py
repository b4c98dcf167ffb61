"""Time-bucketed figures from trace events: request rate, purgatory size, HW, ISR; timer precision.

A bucket is ``bucket_ms = time_ms div B * B`` for the run's bucket width ``B``. Every
table has a row only for buckets in which something happened; a figure that is a
level (waiting, HW, ISR) holds until its next row.

- ``rate`` (all traces summed; traces share one virtual timeline from 0): per
  (bucket, purgatory, op_kind), ``op.create`` events (``created``, and
  ``created_per_s = created * 1000 / B``), ``op.complete`` events (``completed``) and
  those with cause ``expiry`` (``expired``).
- ``purgatory_size``: per (trace, broker, purgatory, bucket), ``created`` and
  ``completed`` as above, ``waiting`` = created - completed summed over the buckets
  so far (operations still in the purgatory at the bucket's end), ``max_waiting``
  the most waiting at any moment of the bucket (its start included; events in
  ``seq`` order, so a create and its completion in one ms count: the level at the
  bucket's start plus the most the bucket's own events raised it, so no window runs over
  every event; time never decreases with ``seq`` in a trace), and from the bucket's
  ``purge`` events: ``purges``, ``purged`` (their ``count``) and the last one's
  ``watched`` (PurgatorySize) and ``num_delayed`` (null without a purge).
- ``hw``: per (trace, partition, bucket), the last ``hw`` event's ``hw`` and its
  ``broker`` (the leader), and how many ``hw`` events there were.
- ``isr``: per (trace, partition, bucket), over ``leader``, ``isr.commit``,
  ``controller.isr`` and ``controller.elect`` events: the last one's ``isr`` (JSON text) and its size, the
  smallest size seen, and how many there were.
- ``timer_precision``: per ``delta_ms = time_ms - expiration`` of ``timer.fire``
  events (one per task run by the timer), how many tasks fired that late.

"Last" means highest ``seq`` within the trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

#: events that carry a partition's ISR: ``leader`` gives the one it starts with
ISR_KINDS = ("leader", "isr.commit", "controller.isr", "controller.elect")


def bucket(bucket_ms: int) -> Column:
    return F.expr(f"time_ms div {int(bucket_ms)} * {int(bucket_ms)}").alias("bucket_ms")


def _op_events(events: DataFrame, bucket_ms: int) -> DataFrame:
    kind = F.col("kind")
    return events.filter(kind.isin("op.create", "op.complete")).select(
        "tid",
        "seq",
        "broker",
        "purgatory",
        "op_kind",
        bucket(bucket_ms),
        (kind == "op.create").cast("long").alias("c"),
        (kind == "op.complete").cast("long").alias("d"),
        ((kind == "op.complete") & (F.col("cause") == "expiry")).cast("long").alias("e"),
    )


def rate(events: DataFrame, bucket_ms: int) -> DataFrame:
    return (
        _op_events(events, bucket_ms)
        .groupBy("bucket_ms", "purgatory", "op_kind")
        .agg(F.sum("c").alias("created"), F.sum("d").alias("completed"), F.sum("e").alias("expired"))
        .withColumn("created_per_s", F.col("created") * 1000.0 / bucket_ms)
    )


def purgatory_size(events: DataFrame, bucket_ms: int, rare: DataFrame | None = None) -> DataFrame:
    """``rare``, when given, holds at least the ``purge`` events of ``events``."""
    keys = ["tid", "broker", "purgatory", "bucket_ms"]
    flows = (
        _op_events(events, bucket_ms)
        .groupBy(*keys)
        .agg(
            F.sum("c").alias("created"),
            F.sum("d").alias("completed"),
            # the bucket's events in seq order: seq * 2 + 1 for a create, seq * 2 for a completion
            F.array_sort(F.collect_list(F.col("seq") * 2 + F.col("c"))).alias("steps"),
        )
        .select(*keys, "created", "completed", _rise(F.col("steps")).alias("rise"))
    )
    purges = (
        (events if rare is None else rare)
        .filter(F.col("kind") == "purge")
        .select(*keys[:3], bucket(bucket_ms), "seq", "count", "watched", "num_delayed")
        .groupBy(*keys)
        .agg(
            F.count(F.lit(1)).alias("purges"),
            F.sum("count").alias("purged"),
            F.max_by("watched", "seq").alias("watched"),
            F.max_by("num_delayed", "seq").alias("num_delayed"),
        )
    )
    joined = flows.join(purges, keys, "full").select(
        *keys,
        F.coalesce("created", F.lit(0)).alias("created"),
        F.coalesce("completed", F.lit(0)).alias("completed"),
        F.coalesce("purges", F.lit(0)).alias("purges"),
        F.coalesce("purged", F.lit(0)).alias("purged"),
        "watched",
        "num_delayed",
        "rise",
    )
    so_far = (
        Window.partitionBy("tid", "broker", "purgatory")
        .orderBy("bucket_ms")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    waiting = F.sum(F.col("created") - F.col("completed")).over(so_far)
    # the level at the bucket's start (waiting before its flows) plus the most it rose within it
    peak = F.col("waiting") - F.col("created") + F.col("completed") + F.col("rise")
    return (
        joined.withColumn("waiting", waiting)
        .withColumn("max_waiting", F.coalesce(peak, "waiting"))
        .drop("rise")
    )


def _rise(steps: Column) -> Column:
    """The most the level rose above its start (0 if it never did) over ``steps`` in order."""
    start = F.struct(F.lit(0).cast("long").alias("level"), F.lit(0).cast("long").alias("peak"))

    def step(acc: Column, item: Column) -> Column:
        level = acc["level"] + F.when(item % 2 == 1, 1).otherwise(-1)
        return F.struct(level.alias("level"), F.greatest(acc["peak"], level).alias("peak"))

    return F.aggregate(steps, start, step, lambda acc: acc["peak"])


def hw(events: DataFrame, bucket_ms: int) -> DataFrame:
    return (
        events.filter(F.col("kind") == "hw")
        .select("tid", "partition", bucket(bucket_ms), "seq", "hw", "broker")
        .groupBy("tid", "partition", "bucket_ms")
        .agg(
            F.max_by("hw", "seq").alias("hw"),
            F.max_by("broker", "seq").alias("leader"),
            F.count(F.lit(1)).alias("changes"),
        )
    )


def isr(events: DataFrame, bucket_ms: int) -> DataFrame:
    size = F.size(F.from_json("isr", "array<bigint>"))
    return (
        events.filter(F.col("kind").isin(*ISR_KINDS))
        .select("tid", "partition", bucket(bucket_ms), "seq", "isr", size.alias("size"))
        .groupBy("tid", "partition", "bucket_ms")
        .agg(
            F.max_by("isr", "seq").alias("isr"),
            F.max_by("size", "seq").cast("long").alias("isr_size"),
            F.min("size").cast("long").alias("min_isr_size"),
            F.count(F.lit(1)).alias("changes"),
        )
    )


def timer_precision(events: DataFrame) -> DataFrame:
    return (
        events.filter(F.col("kind") == "timer.fire")
        .select((F.col("time_ms") - F.col("expiration")).alias("delta_ms"))
        .groupBy("delta_ms")
        .agg(F.count(F.lit(1)).alias("fires"))
    )
