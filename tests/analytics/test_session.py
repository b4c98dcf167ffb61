"""Spark's prerequisites: one line and exit status 2 when Java, the master or the traces are missing."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker.analytics import session, sizing, spark_checks
from minibroker.analytics.inputs import NoTraces, resolve, trace_format
from minibroker.analytics.spark_checks import SparkUnavailable
from tests.analytics.conftest import require_java

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def minibroker(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "minibroker", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        cwd=ROOT,
        timeout=timeout,
    )


@pytest.fixture
def trace(tmp_path) -> Path:
    path = tmp_path / "t.jsonl"
    path.write_text('{"seq":0,"time_ms":0,"kind":"hw","broker":0,"partition":"t-0","data":"{\\"hw\\":1}"}\n')
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
    assert spark_checks.java_major(text) == major


def test_no_java_on_path(monkeypatch, tmp_path):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkUnavailable) as error:
        spark_checks.check_java()
    assert str(error.value) == (
        "Spark needs Java 17 or newer, and no `java` is on PATH (JAVA_HOME is not set): "
        "install it (Debian: apt-get install openjdk-17-jre-headless) and check with `java -version`"
    )


def test_java_home_without_java(monkeypatch, tmp_path):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkUnavailable, match=r"JAVA_HOME=.* has no bin/java: fix or unset JAVA_HOME"):
        spark_checks.check_java()


def test_java_too_old(monkeypatch, tmp_path):
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'openjdk version \"11.0.2\" 2019-01-15' >&2\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkUnavailable, match=r"is Java 11: install it .*point JAVA_HOME at a newer one"):
        spark_checks.check_java()


def test_java_version_from_the_release_file_without_running_java(monkeypatch, tmp_path):
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\nexit 3\n")  # would fail `java -version`: the release file answers first
    java.chmod(0o755)
    (tmp_path / "release").write_text('IMPLEMENTOR="Debian"\nJAVA_VERSION="21.0.4"\n')
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert spark_checks.check_java() == (str(java), 21)
    (tmp_path / "release").write_text('JAVA_VERSION="1.8.0_392"\n')  # too old: asked again, and told
    with pytest.raises(SparkUnavailable, match=r"did not say which Java it is"):
        spark_checks.check_java()


def test_this_machine_has_java_17():
    require_java()
    _, major = spark_checks.check_java()
    assert major >= 17


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "yarn"])
def test_masters_that_need_no_connection(master):
    spark_checks.check_master(master)


@pytest.mark.parametrize("master", ["lokal[2]", "local[0]", "spark://nohostport", "mesos://x:1", ""])
def test_malformed_masters(master):
    with pytest.raises(SparkUnavailable, match=r"expected local, local\[N\], local\[\*\], spark://HOST:PORT"):
        spark_checks.check_master(master)


def test_unreachable_master():
    port = closed_port()
    with pytest.raises(SparkUnavailable) as error:
        spark_checks.check_master(f"spark://127.0.0.1:{port}", connect_timeout=2)
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
    # C1 only, the parallel collector, long generated methods compiled: a short JVM
    assert pairs["spark.driver.extraJavaOptions"] == (
        "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -XX:-DontCompileHugeMethods"
    )
    # aggregation pages off the heap, a quarter of the driver's memory; the user's settings win
    assert (pairs["spark.memory.offHeap.enabled"], pairs["spark.memory.offHeap.size"]) == ("true", "256m")
    assert session.spark_conf_pairs("local[2]", "x", None, "2g")["spark.memory.offHeap.size"] == "512m"
    assert session.spark_conf_pairs("local[2]", "x", None, "4096")["spark.memory.offHeap.size"] == "1024m"
    assert "spark.memory.offHeap.enabled" not in session.spark_conf_pairs("local[2]", "x", None, "lots")
    mine = session.spark_conf_pairs("local[2]", "x", None, "2g", {"spark.memory.offHeap.enabled": "false"})
    assert [key for key in mine if key.startswith("spark.memory.offHeap.")] == [
        "spark.memory.offHeap.enabled"
    ]
    assert mine["spark.memory.offHeap.enabled"] == "false"
    cluster = session.spark_conf_pairs("spark://h:7077", "x", None, None)
    assert "spark.driver.host" not in cluster and "spark.driver.extraJavaOptions" not in cluster
    assert "spark.memory.offHeap.enabled" not in session.spark_conf_pairs("spark://h:7077", "x", None, "2g")
    # a local-cluster's executors are JVMs of their own: the driver's memory does not size them
    local_cluster = session.spark_conf_pairs("local-cluster[2,1,1024]", "x", None, "2g")
    assert "spark.memory.offHeap.enabled" not in local_cluster
    assert local_cluster["spark.driver.extraJavaOptions"] == session.LOCAL_JAVA_OPTIONS
    mine = {"spark.driver.extraJavaOptions": "-Xss4m"}
    assert session.spark_conf_pairs("local[2]", "x", None, None, mine)["spark.driver.extraJavaOptions"] == (
        "-Xss4m"
    )


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


# --- Spark settings as spark-submit takes them -------------------------------------------------
def test_conf_pairs_later_wins_and_values_keep_equals_signs():
    from minibroker.analytics.settings import parse_conf

    assert parse_conf(["spark.a=1", "spark.b = x=y ", "spark.a=2", "spark.c="]) == {
        "spark.a": "2",
        "spark.b": "x=y",
        "spark.c": "",
    }


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("spark.executor.memory", "--conf 'spark.executor.memory': expected KEY=VALUE, e.g. spark.executor"),
        ("=2g", "--conf '=2g': expected KEY=VALUE"),
        ("executor.memory=2g", "--conf 'executor.memory=2g': 'executor.memory' is not a Spark setting;"),
    ],
)
def test_bad_conf_forms(item, message):
    from minibroker.analytics.settings import SettingsError, parse_conf

    with pytest.raises(SettingsError) as error:
        parse_conf([item])
    assert str(error.value).startswith(message)


def test_spark_defaults_file_forms_and_conf_over_it(tmp_path):
    from minibroker.analytics.settings import spark_settings

    path = tmp_path / "spark-defaults.conf"
    path.write_text(
        "# cluster settings\n\n! also a comment\nspark.master  spark://h:7077\n"
        "spark.executor.memory=4g\nspark.executor.cores: 2\nspark.driver.host\t10.0.0.5\n"
    )
    assert spark_settings(["spark.executor.memory=1g"], str(path)) == {
        "spark.master": "spark://h:7077",
        "spark.executor.memory": "1g",
        "spark.executor.cores": "2",
        "spark.driver.host": "10.0.0.5",
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spark.a 1\nspark.b\n", "{p}:2: 'spark.b': expected 'KEY VALUE', e.g. spark.executor.memory 2g"),
        ("spark.a 1\nexecutor.memory 2g\n", "{p}:2: 'executor.memory' is not a Spark setting"),
    ],
)
def test_bad_spark_defaults_lines(tmp_path, text, message):
    from minibroker.analytics.settings import SettingsError, read_defaults

    path = tmp_path / "d.conf"
    path.write_text(text)
    with pytest.raises(SettingsError) as error:
        read_defaults(str(path))
    assert str(error.value).startswith(message.format(p=path))


def test_user_settings_win_over_the_pipelines_but_not_over_master():
    pairs = session.spark_conf_pairs(
        "local[2]", "x", None, "2g", {"spark.sql.shuffle.partitions": "7", "spark.master": "yarn"}
    )
    assert pairs["spark.sql.shuffle.partitions"] == "7"
    assert pairs["spark.master"] == "local[2]"


@pytest.mark.parametrize(
    ("cores", "size", "partitions"),
    [(1, 0, 2), (2, 10 << 20, 4), (8, 0, 16), (2, 3 << 30, 12), (64, 1 << 40, 400)],
)
def test_shuffle_partitions_follow_cores_and_input(cores, size, partitions):
    assert sizing.shuffle_partitions(cores, size) == partitions


@pytest.mark.parametrize(
    ("cores", "size", "partitions"),
    [(2, 0, 4), (2, 6 << 20, 4), (2, 20 << 20, 5), (2, 59 << 20, 8), (2, 1 << 40, 8), (8, 100 << 20, 25)],
)
def test_read_partitions_are_two_to_four_a_core_growing_with_the_input(cores, size, partitions):
    assert sizing.read_partitions(cores, size) == partitions


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("", None),
        ("  ", None),
        ("--packages a:b:1", "--packages a:b:1 pyspark-shell"),
        ("x pyspark-shell", "x pyspark-shell"),
    ],
)
def test_pyspark_submit_args_blank_is_unset_and_gets_its_resource(monkeypatch, value, expected):
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", value)
    session._fix_submit_args()
    assert os.environ.get("PYSPARK_SUBMIT_ARGS") == expected


def test_cli_bad_conf_is_one_line(tmp_path, trace):
    out = minibroker("analyze", str(trace), "--out", str(tmp_path / "o"), "--conf", "memory=2g")
    assert _one_line(out) == (
        "minibroker: analyze: --conf 'memory=2g': 'memory' is not a Spark setting; expected a key starting "
        "with 'spark.' (e.g. spark.executor.memory)\n"
    )


def test_cli_missing_spark_defaults_is_one_line(tmp_path, trace):
    missing = tmp_path / "nope.conf"
    out = minibroker(
        "sweep",
        str(ROOT / "scenarios/sweeps/isr_lag_time.toml"),
        "--out",
        str(tmp_path / "o"),
        "--spark-defaults",
        str(missing),
    )
    assert _one_line(out) == (
        f"minibroker: sweep: --spark-defaults '{missing}': No such file or directory; expected a "
        "spark-defaults.conf file\n"
    )


def test_cli_settings_reach_spark_with_empty_pyspark_submit_args(tmp_path, trace):
    """A real run: PYSPARK_SUBMIT_ARGS set but empty, a spark-defaults file, and --conf over it."""
    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text(
        "spark.master local[1]\nspark.sql.shuffle.partitions 3\nspark.sql.files.minPartitionNum 3\n"
    )
    out = minibroker(
        "analyze",
        str(trace),
        "--out",
        str(tmp_path / "o"),
        "--json",
        "--spark-defaults",
        str(defaults),
        "--conf",
        "spark.sql.shuffle.partitions=5",
        env={"PYSPARK_SUBMIT_ARGS": ""},
        timeout=600,  # a whole local run on a busy machine
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["spark"] == {
        "master": "local[1]",
        "shuffle_partitions": 5,
        "read_partitions": 3,
        "codegen": False,  # one event: interpreted (sizing.size_codegen)
    }


def test_a_spark_failure_is_told_by_its_root_cause_and_file():
    from minibroker.analytics.spark_checks import spark_failure

    text = (
        "An error occurred while calling o138.collectToPython.\n"
        ": org.apache.spark.SparkException: Job aborted due to stage failure: Lost task 0.0: "
        "org.apache.parquet.io.ParquetDecodingException: Can not read value at 0 in block -1 in file "
        "file:/runs/a%20b.parquet\n\tat org.apache.Foo.bar(Foo.java:1)\n"
        "Caused by: java.io.IOException: could not read page in col [seq]\n\tat x.y(Z.java:2)\n"
    )
    assert (
        spark_failure(text)
        == "java.io.IOException: could not read page in col [seq] (in file /runs/a b.parquet)"
    )
    assert spark_failure("[PATH_NOT_FOUND] Path does not exist: file:/x.") == (
        "[PATH_NOT_FOUND] Path does not exist: file:/x."
    )


@pytest.mark.parametrize(
    ("memory", "off_heap"),
    [
        ("2g", 512 * 2**20),
        ("512mb", 128 * 2**20),
        ("4096", 2**30),  # a bare number is MiB, as for spark.driver.memory
        ("1073741824b", 256 * 2**20),
        ("4096k", 64 * 2**20),  # at least 64 MiB
        ("8 G", 2**31),
        ("0g", None),
        ("2x", None),
        ("", None),
    ],
)
def test_off_heap_is_a_quarter_of_the_driver_memory_as_spark_spells_it(memory, off_heap):
    from minibroker.analytics.settings import off_heap_bytes

    assert off_heap_bytes(memory) == off_heap
