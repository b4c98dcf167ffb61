"""The analyze and sweep pictures in docs/ are what tools/docs_pictures.py draws today, byte for byte.

One module fixture runs the tool's one ``analyze`` (traces of every bundled scenario, 1 s buckets) and
its one ``sweep`` on the test run's SparkSession. Both are computed in virtual time and drawn by
matplotlib's Agg backend with its bundled fonts, a fixed size and dpi and no software or date metadata,
so the same tables give the same bytes; the tables are the same whatever the partitioning.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("docs_pictures", ROOT / "tools" / "docs_pictures.py")
pictures = importlib.util.module_from_spec(spec)
sys.modules["docs_pictures"] = pictures
spec.loader.exec_module(pictures)

DRAWN_ON_SPARK = [name for name, job in pictures.PICTURES.items() if job.spark]


@pytest.fixture(scope="module")
def drawn(spark, tmp_path_factory):
    work = tmp_path_factory.mktemp("pictures")
    return work, pictures.draw(DRAWN_ON_SPARK, work)


def test_the_tool_draws_six_analyze_charts_and_one_sweep_heatmap():
    assert DRAWN_ON_SPARK == [
        "analyze-latency.png",
        "analyze-purgatory-size.png",
        "analyze-hw.png",
        "analyze-isr.png",
        "analyze-rebalances.png",
        "analyze-lso-lag.png",
        "sweep_lag_timeout_error_rate.png",
    ]


@pytest.mark.parametrize("name", DRAWN_ON_SPARK)
def test_the_committed_picture_is_what_the_tool_draws_today(drawn, name):
    _, files = drawn
    assert pictures.differing({name: files[name]}) == [], (
        f"docs/{name} is stale: python tools/docs_pictures.py --write --only {name}"
    )


def test_no_bundled_trace_fires_a_task_late_so_there_is_no_timer_chart(drawn):
    work, _ = drawn
    analysis = work / "analyze" / "analysis"
    assert not (analysis / "timer_precision.png").exists()
    assert "tasks fired exactly at their expiration (0 ms late): nothing to chart." in (
        analysis / "report.md"
    ).read_text(encoding="utf-8")
