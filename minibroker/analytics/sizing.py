"""How Spark runs an ``analyze``, sized from the input: read splits, shuffle partitions, generated code.

Spark's defaults suit large inputs on many cores; an ``analyze`` of a few traces on two
cores pays a task per partition and stage, a read split that runs alone at the end, and
the compilation of code for rows it hardly has.
Invariant: a value the user set (``--conf``, ``--spark-defaults``) is never replaced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minibroker.analytics.inputs import count_rows
from minibroker.analytics.spark_checks import LOCAL, local_cores

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from minibroker.analytics.inputs import TraceInputs


def shuffle_partitions(cores: int, input_bytes: int) -> int:
    """Shuffle partitions for ``input_bytes`` of traces on ``cores`` executor cores.

    Two per core (a task per core and one to balance), more only for inputs above
    256 MiB a partition, at most 400: Spark's default of 200 costs a task per
    partition and stage however small the input (a 500k-event trace made 1,426 tasks).
    """
    return min(400, max(2, 2 * cores, -(-input_bytes // (256 << 20))))


def read_partitions(cores: int, input_bytes: int) -> int:
    """The fewest splits Spark should read ``input_bytes`` of traces in (``spark.sql.files.minPartitionNum``).

    Two per core up to 8 MiB of input a core, then one per 4 MiB, at most four per
    core (reached at 16 MiB a core). Spark otherwise packs files into splits of at
    most 16 MiB: 20 files of 3 MiB made 5 splits, whose fifth ran alone on one of 2
    cores for 8 s of a 10M-event analyze; 8 asked for made 10 even ones
    (docs/pipeline.md). Small inputs keep two a core: more tasks cost more than
    they balance.
    """
    return max(2 * cores, min(4 * cores, input_bytes // (4 << 20)))


def size_shuffle(spark: SparkSession, input_bytes: int, conf: dict[str, str] | None = None) -> int:
    """Set ``spark.sql.shuffle.partitions`` and ``spark.sql.files.minPartitionNum`` from the input.

    Either stays as the user's ``conf`` sets it. Returns the shuffle partitions.
    """
    master = spark.sparkContext.master
    cores = (local_cores(master) if LOCAL.match(master) else spark.sparkContext.defaultParallelism) or 2
    if not (conf and "spark.sql.files.minPartitionNum" in conf):
        spark.conf.set("spark.sql.files.minPartitionNum", str(read_partitions(cores, input_bytes)))
    key = "spark.sql.shuffle.partitions"
    if conf and key in conf:
        return int(spark.conf.get(key) or 200)
    partitions = shuffle_partitions(cores, input_bytes)
    spark.conf.set(key, str(partitions))
    return partitions


#: at most this many trace rows, a local ``analyze`` runs without generated code (``size_codegen``)
INTERPRETED_ROWS = 40_000
#: what ``size_codegen`` sets: no generated code for stages nor for expressions
INTERPRETED = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}


def size_codegen(
    spark: SparkSession, inputs: TraceInputs, conf: dict[str, str] | None = None
) -> dict[str, str | None]:
    """Run a small local input's stages and expressions interpreted; returns what it replaced.

    Spark generates and compiles Java code for every stage and expression before their
    first row, on a JVM that is itself still cold: about 2 s of a 16 s analyze of a few
    hundred events, while interpreted rows cost more per row (at 100,000 events the
    command took about a second longer, at 500,000 the job twice as long: docs/pipeline.md).
    So only a ``local[N]`` master (where it was measured) with at most ``INTERPRETED_ROWS``
    rows (``inputs.count_rows``), and only when the user set neither key. The result (each
    key's value before, None when it had none) is for ``restore``.
    """
    if not LOCAL.match(spark.sparkContext.master) or (conf and any(key in conf for key in INTERPRETED)):
        return {}
    if count_rows(inputs, INTERPRETED_ROWS) is None:
        return {}
    return replace(spark, INTERPRETED)


def replace(spark: SparkSession, settings: dict[str, str]) -> dict[str, str | None]:
    """Set ``settings`` on the session; returns each key's value before (None: none), for ``restore``."""
    replaced = {key: spark.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    return replaced


def restore(spark: SparkSession, replaced: dict[str, str | None]) -> None:
    """Put back what ``replace`` (or ``size_codegen``) replaced, for a session that outlives the change."""
    for key, value in replaced.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)
