"""Write docs/benchmarks.md from the benchmark tools' own ``--json`` output.

Usage::

    python tools/benchmarks_page.py run NAME -- python tools/timer_bench.py --quick --json
    python tools/benchmarks_page.py write            # docs/benchmarks.md from docs/benchmarks/*.json
    python tools/benchmarks_page.py write --check    # exit 1 if docs/benchmarks.md differs

``run`` runs one tool command (which must print one JSON document on stdout) and saves it to
docs/benchmarks/NAME.json with the command, the machine's cores and its load average just before and
just after. ``write`` renders one table per saved run: the tool's headline ratios first (figures from
one run of one command, so they compare), then its rows with the machine facts beside them. A run
with ``--baseline REV`` (``tools/bench_baseline.py``) keeps its ``baseline`` section beside the
result, and the page shows it: this tree ÷ REV per figure with the pairs' range, and the machine's
load before and after the pairs. Tools not saved are named with their command and no figures.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "benchmarks"
PAGE = ROOT / "docs" / "benchmarks.md"

INTRO = """\
Written by `python tools/benchmarks_page.py write` from the tools' own `--json` output saved in
[benchmarks/](benchmarks/) (`python tools/benchmarks_page.py run NAME -- COMMAND` saves one). Every figure
comes from one run of the command shown; the headline figures are ratios within one run, which hold on a
shared machine where absolute figures move from one minute to the next. Most runs are small ones, each
well under two minutes (the chaos runs of 2,000 schedules take longer); the tools' default sizes give
steadier figures."""

METHOD = """## Method

Every tool prints its figures as one JSON document with `--json`, and compares this tree with an
earlier revision with `--baseline REV --pairs N`: it takes REV's files (`git archive`), runs the same
tool command from there and from this tree with the same interpreter, N pairs in alternating order
(REV first in the first pair, this tree first in the second, ...), and reports this tree ÷ REV per
figure, total against total, with the pairs' lowest and highest ratio. Each tool declares the figures
it compares and whether lower or higher is better (`FIGURES` in the tool); the whole command's wall
time (`command_s`) is compared too. The result also carries the machine's load (1, 5 and 15
minute averages) before and after the pairs and the CPUs it may use, since a shared machine's speed
moves within minutes: a ratio measured in alternating pairs holds across such spells where absolute
figures do not. A figure the older revision does not report is named and left out.

```sh
python tools/emulator_bench.py --quick --baseline HEAD~10 --pairs 3
python tools/benchmarks_page.py run emulator_bench -- python tools/emulator_bench.py --baseline main --json
```

To see where the time goes, see [profiling.md](profiling.md)."""

# tool -> the command shown for a tool without a saved result (default: ``python tools/NAME.py --json``)
COMMANDS = {
    "spark_floor": "python tools/spark_floor.py --events 200000 --json",
    "delay_bench_serve": "python tools/delay_bench.py --serve --rate 5000 --seconds 10 --json",
    "chaos_bench_transactions": (
        "python tools/chaos_bench.py --runs 2000 --profile transactions --workers 2 --json"
    ),
    "chaos_bench_transactions_v2": (
        "python tools/chaos_bench.py --runs 2000 --profile transactions-v2 --workers 2 --json"
    ),
    "chaos_bench_consumer_protocol": (
        "python tools/chaos_bench.py --runs 2000 --profile consumer-protocol --duration-ms 600"
        " --workers 2 --json"
    ),
}


def _load() -> tuple[float, float, float]:
    one, five, fifteen = os.getloadavg()
    return round(one, 2), round(five, 2), round(fifteen, 2)


def run(name: str, command: list[str]) -> Path:
    """Run ``command``, parse its stdout as JSON and save it with the machine facts."""
    argv = [sys.executable, *command[1:]] if command[0] == "python" else command
    before = _load()
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    after = _load()
    if done.returncode != 0:
        sys.exit(
            f"benchmarks_page: {shlex.join(command)} exited {done.returncode}: {done.stderr.strip()[-300:]}"
        )
    try:
        # the checkout's own path says nothing about the run and differs on every machine
        result = json.loads(done.stdout.replace(str(ROOT) + "/", "").replace(str(ROOT), "."))
    except json.JSONDecodeError as exc:
        sys.exit(f"benchmarks_page: {shlex.join(command)} printed no JSON document ({exc})")
    record = {
        "command": shlex.join(command),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_before": before,
        "load_after": after,
        "result": result,
    }
    if isinstance(result, dict) and isinstance(result.get("baseline"), dict):
        record["baseline"] = result.pop("baseline")
        if set(result) == {"rows"}:  # a tool whose document is a list: bench_baseline wrapped it
            record["result"] = result["rows"]
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


# ---------------------------------------------------------------------------------------------------
# One function per tool: (headline ratios, table header, table rows) from the tool's own JSON.


def _x(value: float) -> str:
    return f"{value:.2f}"


def _timer_bench(r):
    heads, rows = [], []
    for name, w in r["workloads"].items():
        res = w["results"]
        heads.append(
            (f"timer {name} ({w['name']}): SystemTimer ÷ heap, time per operation", _x(w["kafka_vs_heap"]))
        )
        rows.append(
            [
                f"{name} {w['name']}",
                f"{w['ops']:,}",
                f"{res['kafka']['ns_per_op']:,.0f}",
                f"{res['heap']['ns_per_op']:,.0f}",
                f"{res['hashed']['ns_per_op']:,.0f}",
                _x(w["kafka_vs_heap"]),
                _x(res["hashed"]["vs_heap"]),
                "yes" if w["fired_agree"] else "NO",
            ]
        )
    header = [
        "workload",
        "operations",
        "kafka ns/op",
        "heap ns/op",
        "hashed ns/op",
        "kafka ÷ heap",
        "hashed ÷ heap",
        "same tasks fired",
    ]
    return heads, header, rows


def _purgatory_perf(r):
    runs = {run["timer"]: run for run in r["runs"]}
    heads = [
        (
            "purgatory: actual ÷ target request rate (SystemTimer)",
            _x(runs["kafka"]["actual_rate"] / runs["kafka"]["target_rate"]),
        )
    ]
    if "heap" in runs:
        heads.append(
            (
                "purgatory: SystemTimer ÷ heap, CPU per request",
                _x(runs["kafka"]["cpu_us_per_req"] / runs["heap"]["cpu_us_per_req"]),
            )
        )
    header = [
        "timer",
        "target req/s",
        "actual req/s",
        "CPU µs/req",
        "lateness p50 / p99 / max (ms)",
        "keeps up",
    ]
    rows = [
        [
            t,
            f"{x['target_rate']:,.0f}",
            f"{x['actual_rate']:,.0f}",
            f"{x['cpu_us_per_req']}",
            f"{x['late_p50_ms']:.1f} / {x['late_p99_ms']:.1f} / {x['late_max_ms']:.1f}",
            "yes" if x["keeps_up"] else "no",
        ]
        for t, x in runs.items()
    ]
    return heads, header, rows


def _emulator_bench(r):
    target = r["target"]["per_cpu_s"]
    heads = [("emulator: simulated produce requests per CPU second ÷ target", _x(r["per_cpu_s"] / target))]
    p = r["produce"]
    header = [
        "produce requests",
        "per CPU s",
        "target per CPU s",
        "latency p50 / p99 (virtual ms)",
        "records consumed",
    ]
    rows = [
        [
            f"{p['completed']:,}",
            f"{r['per_cpu_s']:,.0f}",
            f"{target:,}",
            f"{p['latency_ms']['p50']} / {p['latency_ms']['p99']}",
            f"{r['consumers']['records_consumed']:,}",
        ]
    ]
    return heads, header, rows


def _group_bench(r):
    heads = []
    if r.get("wire"):
        w = r["wire"]
        heads.append(
            (
                f"groups ({w['client']}): a killed member's partition taken over ÷ session.timeout.ms",
                _x(w["kill_to_takeover_ms"] / w["session_timeout_ms"]),
            )
        )
    header = [
        "protocol",
        "members",
        "Stable at (virtual ms)",
        "rebalance after one leaves (virtual ms)",
        "CPU ms to Stable",
        "CPU ms per rebalance",
    ]
    rows = [
        [
            name,
            v["members"],
            f"{v['stable_ms']:,}",
            f"{v['rebalance_ms']:,}" if v["members"] > 1 else "— (the group empties)",
            v["cpu_ms_to_stable"],
            v["cpu_ms_per_rebalance"] if v["members"] > 1 else "—",
        ]
        for name, key in (("classic", "virtual"), ("consumer (KIP-848)", "consumer"))
        for v in r.get(key) or ()
    ]
    largest = max(r.get("consumer_over_classic") or (), key=lambda x: x["members"], default=None)
    for ratio in (largest,) if largest is not None else ():
        if ratio["members"] > 1 and ratio["cpu_per_rebalance"] is not None:
            heads.append(
                (
                    f"groups of {ratio['members']:,}: CPU per rebalance, consumer protocol ÷ classic",
                    _x(ratio["cpu_per_rebalance"]),
                )
            )
    return heads, header, rows


def _delay_bench(r):
    wheel = [x for x in r if x["design"] == "wheel"]
    heads = (
        [
            (
                "delayed messages: file wheel's latest delivery ÷ its tick (1000 ms)",
                _x(max(x["lateness_max_ms"] for x in wheel) / 1000),
            )
        ]
        if wheel
        else []
    )
    header = ["design", "messages", "lateness p50 / p99 / max (ms)", "CPU µs per message", "peak KiB"]
    rows = [
        [
            x["design"],
            f"{x['count']:,}",
            f"{x['lateness_p50_ms']:,} / {x['lateness_p99_ms']:,} / {x['lateness_max_ms']:,}",
            x["cpu_us_per_message"],
            f"{x['peak_kib']:,}",
        ]
        for x in r
    ]
    return heads, header, rows


def _delay_bench_serve(r):
    heads = [
        (
            f"delayed messages through serve, {x['design']} at {x['rate']:,} msg/s: lateness p99 ÷ "
            f"(tick + 100 ms)",
            _x(x["lateness_p99_ms"] / (x["tick_ms"] + 100)),
        )
        for x in r
        if x["lateness_p99_ms"] is not None
    ]
    header = [
        "design",
        "msg/s asked / sent / delivered",
        "lateness p50 / p99 / max (ms)",
        "delivered / duplicates",
        "serve CPU µs per message",
        "bytes per held / delivered message",
        "delay topic's log start / end after",
    ]
    rows = [
        [
            x["design"],
            f"{x['rate']:,} / {x['sent_per_s']:,} / {x['delivered_per_s'] or 0:,}",
            f"{x['lateness_p50_ms']:,} / {x['lateness_p99_ms']:,} / {x['lateness_max_ms']:,}",
            f"{x['delivered']:,} of {x['count']:,} / {x['duplicates']}",
            x["server_cpu_us_per_message"],
            f"{x['bytes_per_held_message']:,} / {x.get('bytes_per_delivered_message', '—')} ({x['held']:,} "
            f"held, serve idle at {x.get('idle_cpu_percent_while_held', '—')}% CPU)",
            " / ".join(f"{v:,}" for v in x.get("delay_topic_offsets", ["—"])),
        ]
        for x in r
    ]
    return heads, header, rows


def _retry_bench(r):
    by = {(x["backend"], x["pending"]): x for x in r["rows"]}
    heads = [
        (
            f"retry scheduler: wheel ÷ redis, records drained per second ({n:,} pending)",
            _x(x["drain_per_s"] / by[("redis", n)]["drain_per_s"]),
        )
        for (b, n), x in by.items()
        if b == "wheel" and ("redis", n) in by
    ]
    header = ["backend", "pending", "drain (records/s)", "load (records/s)", "lateness p50 / p99 / max (ms)"]
    rows = [
        [
            x["backend"],
            f"{x['pending']:,}",
            f"{x['drain_per_s']:,.0f}",
            f"{x['load_per_s']:,.0f}",
            f"{x['late_p50_ms']:.1f} / {x['late_p99_ms']:.1f} / {x['late_max_ms']:.1f}",
        ]
        for x in r["rows"]
    ]
    return heads, header, rows


def _wire_bench(r):
    m = r.get("minibroker_over_mock", {})
    batching = r.get("batching") or {}
    how = ", ".join(
        f"{name} {batching[key]}"
        for key, name in (("linger_ms", "linger.ms"), ("batch_size", "batch.size"))
        if batching.get(key) is not None
    )
    where = f"serve ({how})" if how else "serve"
    heads = (
        [
            (
                f"{where}: confluent-kafka records/s, minibroker ÷ librdkafka's mock cluster",
                _x(m["records_per_s"]),
            ),
            (
                f"{where}: confluent-kafka acks=all p99, minibroker ÷ librdkafka's mock cluster",
                _x(m["ack_p99_ms"]),
            ),
        ]
        if m
        else []
    )
    header = [
        "client",
        "records",
        "records/s",
        "records per request",
        "server CPU per request (ms)",
        "e2e p50 / p99 (ms)",
        "ack p50 / p99 (ms)",
    ]
    rows = [
        [
            x["client"],
            f"{x['throughput']['records']:,}",
            f"{x['throughput']['records_per_s']:,}",
            x["throughput"]["records_per_request"],
            x["throughput"].get("server_cpu_ms_per_request", "–"),
            f"{x['latency']['p50_ms']} / {x['latency']['p99_ms']}",
            f"{x['latency']['ack_p50_ms']} / {x['latency']['ack_p99_ms']}",
        ]
        for x in r["results"]
    ]
    return heads, header, rows


def _chaos_bench(r):
    heads = [(f"chaos ({r['profile']} profile): violations ÷ runs", f"{r['violations']} / {r['runs']}")]
    header = [
        "runs",
        "violations",
        "runs per CPU minute",
        "client requests per CPU s",
        "network messages per CPU s",
    ]
    rows = [
        [
            r["runs"],
            r["violations"],
            r["runs_per_cpu_minute"],
            f"{r['client_requests_per_cpu_s']:,}",
            f"{r['network_messages_per_cpu_s']:,}",
        ]
    ]
    return heads, header, rows


def _control_bench(r):
    heads = [
        (
            f"control API: Kafka round trip under {r['connections']:,} held connections ÷ idle (median)",
            _x(r["ratio"]),
        )
    ]
    header = [
        "phase",
        "round trip median (ms)",
        "threads",
        "open fds",
        "RSS (MiB)",
        "serve CPU per round trip (ms)",
    ]
    rows = [
        [
            phase,
            r[phase]["round_trip_ms"],
            r[phase]["threads"],
            r[phase]["fds"],
            f"{r[phase]['rss_kib'] / 1024:.1f}",
            r[phase]["serve_cpu_ms_per_round_trip"],
        ]
        for phase in ("idle", "hostile", "after")
    ]
    return heads, header, rows


def _spark_floor(r):
    heads = [
        (
            f"Spark on {r['master']}: first read ÷ session start ({r['events']:,} events)",
            _x(r["seconds"]["read #1"] / r["seconds"]["session"]),
        )
    ]
    rows = [
        [name, f"{seconds:.1f}", f"{seconds * 1e6 / r['events']:.2f}" if name != "session" else ""]
        for name, seconds in r["seconds"].items()
    ]
    return heads, ["step", "seconds", "µs per event"], rows


def _baseline(found: dict) -> list[str]:
    """The ``--baseline`` section of a saved run: this tree ÷ REV per figure, the pairs' range."""
    count = found["pairs"] if isinstance(found["pairs"], int) else len(found["pairs"])
    before, after = (
        " / ".join(f"{x:.2f}" for x in found[k]) for k in ("load_average_before", "load_average_after")
    )
    rows = []
    for name, f in found["figures"].items():
        ratio = "–" if f["ratio"] is None else f"{f['ratio']:.3f}"
        spread = "–" if f["ratio_min"] is None else f"{f['ratio_min']:.3f} to {f['ratio_max']:.3f}"
        rows.append([f"`{name}`", f["better"], ratio, spread])
    lines = [
        f"This tree ÷ `{found['rev']}` (`{found['commit'][:12]}`), {count} alternating pair"
        f"{'s' if count != 1 else ''} of `{found['command']}`:",
        "",
        f"On {found['cpus']} CPUs; load average {before} before the pairs, {after} after.",
        "",
        *_table(["figure", "better", f"this tree ÷ {found['rev']}", "pairs (lowest to highest)"], rows),
        "",
    ]
    if found.get("missing"):
        lines += [f"- {line}" for line in found["missing"]] + [""]
    return lines


def _pipeline_bench(r):
    heads, rows = [], []
    for x in r["runs"]:
        heads.append(
            (
                f"analyze on {x['master']}: Spark ÷ DuckDB, whole command ({r['events']:,} events)",
                f"{x['wall_over_duckdb']}",
            )
        )
        rows.append(
            [
                x["master"],
                f"{r['events']:,}",
                x["wall_s"],
                x["job_s"],
                r["duckdb_s"],
                "yes" if not x["differences"] else "NO",
            ]
        )
    header = [
        "master",
        "events",
        "whole command (s)",
        "job (s)",
        "DuckDB (s)",
        "every table equal to DuckDB's",
    ]
    return heads, header, rows


def _txn_bench(r):
    heads = [
        (
            "transactional ÷ plain acks=-1 produce, CPU per record "
            f"({r['sends_per_group']} sends of {r['records_per_send']} records per transaction)",
            _x(r["txn_vs_plain"]),
        )
    ]
    header = ["records per side", "plain µs per record", "transactional µs per record", "ratio", "per round"]
    rows = [
        [
            f"{r['records_per_side']:,}",
            r["plain_us_per_record"],
            r["txn_us_per_record"],
            _x(r["txn_vs_plain"]),
            ", ".join(_x(x) for x in r["round_ratios"]),
        ]
    ]
    return heads, header, rows


def _share_lock_bench(r):
    per_task = r["system_timer_ns_per_task"]
    heads = [
        (
            f"share acquisition locks ({r['records']:,} in-flight records, ShareFetches of {row['batch']}): "
            "timer per acquired record ÷ SystemTimer per task",
            f"{row['ratio']:.3f}",
        )
        for row in r["rows"]
    ]
    header = [
        "records per ShareFetch",
        "locks",
        "timer ns per record",
        "SystemTimer ns per task",
        "ratio",
        "acquire ns per record (all)",
    ]
    formats = (
        ("batch", "{:,}"),
        ("locks", "{:,}"),
        ("timer_ns_per_record", "{:,.1f}"),
        ("per_task", "{:,.1f}"),
        ("ratio", "{:.3f}"),
        ("acquire_ns_per_record", "{:,.0f}"),
    )
    rows = [[f.format({**row, "per_task": per_task}[k]) for k, f in formats] for row in r["rows"]]
    return heads, header, rows


def _share_vs_retry(r):
    """No headline: the two designs' figures are counts and virtual times, read side by side."""
    fields = (
        "done",
        "dead_or_archived",
        "handler_calls",
        "duplicates",
        "extra_records",
        "out_of_order",
        "done_p50_ms",
        "done_max_ms",
        "poison_end_ms",
        "timer_tasks",
        "wall_ms",
    )
    header = ["design", *fields]
    rows = [[row["design"], *(row[f] for f in fields)] for row in r["rows"]]
    return [], header, rows


TOOLS = {
    "timer_bench": ("Kafka's SystemTimer against a heap and a hashed wheel, in virtual time", _timer_bench),
    "purgatory_perf": ("Kafka's TestPurgatoryPerformance model, real time", _purgatory_perf),
    "emulator_bench": (
        "acks=-1 produce requests through the emulated cluster, in virtual time",
        _emulator_bench,
    ),
    "group_bench": (
        "Consumer groups: time to Stable and to rebalance, and a kafka-python member killed",
        _group_bench,
    ),
    "delay_bench": ("Delayed messages: every design on N messages with delays in [1 s, 2 h]", _delay_bench),
    "delay_bench_serve": (
        "Delayed messages in real time through `minibroker serve` (`--serve`): confluent-kafka, acks=all,"
        " batching, at a set rate, with a 100 ms tick; lateness, serve's CPU and memory per held message",
        _delay_bench_serve,
    ),
    "retry_bench": ("The retry scheduler's backends, real time, no Kafka", _retry_bench),
    "wire_bench": ("`minibroker serve` under real clients, against librdkafka's mock cluster", _wire_bench),
    "chaos_bench": ("Chaos runs: random fault schedules with every invariant checked", _chaos_bench),
    "chaos_bench_transactions": (
        "Chaos runs with transactions (`--profile transactions`): invariant 8 checked as well",
        _chaos_bench,
    ),
    "chaos_bench_transactions_v2": (
        "Chaos runs with transactions of protocol version 2 (`--profile transactions-v2`, KIP-890)",
        _chaos_bench,
    ),
    "chaos_bench_consumer_protocol": (
        "Chaos runs whose group members speak KIP-848's consumer protocol (`--profile consumer-protocol`)",
        _chaos_bench,
    ),
    "txn_bench": ("Transactional produce against plain acks=-1 produce, CPU per record", _txn_bench),
    "control_bench": (
        "`serve --control` under a crowd of held, partial HTTP requests: a Kafka produce-and-read round trip,"
        " threads, open files and memory",
        _control_bench,
    ),
    "pipeline_bench": ("`analyze` on Spark against the same tables computed by DuckDB", _pipeline_bench),
    "share_lock_bench": (
        "Share groups (KIP-932): what 100,000 in-flight acquired records of one share partition cost the"
        " broker's timer, against the SystemTimer's own per-task figure",
        _share_lock_bench,
    ),
    "share_vs_retry": (
        "One poison-record workload through retry topics + a DLT and through a share group, side by side",
        _share_vs_retry,
    ),
    "spark_floor": (
        "What Spark itself costs on the bench traces (session start, reads of analyze's columns)",
        _spark_floor,
    ),
}


def _table(header, rows) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


def render() -> str:
    """The page, from every docs/benchmarks/*.json, tools in TOOLS order."""
    saved = {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}
    heads, sections = [], []
    for name, (what, figures) in TOOLS.items():
        if name not in saved:
            continue
        record = saved[name]
        tool_heads, header, rows = figures(record["result"])
        heads += [(f, v, name) for f, v in tool_heads]
        before, after = (" / ".join(f"{x:.2f}" for x in record[k]) for k in ("load_before", "load_after"))
        sections += [
            f"## {name}",
            "",
            f"{what}.",
            "",
            f"`{record['command']}` on {record['cores']} cores, Python "
            f"{record['python']}; load average {before} before, {after} after.",
            "",
            *_table(header, rows),
            "",
        ]
        baseline = record.get("baseline")
        if baseline is None and isinstance(record["result"], dict):
            baseline = record["result"].get("baseline")  # a tool that keeps it in its own document
        if baseline is not None:
            sections += _baseline(baseline)
    out = [
        "# Benchmarks",
        "",
        INTRO,
        "",
        "## Headline figures",
        "",
        *_table(["figure", "ratio", "tool"], [[f, v, f"[{n}](#{n})"] for f, v, n in heads]),
        "",
        *sections,
        METHOD,
        "",
    ]
    missing = {
        n: (w[0].lower() + w[1:], COMMANDS.get(n, f"python tools/{n}.py --json"))
        for n, (w, _) in TOOLS.items()
        if n not in saved
    }
    if missing:
        out += ["## Not measured in this build of the page", ""]
        out += [f"- {name}: {what} (`{command}`)" for name, (what, command) in sorted(missing.items())]
        out.append("")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    run_parser = sub.add_parser(
        "run", help="run a tool with --json and save its output with the machine facts"
    )
    run_parser.add_argument("name", help="the result's name: docs/benchmarks/NAME.json")
    run_parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="-- then the tool command ('python' is this one)"
    )
    write_parser = sub.add_parser("write", help="render docs/benchmarks.md from docs/benchmarks/*.json")
    write_parser.add_argument(
        "--check", action="store_true", help="exit 1 if the page differs instead of writing"
    )
    args = parser.parse_args(argv)
    if args.mode == "run":
        command = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not command:
            parser.error("run: give the tool command after --")
        print(run(args.name, command))
        return 0
    text = render()
    if args.check:
        if PAGE.read_text() != text:
            print(
                f"benchmarks_page: {PAGE.relative_to(ROOT)} differs from what the saved results give",
                file=sys.stderr,
            )
            return 1
        return 0
    PAGE.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
