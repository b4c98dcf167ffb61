"""Building the SparkSession: Java check, master check, quiet embedded local mode.

``spark_session(master)`` is the only way the pipeline gets Spark. Before the JVM
starts it checks (``spark_checks``), in this order, and raises ``SparkUnavailable`` (one line, for
exit status 2) when:

- ``master`` is not a form Spark accepts (``local``, ``local[N]``, ``local[*]``,
  ``local[N,F]``, ``spark://HOST:PORT[,HOST:PORT]``, ``k8s://URL``, ``yarn``);
- a ``spark://`` or ``k8s://`` master does not accept a TCP connection within
  ``connect_timeout`` seconds;
- pyspark is not installed (the ``spark`` extra);
- no Java 17 or newer is found the way Spark finds it (``$JAVA_HOME/bin/java``
  when JAVA_HOME is set, else ``java`` on PATH).

Local mode is embedded: driver and executors in one JVM bound to 127.0.0.1, the UI
off, the console progress bar off, executors running this interpreter
(``PYSPARK_PYTHON = sys.executable``). The JVM's stdout and stderr (Spark's own
log, WARN and above, and the Python workers' stderr) go to a log file, never to
the terminal; errors still reach Python as exceptions.

Start-up is bounded (``start_timeout`` seconds, ``--spark-timeout``; ``startup``): once the JVM is
up, the SparkContext has that long to start (register with the master), and then, on
a cluster master, its first executor that long to register; else ``SparkUnavailable``
says which of the two did not happen and where the log is.
A master port that answers something else than Spark's RPC (its web UI, another
server) fails as soon as Spark's log says it could not talk to it (one address) or at
the deadline (several); a master that accepts the application but gives it no
executor (no worker with the cores and memory it asks for) fails at the deadline,
and one that removes it (its executors keep failing) at once.

A local session that starts its own JVM with the pipeline's JVM options maps Spark's
classes from a class-data sharing archive, made by the first such session (``cds``).

Settings, lowest precedence first: the pipeline's own (``spark_conf_pairs``), a
spark-defaults file, ``--conf KEY=VALUE`` (``conf`` here); ``PYSPARK_SUBMIT_ARGS``
(spark-submit options for the JVM, e.g. ``--packages``) is honoured, and treated as
unset when it is empty.

If a SparkContext is already running in this process (a test session, a notebook),
it is reused and left running.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minibroker.analytics.settings import off_heap_bytes
from minibroker.analytics.spark_checks import (
    LOCAL,
    SparkUnavailable,
    check_java,
    check_master,
    is_local,
    local_cores,
)
from minibroker.analytics.startup import start_context
from minibroker.extras import MissingExtra, require

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: the driver JVM's options in local mode: C1 only, parallel GC, and Spark's generated methods
#: compiled however long (the JVM leaves a method over 8,000 bytecodes interpreted by default, and a
#: stage's generated code crosses that as its expressions grow: twice the time, at once)
#: (``--conf spark.driver.extraJavaOptions=...`` replaces them)
LOCAL_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -XX:-DontCompileHugeMethods"
_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: seconds the SparkContext and (on a cluster) its first executor have to start
START_TIMEOUT = 60.0


# --- the session -----------------------------------------------------------------------------------
def spark_conf_pairs(
    master: str,
    app_name: str,
    shuffle_partitions: int | None,
    driver_memory: str | None,
    conf: dict[str, str] | None = None,
) -> dict[str, str]:
    """The Spark settings the pipeline runs with: its own, then ``conf`` (the user's) over them."""
    pairs = {
        "spark.master": master,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.adaptive.enabled": "true",
        # the cached projection is read a few times and dropped: building it fast beats its size
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # one run's trace is a few MB of Parquet: split it by row groups so every core reads
        "spark.sql.files.maxPartitionBytes": "16m",
        "spark.sql.files.openCostInBytes": "1m",
    }
    if is_local(master):
        # one short-lived JVM is driver and executors: the C1 compiler alone (no C2) cut the JVM's CPU
        # time for start-up plus a 1M-event analyze by about a third (docs/pipeline.md)
        pairs[_JAVA_OPTIONS] = LOCAL_JAVA_OPTIONS
        pairs["spark.driver.host"] = "127.0.0.1"
        pairs["spark.driver.bindAddress"] = "127.0.0.1"
        cores = local_cores(master) or 2
        pairs["spark.sql.shuffle.partitions"] = str(shuffle_partitions or max(2, 2 * cores))
        pairs["spark.default.parallelism"] = str(max(2, 2 * cores))
    elif shuffle_partitions:
        pairs["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    if driver_memory:
        pairs["spark.driver.memory"] = driver_memory
    pairs.update(conf or {})
    pairs["spark.master"] = master
    off_heap = off_heap_bytes(pairs.get("spark.driver.memory", ""))
    if LOCAL.match(master) and off_heap and not any(key.startswith("spark.memory.offHeap.") for key in pairs):
        # aggregation and shuffle pages off the heap, which holds the kept rows: the collector stops
        # copying them (about 0.6 s less on the 10M-event bench, docs/pipeline.md). local[N] only: a
        # local-cluster's executors are JVMs of their own, sized by their own memory setting
        pairs["spark.memory.offHeap.enabled"] = "true"
        pairs["spark.memory.offHeap.size"] = f"{off_heap // 2**20}m"
    return pairs


def default_log_path() -> Path:
    return Path(tempfile.gettempdir()) / f"minibroker-spark-{os.getpid()}.log"


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    errors = [line for line in lines if "Exception" in line or "Error" in line]
    return (errors or lines or [""])[-1][:300]


@contextlib.contextmanager
def spark_session(
    master: str = "local[*]",
    *,
    app_name: str = "minibroker",
    shuffle_partitions: int | None = None,
    driver_memory: str | None = "2g",
    log_path: str | Path | None = None,
    conf: dict[str, str] | None = None,
    start_timeout: float = START_TIMEOUT,
) -> Iterator[SparkSession]:
    """A SparkSession for ``master``, stopped on exit unless it was already running."""
    check_master(master)
    try:
        require("spark", "the Spark pipeline")
    except MissingExtra as error:
        raise SparkUnavailable(str(error)) from None
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    if SparkContext._active_spark_context is not None:
        yield SparkSession.builder.getOrCreate()
        return
    java, _ = check_java()
    if is_local(master):
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    else:  # workers may have their own Python; PYSPARK_PYTHON set by the user wins
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    _fix_submit_args()
    log = Path(log_path) if log_path is not None else default_log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    pairs = spark_conf_pairs(master, app_name, shuffle_partitions, driver_memory, conf)
    archive = None
    if SparkContext._gateway is None and pairs.get(_JAVA_OPTIONS) == LOCAL_JAVA_OPTIONS:
        from minibroker.analytics import cds

        archive = cds.archive_for(java, LOCAL_JAVA_OPTIONS)
        if archive is not None:
            pairs[_JAVA_OPTIONS] = f"{LOCAL_JAVA_OPTIONS} {archive.java_options}"
            if archive.dumping:  # a one-time cost the user should not have to guess at
                print(
                    f"minibroker: this first local Spark run also writes Spark's class archive "
                    f"(once: ~25 s more, ~180 MB at {archive.path}; {cds.ENV}=0 turns it off)",
                    file=sys.stderr,
                )
    spark_conf = SparkConf()
    spark_conf.setAll(list(pairs.items()))
    try:
        context = _start(spark_conf, log, master, start_timeout)
    except BaseException:
        if archive is not None and archive.temporary is not None:  # a JVM that died may have dumped
            archive.temporary.unlink(missing_ok=True)
        raise
    _quiet_query_context_loggers()
    try:
        yield SparkSession(context)
    finally:
        context.stop()
        if archive is not None and archive.dumping:
            cds.finish(archive)


def _fix_submit_args() -> None:
    """PYSPARK_SUBMIT_ARGS as pyspark needs it: unset when blank, ending in ``pyspark-shell``."""
    value = os.environ.get("PYSPARK_SUBMIT_ARGS")
    if value is None:
        return
    try:
        words = shlex.split(value)
    except ValueError as error:
        raise SparkUnavailable(
            f"PYSPARK_SUBMIT_ARGS={value!r}: {error}; expected spark-submit options"
        ) from None
    if not words:
        del os.environ["PYSPARK_SUBMIT_ARGS"]
    elif words[-1] != "pyspark-shell":
        os.environ["PYSPARK_SUBMIT_ARGS"] = f"{value} pyspark-shell"


def _start(conf: Any, log: Path, master: str, timeout: float) -> Any:
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:  # an earlier session's JVM: pyspark reuses it
        return start_context(conf, None, log, master, timeout)
    with log.open("ab") as sink:
        try:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": sink, "stderr": sink})
        except Exception as error:  # PySparkRuntimeError: the JVM exited before it said its port
            raise SparkUnavailable(
                f"Spark did not start ({_last_line(log) or type(error).__name__}); its log: {log}"
            ) from None
    return start_context(conf, gateway, log, master, timeout)


def _quiet_query_context_loggers() -> None:
    """Silence PySpark's query-context loggers: they print a failed query's error to stderr as a
    JSON line, ahead of the one line the command prints for it (the JVM's side is in Spark's log)."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True
