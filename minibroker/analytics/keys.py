"""Each ``analyze`` table's key columns (rows are sorted by them), without pyspark.

Shared by the Spark job (``analyze``) and the DuckDB reference in ``tools/duckdb_tables.py``.
"""

#: each table's key columns: rows are sorted by them
KEYS = {
    "traces": ("trace",),
    "operations": ("purgatory", "op_kind"),
    "latency": ("purgatory", "op_kind", "cause"),
    "rate": ("bucket_ms", "purgatory", "op_kind"),
    "timer_precision": ("delta_ms",),
    "purgatory_size": ("trace", "broker", "purgatory", "bucket_ms"),
    "hw": ("trace", "partition", "bucket_ms"),
    "isr": ("trace", "partition", "bucket_ms"),
    "audit": ("trace", "broker", "op", "problem"),
    "skipped": ("trace", "problem"),
    "rebalances": ("trace", "broker", "group", "protocol"),
    "transactions": ("trace", "txn", "transaction"),
    "lso_lag": ("trace", "partition"),
    "retry_attempts": ("trace", "client", "outcome", "attempts"),
    "retry_dlt": ("trace", "client"),
    "delay_lateness": ("design",),
    "share_groups": ("trace", "group", "partition"),
}
