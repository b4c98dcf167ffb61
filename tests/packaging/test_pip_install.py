"""A plain, non-editable ``pip install`` of the checkout into a fresh venv: every command of the CLI.

Real parts: a new virtual environment, pip building the wheel with setuptools (build isolation,
as a user's ``pip install .`` does), and the installed ``minibroker`` script run from an empty
directory with no PYTHONPATH, so nothing can come from the checkout. Dependencies come from pip's
cache or the index; the test skips (saying so) only when pip cannot reach an index.

Each command of ``minibroker --help`` runs its smallest useful invocation: it works (exit 0), or,
when it needs an extra that a plain install lacks (Spark, Redis), it says which in one line (exit 2).
No command may end in a traceback.
"""

from __future__ import annotations

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from minibroker.scenario.library import bundled_scenarios

ROOT = Path(__file__).resolve().parents[2]
#: what pip prints when it cannot reach the package index
OFFLINE = ("NewConnectionError", "Temporary failure in name resolution", "No matching distribution found")
#: not part of the source a user would install
SKIP = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "runs"
)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("pip-install")
    source = base / "src"
    shutil.copytree(ROOT, source, symlinks=True, ignore=SKIP)
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_NO_INDEX")}
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "."],
        cwd=source,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0 and any(marker in done.stderr for marker in OFFLINE):
        pytest.skip(f"pip could not reach a package index (offline): {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    shutil.rmtree(source)  # the installed package must not need its source tree
    return venv


def _minibroker(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [str(venv / "bin" / "minibroker"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_list_shows_the_bundled_scenarios_from_any_directory(installed, tmp_path):
    out = _minibroker(installed, tmp_path, "list")
    assert out.returncode == 0, out.stderr
    bundled = [path.stem for path in bundled_scenarios(ROOT / "scenarios")]
    shown = [
        line.split()[1]
        for line in out.stdout.splitlines()
        if line.startswith("│ ") and line.split()[1] != "│"
    ]
    assert shown == bundled
    assert "site-packages/minibroker/scenarios" in out.stdout


def test_run_a_bundled_scenario_by_name_from_any_directory(installed, tmp_path):
    out = _minibroker(installed, tmp_path, "run", "acks_all")
    assert out.returncode == 0, out.stderr
    assert (
        "│ messages-3-4 │ producer │ produce │      0 │     100 │       110 │      10 │ condition │"
        in out.stdout
    )
    assert out.stdout.rstrip().endswith("all expectations hold")
    assert _minibroker(installed, tmp_path, "run", "acks_all.toml", "--quiet").returncode == 0


def test_an_unknown_name_is_a_one_line_usage_error(installed, tmp_path):
    out = _minibroker(installed, tmp_path, "run", "acks_al")
    assert out.returncode == 2
    assert (
        out.stderr
        == "minibroker: acks_al: no such file, and no bundled scenario of that name (minibroker list)\n"
    )


#: every command of ``minibroker --help``; each has a test below
COMMANDS = (
    "demo-timer",
    "run",
    "check",
    "list",
    "snapshot",
    "analyze",
    "sweep",
    "serve",
    "chaos",
    "retry-service",
)


def _worked(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return out.stdout


def _needs_extra(out: subprocess.CompletedProcess, where: str, extra: str, module: str) -> None:
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr == (
        f"minibroker: {where} needs the {extra} extra ({module} is not installed): "
        f"pip install 'minibroker[{extra}]'\n"
    )


def test_the_help_lists_the_commands_tested_here(installed, tmp_path):
    shown = _worked(_minibroker(installed, tmp_path, "--help"))
    listed = shown.split("positional arguments:")[1].split("options:")[0]
    assert tuple(re.findall(r"^    (\S+)", listed, re.MULTILINE)) == COMMANDS


def test_check_demo_timer_and_snapshot(installed, tmp_path):
    assert _worked(_minibroker(installed, tmp_path, "check", "acks_all")) == (
        "ok acks_all: 2 steps, 6 expectations\n"
    )
    demo = _worked(_minibroker(installed, tmp_path, "demo-timer"))
    assert "t=350 ms  task 350 ms fired" in demo and "t=450 ms  task 450 ms fired" in demo
    frame = _worked(_minibroker(installed, tmp_path, "snapshot", "acks_all", "--at", "100"))
    assert " t = 100 ms virtual" in frame and "timing wheel · broker 0" in frame
    assert list(tmp_path.iterdir()) == []


def test_analyze_and_sweep_name_the_spark_extra(installed, tmp_path):
    run = _worked(_minibroker(installed, tmp_path, "run", "acks_all", "--trace", "trace.jsonl"))
    assert "events written to trace.jsonl" in run
    _needs_extra(
        _minibroker(installed, tmp_path, "analyze", "trace.jsonl", "--out", "out"),
        "analyze:",
        "spark",
        "pyspark",
    )
    sweep = next(installed.glob("lib/python*/site-packages/minibroker/scenarios/sweeps/isr_lag_time.toml"))
    _needs_extra(
        _minibroker(installed, tmp_path, "sweep", str(sweep), "--out", "out"), "sweep:", "spark", "pyspark"
    )
    # options that need an extra say so the same way
    parquet = _minibroker(installed, tmp_path, "run", "acks_all", "--trace", "trace.parquet")
    _needs_extra(parquet, "run: a .parquet trace", "parquet", "pyarrow")
    spark = _minibroker(installed, tmp_path, "chaos", "--runs", "1", "--master", "local[1]")
    _needs_extra(spark, "chaos: --master", "spark", "pyspark")


def test_chaos_writes_its_report_and_one_json_line_per_run(installed, tmp_path):
    shown = _worked(
        _minibroker(installed, tmp_path, "chaos", "--runs", "2", "--workers", "1", "--duration-ms", "200")
    )
    assert "report: chaos-out/chaos.md, chaos-out/runs.jsonl" in shown
    assert "| runs | 2 |" in (tmp_path / "chaos-out" / "chaos.md").read_text()
    rows = [json.loads(line) for line in (tmp_path / "chaos-out" / "runs.jsonl").read_text().splitlines()]
    assert [(row["index"], row["run"], row["violations"]) for row in rows] == [
        (0, "default-s0-r0", 0),
        (1, "default-s0-r1", 0),
    ]


#: kafka-python (a core dependency) produces one record per codec to serve's first broker
PRODUCE = """
import sys
from kafka import KafkaProducer
for codec in ("gzip", "snappy", "lz4", "zstd"):
    producer = KafkaProducer(bootstrap_servers=sys.argv[1], compression_type=codec, acks="all")
    print(codec, producer.send("orders", b"payment 7").get(timeout=10).offset)
    producer.close()
"""


def _line(stream, wanted: str, timeout_s: float = 60.0) -> str:
    """The first line of ``stream`` containing ``wanted`` (within ``timeout_s``), else ''."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], max(0.0, deadline - time.monotonic()))
        line = stream.readline() if ready else ""
        if not line or wanted in line:
            return line
    return ""


def test_serve_runs_for_its_duration(installed, tmp_path):
    out = _minibroker(installed, tmp_path, "serve", "--port", "0", "--duration", "2")
    assert re.fullmatch(
        r"(broker [012] listening on 127\.0\.0\.1:\d+\n){3}state: in memory only; .*\n", _worked(out)
    ), out.stdout
    assert out.stderr == "minibroker serve: stopped after 2 s\n"


def test_serve_takes_every_codec_and_the_retry_service_runs_against_it(installed, tmp_path):
    topics = [arg for name in ("orders", "orders-retry-1", "orders-dlt") for arg in ("--topic", name)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    minibroker = str(installed / "bin" / "minibroker")
    serve = subprocess.Popen(
        [minibroker, "serve", "--port", "0", "--brokers", "1", *topics, "--duration", "300"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        listening = _line(serve.stdout, "listening on")
        assert listening.startswith("broker 0 listening on 127.0.0.1:"), listening + serve.stderr.read()
        bootstrap = listening.split()[-1]
        produced = subprocess.run(
            [str(installed / "bin" / "python"), "-c", PRODUCE, bootstrap],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert _worked(produced) == "gzip 0\nsnappy 1\nlz4 2\nzstd 3\n"
        (tmp_path / "retry.toml").write_text("[topics.orders]\nattempts = 2\n")
        service = subprocess.Popen(
            [minibroker, "retry-service", "--bootstrap", bootstrap, "--config", "retry.toml"],
            cwd=tmp_path,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            started = _line(service.stderr, "started")
            assert started == "retry-service: started: 1 retry topics, backend wheel\n", started
            service.send_signal(signal.SIGTERM)
            assert service.wait(timeout=30) == 0
            assert service.stderr.read() == (
                "retry-service: stopped: read 0, delivered 0, dead-lettered 0, still held 0\n"
            )
        finally:
            service.kill()
        # the Redis backend needs the retry extra: one line before it reads anything
        (tmp_path / "redis.toml").write_text('[topics.orders]\nattempts = 2\n[backend]\nkind = "redis"\n')
        redis = _minibroker(
            installed, tmp_path, "retry-service", "--bootstrap", bootstrap, "--config", "redis.toml"
        )
        _needs_extra(redis, 'retry-service: [backend] kind = "redis"', "retry", "redis")
        serve.send_signal(signal.SIGINT)
        assert serve.wait(timeout=30) == 130
        assert serve.stderr.read() == "minibroker: interrupted\n"
    finally:
        serve.kill()
