"""What the analyze report's charts draw (no Spark: hand-made tables); pixels are not checked."""

from __future__ import annotations

import pytest

from minibroker.analytics import charts
from minibroker.analytics.analyze import KEYS, Analysis, Table
from minibroker.analytics.report import analysis_report

pytest.importorskip("matplotlib")


def _latency(kind: str, cause: str, count: int, p50: int) -> dict:
    return {
        "purgatory": "Fetch",
        "op_kind": kind,
        "cause": cause,
        "count": count,
        "p50": p50,
        "p90": p50,
        "p99": p50,
        "p999": p50,
        "max": p50,
        "mean": float(p50),
    }


def _size(trace: str, bucket_ms: int, waiting: int, peak: int, watched: int | None = None) -> dict:
    return {
        "trace": trace,
        "broker": 0,
        "purgatory": "Produce",
        "bucket_ms": bucket_ms,
        "created": 0,
        "completed": 0,
        "purges": 0 if watched is None else 1,
        "purged": 0,
        "watched": watched,
        "num_delayed": None,
        "waiting": waiting,
        "max_waiting": peak,
    }


def _isr(trace: str, bucket_ms: int, size: int, changes: int = 1) -> dict:
    return {
        "trace": trace,
        "partition": "t-0",
        "bucket_ms": bucket_ms,
        "isr": "[]",
        "isr_size": size,
        "min_isr_size": size,
        "changes": changes,
    }


def _analysis(**tables: list[dict]) -> Analysis:
    filled = {name: Table([], tables.get(name, [])) for name in KEYS}
    return Analysis(100, filled, 0)


def test_latency_has_one_series_per_cause_with_its_count_and_no_all():
    rows = [
        _latency("follower-fetch", "all", 24, 500),
        _latency("follower-fetch", "expiry", 18, 500),
        _latency("follower-fetch", "condition", 6, 3),
        _latency("produce", "leadership", 1, 300),
        _latency("produce", "condition", 9, 2),
    ]
    panels = charts.latency_panels(rows)
    assert list(panels) == ["follower-fetch", "produce"]
    assert list(panels["follower-fetch"]) == ["condition", "expiry"]  # CAUSE_ORDER, "all" left out
    assert panels["follower-fetch"]["expiry"] == {"count": 18, "values": [500] * 5}
    assert list(panels["produce"]) == ["condition", "leadership"]


def test_purgatory_peaks_show_what_the_end_of_bucket_level_hides():
    # trace a: 600 ops pile up inside bucket 100 and drain before its end; trace b holds 3 from bucket 0
    rows = [_size("b", 0, 3, 3), _size("a", 100, 0, 600), _size("a", 300, 2, 2, watched=5)]
    panel = charts.waiting_panels(rows)[(0, "Produce")]
    assert panel["end"] == {0: 3, 100: 3, 300: 5}
    assert panel["peak"] == {0: 3, 100: 603, 300: 5}  # b's held level counts in a's buckets
    assert panel["watched"] == {300: 5}
    # between bucket 100 and 300 nothing happened: the level at 100's end holds from 200 on
    assert charts.level_steps(panel["peak"], panel["end"], 100) == (
        [0, 100, 200, 300, 400],
        [3, 603, 3, 5, 5],
    )


def test_hw_shows_the_trace_with_most_moves_one_panel_per_partition():
    rows = [
        {"trace": "quiet", "partition": "t-0", "bucket_ms": 0, "hw": 1, "leader": 0, "changes": 1},
        {"trace": "busy", "partition": "t-1", "bucket_ms": 0, "hw": 5, "leader": 0, "changes": 5},
        {"trace": "busy", "partition": "t-0", "bucket_ms": 100, "hw": 9, "leader": 1, "changes": 4},
    ]
    assert charts.busiest_trace(rows) == "busy"
    assert charts.hw_panels(rows, "busy") == {"t-0": ([100], [9]), "t-1": ([0], [5])}


def test_isr_picks_the_traces_whose_isr_changed_shrinks_first():
    rows = [
        _isr("a-steady", 0, 3),  # only its leader's ISR: no change, not shown
        _isr("b-failover", 0, 3),
        _isr("b-failover", 500, 2),
        _isr("b-failover", 1500, 3),
        _isr("c-shrink", 0, 3),
        _isr("c-shrink", 2000, 2),
        _isr("d-min-isr", 0, 3),
        _isr("d-min-isr", 1500, 1),
    ]
    assert charts.isr_traces(rows) == ["d-min-isr", "b-failover", "c-shrink"]
    assert charts.isr_traces(rows, limit=1) == ["d-min-isr"]
    assert charts.integer_ticks([3, 1, 3]) == [1, 2, 3]


def test_the_isr_legend_names_every_partition_even_internal_ones(tmp_path, monkeypatch):
    drawn = []
    monkeypatch.setattr(charts, "save", lambda figure, path: drawn.append(figure) or path)
    rows = [{**_isr("a", 0, 3), "partition": partition} for partition in ("orders-0", "__delay_5s-0")] + [
        {**_isr("a", 1000, 2), "partition": "__delay_5s-0"}
    ]
    charts.isr_chart(_analysis(isr=rows), tmp_path / "isr.png")
    (axes,) = drawn[0].axes
    assert [text.get_text() for text in axes.get_legend().get_texts()] == ["__delay_5s-0", "orders-0"]


def test_timer_says_every_fire_was_on_time_instead_of_a_chart(tmp_path):
    on_time = [{"delta_ms": 0, "fires": 36}]
    assert (
        charts.timer_note(on_time)
        == "All 36 tasks fired exactly at their expiration (0 ms late): nothing to chart."
    )
    assert charts.timer_note([{"delta_ms": 0, "fires": 3}, {"delta_ms": 1, "fires": 1}]) is None
    analysis = _analysis(timer_precision=on_time)
    assert charts.timer_chart(analysis, tmp_path / "timer.png") is None
    report = analysis_report(analysis, tmp_path, "minibroker analyze x").read_text()
    assert "All 36 tasks fired exactly at their expiration" in report
    assert not (tmp_path / "timer_precision.png").exists()


def _rebalance(
    trace: str, group: str, count: int, lo: int, mean: float, hi: int, expiries: int = 0, stops=None
) -> dict:
    return {
        "trace": trace,
        "broker": 1,
        "group": group,
        "protocol": "classic" if stops is None else "consumer",
        "rebalances": count,
        "min_ms": lo,
        "mean_ms": mean,
        "max_ms": hi,
        "session_expiries": expiries,
        "partition_stops": None if stops is None else stops[0],
        "max_stop_ms": None if stops is None else stops[1],
    }


def test_rebalances_draw_the_groups_that_rebalanced_longest_mean_first():
    rows = [
        _rebalance("/x/short.jsonl", "g", 2, 0, 1500.0, 3000, stops=(2, 1000)),
        _rebalance("/x/evicted.jsonl", "g", 1, 20000, 20000.0, 20000, expiries=1),
        _rebalance("/x/quiet.jsonl", "g", 0, None, None, None, expiries=2),  # expiries, no rebalance
    ]
    drawn = charts.rebalance_rows(rows)
    assert [(r["label"], r["min"], r["mean"], r["max"], r["note"]) for r in drawn] == [
        ("evicted.jsonl · g (broker 1, classic)", 20.0, 20.0, 20.0, "1 rebalance(s), 1 session expiry"),
        (
            "short.jsonl · g (broker 1, consumer)",
            0.0,
            1.5,
            3.0,
            "2 rebalance(s)\n2 partition stop(s) ≤ 1 s",
        ),
    ]
    assert charts.rebalance_rows([rows[2]]) == []


def _lag(trace: str, lags: int, total: int, longest: int, held: int, still_open: bool = False) -> dict:
    return {
        "trace": trace,
        "partition": "t-0",
        "lags": lags,
        "total_ms": total,
        "max_ms": longest,
        "max_held": held,
        "open": still_open,
    }


def test_lso_lag_draws_a_bar_per_partition_longest_total_first():
    drawn = charts.lso_lag_rows(
        [_lag("/x/zombie.jsonl", 2, 895, 805, 3), _lag("/x/stalled.jsonl", 1, 19000, 19000, 4, True)]
    )
    assert [(r["label"], r["total"], r["note"]) for r in drawn] == [
        ("stalled.jsonl · t-0", 19.0, "1 lag(s), longest 19 s, 4 offsets held, open at the end"),
        ("zombie.jsonl · t-0", 0.895, "2 lag(s), longest 0.805 s, 3 offsets held"),
    ]


def test_every_chart_renders_from_small_tables(tmp_path):
    analysis = _analysis(
        latency=[_latency("produce", "condition", 9, 2), _latency("produce", "expiry", 1, 1000)],
        purgatory_size=[_size("a", 0, 1, 4)],
        hw=[{"trace": "a", "partition": "t-0", "bucket_ms": 0, "hw": 1, "leader": 0, "changes": 1}],
        isr=[_isr("a", 0, 3), _isr("a", 100, 2)],
        timer_precision=[{"delta_ms": 0, "fires": 3}, {"delta_ms": 2, "fires": 1}],
        rebalances=[_rebalance("a", "g", 1, 3000, 3000.0, 3000)],
        lso_lag=[_lag("a", 1, 300, 300, 3)],
    )
    report = analysis_report(analysis, tmp_path, "minibroker analyze x").read_text()
    assert "![rebalance durations](rebalances.png)" in report
    assert "![LSO lag behind the HW](lso_lag.png)" in report
    for name in ("latency", "purgatory_size", "hw", "isr", "timer_precision", "rebalances", "lso_lag"):
        assert (tmp_path / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
