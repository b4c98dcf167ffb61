"""Benchmark Kafka's SystemTimer (``kafka``) against the ``heap`` and ``hashed`` baselines.

Usage::

    python tools/timer_bench.py                  # full run: 1,000,000 per workload (a few minutes)
    python tools/timer_bench.py --quick          # 20,000 per workload, a few seconds (CI smoke run)
    python tools/timer_bench.py --workloads W1,W3 --timers kafka,heap --repeat 3 --json

Everything runs in *virtual* integer-ms time: the harness calls ``advance_clock``
itself and nothing sleeps. ``N`` below is ``--size`` (default 1,000,000; 20,000
with ``--quick``).

Workloads (all random numbers come from ``random.Random(--seed)``)
-------------------------------------------------------------------
W1 "purgatory"
    N requests arrive at 100 per virtual ms (request ``i`` at ``i // 100``), each
    armed with a 30,000 ms timeout. A random 1% (``rng.sample``, exactly N/100)
    expire; the other 99% are cancelled ``ceil(Exp(mean 5 ms))`` ms after their
    arrival (at least 1 ms, at most 29,999 ms so a cancel always precedes expiry).
    The clock is advanced to every ms that has an event; afterwards it jumps to
    ``next_expiration()`` until the timer is empty.
    **op = one request** = its add + its cancel or its expiry.
W2 "all expire"
    N timers added at time 0 with delays uniform in [1, 60,000] ms, then the clock
    jumps to ``next_expiration()`` until all have fired.  **op = one timer** = add + fire.
W3 "churn"
    Fill (untimed, but counted in the memory figures): N tasks added at time 0,
    delays uniform in [1,000, 60,000] ms. Steady phase (timed): ``K = max(1, N // 10,000)``
    (100 for N = 1,000,000) and ``S = N // K`` steps (10,000 virtual ms); step
    ``t = 1..S`` advances the clock to ``t`` (tasks due at ``t`` fire), then cancels
    ``K`` tasks picked uniformly among those still armed, then adds ``K`` new tasks
    with delays uniform in [1,000, 60,000] ms. About 15% of the fill expires
    naturally during the steady phase, so the armed count drifts from N to ~0.87 N.
    Nothing is drained at the end.  **op = one add+cancel pair** (K * S of them);
    the natural expiries are part of the timed work but not counted as ops.

Within one ms the order is always: advance the clock, cancel, add.

What is timed
-------------
Each (workload, timer, repetition) runs in a fresh ``sys.executable`` subprocess
that builds the whole schedule first (arrival order, cancel times, which tasks,
all ``TimerTask`` objects), identically for every timer. The cyclic GC is disabled
in the child (``gc.disable()``), ``gc.collect()`` runs just before the timed
section and ``gc.enable()`` right after it. The timed section is only the driver
loop: ``advance_clock``, ``add``, ``TimerTask.cancel``, and the executor, which is
``fired.append`` (a C-level bound method: no Python frame per fire). Wall time is
``time.perf_counter_ns``, CPU time ``time.process_time_ns``; both are divided by
the op count of the workload. With ``--repeat N`` the runs are interleaved across
timers and the run with the lowest wall time is reported.

The ``floor`` row runs the same driver over the same schedule against a timer
whose ``add``/``advance_clock`` and whose cancel are empty Python functions: it is
the harness plus interpreter call overhead per op, the part of every timer's
figure that no timer implementation can remove. The header also prints the cost
of one empty Python function call (called in a ``for`` loop over a list) for scale.

Peak memory
-----------
``peak MiB`` comes from a separate, untimed subprocess per (workload, timer):
the schedule is built first, then ``tracemalloc.start()``, then the timer is
created, filled and driven; the figure is tracemalloc's peak of memory allocated
*after* the start, i.e. the timer's own structures (entries, buckets, heap nodes)
plus the harness's ``fired`` list (identical for all timers), excluding the
pre-built schedule and tasks. ``RSS MiB`` is ``ru_maxrss`` of the timed child:
the whole process, schedule included, so only differences between rows matter.

Reading the output
------------------
``vs heap`` is the timer's wall ns/op divided by heap's for the same workload; the
targets (kafka ÷ heap ≤ 0.5 on W1, ≤ 0.4 on W2 and W3) are printed with
PASS/MISS. Targets never affect the exit status. Every child reports the sorted
indices of the tasks that reached the executor (as a digest): the run fails
(exit 1) if they differ between timers, between repetitions, or from the set the
schedule predicts (due when ``now >= expiration``). A crashed child exits 2.

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import platform
import random
import resource
import subprocess
import sys
import time
import tracemalloc
from array import array
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_baseline import Figure, add_arguments, check, compare_tool

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [
    Figure("workloads.*.results.*.ns_per_op", "lower"),
    Figure("workloads.*.kafka_vs_heap", "lower"),
]

ROOT = Path(__file__).resolve().parents[1]

WORKLOADS = {
    "W1": ("purgatory", "one request = add + its cancel or its expiry"),
    "W2": ("all expire", "one timer = add + fire"),
    "W3": ("churn", "one add+cancel pair (steady phase; natural expiries included in the time)"),
}
TARGETS = {"W1": 0.5, "W2": 0.4, "W3": 0.4}  # kafka ns/op ÷ heap ns/op: the wheel must beat the heap
FLOOR = "floor"
DEFAULT_SIZE = 1_000_000
QUICK_SIZE = 20_000

W1_RATE = 100  # arrivals per virtual ms
W1_TIMEOUT = 30_000
W1_CANCEL_MEAN = 5.0
W2_MAX_DELAY = 60_000
W3_DELAYS = (1_000, 60_000)
W3_STEPS = 10_000  # target steady-phase length in ms; K = N // W3_STEPS


# --------------------------------------------------------------------------- schedule (child, untimed)

Step = tuple[int, list, list]  # (time, tasks to cancel, tasks to add)


class Schedule:
    """Everything a workload does, pre-built: tasks, an optional fill, the steps, the expected fired set."""

    def __init__(self, tasks: list, fill: list, steps: list[Step], drain: bool, ops: int, expected: list):
        self.tasks = tasks
        self.fill = fill
        self.steps = steps
        self.drain = drain
        self.ops = ops
        self.expected = expected


def _task_class() -> type:
    from minibroker.timer import TimerTask

    class BenchTask(TimerTask):
        """A TimerTask that knows its index in the schedule."""

        __slots__ = ("idx",)

        def __init__(self, delay_ms: int, idx: int) -> None:
            super().__init__(delay_ms)
            self.idx = idx

    return BenchTask


def build_w1(n: int, rng: random.Random) -> Schedule:
    task = _task_class()
    tasks = [task(W1_TIMEOUT, i) for i in range(n)]
    expiring = set(rng.sample(range(n), n // 100))
    cancels: defaultdict[int, list] = defaultdict(list)
    rate = 1.0 / W1_CANCEL_MEAN
    for i in range(n):
        if i not in expiring:
            delay = min(max(1, math.ceil(rng.expovariate(rate))), W1_TIMEOUT - 1)
            cancels[i // W1_RATE + delay].append(tasks[i])
    times = sorted(set(range((n - 1) // W1_RATE + 1)).union(cancels))
    steps = [(t, cancels.get(t, []), tasks[t * W1_RATE : (t + 1) * W1_RATE]) for t in times]
    return Schedule(tasks, [], steps, True, n, sorted(expiring))


def build_w2(n: int, rng: random.Random) -> Schedule:
    task = _task_class()
    uniform = rng.random
    tasks = [task(1 + int(uniform() * W2_MAX_DELAY), i) for i in range(n)]
    return Schedule(tasks, [], [(0, [], tasks)], True, n, list(range(n)))


def build_w3(n: int, rng: random.Random) -> Schedule:
    """Simulate the churn once to know which tasks are armed when each cancel is chosen."""
    task = _task_class()
    lo, hi = W3_DELAYS
    span = hi - lo + 1
    uniform = rng.random  # lo + int(uniform() * span): a uniform int in [lo, hi], faster than randint
    k = max(1, n // W3_STEPS)
    tasks: list = []
    pool: list[int] = []  # indices of armed tasks (order irrelevant: swap-remove)
    pos: list[int] = []  # index -> position in pool, -1 once cancelled or fired
    by_expiration: defaultdict[int, list[int]] = defaultdict(list)

    def arm(now: int) -> Any:
        i = len(tasks)
        delay = lo + int(uniform() * span)
        tasks.append(task(delay, i))
        pos.append(len(pool))
        pool.append(i)
        by_expiration[now + delay].append(i)
        return tasks[i]

    def disarm(i: int) -> None:
        p = pos[i]
        last = pool.pop()
        if last != i:
            pool[p] = last
            pos[last] = p
        pos[i] = -1

    fill = [arm(0) for _ in range(n)]
    fired: list[int] = []
    steps: list[Step] = []
    for t in range(1, n // k + 1):
        for i in by_expiration.pop(t, ()):
            if pos[i] >= 0:
                disarm(i)
                fired.append(i)
        cancels = []
        for _ in range(k):
            i = pool[int(uniform() * len(pool))]
            disarm(i)
            cancels.append(tasks[i])
        steps.append((t, cancels, [arm(t) for _ in range(k)]))
    return Schedule(tasks, fill, steps, False, k * (n // k), sorted(fired))


BUILDERS = {"W1": build_w1, "W2": build_w2, "W3": build_w3}


# --------------------------------------------------------------------------- driver (child, timed)


def _empty(_arg: Any = None) -> None:
    """An empty Python function: the floor's add/cancel/advance, and the empty-call measurement."""


class NullTimer:
    """The floor: same calls as a timer, every one an empty Python function, nothing ever fires."""

    def add(self, task: Any) -> None:
        pass

    def advance_clock(self, now_ms: int) -> None:
        pass

    def next_expiration(self) -> None:
        return None


def drive(timer: Any, cancel: Any, steps: list[Step], drain: bool) -> None:
    """The timed loop: per step advance, cancel, add; then (optionally) jump from expiration to expiration."""
    advance = timer.advance_clock
    add = timer.add
    for t, cancels, adds in steps:
        advance(t)
        for task in cancels:
            cancel(task)
        for task in adds:
            add(task)
    if drain:
        next_expiration = timer.next_expiration
        last = -1
        while (t := next_expiration()) is not None:
            if t <= last:
                raise RuntimeError(f"next_expiration() did not move forward: {t} after {last}")
            advance(t)
            last = t


def digest(indices: list[int]) -> str:
    return hashlib.blake2b(array("q", indices).tobytes(), digest_size=8).hexdigest()


def run_child(workload: str, runner: str, size: int, seed: int, memory: bool) -> dict[str, Any]:
    """One (workload, timer) run in this process; returns what the parent tabulates."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from minibroker.timer import TimerTask, make_timer

    gc.disable()
    sched = BUILDERS[workload](size, random.Random(seed))
    fired: list = []
    if runner == FLOOR:
        timer: Any = NullTimer()
        cancel = _empty
    else:
        cancel = TimerTask.cancel
    gc.collect()
    if memory:
        tracemalloc.start()
    if runner != FLOOR:
        timer = make_timer(runner, executor=fired.append)
    if sched.fill:
        drive(timer, cancel, [(0, [], sched.fill)], False)
    wall0, cpu0 = time.perf_counter_ns(), time.process_time_ns()
    drive(timer, cancel, sched.steps, sched.drain)
    cpu1, wall1 = time.process_time_ns(), time.perf_counter_ns()
    gc.enable()
    result: dict[str, Any] = {"workload": workload, "timer": runner, "ops": sched.ops}
    if memory:
        result["peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        return result
    got = sorted(task.idx for task in fired)
    result.update(
        wall_ns=wall1 - wall0,
        cpu_ns=cpu1 - cpu0,
        fired=len(got),
        digest=digest(got),
        expected=len(sched.expected),
        expected_digest=digest(sched.expected),
        armed_after=getattr(timer, "size", 0),
        maxrss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )
    return result


# --------------------------------------------------------------------------- parent


def empty_call_ns(count: int, repeat: int = 5) -> float:
    """ns of one call of an empty Python function, called in a for loop over a list (best of ``repeat``)."""
    items = [None] * count
    f = _empty
    best = math.inf
    for _ in range(repeat):
        t0 = time.perf_counter_ns()
        for x in items:
            f(x)
        best = min(best, time.perf_counter_ns() - t0)
    return best / count


def spawn(workload: str, runner: str, args: argparse.Namespace, memory: bool) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", workload, runner]
    cmd += ["--size", str(args.size), "--seed", str(args.seed)] + (["--memory"] if memory else [])
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{workload}/{runner} child failed ({proc.returncode}):\n{proc.stderr}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    what = "memory" if memory else f"{result['wall_ns'] / result['ops']:.0f} ns/op"
    print(f"  {workload} {runner:<6} {what:>14}  ({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return result


def bench_workload(workload: str, runners: list[str], args: argparse.Namespace) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {r: [] for r in runners}
    for _ in range(args.repeat):  # interleaved so slow drift hits every timer alike
        for runner in runners:
            runs[runner].append(spawn(workload, runner, args, memory=False))
    best = {r: min(rs, key=lambda res: res["wall_ns"]) for r, rs in runs.items()}
    if not args.no_memory:
        for runner in runners:
            best[runner]["peak_mib"] = spawn(workload, runner, args, memory=True)["peak_mib"]

    problems = []
    timers = [r for r in runners if r != FLOOR]
    for runner in timers:
        digests = {res["digest"] for res in runs[runner]}
        if len(digests) > 1:
            problems.append(f"{runner}: fired set differs between repetitions")
        res = best[runner]
        if res["digest"] != res["expected_digest"]:
            problems.append(
                f"{runner}: fired {res['fired']} tasks (digest {res['digest']}), "
                f"schedule predicts {res['expected']} (digest {res['expected_digest']})"
            )
    if len({best[r]["digest"] for r in timers}) > 1:
        problems.append("timers disagree: " + ", ".join(f"{r}={best[r]['digest']}" for r in timers))

    for res in best.values():
        res["ns_per_op"] = res["wall_ns"] / res["ops"]
        res["cpu_ns_per_op"] = res["cpu_ns"] / res["ops"]
    if "heap" in best:
        for runner in timers:
            best[runner]["vs_heap"] = best[runner]["ns_per_op"] / best["heap"]["ns_per_op"]
    out: dict[str, Any] = {
        "name": WORKLOADS[workload][0],
        "op": WORKLOADS[workload][1],
        "ops": best[runners[0]]["ops"],
        "results": best,
        "fired_agree": not problems,
        "problems": problems,
        "target_kafka_vs_heap": TARGETS[workload],
    }
    if "kafka" in best and "heap" in best:
        ratio = best["kafka"]["vs_heap"]
        out["kafka_vs_heap"] = ratio
        out["verdict"] = "PASS" if ratio <= TARGETS[workload] else "MISS"
    return out


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=150)
    cfg = report["config"]
    lines = [
        f"[bold]minibroker timer benchmark[/] — Python {cfg['python']}, size {cfg['size']:,}, "
        f"seed {cfg['seed']}, best of {cfg['repeat']} by wall time; "
        "each (workload, timer) in a fresh subprocess.",
        "Cyclic GC disabled during the timed section (gc.collect(); gc.disable(); ... gc.enable()).",
        "ns/op = perf_counter_ns wall ÷ ops; cpu ns/op = process_time_ns ÷ ops; "
        "vs heap = ns/op ÷ heap's ns/op.",
        f"Interpreter floor: one empty Python function call = {report['empty_call_ns']:.1f} ns; "
        "row 'floor' = same driver with empty add/cancel/advance.",
        "peak MiB = tracemalloc peak of allocations made by the timer run (separate untimed run); "
        "RSS MiB = ru_maxrss of the timed child.",
    ]
    console.print("\n".join(lines))
    table = Table(show_lines=False)
    for col, justify in [
        ("workload", "left"), ("timer", "left"), ("ns/op", "right"), ("cpu ns/op", "right"),
        ("vs heap", "right"), ("target", "left"), ("peak MiB", "right"), ("RSS MiB", "right"),
        ("fired", "right"), ("check", "left"),
    ]:  # fmt: skip
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for workload, w in report["workloads"].items():
        first = True
        for runner, res in w["results"].items():
            target = ""
            if runner == "kafka" and "verdict" in w:
                target = f"≤ {w['target_kafka_vs_heap']:.2f} {w['verdict']}"
            vs_heap = f"{res['vs_heap']:.2f}" if "vs_heap" in res else ""
            peak = f"{res['peak_mib']:.1f}" if "peak_mib" in res else ""
            check = "" if runner == FLOOR else ("agree" if w["fired_agree"] else "[red]DISAGREE[/]")
            table.add_row(
                f"{workload} {w['name']}" if first else "",
                runner,
                f"{res['ns_per_op']:,.0f}",
                f"{res['cpu_ns_per_op']:,.0f}",
                vs_heap,
                target,
                peak,
                f"{res['maxrss_mib']:.0f}",
                "" if runner == FLOOR else f"{res['fired']:,}",
                check,
            )
            first = False
        table.add_section()
    console.print(table)
    for workload, w in report["workloads"].items():
        console.print(f"{workload}: op = {w['op']}; {w['ops']:,} ops.")
        for problem in w["problems"]:
            console.print(f"[red]{workload}: {problem}[/]")
    if not report["ok"]:
        console.print("[bold red]FAIL: fired sets disagree (see above).[/]")


def parse_list(value: str, allowed: list[str], what: str) -> list[str]:
    items = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in items if v not in allowed]
    if unknown or not items:
        raise argparse.ArgumentTypeError(f"unknown {what} {unknown}: expected some of {','.join(allowed)}")
    return items


def main(argv: list[str] | None = None) -> int:
    timer_names = ["kafka", "heap", "hashed"]
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--workloads", default="W1,W2,W3", help="comma-separated subset of W1,W2,W3")
    p.add_argument(
        "--timers", default=",".join(timer_names), help="comma-separated subset of kafka,heap,hashed"
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per (workload, timer); the best is reported")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--size", type=int, default=None, help=f"N per workload (default {DEFAULT_SIZE:,})")
    p.add_argument("--quick", action="store_true", help=f"smoke run: size {QUICK_SIZE:,}")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the table")
    p.add_argument("--no-floor", action="store_true", help="skip the empty-function floor rows")
    p.add_argument("--no-memory", action="store_true", help="skip the separate tracemalloc runs")
    p.add_argument("--child", nargs=2, metavar=("WORKLOAD", "TIMER"), help=argparse.SUPPRESS)
    p.add_argument("--memory", action="store_true", help=argparse.SUPPRESS)
    add_arguments(p)
    args = p.parse_args(argv)
    if args.size is None:
        args.size = QUICK_SIZE if args.quick else DEFAULT_SIZE
    if args.size < 1_000 or args.repeat < 1:
        p.error("--size must be >= 1000 and --repeat >= 1")
    commit = check(p, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)

    if args.child:
        print(json.dumps(run_child(*args.child, args.size, args.seed, args.memory)))
        return 0

    try:
        workloads = parse_list(args.workloads, list(WORKLOADS), "workloads")
        timers = parse_list(args.timers, timer_names, "timers")
    except argparse.ArgumentTypeError as exc:
        p.error(str(exc))
    runners = timers + ([] if args.no_floor else [FLOOR])
    report: dict[str, Any] = {
        "config": {
            "python": platform.python_version(),
            "size": args.size,
            "seed": args.seed,
            "repeat": args.repeat,
            "gc": "disabled during the timed section",
            "workloads": workloads,
            "timers": timers,
        },
        "empty_call_ns": empty_call_ns(min(args.size, 1_000_000)),
        "workloads": {},
    }
    try:
        for workload in workloads:
            print(f"{workload} {WORKLOADS[workload][0]}:", file=sys.stderr)
            report["workloads"][workload] = bench_workload(workload, runners, args)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    report["ok"] = all(w["fired_agree"] for w in report["workloads"].values())
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
