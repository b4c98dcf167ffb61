"""Benchmark chaos: runs per CPU-minute and simulated requests per CPU-second, faults on.

Usage::

    python tools/chaos_bench.py                        # 50 runs of the default profile, 2000 ms each
    python tools/chaos_bench.py --runs 200 --profile unclean --duration-ms 1000 --json
    python tools/chaos_bench.py --runs 2000 --profile transactions --json
    python tools/chaos_bench.py --runs 300 --profile share --workers 2 --json

Workload: runs ``0 .. runs-1`` of ``--seed`` on ``--profile``, one after the other
in this process (``minibroker.chaos.run_index``: generate the schedule, play it in
virtual time under the live checker, check the end). Each run is a whole chaos run
with its faults, its healing, its probes and its read-back.

What is measured: CPU time (``time.process_time``) and wall time
(``time.perf_counter``) around all runs together, in one process, so the figures
are per core. Counted per run: client requests (``ClientRequest`` records: produce
and fetch, the probes and the reader included) and network messages (every
message sent on the emulated network: client requests and answers, follower fetches,
controller traffic). Printed: runs per CPU-minute, client requests and network
messages per CPU-second, trace events checked per CPU-second, violations (must be 0
on the ``default``, ``transactions``, ``transactions-v2``, ``consumer-protocol`` and ``share``
profiles: the command exits 1 otherwise). The ``share`` profile's runs are share chaos
runs (``minibroker.chaos.share``), whose timeline ``--duration-ms`` does not change. On a
machine shared with other work the CPU figures are the ones to quote; wall time only says
how loaded it was.

``--workers K`` spreads the runs over K spawned processes (run ``i`` in process ``i % K``); the
CPU figures then divide by the sum of each run's own CPU time (``cpu_ms`` of its row, measured in
the process that ran it), so they stay per core.

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_baseline import Figure, add_arguments, check, compare_tool

from minibroker.chaos import PROFILES, run_index

#: compared with ``--baseline REV``: this tree ÷ REV
FIGURES = [
    Figure("runs_per_cpu_minute", "higher"),
    Figure("client_requests_per_cpu_s", "higher"),
    Figure("network_messages_per_cpu_s", "higher"),
    Figure("cpu_s", "lower"),
]


#: the profiles whose runs must hold every invariant (unclean and acks1 runs lose records by design)
MUST_HOLD = ("default", "transactions", "transactions-v2", "consumer-protocol", "share")


def _runs(profile: str, seed: int, indices: list[int], duration_ms: int) -> list:
    """Requests, network messages, trace events, violations and CPU seconds of these runs."""
    totals = [0, 0, 0, 0, 0.0]
    for index in indices:
        row = run_index(profile, seed, index, duration_ms).row
        for i, key in enumerate(("requests", "messages", "events", "violations")):
            totals[i] += row[key]
        totals[4] += row["cpu_ms"] / 1000
        if row["violations"]:  # name it at once: the figures alone do not say which run broke what
            print(f"chaos_bench: run {index}: {row['first_violation']}", file=sys.stderr, flush=True)
    return totals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--duration-ms", type=int, default=2000)
    parser.add_argument("--profile", choices=sorted(PROFILES), default="default")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.duration_ms < 100 or args.workers < 1:
        parser.error("--runs and --workers must be >= 1 and --duration-ms >= 100")
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    wall, cpu = time.perf_counter(), time.process_time()
    totals = [0, 0, 0, 0, 0.0]
    if args.workers == 1:
        totals = _runs(args.profile, args.seed, list(range(args.runs)), args.duration_ms)
        cpu_s = time.process_time() - cpu
    else:
        context = multiprocessing.get_context("spawn")
        slices = [list(range(args.runs))[w :: args.workers] for w in range(args.workers)]
        with concurrent.futures.ProcessPoolExecutor(args.workers, mp_context=context) as pool:
            jobs = [pool.submit(_runs, args.profile, args.seed, s, args.duration_ms) for s in slices]
            for job in jobs:
                totals = [a + b for a, b in zip(totals, job.result(), strict=True)]
        cpu_s = totals[4]  # each run's own CPU time, in the process that ran it
    requests, messages, events, violations = totals[:4]
    wall_s = time.perf_counter() - wall
    figures = {
        "runs": args.runs,
        "profile": args.profile,
        "seed": args.seed,
        "duration_ms": args.duration_ms,
        "workers": args.workers,
        "cpu_s": round(cpu_s, 2),
        "wall_s": round(wall_s, 2),
        "runs_per_cpu_minute": round(args.runs / cpu_s * 60, 1),
        "client_requests_per_cpu_s": round(requests / cpu_s),
        "network_messages_per_cpu_s": round(messages / cpu_s),
        "trace_events_per_cpu_s": round(events / cpu_s),
        "violations": violations,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:28} {value}")
    return 1 if violations and args.profile in MUST_HOLD else 0


if __name__ == "__main__":
    sys.exit(main())
