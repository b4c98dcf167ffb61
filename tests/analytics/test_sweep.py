"""Sweep files: validation errors, overrides, and an 8-variant sweep run as Spark tasks."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from minibroker.analytics.sweepfile import load_sweep, parse_sweep
from minibroker.cli import main
from minibroker.scenario import ScenarioError, run_scenario

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
[cluster]
brokers = 3
latency_ms = 1
config = { "min.insync.replicas" = 2 }

[[links]]
between = [0, 2]
latency_ms = 1

[[topics]]
name = "t"
replication_factor = 3

[[clients]]
id = "producer"
type = "producer"
config = { acks = "all" }

[[steps]]
at = 0
action = "load"
client = "producer"
topic = "t"
rate = 100
duration_ms = 200

[[expect]]
count = "requests"
kind = "produce"
error = "NONE"
equals = 20
"""

SWEEP = """\
[sweep]
name = "tiny"
scenario = "base.toml"
seeds = [0, 1]

[[axes]]
name = "lag_ms"
link = [0, 2]
values = [1, 100]

[[axes]]
client = "producer"
config = "request.timeout.ms"
values = [150, 600]
"""


@pytest.fixture
def base(tmp_path) -> Path:
    (tmp_path / "base.toml").write_text(BASE)
    return tmp_path


def error_of(text: str, base: Path) -> str:
    with pytest.raises(ScenarioError) as error:
        parse_sweep(text, str(base / "s.toml"))
    return str(error.value).replace(str(base), "DIR")


def test_the_grid_in_order(base):
    sweep = parse_sweep(SWEEP, str(base / "s.toml"))
    variants = sweep.variants()
    assert [(v.values, v.seed) for v in variants][:3] == [
        ((("lag_ms", 1), ("request.timeout.ms", 150)), 0),
        ((("lag_ms", 1), ("request.timeout.ms", 150)), 1),
        ((("lag_ms", 1), ("request.timeout.ms", 600)), 0),
    ]
    last = variants[-1].scenario
    assert [(link.between, link.latency_ms) for link in last.links] == [((0, 2), 100)]
    assert last.clients[0].config["request.timeout.ms"] == 600
    assert [h.metric for h in sweep.heatmaps] == ["timeout_rate"]


def test_broker_settings_reach_every_broker_and_one_broker(base):
    text = SWEEP.split("[[axes]]")[0] + (
        '[[axes]]\nconfig = "min.insync.replicas"\nvalues = [1, 3]\n\n'
        '[[axes]]\nconfig = "replica.fetch.wait.max.ms"\nbroker = 2\nvalues = [10]\n'
    )
    variants = parse_sweep(text, str(base / "s.toml")).variants()
    cluster = variants[-1].scenario.cluster
    assert cluster.config["min.insync.replicas"] == 3
    assert cluster.broker_overrides == {2: {"replica.fetch.wait.max.ms": 10}}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("values = [150, 600]", 'values = [150, "x"]'),
            "DIR/s.toml:14: axes[1].values[1]: expected a whole number, got 'x' (request.timeout.ms)",
        ),
        (
            ('config = "request.timeout.ms"', 'config = "request.timeout"'),
            "DIR/s.toml:13: axes[1].config: unknown setting 'request.timeout'; expected one of: acks, ",
        ),
        (
            ('client = "producer"', 'client = "nobody"'),
            "DIR/s.toml:12: axes[1].client: no client 'nobody' in the scenario; expected one of: producer",
        ),
        (
            ("link = [0, 2]", "link = [0, 5]"),
            "DIR/s.toml:8: axes[0].link: expected two different nodes (broker ids 0..2 or client ids) "
            "like [0, 2], got [0, 5]",
        ),
        (
            ('name = "lag_ms"', 'name = "request.timeout.ms"'),
            "DIR/s.toml:11: axes[1].name: 'request.timeout.ms' names axes[0] too; expected a unique name",
        ),
        (
            ('name = "lag_ms"', 'name = "timeout_rate"'),
            "DIR/s.toml:7: axes[0].name: 'timeout_rate' is a column of the results; expected another name",
        ),
        (
            ('scenario = "base.toml"', 'scenario = "nope.toml"'),
            "DIR/s.toml:3: sweep.scenario: no scenario file 'DIR/nope.toml'; expected a path from this file",
        ),
        (("seeds = [0, 1]", "seeds = [0, 0]"), "DIR/s.toml:4: sweep.seeds: expected a list of distinct"),
        (
            ("values = [1, 100]", "values = []"),
            "DIR/s.toml:9: axes[0].values: expected a non-empty list, got []",
        ),
        (
            ("seeds = [0, 1]", 'seeds = [0, 1]\ncolour = "red"'),
            "DIR/s.toml:5: sweep.colour: unknown key 'colour'; expected one of: description, name, scenario,",
        ),
    ],
)
def test_one_line_errors_name_file_line_and_key(base, change, message):
    old, new = change
    assert old in SWEEP
    assert error_of(SWEEP.replace(old, new, 1), base).startswith(message)


def test_heatmap_errors(base):
    heatmap = '\n[[heatmaps]]\nx = "lag_ms"\ny = "lag_ms"\n'
    assert (
        error_of(SWEEP + heatmap, base)
        == "DIR/s.toml:18: heatmaps[0].y: expected an axis other than x ('lag_ms')"
    )
    heatmap = '\n[[heatmaps]]\nx = "lag_ms"\ny = "seed"\nmetric = "speed"\n'
    assert error_of(SWEEP + heatmap, base).startswith(
        "DIR/s.toml:19: heatmaps[0].metric: expected one of requests,"
    )


def test_bundled_sweeps_load():
    sweeps = {path.stem: load_sweep(path) for path in sorted((ROOT / "scenarios" / "sweeps").glob("*.toml"))}
    assert {name: len(s.variants()) for name, s in sweeps.items()} == {
        "isr_lag_time": 9,
        "lag_timeout_min_isr": 80,
    }
    for path in (ROOT / "scenarios" / "sweeps").glob("*.toml"):
        assert path.read_text().startswith(f"# {path.stem}: ")


def expected_row(scenario, seed: int) -> dict:
    """The figures of one variant, computed here from a plain run_scenario."""
    result = run_scenario(scenario, seed=seed)
    produce = [r for r in result.requests if r.kind == "produce"]
    latencies = sorted(r.latency_ms for r in produce)
    timeouts = sum("REQUEST_TIMED_OUT" in r.errors.values() for r in produce)
    failed = sum(set(r.errors.values()) != {"NONE"} for r in produce)
    expirations = sum(f["expirations"] for b in result.purgatory_totals.values() for f in b.values())
    return {
        "requests": len(result.requests),
        "produce": len(produce),
        "timeouts": timeouts,
        "timeout_rate": timeouts / len(produce),
        "errors": failed,
        "produce_p50": latencies[(len(latencies) + 1) // 2 - 1],
        "produce_max": latencies[-1],
        "expirations": expirations,
        "expectations_passed": sum(r.passed for r in result.results),
        "end_ms": result.end_ms,
    }


def test_eight_variants_as_spark_tasks(spark, base, tmp_path):
    (base / "tiny.toml").write_text(SWEEP)
    out = tmp_path / "out"
    buffer, errors = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(errors):
        code = main(["sweep", str(base / "tiny.toml"), "--out", str(out), "--json"])
    assert code == 0
    # the count up front; the progress bar is drawn only on a terminal
    assert errors.getvalue() == "sweep tiny: 8 variants (2 lag_ms × 2 request.timeout.ms × 2 seeds)\n"
    summary = json.loads(buffer.getvalue())
    rows = pq.read_table(out / "variants.parquet").to_pylist()
    assert rows == [{**row, "wall_ms": rows[i]["wall_ms"]} for i, row in enumerate(summary["variants"])]
    sweep = load_sweep(base / "tiny.toml")
    assert len(rows) == 8
    for row, variant in zip(rows, sweep.variants(), strict=True):
        assert (row["variant"], row["lag_ms"], row["request.timeout.ms"], row["seed"]) == (
            variant.index,
            dict(variant.values)["lag_ms"],
            dict(variant.values)["request.timeout.ms"],
            variant.seed,
        )
        expected = expected_row(variant.scenario, variant.seed)
        assert {key: row[key] for key in expected} == expected
    # what the grid means: a produce waits about 2 x lag for the slow follower
    rates = {(r["lag_ms"], r["request.timeout.ms"]): r["timeout_rate"] for r in rows}
    assert rates == {(1, 150): 0.0, (1, 600): 0.0, (100, 150): 1.0, (100, 600): 0.0}
    assert all(r["produce_p50"] == 4 for r in rows if r["lag_ms"] == 1)
    assert (out / "sweep.md").read_text().count(
        "![timeout_rate](heatmap-0-timeout_rate_lag_ms_request_timeout_ms.png)"
    ) == 1
    assert (out / "heatmap-0-timeout_rate_lag_ms_request_timeout_ms.png").stat().st_size > 1000


def test_a_grid_over_max_variants_is_refused_before_spark(base, tmp_path):
    (base / "tiny.toml").write_text(SWEEP)
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        code = main(["sweep", str(base / "tiny.toml"), "--out", str(tmp_path / "o"), "--max-variants", "7"])
    assert code == 2
    assert errors.getvalue() == (
        f"minibroker: sweep: {base / 'tiny.toml'}: 8 variants (2 lag_ms × 2 request.timeout.ms × 2 seeds) "
        "is more than --max-variants 7; shrink the grid, or raise --max-variants to run them all\n"
    )
    assert not (tmp_path / "o").exists()  # refused before anything ran


def test_32000_variants_are_counted_without_building_them(base):
    grid = SWEEP.replace("values = [1, 100]", f"values = {list(range(1, 801))}").replace(
        "values = [150, 600]", f"values = {list(range(100, 2100, 100))}"
    )
    sweep = parse_sweep(grid, str(base / "s.toml"))
    assert (sweep.count, sweep.shape()) == (32_000, "800 lag_ms × 20 request.timeout.ms × 2 seeds")


def test_progress_reports_tasks_done_up_to_all(spark, base):
    from minibroker.analytics.sweep_job import run_sweep

    (base / "tiny.toml").write_text(SWEEP)
    calls: list[tuple[int, int]] = []
    rows = run_sweep(
        spark, load_sweep(base / "tiny.toml"), progress=lambda done, total: calls.append((done, total))
    )
    assert len(rows) == 8
    assert calls[-1] == (8, 8)
    assert all(total == 8 and 0 <= done <= 8 for done, total in calls)
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_the_progress_bar_counts_variants_on_a_terminal():
    from rich.console import Console

    from minibroker.analytics.commands import _progress_bar

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=80)
    with _progress_bar(console, 4000) as update:
        update(1000, 2000)  # 2,000 tasks of 2 variants each: half done
        update(2000, 2000)
    assert "4000/4000" in screen.getvalue()
    with _progress_bar(Console(file=io.StringIO(), force_terminal=False), 8) as update:
        update(8, 8)  # not a terminal: nothing drawn, nothing fails
