"""A SparkContext's start-up, watched: bounded in time, and every way it cannot finish told in one line.

``start_context`` creates the SparkContext on a thread and watches it from the
caller's: the context has ``timeout`` seconds to start (on a cluster: to register
with the master), then, on a cluster master without dynamic allocation, its first
executor has ``timeout`` seconds more to register. While it waits it reads the new
part of Spark's log: for a master given as one address, Spark's "Failed to connect
to master" means the port answers but is not a Spark master's RPC port, and the
port is asked over HTTP whether it is a web UI (a master's UI names its
``spark://`` URL at ``/json/``). A master that removes the application (its
executors keep failing) ends the wait at once.

Giving up (``_abandon``) stops the context if there is one (bounded), else kills
the JVM this process started, and forgets it, so a later session starts afresh.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from pathlib import Path
from typing import Any

from minibroker.analytics.spark_checks import SparkUnavailable, is_local, master_addresses, spark_failure


def start_context(conf: Any, gateway: Any, log: Path, master: str, timeout: float) -> Any:
    """The SparkContext, started within ``timeout`` s and (on a cluster) given an executor within as long."""
    from pyspark import SparkContext

    outcome: dict[str, Any] = {}

    def create() -> None:
        try:
            outcome["context"] = SparkContext(conf=conf, gateway=gateway)
        except BaseException as error:
            outcome["error"] = error

    offset = log.stat().st_size if log.exists() else 0
    thread = threading.Thread(target=create, name="minibroker-spark-start", daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    refused = None
    while thread.is_alive() and time.monotonic() < deadline and refused is None:
        thread.join(0.25)
        refused = _master_refused(log, offset, master)
    if thread.is_alive():
        _abandon(starting=thread)
        if refused is not None:
            raise SparkUnavailable(f"{refused}; its log: {log}")
        if is_local(master):
            raise SparkUnavailable(
                f"Spark did not start within {timeout:g} s; raise --spark-timeout or see its log: {log}"
            )
        raise SparkUnavailable(
            f"Spark did not start within {timeout:g} s on {master} (the master did not accept the "
            f"application: is it a Spark master's RPC port, 7077 by default?); raise --spark-timeout or "
            f"see its log: {log}"
        )
    if "error" in outcome:
        reason = spark_failure(str(outcome["error"])) or type(outcome["error"]).__name__
        raise SparkUnavailable(f"Spark did not start ({reason[:300]}); its log: {log}")
    context = outcome["context"]
    context.setLogLevel("WARN")
    _cancel_jobs_on_interrupt(context)
    if not is_local(master) and context.getConf().get("spark.dynamicAllocation.enabled") != "true":
        _await_executor(context, log, master, time.monotonic() + timeout, timeout)
    return context


def _cancel_jobs_on_interrupt(context: Any) -> None:
    """What pyspark does when its context starts on the main thread: Ctrl-C cancels the running jobs."""
    if threading.current_thread() is not threading.main_thread():
        return

    def interrupted(signum: int, frame: Any) -> None:
        try:
            context.cancelAllJobs()
        finally:
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, interrupted)


def _master_refused(log: Path, offset: int, master: str) -> str | None:
    """Why a one-address master cannot be this application's master, once Spark's log says so."""
    addresses = master_addresses(master)
    if len(addresses) != 1:
        return None  # standby masters of an HA list refuse too: wait for the deadline
    try:
        with log.open("rb") as file:
            file.seek(offset)
            text = file.read().decode(errors="replace")
    except OSError:
        return None
    if "Failed to connect to master" not in text:
        return None
    host, port = addresses[0]
    return f"{host}:{port} answers, but not as a Spark master{_http_hint(host, port)}"


def _http_hint(host: str, port: int) -> str:
    """``: it is a web server ...`` when the port speaks HTTP (a master's web UI names its URL)."""
    import http.client
    import json

    connection = http.client.HTTPConnection(host, port, timeout=3)
    try:
        connection.request("GET", "/json/")
        response = connection.getresponse()
        body = response.read(1 << 20)
    except (OSError, http.client.HTTPException):
        return " (it does not speak Spark's RPC protocol); --master expects spark://HOST:PORT of the master"
    finally:
        connection.close()
    try:
        url = json.loads(body).get("url")
    except (ValueError, AttributeError):
        url = None
    if isinstance(url, str) and url.startswith("spark://"):
        return f": it is the web UI of the master {url}; use --master {url}"
    return ": it is a web server; --master expects the master's RPC port (spark://HOST:7077 by default)"


def _await_executor(context: Any, log: Path, master: str, deadline: float, timeout: float) -> None:
    """Return once an executor has registered; SparkUnavailable at ``deadline`` or if the master gives up."""
    conf = context.getConf()
    tracker = context._jsc.sc()
    while True:
        if tracker.isStopped():
            _abandon(context)
            raise SparkUnavailable(
                f"{master} removed this application: its executors failed to start (each worker's log "
                f"and work dir say why); Spark's log: {log}"
            )
        if len(tracker.statusTracker().getExecutorInfos()) > 1:  # the driver is one of them
            return
        if time.monotonic() >= deadline:
            memory = conf.get("spark.executor.memory", "1g")
            cores = conf.get("spark.executor.cores", "a worker's free cores")
            _abandon(context)
            raise SparkUnavailable(
                f"no executor started on {master} within {timeout:g} s: no worker has the free memory and "
                f"cores this application asks for (spark.executor.memory={memory}, spark.executor.cores="
                f"{cores}), or none can start one; ask for less with --conf, raise --spark-timeout, or see "
                f"Spark's log: {log}"
            )
        time.sleep(0.25)


def _abandon(context: Any = None, starting: threading.Thread | None = None) -> None:
    """Give up a start-up that cannot finish: stop ``context`` (bounded), else kill the JVM; forget it.

    py4j reports a call cut short by the JVM's death through the root logger (which it
    configures if nobody did): a handler that drops records keeps that off the terminal.
    """
    from pyspark import SparkContext

    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    if context is not None:
        stopper = threading.Thread(target=context.stop, name="minibroker-spark-stop", daemon=True)
        stopper.start()
        stopper.join(15)
        if not stopper.is_alive():
            return
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is not None:
        process.kill()
        process.wait(10)
    if starting is not None:
        starting.join(10)  # its py4j call fails now: let it finish before the caller reports
    with contextlib.suppress(Exception):
        gateway.shutdown()
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
