"""Transaction figures from trace events: each transaction's outcome and latency, the LSO's lag.

``transactions``: per (trace, transactional id, transaction), from the coordinators' ``txn.*``
events in ``seq`` order (a transaction may move to another coordinator on failover: the id, not
the broker, keys it). A transaction begins at a ``txn.state`` Ongoing that does not follow another
Ongoing of its id (a later Ongoing only adds partitions). ``end_ms`` is its first ``txn.end`` (the
EndTxn, the timeout's or a fencing InitProducerId's abort), ``markers_ms`` the first ``txn.markers``
send, ``complete_ms`` the first CompleteCommit/CompleteAbort; ``outcome`` is commit, abort, or
timeout-abort when a ``txn.timeout`` came before its abort (null while the trace has no completion).
``latency_ms`` is ``complete_ms - end_ms`` (EndTxn to the completion written), ``marker_ms``
``complete_ms - markers_ms`` (the markers written on every partition, and the completion).

``lso_lag``: per (trace, partition), from the leaders' ``lso`` events. A lag begins at an event with
the LSO below the HW after none or one at the HW, and ends at the next one at the HW (a lag still
open ends at the trace's last event, and ``open`` says so). Columns: ``lags``, ``total_ms``,
``max_ms`` and ``max_held`` (the most offsets the LSO was below the HW).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

TXN_KINDS = ("txn.state", "txn.end", "txn.timeout", "txn.markers")
KINDS = (*TXN_KINDS, "lso")
COMPLETE = ("CompleteCommit", "CompleteAbort")


def transactions(rel: DataFrame) -> DataFrame:
    keys = ("tid", "txn")
    events = rel.filter(F.col("kind").isin(*TXN_KINDS)).select(*keys, "seq", "time_ms", "kind", "state")
    ordered = Window.partitionBy(*keys).orderBy("seq")
    before = ordered.rowsBetween(Window.unboundedPreceding, -1)
    is_state = F.col("kind") == "txn.state"
    previous = F.last(F.when(is_state, F.col("state")), ignorenulls=True).over(before)
    begins = is_state & (F.col("state") == "Ongoing") & ~F.coalesce(previous == "Ongoing", F.lit(False))
    marked = events.withColumn("begins", begins).withColumn(
        "number", F.sum(F.col("begins").cast("long")).over(ordered.rowsBetween(Window.unboundedPreceding, 0))
    )
    complete = is_state & F.col("state").isin(*COMPLETE)

    def first(condition: F.Column, value: str = "time_ms") -> F.Column:
        return F.min_by(F.when(condition, F.col(value)), F.when(condition, F.col("seq")))

    per_txn = (
        marked.filter(F.col("number") > 0)
        .groupBy(*keys, "number")
        .agg(
            first(F.col("begins")).alias("begin_ms"),
            first(F.col("kind") == "txn.end").alias("end_ms"),
            first(F.col("kind") == "txn.markers").alias("markers_ms"),
            first(complete).alias("complete_ms"),
            first(complete, "state").alias("completed"),
            F.max((F.col("kind") == "txn.timeout").cast("int")).alias("timed_out"),
        )
    )
    outcome = (
        F.when(F.col("completed") == "CompleteCommit", "commit")
        .when((F.col("completed") == "CompleteAbort") & (F.col("timed_out") == 1), "timeout-abort")
        .when(F.col("completed") == "CompleteAbort", "abort")
    )
    return per_txn.select(
        "tid",
        "txn",
        F.col("number").alias("transaction"),
        "begin_ms",
        "end_ms",
        "complete_ms",
        outcome.alias("outcome"),
        (F.col("complete_ms") - F.col("end_ms")).alias("latency_ms"),
        (F.col("complete_ms") - F.col("markers_ms")).alias("marker_ms"),
    )


def lso_lag(rel: DataFrame, traces: DataFrame) -> DataFrame:
    keys = ("tid", "partition")
    events = rel.filter(F.col("kind") == "lso").select(*keys, "seq", "time_ms", "lso", "hw")
    ordered = Window.partitionBy(*keys).orderBy("seq")
    lagging = F.col("lso") < F.col("hw")
    marked = events.withColumn("lagging", lagging).withColumn("was_lagging", F.lag(lagging).over(ordered))
    after = ordered.rowsBetween(1, Window.unboundedFollowing)
    caught_up = F.min_by(F.when(~lagging, F.col("time_ms")), F.when(~lagging, F.col("seq"))).over(after)
    starts = (
        marked.withColumn("caught_up_ms", caught_up)
        .filter(F.col("lagging") & ~F.coalesce(F.col("was_lagging"), F.lit(False)))
        .join(traces.select("tid", F.col("end_ms").alias("trace_end_ms")), "tid")
        .withColumn("lag_ms", F.coalesce("caught_up_ms", "trace_end_ms") - F.col("time_ms"))
    )
    lags = starts.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("lags"),
        F.sum("lag_ms").alias("total_ms"),
        F.max("lag_ms").alias("max_ms"),
        F.max(F.col("caught_up_ms").isNull()).alias("open"),
    )
    held = (
        marked.filter(F.col("lagging"))
        .groupBy(*keys)
        .agg(F.max(F.col("hw") - F.col("lso")).alias("max_held"))
    )
    return lags.join(held, list(keys)).select(
        "tid", "partition", "lags", "total_ms", "max_ms", "max_held", "open"
    )
