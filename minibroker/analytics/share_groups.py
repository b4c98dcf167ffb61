"""Share-group figures from trace events (KIP-932): deliveries, lock expiries, archives, time to accept.

``share_groups``: one row per (trace, group, partition) with any of the share partition's events:

- ``acquired``: records acquired (the ``count`` of every ``share.acquire``), ``redelivered``: those acquired
  at a delivery count above 1;
- ``lock_expiries``: ``share.lock.expire`` events (acquisition locks that ran out holding records);
- ``accepted``: ``share.accept`` events (one per ACCEPTed record);
- ``rejected`` and ``at_limit``: ``share.archive`` events of cause ``reject`` and ``limit`` (the
  delivery-count limit);
- ``p50_ms`` and ``p99_ms``: the nearest-rank percentiles of the accepted records' ``latency_ms`` (the
  ACCEPT's time minus the leader's append time; null without any).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from minibroker.analytics.retries import nearest_rank

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KINDS = ("share.acquire", "share.lock.expire", "share.archive", "share.accept")


def share_groups(rel: DataFrame) -> DataFrame:
    kind, count = F.col("kind"), F.col("count")
    acquire = kind == "share.acquire"
    return (
        rel.filter(kind.isin(*KINDS))
        .groupBy("tid", "group", "partition")
        .agg(
            F.coalesce(F.sum(F.when(acquire, count)), F.lit(0)).cast("long").alias("acquired"),
            F.coalesce(F.sum(F.when(acquire & (F.col("delivery_count") > 1), count)), F.lit(0))
            .cast("long")
            .alias("redelivered"),
            F.count(F.when(kind == "share.lock.expire", 1)).alias("lock_expiries"),
            F.count(F.when(kind == "share.accept", 1)).alias("accepted"),
            F.count(F.when((kind == "share.archive") & (F.col("cause") == "reject"), 1)).alias("rejected"),
            F.count(F.when((kind == "share.archive") & (F.col("cause") == "limit"), 1)).alias("at_limit"),
            nearest_rank("accept_ms", 0.5).alias("p50_ms"),
            nearest_rank("accept_ms", 0.99).alias("p99_ms"),
        )
    )
