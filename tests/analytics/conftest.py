"""One SparkSession (local[2]) for the whole test run, and small traces made by bundled scenarios."""

from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path

import pytest

from minibroker.scenario import load_scenario, run_scenario
from minibroker.trace import open_sink

ROOT = Path(__file__).resolve().parents[2]
# no class-data sharing archive made by the test run (a dump costs tens of seconds and ~180 MB of the
# home directory); test_cds.py turns it on for its own runs, in a temporary cache directory
os.environ.setdefault("MINIBROKER_SPARK_CDS", "0")
#: small bundled scenarios that between them have every relevant event kind: expiry, leadership,
#: shutdown, ISR shrink/expand, purges, timer cascades, consumer and follower fetches, classic and
#: consumer protocol group rebalances,
#: transactions (a timeout's abort, a fencing abort and a commit) and the LSO held below the HW
TRACED = {
    "follower_paused_timeout": "jsonl",
    "leader_failover": "parquet",
    "slow_follower_isr_shrink": "jsonl",
    "purge_interval": "jsonl",
    "fetch_min_bytes": "jsonl",
    "timing_wheel_cascade": "parquet",
    "group_session_timeout": "jsonl",
    "group_consumer_join": "parquet",
    "group_consumer_session_timeout": "jsonl",
    "retry_poison_dlt": "jsonl",
    "delay_wheel_vs_levels": "parquet",
    "txn_read_committed_stalled": "jsonl",
    "txn_zombie_fenced": "parquet",
    "share_poison_archived": "jsonl",
    "share_lock_expiry": "parquet",
}


def write_trace(scenario: str, path: Path) -> Path:
    sink = open_sink(path)
    try:
        run_scenario(load_scenario(ROOT / "scenarios" / f"{scenario}.toml"), sinks=[sink])
    finally:
        sink.close()
    return path


def require_java() -> None:
    """Skip, saying what is missing, unless Spark's Java (17 or newer, a README prerequisite) is here."""
    from minibroker.analytics.spark_checks import SparkUnavailable, check_java

    try:
        check_java()
    except SparkUnavailable as error:
        pytest.skip(f"Spark tests need Java 17 (README: what the tests need): {error}")


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    pytest.importorskip("pyspark")
    require_java()
    from minibroker.analytics.session import spark_session

    log = tmp_path_factory.mktemp("spark") / "spark.log"
    with spark_session("local[2]", app_name="minibroker tests", log_path=log, driver_memory="1g") as session:
        yield session


@pytest.fixture(scope="session")
def trace_dir(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("traces")
    for scenario, suffix in TRACED.items():
        write_trace(scenario, directory / f"{scenario}.{suffix}")
    return directory


@pytest.fixture(scope="session")
def analyzed(spark, trace_dir, tmp_path_factory):
    """``minibroker analyze`` run once over ``trace_dir`` (100 ms buckets): (exit code, out dir, JSON)."""
    from minibroker.cli import main

    out = tmp_path_factory.mktemp("analysis")
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["analyze", str(trace_dir), "--out", str(out), "--bucket-ms", "100", "--json"])
    return code, out, json.loads(buffer.getvalue())
