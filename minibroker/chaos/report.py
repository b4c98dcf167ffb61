"""The chaos report: the same figures on the terminal, in ``DIR/chaos.md`` and per run in ``runs.jsonl``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import attrs

from minibroker.chaos.distribute import RunSummary
from minibroker.chaos.schedule import FAULT_KINDS
from minibroker.chaos.violations import INVARIANTS

COUNTED = (
    "produces",
    "acked",
    "protected",
    "read_back",
    "failed",
    "in_doubt",
    "acks1_lost",
    "unprotected_lost",
)
LABELS = {
    "produces": "produce requests (chaos clients)",
    "acked": "answered NONE",
    "protected": "acks=-1 acknowledged with min ISR >= 2 (must survive)",
    "read_back": "records read back by the reader",
    "failed": "answered with an error",
    "in_doubt": "failed, yet in the log (allowed: Kafka promises nothing)",
    "acks1_lost": "acks=1 acknowledged, then lost (allowed)",
    "unprotected_lost": "acks=-1 with min ISR 1, lost (allowed)",
}

#: the share profile's tallies (``minibroker.chaos.share.ShareTally``), in the records table
SHARE_LABELS = {
    "records": "records produced (below the high watermarks at the end)",
    "acquired": "records acquired (every delivery)",
    "redelivered": "of them redelivered (delivery count > 1)",
    "acknowledged": "acknowledgements (ACCEPT, RELEASE, REJECT)",
    "archived": "records archived (rejected, or at the delivery-count limit)",
    "lock_expiries": "acquisition locks expired",
    "fetch_expiries": "DelayedShareFetches that waited their max wait",
}


@attrs.define
class Shrunk:
    run: str
    violation: str
    path: str
    faults: int
    produces: int
    runs_spent: int
    replay_fails: bool


@attrs.define
class ChaosReport:
    profile: str
    seed: int
    duration_ms: int
    where: str  # "2 workers" or "Spark local[2]"
    wall_s: float
    summaries: list[RunSummary]
    shrunk: list[Shrunk] = attrs.Factory(list)

    @property
    def violations(self) -> int:
        return sum(len(s.violations) for s in self.summaries)

    @property
    def failed_runs(self) -> int:
        return sum(1 for s in self.summaries if s.violations)

    def total(self, key: str) -> int:
        return sum(s.row[key] for s in self.summaries)

    def by_invariant(self) -> Counter[int]:
        return Counter(v.invariant for s in self.summaries for v in s.violations)

    def expected_by_invariant(self) -> Counter[int]:
        return Counter(v.invariant for s in self.summaries for v in s.expected)

    def rates(self) -> tuple[float, float, float]:
        """(runs per CPU-minute, client requests per CPU-second, network messages per CPU-second)."""
        cpu_s = max(1e-9, self.total("cpu_ms") / 1000)
        return (
            len(self.summaries) / cpu_s * 60,
            self.total("requests") / cpu_s,
            self.total("messages") / cpu_s,
        )

    def sections(self) -> list[tuple[str, list[str], list[list[Any]]]]:
        """(title, header, rows) of every table, for both renderers."""
        runs_per_min, requests_s, messages_s = self.rates()
        overview = [
            ["profile", self.profile],
            ["seed", self.seed],
            ["runs", len(self.summaries)],
            ["faults/load window", f"{self.duration_ms} ms virtual per run"],
            ["ran on", self.where],
            ["wall time", f"{self.wall_s:.1f} s"],
            ["runs with violations", self.failed_runs],
            ["violations", self.violations],
            ["expected by the profile", sum(len(s.expected) for s in self.summaries)],
            ["runs with group members", sum(bool(s.row.get("members")) for s in self.summaries)],
            ["group offset commits written", self.total("commits")],
            ["runs per CPU-minute", f"{runs_per_min:.1f}"],
            ["client requests per CPU-second", f"{requests_s:.0f}"],
            ["network messages per CPU-second", f"{messages_s:.0f}"],
        ]
        faults = [[kind, self.total(f"fault_{kind}")] for kind in FAULT_KINDS]
        faults.append(["of them on a link to the controller", self.total("controller_faults")])
        operations = [
            ["client requests", self.total("requests")],
            ["network messages", self.total("messages")],
            ["trace events checked", self.total("events")],
            ["virtual time", f"{self.total('virtual_ms') / 1000:.1f} s"],
        ]
        records = [[LABELS[key], self.total(key)] for key in COUNTED]
        if self.summaries and "share_acquired" in self.summaries[0].row:  # the share profile's runs
            records = [[label, self.total(f"share_{key}")] for key, label in SHARE_LABELS.items()]
        found = self.by_invariant()
        expected = self.expected_by_invariant()
        invariants = [
            [n, INVARIANTS.get(n, "the emulator raised"), found.get(n, 0), expected.get(n, 0)]
            for n in sorted(set(INVARIANTS) | set(found))
        ]
        listed = [[s.row["run"], v.line()] for s in self.summaries for v in (*s.violations, *s.expected)][:30]
        shrunk = [
            [s.run, s.path, s.faults, s.produces, s.runs_spent, "fails" if s.replay_fails else "PASSES"]
            for s in self.shrunk
        ]
        slowest = sorted(self.summaries, key=lambda s: -s.row["wall_ms"])[:5]
        slow = [
            [
                s.row["run"],
                s.row["wall_ms"],
                s.row["cpu_ms"],
                s.row["faults"],
                s.row["requests"],
                s.row["events"],
            ]
            for s in slowest
        ]
        return [
            ("chaos", ["", ""], overview),
            ("faults by kind", ["fault", "count"], faults),
            ("operations", ["what", "count"], operations),
            ("records", ["what", "count"], records),
            ("violations by invariant", ["#", "invariant", "violations", "expected by profile"], invariants),
            ("violations (first 30)", ["run", "violation"], listed),
            (
                "shrunk scenarios",
                ["run", "file", "faults", "produces", "runs spent", "minibroker run"],
                shrunk,
            ),
            ("slowest runs", ["run", "wall ms", "cpu ms", "faults", "requests", "events"], slow),
        ]


def print_report(report: ChaosReport, console: Any) -> None:
    from rich.table import Table

    for title, header, rows in report.sections():
        if not rows:
            continue
        table = Table(title=title, title_justify="left", show_header=any(header))
        for name in header:
            table.add_column(name)
        for row in rows:
            table.add_row(*(str(cell) for cell in row))
        console.print(table)


def write_markdown(report: ChaosReport, path: Path, command: str) -> None:
    lines = ["# minibroker chaos report", "", f"Command: `{command}`", ""]
    for title, header, rows in report.sections():
        lines += [f"## {title}", ""]
        if not rows:
            lines += ["(none)", ""]
            continue
        cells = header if any(header) else ["", ""]
        lines.append("| " + " | ".join(cells) + " |")
        lines.append("|" + "---|" * len(cells))
        for row in rows:
            lines.append("| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |")
        lines.append("")
    lines += [
        "Timed-out acks=-1 requests may or may not be in the log: Kafka promises nothing about them, "
        "so they are counted as *in doubt*, never as violations.",
        "",
    ]
    path.write_text("\n".join(lines), encoding="utf-8")


def write_runs(report: ChaosReport, path: Path) -> None:
    """One JSON object per run, in run order, with the columns of the first row: a table that pandas,
    DuckDB, Spark and jq read, written with the standard library only."""
    rows = [s.row for s in sorted(report.summaries, key=lambda s: s.index)]
    columns = list(rows[0]) if rows else ["index"]
    with path.open("w", encoding="utf-8") as out:
        for row in rows:
            out.write(json.dumps({name: row.get(name) for name in columns}, separators=(",", ":")) + "\n")
