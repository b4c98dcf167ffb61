"""Benchmark ``minibroker analyze`` on a 10,000,000-event trace: local[1] against local[2], one run.

    .venv/bin/python tools/pipeline_bench.py                 # 10M events (generation takes minutes)
    .venv/bin/python tools/pipeline_bench.py --events 1000000 --json

How the trace is made: nothing is replicated or synthesised. The bench runs the
bundled load scenario ``scenarios/load_lagging_follower.toml`` (30,000 acks=all
produces over 10 s, about 500,000 trace events) once per seed 0, 1, 2, ..., in
parallel processes (one per core), each writing its own Parquet trace into one
directory, until the runs add up to ``--events``; the last run's load is shortened
so the total lands near the target (within one load step's worth of events). The
directory is the input of ``analyze``: one "trace" per run, as a sweep would leave.
It is kept and reused by later runs with the same ``--events`` (``--fresh`` to redo).

Then ``minibroker analyze DIR --master local[N]`` runs as a subprocess for N = 1 and
N = 2, one after the other in this one run, each in a fresh JVM. Reported per master:
wall time of the whole command (JVM start, job, writing tables, report and charts),
the job's own time (as ``analyze --json`` reports it: reading, aggregating and
collecting), events per second of each, and the speed-up of local[2] over local[1].
The trace files are read once
before the first run so that both start with them in the page cache. Both runs'
tables are compared and must be identical. The machine's load average is
printed too: the figures are only as quiet as the machine was.
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


def analyze(directory: Path, out: Path, master: str) -> dict:
    """``minibroker analyze`` in a subprocess: wall time, and the job's JSON summary."""
    if out.exists():
        shutil.rmtree(out)
    command = [
        sys.executable,
        "-m",
        "minibroker",
        "analyze",
        str(directory),
        "--out",
        str(out),
        "--master",
        master,
        "--json",
    ]
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    if result.returncode not in (0, 1):
        raise SystemExit(f"analyze on {master} failed ({result.returncode}): {result.stderr.strip()}")
    summary = json.loads(result.stdout)
    return {
        "master": master,
        "wall_s": round(wall, 2),
        "job_s": summary["seconds"],
        "events": summary["events"],
        "audit_problems": summary["audit"]["problems"],
    }


def same_tables(a: Path, b: Path) -> bool:
    import pyarrow.parquet as pq

    names = sorted(p.name for p in a.glob("*.parquet"))
    if names != sorted(p.name for p in b.glob("*.parquet")):
        return False
    return all(pq.read_table(a / n).to_pylist() == pq.read_table(b / n).to_pylist() for n in names)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--events", type=int, default=10_000_000, help="trace events to analyse (default 10M)"
    )
    parser.add_argument(
        "--dir", type=Path, help="where traces and results go (default: $TMPDIR/minibroker-bench)"
    )
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1, help="generator processes")
    parser.add_argument("--fresh", action="store_true", help="regenerate the traces even if they exist")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if args.events < 1:
        parser.error("--events must be >= 1")
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
    for path in traces.glob("*.parquet"):  # both masters start with the files in the page cache
        path.read_bytes()
    runs = [analyze(traces, base / f"analysis-local{n}", f"local[{n}]") for n in (1, 2)]
    one, two = runs
    figures = {
        "events": manifest["events"],
        "trace_files": manifest["runs"],
        "trace_bytes": sum(p.stat().st_size for p in traces.glob("*.parquet")),
        "generate_s": manifest.get("generate_s"),
        "runs": [
            {
                **run,
                "events_per_s_wall": round(run["events"] / run["wall_s"]),
                "events_per_s_job": round(run["events"] / run["job_s"]),
            }
            for run in runs
        ],
        "speedup_wall": round(one["wall_s"] / two["wall_s"], 2),
        "speedup_job": round(one["job_s"] / two["job_s"], 2),
        "same_tables": same_tables(base / "analysis-local1", base / "analysis-local2"),
        "cpus": os.cpu_count(),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0 if figures["same_tables"] else 1
    print(f"{'master':<10} {'wall s':>8} {'job s':>8} {'events/s (wall)':>16} {'events/s (job)':>15}")
    for run in figures["runs"]:
        print(
            f"{run['master']:<10} {run['wall_s']:>8.1f} {run['job_s']:>8.1f} "
            f"{run['events_per_s_wall']:>16,} {run['events_per_s_job']:>15,}"
        )
    print(
        f"speed-up local[2] / local[1]: {figures['speedup_wall']}x wall, {figures['speedup_job']}x job; "
        f"identical tables: {figures['same_tables']}"
    )
    print(
        f"load average before {figures['load_average_before']}, after {figures['load_average_after']} "
        f"on {figures['cpus']} CPUs"
    )
    return 0 if figures["same_tables"] else 1


if __name__ == "__main__":
    sys.exit(main())
