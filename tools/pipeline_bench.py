"""Benchmark ``minibroker analyze`` on a 10,000,000-event trace against DuckDB on the same files, one run.

    .venv/bin/python tools/pipeline_bench.py                 # 10M events (generation takes minutes)
    .venv/bin/python tools/pipeline_bench.py --events 1000000 --json
    .venv/bin/python tools/pipeline_bench.py --master 'local[1]' --master 'local[2]'

How the trace is made: nothing is replicated or synthesised. The bench runs the
bundled load scenario ``scenarios/load_lagging_follower.toml`` (30,000 acks=all
produces over 10 s, about 500,000 trace events) once per seed 0, 1, 2, ..., in
parallel processes (one per core), each writing its own Parquet trace into one
directory, until the runs add up to ``--events``; the last run's load is shortened
so the total lands near the target (within one load step's worth of events). The
directory is the input of ``analyze``: one "trace" per run, as a sweep would leave.
It is kept and reused by later runs with the same ``--events`` (``--fresh`` to redo).

Then ``minibroker analyze DIR --master M`` runs as a subprocess for each ``--master``
(default ``local[2]``), one after the other in this one run, each in a fresh JVM, and
the same tables are computed in this process with DuckDB (``tools/duckdb_tables.py``,
SQL written from docs/pipeline.md, DuckDB's default threads: one per core). Reported:
per master the wall time of the whole command (JVM start, job, writing tables, report
and charts) and the job's own time (as ``analyze --json`` reports it: reading,
aggregating and collecting), events per second of each; DuckDB's time (reading the
files and computing every table); Spark ÷ DuckDB for both Spark figures; with two
masters the speed-up of the second over the first. The trace files are read once
before the first run so that every run starts with them in the page cache. Every
Spark run's tables must equal DuckDB's, row for row (exit status 1 otherwise). The
machine's load average is printed too: the figures are only as quiet as the machine was.

``--baseline REV`` (with ``--pairs N``, default 3) then times the same whole command
from the commit REV against this tree on the first master, in N alternating pairs
(``tools/bench_baseline.py``: the commit's files from ``git archive``, run with this
interpreter), and reports this tree ÷ baseline. On a machine whose speed drifts, that
ratio is the figure that compares across sessions; seconds from another day do not.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(ROOT / "tools"))

import duckdb_tables  # noqa: E402
from bench_baseline import BaselineError, add_arguments, check, checkout, nproc, pairs, summary  # noqa: E402

from minibroker.scenario import Scenario, load_scenario, run_scenario  # noqa: E402
from minibroker.scenario.model import Load  # noqa: E402
from minibroker.trace import ParquetSink  # noqa: E402

SCENARIO = ROOT / "scenarios" / "load_lagging_follower.toml"
#: events one full run of the load scenario writes (measured; only used to plan the runs)
EVENTS_PER_RUN = 500_000


def shortened(scenario: Scenario, fraction: float) -> Scenario:
    """The scenario with every load step's duration scaled by ``fraction`` (at least 100 ms)."""
    steps = tuple(
        attrs.evolve(step, duration_ms=max(100, int(step.duration_ms * fraction)))
        if isinstance(step, Load)
        else step
        for step in scenario.steps
    )
    return attrs.evolve(scenario, steps=steps)


def _generate_one(job: tuple[int, float, str]) -> tuple[str, int, float]:
    seed, fraction, path = job
    scenario = load_scenario(SCENARIO)
    if fraction < 1:
        scenario = shortened(scenario, fraction)
    started = time.perf_counter()
    sink = ParquetSink(path)
    try:
        run_scenario(scenario, seed=seed, sinks=[sink])
    finally:
        sink.close()
    return path, sink.events, time.perf_counter() - started


def plan(events: int) -> list[tuple[int, float]]:
    """(seed, load fraction) of each run: whole runs, then a shortened one for the remainder."""
    whole, rest = divmod(events, EVENTS_PER_RUN)
    runs = [(seed, 1.0) for seed in range(whole)]
    if rest >= EVENTS_PER_RUN // 50 or not runs:
        runs.append((whole, rest / EVENTS_PER_RUN))
    return runs


def generate(directory: Path, events: int, processes: int) -> dict:
    """Run the load scenario once per planned seed, in parallel; write ``manifest.json``."""
    manifest_path = directory / "manifest.json"
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("target") == events and all((directory / f).exists() for f in manifest["files"]):
            manifest["reused"] = True
            return manifest
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)
    jobs = [(seed, fraction, str(directory / f"run-{seed:03d}.parquet")) for seed, fraction in plan(events)]
    started = time.perf_counter()
    if processes <= 1 or len(jobs) == 1:
        done = [_generate_one(job) for job in jobs]
    else:
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            done = pool.map(_generate_one, jobs, chunksize=1)
    manifest = {
        "target": events,
        "events": sum(n for _, n, _ in done),
        "files": [Path(path).name for path, _, _ in done],
        "runs": len(done),
        "processes": processes,
        "generate_s": round(time.perf_counter() - started, 1),
        "run_s": [round(s, 1) for _, _, s in done],
    }
    manifest_path.write_text(json.dumps(manifest, indent=2))
    manifest["reused"] = False
    return manifest


def analyze(directory: Path, out: Path, master: str, tree: Path = ROOT, label: str = "analyze") -> dict:
    """``minibroker analyze`` of the source ``tree`` in a subprocess: wall time, and the job's JSON
    summary (``job_s`` is None from a baseline that did not report it)."""
    if out.exists():
        shutil.rmtree(out)
    command = [
        sys.executable,
        "-m",
        "minibroker",
        "analyze",
        str(directory / "*.parquet"),  # not manifest.json: a .json file would be read as a JSONL trace
        "--out",
        str(out),
        "--master",
        master,
        "--json",
    ]
    started = time.perf_counter()
    environment = {**os.environ, "PYTHONPATH": str(tree)}
    result = subprocess.run(command, capture_output=True, text=True, cwd=tree, env=environment)
    wall = time.perf_counter() - started
    last = (result.stderr.strip().splitlines() or ["no message"])[-1]
    if result.returncode not in (0, 1):
        raise SystemExit(f"{label} on {master} failed ({result.returncode}): {last}")
    try:
        found = json.loads(result.stdout)
    except ValueError:
        raise SystemExit(
            f"{label} on {master} printed no JSON summary (exit {result.returncode}): {last}"
        ) from None
    return {
        "master": master,
        "wall_s": round(wall, 2),
        "job_s": found.get("seconds"),
        "events": found["events"],
        "audit_problems": found["audit"]["problems"],
    }


def against_baseline(
    commit: str, directory: Path, base: Path, master: str, count: int, rev: str | None = None
) -> dict:
    """``count`` alternating pairs of whole ``analyze`` commands, the baseline ``commit``'s and this
    tree's, on ``master``: each pair's seconds and this tree ÷ baseline (also in the shape every
    tool's ``baseline`` section has: ``figures``, the load average before and after, ``cpus``)."""
    before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="minibroker-baseline-") as scratch:
        trees = {"baseline": checkout(commit, ROOT, Path(scratch) / "tree"), "current": ROOT}

        def run(side: str) -> float:
            label = f"analyze of {commit[:12]}" if side == "baseline" else "analyze"
            return analyze(directory, base / f"pairs-{side}", master, trees[side], label)["wall_s"]

        done = pairs(count, run)
    total = summary(done)
    figure = {
        "better": "lower",
        "baseline_total": total["baseline_total_s"],
        "current_total": total["current_total_s"],
        "ratio": total["ratio"],
        "ratio_min": total["ratio_min"],
        "ratio_max": total["ratio_max"],
        "pairs": [[pair["baseline_s"], pair["current_s"]] for pair in done],
    }
    return {
        "commit": commit,
        "rev": rev or commit,
        "master": master,
        "command": f"python -m minibroker analyze TRACES --master {master} --json",
        "pairs": done,
        **total,
        "figures": {"analyze_wall_s": figure},
        "missing": [],
        "cpus": nproc(),
        "load_average_before": before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }


def duckdb_reference(directory: Path, bucket_ms: int) -> tuple[dict, float]:
    """The ten tables computed by DuckDB from the trace files, and the seconds it took."""
    started = time.perf_counter()
    tables = duckdb_tables.tables(sorted(directory.glob("*.parquet")), bucket_ms)
    return tables, time.perf_counter() - started


def differences(spark_out: Path, reference: dict) -> list[str]:
    """Where the Spark run's tables differ from DuckDB's (empty when they agree row for row)."""
    import pyarrow.parquet as pq

    found = []
    for name, expected in reference.items():
        path = spark_out / f"{name}.parquet"
        if not path.exists():
            found.append(f"{name}: no table from Spark")
            continue
        rows = pq.read_table(path).to_pylist()
        if len(rows) != len(expected):
            found.append(f"{name}: {len(rows)} rows from Spark, {len(expected)} from DuckDB")
            continue
        for got, want in zip(rows, expected, strict=True):
            if got != want:
                found.append(f"{name}: Spark {got} != DuckDB {want}")
                break
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--events", type=int, default=10_000_000, help="trace events to analyse (default 10M)"
    )
    parser.add_argument(
        "--dir", type=Path, help="where traces and results go (default: $TMPDIR/minibroker-bench)"
    )
    parser.add_argument(
        "--master", action="append", help="Spark master to time, repeatable (default local[2])"
    )
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="generator processes")
    parser.add_argument("--fresh", action="store_true", help="regenerate the traces even if they exist")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_arguments(parser)
    args = parser.parse_args()
    if args.events < 1:
        parser.error("--events must be >= 1")
    commit = check(parser, args)
    masters = args.master or ["local[2]"]
    base = args.dir or Path(tempfile.gettempdir()) / "minibroker-bench"
    traces = base / f"traces-{args.events}"
    if args.fresh and traces.exists():
        shutil.rmtree(traces)
    load_before = os.getloadavg()
    manifest = generate(traces, args.events, args.processes)
    if not args.json:
        how = "reused" if manifest["reused"] else f"generated in {manifest['generate_s']} s"
        print(
            f"trace: {manifest['events']:,} events in {manifest['runs']} runs of {SCENARIO.name} ({how}):",
            traces,
        )
    for path in traces.glob("*.parquet"):  # every run starts with the files in the page cache
        path.read_bytes()
    reference, duckdb_s = duckdb_reference(traces, bucket_ms=1000)
    runs = []
    for master in masters:
        out = base / f"analysis-{''.join(c for c in master if c.isalnum())}"
        run = analyze(traces, out, master)
        run["differences"] = differences(out, reference)
        runs.append(run)
    figures = {
        "events": manifest["events"],
        "trace_files": manifest["runs"],
        "trace_bytes": sum(p.stat().st_size for p in traces.glob("*.parquet")),
        "generate_s": manifest.get("generate_s"),
        "duckdb_s": round(duckdb_s, 2),
        "runs": [
            {
                **run,
                "events_per_s_wall": round(run["events"] / run["wall_s"]),
                "events_per_s_job": round(run["events"] / run["job_s"]),
                "wall_over_duckdb": round(run["wall_s"] / duckdb_s, 1),
                "job_over_duckdb": round(run["job_s"] / duckdb_s, 1),
            }
            for run in runs
        ],
        "same_tables_as_duckdb": all(not run["differences"] for run in runs),
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    if commit is not None:
        try:
            found = against_baseline(commit, traces, base, masters[0], args.pairs, args.baseline)
            figures["baseline"] = found
        except BaselineError as error:
            raise SystemExit(f"pipeline_bench: {error}") from None
    if len(runs) >= 2:
        figures["speedup_wall"] = round(runs[0]["wall_s"] / runs[-1]["wall_s"], 2)
        figures["speedup_job"] = round(runs[0]["job_s"] / runs[-1]["job_s"], 2)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0 if figures["same_tables_as_duckdb"] else 1
    print(
        f"{'engine':<10} {'wall s':>8} {'job s':>8} {'events/s (wall)':>16} {'events/s (job)':>15} "
        f"{'÷ DuckDB (wall, job)':>22}"
    )
    for run in figures["runs"]:
        print(
            f"{run['master']:<10} {run['wall_s']:>8.1f} {run['job_s']:>8.1f} "
            f"{run['events_per_s_wall']:>16,} {run['events_per_s_job']:>15,} "
            f"{run['wall_over_duckdb']:>12}x {run['job_over_duckdb']:>7}x"
        )
        for line in run["differences"]:
            print(f"  differs from DuckDB: {line[:300]}")
    print(f"{'DuckDB':<10} {duckdb_s:>8.2f} {'':>8} {round(manifest['events'] / duckdb_s):>16,}")
    if "speedup_wall" in figures:
        print(
            f"speed-up {runs[-1]['master']} / {runs[0]['master']}: {figures['speedup_wall']}x wall, "
            f"{figures['speedup_job']}x job"
        )
    if "baseline" in figures:
        _print_baseline(figures["baseline"])
    print(f"every Spark run's tables equal DuckDB's: {figures['same_tables_as_duckdb']}")
    print(
        f"load average before {figures['load_average_before']}, after {figures['load_average_after']} "
        f"on {figures['cpus']} CPUs"
    )
    return 0 if figures["same_tables_as_duckdb"] else 1


def _print_baseline(found: dict) -> None:
    print(
        f"baseline {found['commit'][:12]} against this tree, whole commands on {found['master']}, "
        f"{len(found['pairs'])} alternating pairs:"
    )
    print(f"{'pair':>6} {'baseline s':>11} {'this tree s':>12} {'ratio':>7}")
    for number, pair in enumerate(found["pairs"], 1):
        print(f"{number:>6} {pair['baseline_s']:>11.2f} {pair['current_s']:>12.2f} {pair['ratio']:>7.3f}")
    print(
        f"this tree ÷ baseline: {found['ratio']:.3f} ({found['current_total_s']} s against "
        f"{found['baseline_total_s']} s; pairs {found['ratio_min']:.3f} to {found['ratio_max']:.3f})"
    )


if __name__ == "__main__":
    sys.exit(main())
