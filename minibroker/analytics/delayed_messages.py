"""Delayed messages from trace events: delivery lateness per design.

``delay_lateness``: one row per ``design`` (``levels``, ``wheel``) of every trace together,
from the ``delay.delivered`` events (each forward a real partition acknowledged; a message
forwarded twice counts twice). ``lateness_ms`` is the event's own: delivery time minus the
message's due time. Columns: ``delivered``, nearest-rank ``p50_ms`` and ``p99_ms`` (the
smallest lateness with at least that share of deliveries at or below it), ``max_ms``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from minibroker.analytics.retries import nearest_rank

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

KINDS = ("delay.delivered",)


def lateness(rel: DataFrame) -> DataFrame:
    return (
        rel.filter(F.col("kind") == "delay.delivered")
        .groupBy("design")
        .agg(
            F.count(F.lit(1)).alias("delivered"),
            nearest_rank("lateness_ms", 0.5).alias("p50_ms"),
            nearest_rank("lateness_ms", 0.99).alias("p99_ms"),
            F.max("lateness_ms").alias("max_ms"),
        )
    )
