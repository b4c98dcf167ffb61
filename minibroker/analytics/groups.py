"""Consumer group figures from trace events: rebalance durations, session expiries, partition stops.

``rebalances``: per (trace, broker, group, protocol), one row for each protocol the group
had on that coordinator (a group id names a classic group, then a consumer group after an
upgrade). Events in ``seq`` order.

- ``classic``: from the coordinator's ``group.state`` events. A rebalance starts at a
  ``PreparingRebalance`` event and ends at the next ``Stable`` one (through
  ``CompletingRebalance``); its duration is the difference of their ``time_ms``.
  ``session_expiries`` counts ``group.session.expire`` events of members (not of pending
  member ids). Every member stops fetching for the whole rebalance, so there are no
  per-partition figures: ``partition_stops`` and ``max_stop_ms`` are null.
- ``consumer`` (KIP-848): a rebalance starts at the first ``group.consumer.epoch`` (a member
  joined, left or was fenced, a subscription or a subscribed topic's partitions changed)
  after the group was last ``Stable`` or ``Empty`` (``group.consumer.state``), and ends at the
  next ``Stable``: every member at the group epoch with its target assignment. A partition
  stops only from its ``group.consumer.release`` (revocation acknowledged, or its owner
  fenced) to its next ``group.consumer.own``: ``partition_stops`` counts those spans and
  ``max_stop_ms`` is the longest. ``session_expiries`` counts ``group.consumer.fence`` events
  whose reason is the session timeout.

A rebalance that never reaches Stable in the trace (the group emptied, or the trace ended)
is not counted, nor is a stop that has not ended. Columns: ``rebalances``, ``min_ms``,
``mean_ms``, ``max_ms``, ``session_expiries``, ``partition_stops``, ``max_stop_ms``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Window
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

CONSUMER_KINDS = (
    "group.consumer.epoch",
    "group.consumer.state",
    "group.consumer.fence",
    "group.consumer.release",
    "group.consumer.own",
)
KINDS = ("group.state", "group.session.expire", *CONSUMER_KINDS)
#: a consumer group member fenced for this reason has let its session expire
SESSION_TIMEOUT = "session timeout"
KEYS = ("tid", "broker", "group")
COLUMNS = (
    "tid",
    "broker",
    "group",
    "protocol",
    "rebalances",
    "min_ms",
    "mean_ms",
    "max_ms",
    "session_expiries",
    "partition_stops",
    "max_stop_ms",
)


def _durations(ends: DataFrame, start: str) -> DataFrame:
    took = F.col("time_ms") - F.col(start)
    return ends.groupBy(*KEYS).agg(
        F.count(F.lit(1)).alias("rebalances"),
        F.min(took).alias("min_ms"),
        F.round(F.avg(took), 1).alias("mean_ms"),
        F.max(took).alias("max_ms"),
    )


def _classic(rel: DataFrame) -> DataFrame:
    states = rel.filter(F.col("kind") == "group.state")
    ordered = Window.partitionBy(*KEYS).orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
    start = F.last(F.when(F.col("state") == "PreparingRebalance", F.col("time_ms")), ignorenulls=True)
    marked = states.withColumn("start_ms", start.over(ordered)).withColumn(
        "previous", F.lag("state").over(Window.partitionBy(*KEYS).orderBy("seq"))
    )
    done = marked.filter((F.col("state") == "Stable") & (F.col("previous") == "CompletingRebalance"))
    expiries = (
        rel.filter((F.col("kind") == "group.session.expire") & (F.col("pending") == "false"))
        .groupBy(*KEYS)
        .agg(F.count(F.lit(1)).alias("session_expiries"))
    )
    return (
        _durations(done, "start_ms")
        .join(expiries, list(KEYS), "full_outer")
        .withColumn("protocol", F.lit("classic"))
        .withColumn("partition_stops", F.lit(None).cast("long"))
        .withColumn("max_stop_ms", F.lit(None).cast("long"))
    )


def _consumer(rel: DataFrame) -> DataFrame:
    kind, state = F.col("kind"), F.col("state")
    changes = rel.filter(kind.isin("group.consumer.epoch", "group.consumer.state"))
    settled = (kind == "group.consumer.state") & state.isin("Stable", "Empty")
    # a segment: the events after the group last settled, up to and including the next settling
    before = Window.partitionBy(*KEYS).orderBy("seq").rowsBetween(Window.unboundedPreceding, -1)
    segments = (
        changes.withColumn("segment", F.coalesce(F.sum(settled.cast("long")).over(before), F.lit(0)))
        .groupBy(*KEYS, "segment")
        .agg(
            F.min(F.when(kind == "group.consumer.epoch", F.col("time_ms"))).alias("start_ms"),
            F.max(F.when(settled & (state == "Stable"), F.col("time_ms"))).alias("time_ms"),
        )
        .filter(F.col("start_ms").isNotNull() & F.col("time_ms").isNotNull())
    )
    expiries = (
        rel.filter((kind == "group.consumer.fence") & (F.col("reason") == SESSION_TIMEOUT))
        .groupBy(*KEYS)
        .agg(F.count(F.lit(1)).alias("session_expiries"))
    )
    owners = rel.filter(kind.isin("group.consumer.release", "group.consumer.own"))
    per_partition = Window.partitionBy(*KEYS, "partition").orderBy("seq")
    stops = (
        owners.withColumn("previous", F.lag("kind").over(per_partition))
        .withColumn("released_ms", F.lag("time_ms").over(per_partition))
        .filter((kind == "group.consumer.own") & (F.col("previous") == "group.consumer.release"))
        .groupBy(*KEYS)
        .agg(
            F.count(F.lit(1)).alias("partition_stops"),
            F.max(F.col("time_ms") - F.col("released_ms")).alias("max_stop_ms"),
        )
    )
    return (
        _durations(segments, "start_ms")
        .join(expiries, list(KEYS), "full_outer")
        .join(stops, list(KEYS), "full_outer")
        .withColumn("protocol", F.lit("consumer"))
        .fillna(0, ["partition_stops"])
    )


def rebalances(rel: DataFrame) -> DataFrame:
    both = _classic(rel).select(*COLUMNS).unionByName(_consumer(rel).select(*COLUMNS))
    return both.fillna(0, ["rebalances", "session_expiries"])
