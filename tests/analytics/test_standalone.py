"""analyze and sweep on a real standalone cluster (master + worker on loopback) give local mode's tables;
a port that is not a master and a master without resources end in one line and exit 2.

The cluster is started once for the module from the pyspark installation (tests/analytics/standalone.py)
and always torn down. The commands run as ``python -m minibroker`` subprocesses, as a user runs them.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from minibroker.analytics.analyze import KEYS
from minibroker.analytics.spark_checks import SparkUnavailable, check_java
from tests.analytics.standalone import ROOT, start_cluster
from tests.analytics.test_session import minibroker as run_cli

pytest.importorskip("pyspark")

#: settings every run on the test cluster needs: executors that fit the worker, a driver on loopback
CLUSTER_CONF = [
    "--conf",
    "spark.executor.memory=512m",
    "--conf",
    "spark.driver.host=127.0.0.1",
    "--conf",
    "spark.driver.bindAddress=127.0.0.1",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    try:
        check_java()
    except SparkUnavailable as error:
        pytest.skip(f"a standalone cluster needs Java 17, which is absent: {error}")
    running = start_cluster(tmp_path_factory.mktemp("standalone"))
    try:
        yield running
    finally:
        running.stop()


def minibroker(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return run_cli(*args, timeout=timeout)


def analyze_on(master: str, trace_dir: Path, out: Path, *options: str) -> subprocess.CompletedProcess:
    """``minibroker analyze`` of the test traces on ``master``."""
    return minibroker("analyze", str(trace_dir), "--out", str(out), "--master", master, *options)


def one_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    return out.stderr.strip()


def test_analyze_on_the_cluster_equals_local_mode(cluster, analyzed, trace_dir, tmp_path):
    _, local_out, local_json = analyzed
    out = tmp_path / "cluster"
    args = ["analyze", str(trace_dir), "--out", str(out), "--bucket-ms", "100", "--json"]
    done = minibroker(*args, "--master", cluster.url, *CLUSTER_CONF, "--spark-timeout", "300")
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["events"] == local_json["events"] > 0
    for name in KEYS:
        assert (
            pq.read_table(out / f"{name}.parquet").to_pylist()
            == pq.read_table(local_out / f"{name}.parquet").to_pylist()
        ), name
    # shuffle and read partitions sized from the input for the cluster's 2 cores, not Spark's 200; the
    # small input runs interpreted only in local mode, where that was measured
    assert summary["spark"] == {
        "master": cluster.url,
        "shuffle_partitions": 4,
        "read_partitions": 4,
        "codegen": True,
    }
    assert list(cluster.work_dir.iterdir()), "the executors ran in the worker's work dir"


SWEEP = """
[sweep]
scenario = "{base}"
seeds = [0]

[[axes]]
name = "lag_ms"
link = [0, 2]
values = [1, 400]
"""


def test_sweep_on_the_cluster_equals_local_mode(cluster, spark, tmp_path):
    from minibroker.analytics.sweep_job import run_sweep
    from minibroker.analytics.sweepfile import load_sweep

    path = tmp_path / "small.toml"
    path.write_text(SWEEP.format(base=ROOT / "scenarios" / "lagging_link.toml"))
    out = tmp_path / "cluster"
    done = minibroker("sweep", str(path), "--out", str(out), "--master", cluster.url, *CLUSTER_CONF, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.startswith("sweep small: 2 variants (2 lag_ms × 1 seed)\n")
    rows = pq.read_table(out / "variants.parquet").to_pylist()
    local = run_sweep(spark, load_sweep(path))
    assert [row["lag_ms"] for row in rows] == [1, 400]
    for row, expected in zip(rows, local, strict=True):
        assert {k: v for k, v in row.items() if k != "wall_ms"} == {
            k: v for k, v in expected.items() if k != "wall_ms"
        }


def test_the_masters_web_ui_port_is_one_line(cluster, trace_dir, tmp_path):
    started = time.monotonic()
    out = analyze_on(
        f"spark://127.0.0.1:{cluster.ui_port}", trace_dir, tmp_path / "o", "--spark-timeout", "600"
    )
    line = one_line(out)
    assert line.startswith(
        f"minibroker: analyze: 127.0.0.1:{cluster.ui_port} answers, but not as a Spark master"
    )
    assert f"it is the web UI of the master {cluster.url}; use --master {cluster.url}" in line
    assert line.endswith(f"its log: {tmp_path / 'o' / 'spark.log'}")
    # told as soon as Spark's first connection fails, long before the 600 s deadline (real time)
    assert time.monotonic() - started < 300


def test_no_executor_fits_is_one_line_at_the_timeout(cluster, trace_dir, tmp_path):
    conf = [c if c != "spark.executor.memory=512m" else "spark.executor.memory=4g" for c in CLUSTER_CONF]
    started = time.monotonic()
    out = analyze_on(cluster.url, trace_dir, tmp_path / "o", *conf, "--spark-timeout", "25")
    line = one_line(out)
    assert line.startswith(f"minibroker: analyze: no executor started on {cluster.url} within 25 s:")
    assert "spark.executor.memory=4g" in line
    # the timeout bounds the wait; the JVM's own start adds its seconds (real time: generous margin)
    assert time.monotonic() - started < 25 + 200


class _Garbage:
    """A TCP server that answers every connection with bytes that are no protocol, or stays silent."""

    def __init__(self, reply: bytes) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.reply = reply
        self.conns: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            if self.reply:
                with contextlib.suppress(OSError):
                    conn.sendall(self.reply)

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.mark.parametrize(
    ("reply", "timeout", "expected"),
    [
        # Spark's first failed connection tells: no waiting for the (600 s) deadline
        (b"\x00garbage\x00" * 64, 600, "answers, but not as a Spark master (it does not speak Spark's RPC"),
        # a port that accepts and never answers: the deadline tells
        (b"", 15, "Spark did not start within 15 s on spark://127.0.0.1:"),
    ],
    ids=["garbage", "silent"],
)
def test_a_port_that_is_no_master_is_one_line(reply, timeout, expected, trace_dir, tmp_path):
    server = _Garbage(reply)
    try:
        started = time.monotonic()
        out = analyze_on(
            f"spark://127.0.0.1:{server.port}", trace_dir, tmp_path / "o", "--spark-timeout", str(timeout)
        )
    finally:
        server.close()
    assert expected in one_line(out)
    # JVM start, then the failed connection or the 15 s deadline (real time: generous margin)
    assert time.monotonic() - started < 300
