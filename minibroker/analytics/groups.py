"""Consumer group figures from trace events: rebalance durations and session expiries.

``rebalances``: per (trace, broker, group), from the coordinator's ``group.state``
events in ``seq`` order. A rebalance starts at a ``PreparingRebalance`` event and
ends at the next ``Stable`` one (through ``CompletingRebalance``); its duration is
the difference of their ``time_ms``. A rebalance that never reaches Stable in the
trace (the group emptied, or the trace ended) is not counted. Columns: ``rebalances``,
``min_ms``, ``mean_ms``, ``max_ms``, and ``session_expiries`` (``group.session.expire``
events of members, not of pending member ids).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KINDS = ("group.state", "group.session.expire")


def rebalances(rel: DataFrame) -> DataFrame:
    keys = ("tid", "broker", "group")
    states = rel.filter(F.col("kind") == "group.state")
    ordered = Window.partitionBy(*keys).orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
    start = F.last(F.when(F.col("state") == "PreparingRebalance", F.col("time_ms")), ignorenulls=True)
    marked = states.withColumn("start_ms", start.over(ordered)).withColumn(
        "previous", F.lag("state").over(Window.partitionBy(*keys).orderBy("seq"))
    )
    done = marked.filter((F.col("state") == "Stable") & (F.col("previous") == "CompletingRebalance"))
    durations = done.groupBy(*keys).agg(
        F.count(F.lit(1)).alias("rebalances"),
        F.min(F.col("time_ms") - F.col("start_ms")).alias("min_ms"),
        F.round(F.avg(F.col("time_ms") - F.col("start_ms")), 1).alias("mean_ms"),
        F.max(F.col("time_ms") - F.col("start_ms")).alias("max_ms"),
    )
    expiries = (
        rel.filter((F.col("kind") == "group.session.expire") & (F.col("pending") == "false"))
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).alias("session_expiries"))
    )
    return (
        durations.join(expiries, list(keys), "full_outer")
        .fillna(0, ["rebalances", "session_expiries"])
        .select("tid", "broker", "group", "rebalances", "min_ms", "mean_ms", "max_ms", "session_expiries")
    )
