"""The ``analyze`` report's charts: what each shows is computed by a pure function, then drawn.

Each ``*_chart`` writes one PNG (matplotlib's object API, no display) and returns its
path, or None when there is nothing to draw. The data functions before them decide
what is drawn and are what the tests check:

- ``latency_panels``: one panel per operation kind, one bar group per cause
  (condition / expiry / leadership / other) with its operation count, so "p50 = 500 ms"
  reads as "most of them expired"; the legend sits below the panels, never on a bar.
- ``waiting_panels``: one panel per (broker, purgatory): the most operations waiting at
  any moment of each bucket (``max_waiting``) and the level at its end (``waiting``),
  summed over traces, so short pauses inside a bucket show and no series hides another.
- ``busiest_trace`` / ``hw_panels``: the HW chart shows the trace with the most HW
  advances, one panel per partition (six lines on one axis hide one another).
- ``isr_traces``: the traces whose ISR changed, those with a shrink first; one panel
  each, one line per partition, integer ticks (``integer_ticks``).
- ``timer_note``: a sentence instead of a chart when every task fired on time.
- ``rebalance_rows``: one bar per (trace, group) with rebalances, the longest mean first:
  the mean rebalance duration, a whisker from the shortest to the longest, and the
  counts of rebalances and session expiries written beside it.
- ``lso_lag_rows``: one bar per (trace, partition) whose LSO lagged its HW, the longest total
  first: the total time, with the number of lags, the longest, the most offsets held and
  whether a lag was still open at the trace's end written beside it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minibroker.analytics.analyze import Analysis

PERCENTILES = ("p50", "p90", "p99", "p999", "max")
CAUSE_ORDER = ("condition", "expiry", "leadership", "other")
CAUSE_COLORS = {
    "condition": "tab:green",
    "expiry": "tab:red",
    "leadership": "tab:purple",
    "other": "tab:gray",
}
#: panels at most in one small-multiples chart (the tables hold everything)
MAX_PANELS = 12
MAX_ISR_TRACES = 4
MAX_REBALANCE_ROWS = 20


def figure(width: float = 8.0, height: float = 4.0) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100, layout="constrained")


def save(figure: Any, path: Path) -> Path:
    figure.savefig(path, metadata={"Software": None})
    return path


def _grid(count: int, columns: int) -> tuple[int, int]:
    columns = max(1, min(columns, count))
    return math.ceil(count / columns), columns


def _panels(fig: Any, count: int, columns: int, **kwargs: Any) -> list[Any]:
    rows, cols = _grid(count, columns)
    axes = fig.subplots(rows, cols, squeeze=False, **kwargs)
    flat = [a for line in axes for a in line]
    for extra in flat[count:]:
        extra.set_visible(False)
    return flat[:count]


def integer_ticks(values: Iterable[int]) -> list[int]:
    """Every whole number from the smallest value to the largest (sizes are counts)."""
    values = list(values)
    return list(range(min(values), max(values) + 1)) if values else []


# --- latency -------------------------------------------------------------------------------------
def latency_panels(rows: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """op_kind -> cause -> {"count", "values" (p50 … max)}, causes in CAUSE_ORDER, no ``all``."""
    panels: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        if row["cause"] != "all":
            values = [row[name] for name in PERCENTILES]
            panels[row["op_kind"]][row["cause"]] = {"count": row["count"], "values": values}
    return {
        kind: {cause: causes[cause] for cause in CAUSE_ORDER if cause in causes}
        for kind, causes in sorted(panels.items())
    }


def latency_chart(analysis: Analysis, path: Path) -> Path | None:
    panels = latency_panels(analysis.rows("latency"))
    if not panels:
        return None
    fig = figure(4.2 * min(3, len(panels)) + 0.6, 3.4 * _grid(len(panels), 3)[0] + 0.7)
    axes_list = _panels(fig, len(panels), 3, sharey=True)
    seen: dict[str, Any] = {}
    for axes, (kind, causes) in zip(axes_list, panels.items(), strict=True):
        width = 0.8 / len(causes)
        for i, (cause, data) in enumerate(causes.items()):
            positions = [n - 0.4 + width * (i + 0.5) for n in range(len(PERCENTILES))]
            bars = axes.bar(
                positions, [max(v, 0.5) for v in data["values"]], width, color=CAUSE_COLORS[cause]
            )
            seen.setdefault(cause, bars)
        total = sum(data["count"] for data in causes.values())
        split = ", ".join(f"{data['count']:,} {cause}" for cause, data in causes.items())
        axes.set_title(f"{kind}: {total:,} completed\n({split})", fontsize="medium")
        axes.set_xticks(range(len(PERCENTILES)), PERCENTILES)
        axes.set_yscale("log")
        axes.grid(axis="y", alpha=0.3)
    axes_list[0].set_ylabel("completion latency (ms, log; 0 drawn at 0.5)")
    fig.legend(
        list(seen.values()),
        [f"cause: {cause}" for cause in seen],
        loc="outside lower center",
        ncol=len(seen),
        fontsize="small",
    )
    fig.suptitle("completion latency by operation kind and cause of the first completion")
    return save(fig, path)


# --- purgatory size ------------------------------------------------------------------------------
def waiting_panels(rows: list[dict[str, Any]]) -> dict[tuple[int, str], dict[str, dict[int, int]]]:
    """(broker, purgatory) -> {"peak": bucket -> most waiting, "end": bucket -> waiting at its end,
    "watched": bucket -> PurgatorySize at the bucket's last purge}, summed over traces.

    A trace's level holds from its row until its next row, so a bucket where one trace
    has no row counts that trace's last level (for the peak too: a level held is reached).
    """
    changes: dict[tuple[int, str], dict[int, dict[str, tuple[int, int]]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    watched: dict[tuple[int, str], dict[int, int]] = defaultdict(lambda: defaultdict(int))
    for row in rows:
        key = (row["broker"], row["purgatory"])
        peak = row.get("max_waiting", row["waiting"])
        changes[key][row["bucket_ms"]][row["trace"]] = (row["waiting"], peak)
        if row["watched"] is not None:
            watched[key][row["bucket_ms"]] += row["watched"]
    panels = {}
    for key, by_bucket in sorted(changes.items()):
        level: dict[str, int] = {}
        end, peak = {}, {}
        for bucket_ms in sorted(by_bucket):
            here = by_bucket[bucket_ms]
            peak[bucket_ms] = sum(here[t][1] if t in here else v for t, v in level.items()) + sum(
                here[t][1] for t in here if t not in level
            )
            level.update({t: waiting for t, (waiting, _) in here.items()})
            end[bucket_ms] = sum(level.values())
        panels[key] = {"peak": peak, "end": end, "watched": dict(watched.get(key, {}))}
    return panels


def level_steps(values: dict[int, int], ends: dict[int, int], bucket_ms: int) -> tuple[list[int], list[int]]:
    """Step points of a per-bucket figure: after a bucket with no next row, the level at its end holds."""
    xs: list[int] = []
    ys: list[int] = []
    buckets = sorted(values)
    for index, bucket_ms_at in enumerate(buckets):
        xs.append(bucket_ms_at)
        ys.append(values[bucket_ms_at])
        following = buckets[index + 1] if index + 1 < len(buckets) else None
        if following != bucket_ms_at + bucket_ms:
            xs.append(bucket_ms_at + bucket_ms)
            ys.append(ends[bucket_ms_at])
    return xs, ys


def purgatory_chart(analysis: Analysis, path: Path) -> Path | None:
    panels = waiting_panels(analysis.rows("purgatory_size"))
    if not panels:
        return None
    shown = list(panels.items())[:MAX_PANELS]
    purgatories = sorted({purgatory for (_, purgatory), _ in shown})
    rows = math.ceil(len(shown) / len(purgatories))
    fig = figure(4.6 * len(purgatories) + 0.4, 2.1 * rows + 1.2)
    axes_list = _panels(fig, len(shown), len(purgatories), sharex=True)
    bucket_s = analysis.bucket_ms / 1000
    for axes, ((broker, purgatory), data) in zip(axes_list, shown, strict=True):
        xs, peaks = level_steps(data["peak"], data["end"], analysis.bucket_ms)
        axes.fill_between(
            [x / 1000 for x in xs],
            peaks,
            step="post",
            color="tab:orange",
            alpha=0.35,
            label="most waiting in the bucket",
        )
        xs, ends = level_steps(data["end"], data["end"], analysis.bucket_ms)
        axes.step([x / 1000 for x in xs], ends, where="post", color="tab:blue", label="at its end")
        if data["watched"]:
            points = sorted(data["watched"].items())
            axes.scatter(
                [x / 1000 + bucket_s / 2 for x, _ in points],
                [w for _, w in points],
                marker="x",
                color="black",
                label="PurgatorySize at a purge",
            )
        axes.set_title(f"broker {broker} · {purgatory}", fontsize="medium")
        axes.set_ylim(bottom=0)
        axes.yaxis.get_major_locator().set_params(integer=True)
    for axes in axes_list[-len(purgatories) :]:
        axes.set_xlabel("virtual time (s)")
    handles, labels = {}, {}
    for axes in axes_list:
        for handle, label in zip(*axes.get_legend_handles_labels(), strict=True):
            handles.setdefault(label, handle)
            labels[label] = label
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=3, fontsize="small")
    fig.suptitle(f"operations waiting per broker and purgatory ({analysis.bucket_ms} ms buckets, all traces)")
    return save(fig, path)


# --- HW and ISR ----------------------------------------------------------------------------------
def busiest_trace(rows: list[dict[str, Any]]) -> str | None:
    """The trace with the most ``changes`` in ``rows`` (ties: the first by name)."""
    totals: dict[str, int] = defaultdict(int)
    for row in rows:
        totals[row["trace"]] += row["changes"]
    return min(totals, key=lambda trace: (-totals[trace], trace)) if totals else None


def hw_panels(rows: list[dict[str, Any]], trace: str) -> dict[str, tuple[list[int], list[int]]]:
    """partition -> (bucket_ms, hw) of one trace."""
    panels: dict[str, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))
    for row in rows:
        if row["trace"] == trace:
            panels[row["partition"]][0].append(row["bucket_ms"])
            panels[row["partition"]][1].append(row["hw"])
    return dict(sorted(panels.items()))


def hw_chart(analysis: Analysis, path: Path) -> Path | None:
    rows = analysis.rows("hw")
    trace = busiest_trace(rows)
    if trace is None:
        return None
    panels = list(hw_panels(rows, trace).items())[:MAX_PANELS]
    fig = figure(9, 2.0 * _grid(len(panels), 3)[0] + 1.0)
    axes_list = _panels(fig, len(panels), 3, sharex=True)
    for axes, (partition, (xs, ys)) in zip(axes_list, panels, strict=True):
        axes.step([x / 1000 for x in xs], ys, where="post", marker=".", markersize=3)
        axes.set_title(partition, fontsize="medium")
        axes.yaxis.get_major_locator().set_params(integer=True)
    for axes in axes_list[-3:]:
        axes.set_xlabel("virtual time (s)")
    fig.suptitle(f"high watermark per partition (offset) — {Path(trace).name}, the trace with most HW moves")
    return save(fig, path)


def isr_traces(rows: list[dict[str, Any]], limit: int = MAX_ISR_TRACES) -> list[str]:
    """Traces whose ISR size changed: the smallest ISR first, then the most changes, then by name."""
    sizes: dict[str, set[int]] = defaultdict(set)
    changes: dict[str, int] = defaultdict(int)
    for row in rows:
        sizes[row["trace"]].update((row["isr_size"], row["min_isr_size"]))
        changes[row["trace"]] += row["changes"]
    changed = [trace for trace, seen in sizes.items() if len(seen) > 1]
    return sorted(changed, key=lambda t: (min(sizes[t]), -changes[t], t))[:limit]


def isr_chart(analysis: Analysis, path: Path) -> Path | None:
    rows = analysis.rows("isr")
    traces = isr_traces(rows)
    if not traces:
        return None
    fig = figure(4.4 * min(2, len(traces)) + 0.4, 2.6 * _grid(len(traces), 2)[0] + 0.9)
    axes_list = _panels(fig, len(traces), 2)
    for axes, trace in zip(axes_list, traces, strict=True):
        mine = [row for row in rows if row["trace"] == trace]
        by_partition: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
        for row in mine:
            by_partition[row["partition"]][0].append(row["bucket_ms"] / 1000)
            by_partition[row["partition"]][1].append(row["isr_size"])
        end = max(row["bucket_ms"] for row in mine) / 1000 + analysis.bucket_ms / 1000
        lines = []
        for index, (_, (xs, ys)) in enumerate(sorted(by_partition.items())):
            offset = (index - (len(by_partition) - 1) / 2) * 0.06  # so that no line hides another
            lines += axes.step([*xs, end], [y + offset for y in (*ys, ys[-1])], where="post", marker="o")
        sizes = [row["isr_size"] for row in mine] + [row["min_isr_size"] for row in mine]
        axes.set_yticks(integer_ticks(sizes))
        axes.set_ylim(min(sizes) - 0.5, max(sizes) + 0.5)
        axes.set_title(Path(trace).name, fontsize="medium")
        axes.set_xlabel("virtual time (s)")
        # handles and labels given, because a label= starting with "_" (__delay_5s-0) is left out
        axes.legend(
            lines,
            sorted(by_partition),
            fontsize="x-small",
            title="partition",
            title_fontsize="x-small",
            loc="best",
        )
    axes_list[0].set_ylabel("ISR size (replicas)")
    fig.suptitle("ISR size per partition, in the traces whose ISR changed (smallest first)")
    return save(fig, path)


# --- rate and timer ------------------------------------------------------------------------------
def rate_chart(analysis: Analysis, path: Path) -> Path | None:
    rows = analysis.rows("rate")
    if not rows:
        return None
    series: dict[str, tuple[list, list]] = defaultdict(lambda: ([], []))
    for row in rows:
        series[row["op_kind"]][0].append(row["bucket_ms"] / 1000)
        series[row["op_kind"]][1].append(row["created_per_s"])
    fig = figure()
    axes = fig.subplots()
    for kind, (xs, ys) in sorted(series.items()):
        axes.step(xs, ys, where="post", label=kind)
    axes.set_xlabel("virtual time (s)")
    axes.set_ylabel("operations created per second")
    axes.set_title(f"purgatory operations per second ({analysis.bucket_ms} ms buckets, all traces)")
    axes.legend(fontsize="small")
    return save(fig, path)


def timer_note(histogram: list[dict[str, Any]]) -> str | None:
    """The sentence that replaces the chart when every task fired exactly at its expiration."""
    fires = sum(row["fires"] for row in histogram)
    if fires and all(row["delta_ms"] == 0 for row in histogram):
        return f"All {fires:,} tasks fired exactly at their expiration (0 ms late): nothing to chart."
    return None


def timer_chart(analysis: Analysis, path: Path) -> Path | None:
    rows = analysis.rows("timer_precision")
    if not rows or timer_note(rows) is not None:
        return None
    fig = figure(6, 3.5)
    axes = fig.subplots()
    ticks = integer_ticks(row["delta_ms"] for row in rows)
    width = max(0.8, len(ticks) / 150)  # a late fire stays visible on a wide range
    axes.bar([row["delta_ms"] for row in rows], [row["fires"] for row in rows], width=width)
    axes.set_yscale("log")  # on-time fires outnumber late ones by far
    axes.set_ylim(bottom=0.5)  # a single fire still gets a bar
    if len(ticks) <= 20:
        axes.set_xticks(ticks)
    else:
        axes.xaxis.get_major_locator().set_params(integer=True)
    axes.set_xlabel("fire time − expiration (ms)")
    axes.set_ylabel("tasks (log)")
    axes.set_title("timer precision: how late each task fired")
    return save(fig, path)


# --- consumer groups -----------------------------------------------------------------------------
def rebalance_rows(rows: list[dict[str, Any]], limit: int = MAX_REBALANCE_ROWS) -> list[dict[str, Any]]:
    """The groups that completed a rebalance: (label, min, mean, max seconds, note), longest mean first;
    the note counts rebalances, session expiries and (consumer protocol) partition stops."""
    drawn = []
    for row in rows:
        if not row["rebalances"]:
            continue
        note = f"{row['rebalances']} rebalance(s)"
        if row["session_expiries"]:
            note += (
                f", {row['session_expiries']} session expir{'y' if row['session_expiries'] == 1 else 'ies'}"
            )
        if row["partition_stops"]:
            note += f"\n{row['partition_stops']} partition stop(s) ≤ {row['max_stop_ms'] / 1000:g} s"
        label = f"{Path(row['trace']).name} · {row['group']} (broker {row['broker']}, {row['protocol']})"
        seconds = [row[k] / 1000 for k in ("min_ms", "mean_ms", "max_ms")]
        drawn.append({"label": label, "min": seconds[0], "mean": seconds[1], "max": seconds[2], "note": note})
    return sorted(drawn, key=lambda r: (-r["mean"], r["label"]))[:limit]


def rebalance_chart(analysis: Analysis, path: Path) -> Path | None:
    drawn = rebalance_rows(analysis.rows("rebalances"))
    if not drawn:
        return None
    whiskers = [[r["mean"] - r["min"] for r in drawn], [r["max"] - r["mean"] for r in drawn]]
    return _noted_bars(
        drawn,
        [r["mean"] for r in drawn],
        [r["max"] for r in drawn],
        {"xerr": whiskers, "capsize": 4, "color": "tab:blue", "ecolor": "black"},
        ("duration in virtual s: bar = mean, whisker = shortest to longest", 1.9),
        "consumer group rebalances (to Stable: classic and consumer protocols)",
        path,
    )


def _noted_bars(
    drawn: list[dict[str, Any]],
    values: list[float],
    ends: list[float],
    style: dict[str, Any],
    axis: tuple[str, float],
    title: str,
    path: Path,
) -> Path:
    """One horizontal bar per row, the first on top, each row's ``note`` written after its ``end``;
    ``axis`` is the x label and how far past the longest end the axis reaches (a multiple of it)."""
    fig = figure(9, 0.45 * len(drawn) + 1.4)
    axes = fig.subplots()
    ys = list(range(len(drawn)))[::-1]
    axes.barh(ys, values, height=0.6, **style)
    right = max(ends)
    for y, end, row in zip(ys, ends, drawn, strict=True):
        axes.text(end + right * 0.02, y, row["note"], va="center", fontsize="small")
    axes.set_yticks(ys, [r["label"] for r in drawn], fontsize="small")
    axes.set_xlim(0, right * axis[1] or 1)
    axes.set_xlabel(axis[0])
    fig.suptitle(title)
    return save(fig, path)


# --- transactions ------------------------------------------------------------------------------
def lso_lag_rows(rows: list[dict[str, Any]], limit: int = MAX_REBALANCE_ROWS) -> list[dict[str, Any]]:
    """The partitions whose LSO lagged the HW: (label, total seconds, note), the longest total first."""
    drawn = []
    for row in rows:
        note = f"{row['lags']} lag(s), longest {row['max_ms'] / 1000:g} s, {row['max_held']} offsets held"
        if row["open"]:
            note += ", open at the end"
        label = f"{Path(row['trace']).name} · {row['partition']}"
        drawn.append({"label": label, "total": row["total_ms"] / 1000, "note": note})
    return sorted(drawn, key=lambda r: (-r["total"], r["label"]))[:limit]


def lso_lag_chart(analysis: Analysis, path: Path) -> Path | None:
    drawn = lso_lag_rows(analysis.rows("lso_lag"))
    if not drawn:
        return None
    totals = [r["total"] for r in drawn]
    return _noted_bars(
        drawn,
        totals,
        totals,
        {"color": "tab:orange"},
        ("virtual s the last stable offset stood below the HW (READ_COMMITTED readers held back)", 2.2),
        "LSO lag behind the HW, per partition (open transactions)",
        path,
    )
