"""Rows the job's actions share: written once as one shuffle, read from its files by every table.

``keep(frame, keys)`` hash-partitions ``frame``'s rows on ``keys`` into
``spark.sql.shuffle.partitions`` partitions and returns a frame whose plan is a scan of that
shuffle's output (a ``LogicalRDD`` over the shuffled RDD). Invariants:

- the first action that reads the frame writes the shuffle; every later read, in that action or
  another, reads its files (Spark skips a shuffle-map stage whose output exists), so the input is
  read once however many tables scan the rows;
- the frame says how it is partitioned, so an aggregation whose key includes ``keys`` needs no
  shuffle of its own;
- nothing is held on the heap (a local checkpoint held the 10M-event bench's kept rows as 548 MB
  of objects that the collector copied); output lost with an executor is recomputed from its
  lineage, as any shuffle's is;
- ``keep`` is lazy: the shuffle is planned with adaptive execution off, which would otherwise run
  it while planning; the tables' own queries are planned as the session says.

``release`` removes the shuffle's files and its map output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import DataFrame

from minibroker.analytics.sizing import replace, restore

if TYPE_CHECKING:
    from py4j.java_gateway import JavaObject


def keep(frame: DataFrame, keys: tuple[str, ...]) -> DataFrame:
    """``frame``'s rows, shuffled once on ``keys``, as a frame that scans the shuffle's output."""
    spark = frame.sparkSession
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 1)
    shuffled = frame.repartition(partitions, *keys)
    replaced = replace(spark, {"spark.sql.adaptive.enabled": "false"})
    try:
        rdd = shuffled._jdf.queryExecution().executedPlan().execute()
    finally:
        restore(spark, replaced)
    jvm = spark._jvm
    logical_rdd = getattr(getattr(jvm.org.apache.spark.sql.execution, "LogicalRDD$"), "MODULE$")
    # the plan keeps the shuffle's partitioning (from the executed plan above); not a checkpoint
    plan = logical_rdd.fromDataset(rdd, shuffled._jdf, False, False)
    return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan), spark)


def shuffle_id(kept: DataFrame) -> int | None:
    """The id of the shuffle ``kept`` scans (None for a frame ``keep`` did not make)."""
    plan = kept._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() != "LogicalRDD":
        return None
    rdd: JavaObject = plan.rdd()
    if rdd.getClass().getSimpleName() != "ShuffledRowRDD":
        return None
    return int(rdd.dependency().shuffleId())


def release(kept: DataFrame) -> None:
    """Remove the files and map output of the shuffle ``kept`` scans (blocking: they are gone after)."""
    number = shuffle_id(kept)
    cleaner = kept.sparkSession.sparkContext._jsc.sc().cleaner()
    if number is not None and cleaner.isDefined():
        cleaner.get().doCleanupShuffle(number, True)
