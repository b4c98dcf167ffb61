"""Rendering a scenario run: the rich summary on the terminal and the JSON summary for machines.

Text that comes from the scenario (its name and description, client and request ids,
topics, expected values) is printed as plain ``Text``: never parsed as rich markup (a
``[/x]`` in an id would be a MarkupError) nor run through rich's repr highlighter, whose
regular expressions take quadratic time on a long run of word characters (a 100 KB
description took 39 s to print).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from minibroker.clients import ClientRequest
from minibroker.scenario import RunResult

#: requests shown one by one; the rest (load generators) are summarised per group
MAX_LISTED = 40


def _errors(request: ClientRequest) -> str:
    values = sorted(set(request.errors.values()))
    return ",".join(values) if values else "-"


def _percentile(values: list[int], q: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def request_groups(result: RunResult) -> tuple[list[ClientRequest], dict[str, list[ClientRequest]]]:
    """Requests to list one by one (named, or all of a small run), and the rest grouped by label."""
    requests = result.requests
    if len(requests) <= MAX_LISTED:
        return requests, {}
    listed = [
        r
        for r in requests
        if r.label is not None and r.label in result.named and len(result.named[r.label]) <= 3
    ]
    grouped: dict[str, list[ClientRequest]] = defaultdict(list)
    listed_ids = {id(r) for r in listed}
    for request in requests:
        if id(request) not in listed_ids:
            grouped[request.label or f"{request.client} {request.kind}"].append(request)
    return listed, dict(grouped)


def _plain(text: str) -> Text:
    """Scenario text as it is: no markup, no highlighting."""
    return Text(text)


def render(result: RunResult, console: Console) -> None:
    scenario = result.scenario
    console.print(
        Text.assemble(
            (scenario.name, "bold"),
            " — ",
            scenario.description,
            f"\nseed {result.seed}, {len(result.requests):,} requests, "
            f"ended at {result.end_ms:,} ms (virtual)",
            f", {result.trace_events:,} trace events" if result.trace_events else "",
        )
    )
    listed, grouped = request_groups(result)
    if listed:
        table = Table(title="requests", title_justify="left")
        for column in (
            "request",
            "client",
            "kind",
            "broker",
            "created",
            "completed",
            "latency",
            "cause",
            "error",
        ):
            table.add_column(
                column, justify="right" if column in ("broker", "created", "completed", "latency") else "left"
            )
        for r in listed:
            table.add_row(
                _plain(r.label or r.id),
                _plain(r.client),
                r.kind,
                str(r.broker),
                f"{r.created_ms}",
                "-" if r.completed_ms is None else f"{r.completed_ms}",
                "-" if r.latency_ms is None else f"{r.latency_ms}",
                r.cause or "-",
                _errors(r),
            )
        console.print(table)
    if grouped:
        table = Table(title="request groups", title_justify="left")
        for column in ("group", "kind", "requests", "causes", "errors", "p50 ms", "p99 ms", "max ms"):
            table.add_column(column)
        for label, requests in grouped.items():
            latencies = [r.latency_ms for r in requests if r.latency_ms is not None]
            causes = Counter(r.cause or "pending" for r in requests)
            errors = Counter(_errors(r) for r in requests)
            table.add_row(
                _plain(label),
                requests[0].kind,
                f"{len(requests):,}",
                " ".join(f"{k} {v:,}" for k, v in sorted(causes.items())),
                " ".join(f"{k} {v:,}" for k, v in sorted(errors.items())),
                str(_percentile(latencies, 0.5)),
                str(_percentile(latencies, 0.99)),
                str(max(latencies, default=None)),
            )
        console.print(table)
    partitions = Table(title="partitions at the end", title_justify="left")
    for column in ("partition", "leader", "epoch", "isr", "replicas (broker: LEO/HW)"):
        partitions.add_column(column)
    for view in result.final.partitions:
        replicas = "  ".join(
            f"{r.broker}: {r.log_end_offset}/{r.high_watermark}"
            + ("" if r.alive else " down")
            + (" paused" if r.fetcher_paused else "")
            for r in view.replicas
        )
        isr = ",".join(map(str, view.isr)) + (
            f" (pending {','.join(map(str, view.pending_isr))})" if view.pending_isr else ""
        )
        partitions.add_row(_plain(view.partition), str(view.leader), str(view.leader_epoch), isr, replicas)
    console.print(partitions)
    purgatories = Table(
        title="purgatories (totals over the run; watched / delayed operations now)", title_justify="left"
    )
    for column in ("broker", "purgatory", "completed", "expired", "purges", "purged", "watched", "delayed"):
        purgatories.add_column(column, justify="left" if column in ("broker", "purgatory") else "right")
    timers = Table(title="timers now", title_justify="left")
    for column in (
        "broker",
        "timer",
        "armed",
        "levels (tick ms @ current time)",
        "next buckets (ms×entries)",
    ):
        timers.add_column(column)
    for view in result.final.brokers:
        totals = result.purgatory_totals[view.broker]
        live = {p.name: p for p in view.purgatories}
        extra = [
            name
            for name in [*totals, *live]
            if name not in ("Produce", "Fetch", "DeleteRecords", "ElectLeader")
        ]
        for name in ("Produce", "Fetch", "DeleteRecords", "ElectLeader", *dict.fromkeys(extra)):
            figures = totals.get(name, {})
            current = live.get(name)
            purgatories.add_row(
                str(view.broker),
                name,
                f"{figures.get('completions', 0):,}",
                f"{figures.get('expirations', 0):,}",
                f"{figures.get('purges', 0):,}",
                f"{figures.get('purged', 0):,}",
                "-" if current is None else f"{current.watched:,}",
                "-" if current is None else f"{current.num_delayed:,}",
            )
        timer = view.timer
        if timer is None:
            timers.add_row(str(view.broker), "down", "", "", "")
            continue
        levels = " ".join(f"{level.tick_ms}@{level.current_time}" for level in timer.levels)
        head = " ".join(f"{expiration}×{size}" for expiration, size in timer.queue_head[:4])
        timers.add_row(str(view.broker), timer.kind, str(timer.size), levels, head or "-")
    console.print(purgatories)
    console.print(timers)
    if result.results:
        table = Table(title="expectations", title_justify="left")
        for column in ("", "expectation", "expected", "seen"):
            table.add_column(column)
        for item in result.results:
            mark = "[green]pass[/]" if item.passed else "[bold red]FAIL[/]"
            table.add_row(mark, _plain(item.where), _plain(item.expected), _plain(item.seen))
        console.print(table)
        failed = sum(1 for item in result.results if not item.passed)
        verdict = (
            "[green]all expectations hold[/]"
            if not failed
            else f"[bold red]{failed} expectation(s) failed[/]"
        )
        console.print(verdict)


def as_json(result: RunResult) -> dict[str, Any]:
    """The run as plain JSON-ready data."""

    def request(r: ClientRequest) -> dict[str, Any]:
        return {
            "id": r.id,
            "label": r.label,
            "client": r.client,
            "kind": r.kind,
            "broker": r.broker,
            "created_ms": r.created_ms,
            "completed_ms": r.completed_ms,
            "cause": r.cause,
            "errors": r.errors,
            "base_offsets": r.base_offsets,
            "records": r.records,
        }

    listed, grouped = request_groups(result)
    return {
        "scenario": result.scenario.name,
        "path": result.scenario.path,
        "seed": result.seed,
        "end_ms": result.end_ms,
        "passed": result.passed,
        "requests": [request(r) for r in listed],
        "request_groups": {
            label: {
                "requests": len(group),
                "causes": dict(Counter(r.cause or "pending" for r in group)),
                "errors": dict(Counter(_errors(r) for r in group)),
                "latency_p50_ms": _percentile([r.latency_ms for r in group if r.latency_ms is not None], 0.5),
                "latency_p99_ms": _percentile(
                    [r.latency_ms for r in group if r.latency_ms is not None], 0.99
                ),
            }
            for label, group in grouped.items()
        },
        "partitions": [
            {
                "partition": v.partition,
                "leader": v.leader,
                "epoch": v.leader_epoch,
                "isr": list(v.isr),
                "replicas": [
                    {"broker": r.broker, "leo": r.log_end_offset, "hw": r.high_watermark, "alive": r.alive}
                    for r in v.replicas
                ],
            }
            for v in result.final.partitions
        ],
        "purgatories": {str(b): figures for b, figures in result.purgatory_totals.items()},
        "expectations": [
            {"where": r.where, "expected": r.expected, "seen": r.seen, "passed": r.passed}
            for r in result.results
        ],
        "trace_events": result.trace_events,
    }
