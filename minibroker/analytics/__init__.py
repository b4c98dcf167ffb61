"""Front end: trace analytics on Spark (``minibroker analyze`` and ``minibroker sweep``).

Nothing here imports pyspark at module import time except the Spark job modules
(``analyze``, ``sweep_job``), which the command handlers import lazily, so
``minibroker --help`` stays fast and a missing ``spark`` extra only matters to
these two commands. The same jobs run in local mode (the default, embedded, bound
to 127.0.0.1) and on any Spark cluster (``--master``).

- ``session``: the quiet SparkSession; ``startup``: its bounded start-up; ``spark_checks``: the Java
  and master checks and Spark's failures in one line.
- ``settings``: ``--conf`` and ``--spark-defaults``, as spark-submit takes them.
- ``inputs``: trace paths, globs and directories; the trace schema; files that are no trace.
- ``reader``: traces read with every file and row checked (bad rows skipped and counted).
- ``analyze``: the trace analytics job; ``operations``: operations, latencies and the exactly-once audit.
- ``sweepfile``: sweep TOML files; ``sweep_job``: variants as Spark tasks.
- ``report``: Markdown + matplotlib PNGs; ``summary``: the rich terminal summary.
- ``commands``: ``add_parsers`` for the CLI.
"""
