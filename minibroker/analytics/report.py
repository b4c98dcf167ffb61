"""Reports: Markdown with PNG charts (matplotlib, no display needed) for analyze and sweep.

The Markdown and the charts depend only on the collected tables, never on the
clock or the machine, so the same traces give the same report. Charts use
matplotlib's object API (``Figure``), not pyplot: no global state, no GUI backend.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from minibroker.analytics.charts import (
    figure,
    hw_chart,
    isr_chart,
    latency_chart,
    lso_lag_chart,
    purgatory_chart,
    rate_chart,
    rebalance_chart,
    save,
    timer_chart,
    timer_note,
)
from minibroker.analytics.drawing import draw

if TYPE_CHECKING:
    from minibroker.analytics.analyze import Analysis
    from minibroker.analytics.sweepfile import Heatmap, Sweep

MAX_ROWS = 50


def _cell(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("|", "\\|")


def skipped_rows(skipped: list[dict[str, Any]]) -> list[str]:
    """The report's lines on rows ``analyze`` skipped (none when every row was a valid event)."""
    if not skipped:
        return []
    intro = "Rows skipped, by reason (docs/pipeline.md), with the first one's place:"
    return ["", intro, "", markdown_table(skipped, ["trace", "problem", "rows", "first"])]


def markdown_table(rows: Sequence[dict[str, Any]], columns: Sequence[str], limit: int = MAX_ROWS) -> str:
    """A GitHub Markdown table of ``rows`` (at most ``limit``, then a line saying how many more)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows[:limit]:
        lines.append("| " + " | ".join(_cell(row.get(column)) for column in columns) + " |")
    if len(rows) > limit:
        lines.append(f"\n… and {len(rows) - limit:,} more rows (see the Parquet table).")
    return "\n".join(lines)


# --- the analyze report ---------------------------------------------------------------------------
def analysis_report(analysis: Analysis, out: Path, command: str) -> Path:
    """``out/report.md`` and its charts; returns the report's path."""
    charts = draw(
        analysis,
        {
            "latency": (latency_chart, out / "latency.png"),
            "rate": (rate_chart, out / "rate.png"),
            "timer": (timer_chart, out / "timer_precision.png"),
            "purgatory": (purgatory_chart, out / "purgatory_size.png"),
            "hw": (hw_chart, out / "hw.png"),
            "isr": (isr_chart, out / "isr.png"),
            "rebalances": (rebalance_chart, out / "rebalances.png"),
            "lso_lag": (lso_lag_chart, out / "lso_lag.png"),
        },
    )

    def image(name: str, alt: str, instead: str | None = None) -> str:
        chart = charts[name]
        if chart is not None:
            return f"![{alt}]({chart.name})"
        return instead or f"_(no data for {alt})_"

    traces = analysis.rows("traces")
    timer = analysis.timer_summary()
    audit = analysis.rows("audit")
    lines = [
        "# minibroker trace analysis",
        "",
        f"`{command}`",
        "",
        f"{len(traces):,} trace(s), {analysis.events:,} events, {analysis.bucket_ms} ms buckets.",
        "",
        "## Traces",
        "",
        markdown_table(traces, ["trace", "events", "skipped", "start_ms", "end_ms", "has_expire"]),
        *skipped_rows(analysis.rows("skipped")),
        "",
        "## Operations",
        "",
        "Per purgatory and operation kind: operations by status (completed, cancelled, crashed, waiting "
        "at the end, lost) and by the cause of their first completion; expiry rate = expiry / completed.",
        "",
        markdown_table(
            analysis.rows("operations"),
            [
                "purgatory",
                "op_kind",
                "created",
                "completed",
                "condition",
                "expiry",
                "leadership",
                "waiting",
                "crashed",
                "cancelled",
                "lost",
                "expiry_rate",
            ],
        ),
        "",
        "## Completion latency (ms)",
        "",
        "`op.complete` − `op.create` of each operation's first completion; nearest-rank percentiles.",
        "",
        markdown_table(
            analysis.rows("latency"),
            ["purgatory", "op_kind", "cause", "count", "p50", "p90", "p99", "p999", "max", "mean"],
        ),
        "",
        image("latency", "completion latency"),
        "",
        "## Requests per second",
        "",
        image("rate", "operations per second"),
        "",
        "## Exactly-once audit",
        "",
    ]
    if analysis.audit_total == 0:
        lines.append(
            "No problem: every operation completed exactly once, or was still waiting, cancelled "
            "or on a crashed broker when its trace ended."
        )
    else:
        counts = ", ".join(
            f"{problem}: {count:,}" for problem, count in sorted(analysis.audit_counts().items())
        )
        lines += [
            f"**{analysis.audit_total:,} problem(s)** ({counts}).",
            "",
            markdown_table(
                audit,
                [
                    "trace",
                    "broker",
                    "purgatory",
                    "op_kind",
                    "op",
                    "created_ms",
                    "deadline_ms",
                    "completions",
                    "expirations",
                    "problem",
                ],
            ),
        ]
    lines += ["", "## Timer precision", ""]
    if timer["fires"]:
        lines.append(
            f"{timer['fires']:,} tasks fired; fire time − expiration: min {timer['min']} ms, "
            f"p50 {timer['p50']} ms, p99 {timer['p99']} ms, max {timer['max']} ms, "
            f"mean {timer['mean']:.3f} ms."
        )
    else:
        lines.append("No `timer.fire` event.")
    lines += [
        "",
        image("timer", "timer precision", timer_note(analysis.rows("timer_precision"))),
        "",
        "## Purgatory size",
        "",
        "Operations waiting per broker and purgatory, summed over traces: the shaded area is the most "
        "waiting at any moment of a bucket (`max_waiting`), the line the level at its end (`waiting`); "
        "crosses: PurgatorySize (`watched`) when a purge ran.",
        "",
        image("purgatory", "purgatory size"),
        "",
        "## High watermark and ISR",
        "",
        "The HW chart shows the trace with the most HW moves, one panel per partition; the ISR chart "
        "the traces whose ISR changed (shrinks first), lines offset a little so none hides another. "
        "The tables hold every trace.",
        "",
        image("hw", "high watermark"),
        "",
        image("isr", "ISR size"),
        "",
    ]
    rebalances = analysis.rows("rebalances")
    if rebalances:  # consumer groups: rebalance durations and session expiries per group
        columns = ["trace", "broker", "group", "protocol", "rebalances", "min_ms", "mean_ms", "max_ms"]
        columns += ["session_expiries", "partition_stops", "max_stop_ms"]
        chart = image("rebalances", "rebalance durations", "_(no group completed a rebalance)_")
        lines += ["## Consumer group rebalances", "", markdown_table(rebalances, columns), "", chart, ""]
    txns, lags = analysis.rows("transactions"), analysis.rows("lso_lag")
    if txns or lags:  # transactions: outcome and latency of each, how long each partition's LSO lagged
        columns = ["trace", "txn", "transaction", "begin_ms", "end_ms", "complete_ms", "outcome"]
        columns += ["latency_ms", "marker_ms"]
        lag_columns = ["trace", "partition", "lags", "total_ms", "max_ms", "max_held", "open"]
        lines += [
            "## Transactions",
            "",
            "Latency from the end (EndTxn, or the timeout's or a fencing InitProducerId's abort) to "
            "CompleteCommit/CompleteAbort; marker_ms from the first marker sent to it:",
            "",
            markdown_table(txns, columns),
            "",
            "Time the last stable offset lagged the HW (READ_COMMITTED readers held back), per partition:",
            "",
            markdown_table(lags, lag_columns) if lags else "_(the LSO never lagged the HW)_",
            "",
            image("lso_lag", "LSO lag behind the HW", "_(the LSO never lagged the HW)_") if lags else "",
            "",
        ]
    retried = analysis.rows("retry_dlt")
    if retried:  # retrying consumers: outcomes, time to the DLT, attempts per record
        columns = ["trace", "client", "records", "processed", "dead", "pending", "p50_ms", "p99_ms", "max_ms"]
        attempts = ["trace", "client", "outcome", "attempts", "records"]
        lines += [
            "## Retries",
            "",
            "Time to the DLT (ms, from a record's first delivery to its dead-lettering):",
            "",
            markdown_table(retried, columns),
            "",
            "Attempts (deliveries) per record, by outcome:",
            "",
            markdown_table(analysis.rows("retry_attempts"), attempts),
            "",
        ]
    lateness = analysis.rows("delay_lateness")
    if lateness:  # delayed messages: how late each design delivered, after the due time
        columns = ["design", "delivered", "p50_ms", "p99_ms", "max_ms"]
        lines += ["## Delayed messages: delivery lateness", "", markdown_table(lateness, columns), ""]
    shared = analysis.rows("share_groups")
    if shared:  # share groups: deliveries, lock expiries, archives, produce-to-accept time per partition
        columns = ["trace", "group", "partition", "acquired", "redelivered", "lock_expiries", "accepted"]
        columns += ["rejected", "at_limit", "p50_ms", "p99_ms"]
        lines += [
            "## Share groups",
            "",
            "Records per share group and partition (p50_ms, p99_ms: from produce to ACCEPT):",
            "",
            markdown_table(shared, columns),
            "",
        ]
    lines += [
        "## Tables",
        "",
    ]
    for name, table in analysis.tables.items():
        lines.append(
            f"- `{name}.parquet`: {len(table.rows):,} rows; " + ", ".join(c for c, _ in table.columns)
        )
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- the sweep report -----------------------------------------------------------------------------
def heatmap_grid(rows: list[dict[str, Any]], heatmap: Heatmap) -> tuple[list, list, list[list[float | None]]]:
    """(x values, y values, mean of the metric per cell) over the rows matching ``where``."""
    cells: dict[tuple[Any, Any], list[float]] = defaultdict(list)
    xs: dict[Any, None] = {}
    ys: dict[Any, None] = {}
    for row in rows:
        if any(row[key] != value for key, value in heatmap.where):
            continue
        xs[row[heatmap.x]] = None
        ys[row[heatmap.y]] = None
        if row[heatmap.metric] is not None:
            cells[(row[heatmap.x], row[heatmap.y])].append(float(row[heatmap.metric]))
    x_values, y_values = sorted(xs), sorted(ys)
    grid = [
        [sum(cells[(x, y)]) / len(cells[(x, y)]) if cells[(x, y)] else None for x in x_values]
        for y in y_values
    ]
    return x_values, y_values, grid


def heatmap_chart(rows: list[dict[str, Any]], heatmap: Heatmap, path: Path) -> Path:
    x_values, y_values, grid = heatmap_grid(rows, heatmap)
    fig = figure(1.6 + 1.1 * max(3, len(x_values)), 1.4 + 0.6 * max(3, len(y_values)))
    axes = fig.subplots()
    values = [[float("nan") if v is None else v for v in line] for line in grid]
    image = axes.imshow(values, origin="lower", aspect="auto", cmap="viridis")
    axes.set_xticks(range(len(x_values)), [str(v) for v in x_values])
    axes.set_yticks(range(len(y_values)), [str(v) for v in y_values])
    axes.set_xlabel(heatmap.x)
    axes.set_ylabel(heatmap.y)
    where = ", ".join(f"{k} = {v}" for k, v in heatmap.where)
    axes.set_title(
        f"{heatmap.metric}" + (f" ({where})" if where else " (mean over the other axes and seeds)")
    )
    finite = [v for line in grid for v in line if v is not None]
    middle = (min(finite) + max(finite)) / 2 if finite else 0
    for j, line in enumerate(grid):
        for i, value in enumerate(line):
            if value is not None:
                axes.text(
                    i,
                    j,
                    f"{value:.3g}",
                    ha="center",
                    va="center",
                    fontsize="small",
                    color="black" if value > middle else "white",
                )
    fig.colorbar(image, ax=axes)
    return save(fig, path)


def heatmap_name(index: int, heatmap: Heatmap) -> str:
    safe = "".join(c if c.isalnum() else "_" for c in f"{heatmap.metric}_{heatmap.x}_{heatmap.y}")
    return f"heatmap-{index}-{safe}.png"


def sweep_report(
    sweep: Sweep, rows: list[dict[str, Any]], columns: list[str], out: Path, command: str
) -> Path:
    """``out/sweep.md`` with one heatmap per ``[[heatmaps]]``; returns the report's path."""
    lines = [
        f"# sweep {sweep.name}",
        "",
        f"`{command}`",
        "",
        sweep.description or "",
        "",
        f"Base scenario: `{sweep.scenario.path}`; {len(rows)} variants = "
        + " × ".join(f"{axis.name} ({len(axis.values)})" for axis in sweep.axes)
        + f" × seeds ({len(sweep.seeds)}).",
        "",
    ]
    for index, heatmap in enumerate(sweep.heatmaps):
        chart = heatmap_chart(rows, heatmap, out / heatmap_name(index, heatmap))
        lines += [
            f"## {heatmap.metric} over {heatmap.x} × {heatmap.y}",
            "",
            f"![{heatmap.metric}]({chart.name})",
            "",
        ]
    shown = [c for c in columns if c not in ("trace", "wall_ms")]
    lines += ["## Variants", "", markdown_table(rows, shown, limit=500), ""]
    path = out / "sweep.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
