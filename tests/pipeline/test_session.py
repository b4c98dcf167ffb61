"""Spark's prerequisites: one line and exit status 2 when Java, the master or the traces are missing."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker.pipeline import session
from minibroker.pipeline.inputs import NoTraces, resolve, trace_format
from minibroker.pipeline.session import SparkUnavailable
from tests.pipeline.conftest import require_java

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def minibroker(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minibroker", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        timeout=120,
    )


@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text('{"seq":0,"time_ms":0,"kind":"hw"}\n')
    return path


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ("no version here", None),
    ],
)
def test_java_major(text, major):
    assert session.java_major(text) == major


def test_no_java_on_path(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkUnavailable) as error:
        session.check_java()
    assert str(error.value) == (
        "Spark needs Java 17 or newer, and no `java` is on PATH (JAVA_HOME is not set): "
        "install it (Debian: apt-get install openjdk-17-jre-headless) and check with `java -version`"
    )


def test_java_home_without_java(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkUnavailable, match=r"JAVA_HOME=.* has no bin/java: fix or unset JAVA_HOME"):
        session.check_java()


def test_java_too_old(monkeypatch, tmp_path):
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkUnavailable, match=r"is Java 11: install it .*point JAVA_HOME at a newer one"):
        session.check_java()


def test_this_machine_has_java_17():
    require_java()
    _, major = session.check_java()
    assert major >= 17


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "yarn"])
def test_masters_that_need_no_connection(master):
    session.check_master(master)


@pytest.mark.parametrize("master", ["lokal[2]", "local[0]", "spark://nohostport", "mesos://x:1", ""])
def test_malformed_masters(master):
    with pytest.raises(SparkUnavailable, match=r"expected local, local\[N\], local\[\*\], spark://HOST:PORT"):
        session.check_master(master)


def test_unreachable_master():
    port = closed_port()
    with pytest.raises(SparkUnavailable) as error:
        session.check_master(f"spark://127.0.0.1:{port}", connect_timeout=2)
    assert str(error.value) == (
        f"cannot reach the Spark master spark://127.0.0.1:{port} (Connection refused): "
        "start it, or run locally with --master 'local[*]'"
    )


def test_local_conf_binds_to_loopback_without_ui():
    pairs = session.spark_conf_pairs("local[2]", "x", None, "1g")
    assert pairs["spark.driver.host"] == pairs["spark.driver.bindAddress"] == "127.0.0.1"
    assert pairs["spark.ui.enabled"] == "false"
    assert pairs["spark.sql.shuffle.partitions"] == "4"
    assert pairs["spark.driver.memory"] == "1g"
    assert "spark.driver.host" not in session.spark_conf_pairs("spark://h:7077", "x", None, None)


def test_resolve_files_directories_and_globs(tmp_path):
    (tmp_path / "a.jsonl").write_text("")
    (tmp_path / "b.parquet").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.ndjson").write_text("")
    (tmp_path / "sub" / "notes.txt").write_text("")
    found = resolve([str(tmp_path), str(tmp_path / "*.jsonl")])
    assert found.jsonl == (str(tmp_path / "a.jsonl"), str(tmp_path / "sub" / "c.ndjson"))
    assert found.parquet == (str(tmp_path / "b.parquet"),)
    assert resolve(["hdfs://nn/runs/x.parquet"]).parquet == ("hdfs://nn/runs/x.parquet",)
    assert trace_format("x.jsonl.gz") == "jsonl"
    with pytest.raises(
        NoTraces, match=r"^no trace matched '.*/none\*\.jsonl': expected \.jsonl or \.parquet"
    ):
        resolve([str(tmp_path / "none*.jsonl")])
    with pytest.raises(NoTraces, match=r"^'.*notes\.txt' holds no trace"):
        resolve([str(tmp_path / "sub" / "notes.txt")])


def _one_line(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1, out.stderr
    return out.stderr


def test_cli_java_missing(tmp_path, trace):
    out = minibroker(
        "analyze",
        str(trace),
        "--out",
        str(tmp_path / "o"),
        "--master",
        "local[1]",
        env={"PATH": str(tmp_path), "JAVA_HOME": ""},
    )
    line = _one_line(out)
    assert line.startswith("minibroker: analyze: Spark needs Java 17 or newer")
    assert "apt-get install openjdk-17-jre-headless" in line


def test_cli_master_unreachable(tmp_path, trace):
    port = closed_port()
    out = minibroker(
        "analyze", str(trace), "--out", str(tmp_path / "o"), "--master", f"spark://127.0.0.1:{port}"
    )
    assert _one_line(out).startswith(
        f"minibroker: analyze: cannot reach the Spark master spark://127.0.0.1:{port}"
    )


def test_cli_no_traces(tmp_path):
    out = minibroker("analyze", str(tmp_path / "missing" / "*.jsonl"), "--out", str(tmp_path / "o"))
    assert _one_line(out).startswith("minibroker: analyze: no trace matched")


def test_cli_sweep_master_unreachable(tmp_path):
    port = closed_port()
    sweep = ROOT / "scenarios" / "sweeps" / "lag_timeout_min_isr.toml"
    out = minibroker(
        "sweep", str(sweep), "--out", str(tmp_path / "o"), "--master", f"spark://127.0.0.1:{port}"
    )
    assert _one_line(out).startswith("minibroker: sweep: cannot reach the Spark master")


def test_help_does_not_import_pyspark():
    code = (
        "import sys; from minibroker.cli import build_parser; build_parser(); print('pyspark' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
