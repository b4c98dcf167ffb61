"""A real Spark standalone cluster (one master, one worker) on loopback, from the pyspark installation.

``start_cluster`` runs the master and the worker the way Spark's own scripts do
(``bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``),
in the foreground as child processes of the test, bound to 127.0.0.1 on free
ports, with a temporary work dir and small daemons (256 MB heaps, REST server
off). The worker offers 2 cores and ``WORKER_MEMORY``; its executors run this
interpreter with this checkout first on ``PYTHONPATH``. ``stop`` terminates both
process groups and always reaps them.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parents[2]
WORKER_MEMORY = "1g"
#: seconds the daemons have to come up: two JVMs on a small, busy machine
START_SECONDS = 240


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@attrs.define
class Cluster:
    url: str
    ui_port: int
    work_dir: Path
    logs: Path
    processes: list[subprocess.Popen] = attrs.field(factory=list)

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    continue
        for process in reversed(self.processes):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _daemon(cluster: Cluster, name: str, args: list[str], env: dict[str, str]) -> subprocess.Popen:
    log = (cluster.logs / f"{name}.log").open("ab")
    spark_class = _spark_home() / "bin" / "spark-class"
    process = subprocess.Popen(
        [str(spark_class), *args],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # its own process group: stop() signals the JVM and any child
    )
    cluster.processes.append(process)
    return process


def _wait_for(cluster: Cluster, name: str, text: str, deadline: float) -> None:
    log = cluster.logs / f"{name}.log"
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if any(process.poll() is not None for process in cluster.processes):
            break
        time.sleep(0.5)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
    raise RuntimeError(f"the standalone {name} did not say {text!r}; its log ends:\n{tail}")


def start_cluster(base: Path) -> Cluster:
    """A master and a worker, started and registered (RuntimeError with the log's end otherwise)."""
    master_port, ui_port, worker_ui = free_port(), free_port(), free_port()
    cluster = Cluster(f"spark://127.0.0.1:{master_port}", ui_port, base / "work", base / "logs")
    cluster.work_dir.mkdir(parents=True)
    cluster.logs.mkdir()
    env = {
        **os.environ,
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "SPARK_LOG_DIR": str(cluster.logs),
        "PYSPARK_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    deadline = time.monotonic() + START_SECONDS
    try:
        _daemon(
            cluster,
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(master_port),
                "--webui-port",
                str(ui_port),
            ],
            env,
        )
        _wait_for(cluster, "master", "I have been elected leader", deadline)
        _daemon(
            cluster,
            "worker",
            [
                "org.apache.spark.deploy.worker.Worker",
                cluster.url,
                "--host",
                "127.0.0.1",
                "--cores",
                "2",
                "--memory",
                WORKER_MEMORY,
                "--work-dir",
                str(cluster.work_dir),
                "--webui-port",
                str(worker_ui),
            ],
            env,
        )
        _wait_for(cluster, "worker", "Successfully registered with master", deadline)
    except BaseException:
        cluster.stop()
        raise
    return cluster
