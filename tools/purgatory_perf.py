"""Kafka's TestPurgatoryPerformance on minibroker: a purgatory under a Poisson request load, on trio.

Usage::

    python tools/purgatory_perf.py --num 200000 --rate 50000 --workload low
    python tools/purgatory_perf.py --num 100000 --rates 25000,50000,75000,100000 --workload high --compare
    python tools/purgatory_perf.py --num 100000 --rate 50000 --workload high --virtual --timer heap --json

The model (Kafka's, from the 2015 Scala original)
-------------------------------------------------
- ``--num`` requests arrive as a Poisson process: inter-arrival times are exponential
  with λ = rate/1000 per ms, truncated to whole ms with the fractional part carried
  into the next one so the mean stays right (many requests share a ms at high rates).
- Each request has a completion latency drawn from a log-normal with μ = ln pct50 and
  σ = (ln pct75 − ln pct50) / 0.674490, truncated to whole ms.
- ``keys`` is one list of ``--keys`` keys, ``fakeKey<random in [0, key-space-size)>``,
  drawn once at start-up and shared by every request (duplicates possible, as in Kafka).
- Request ``i`` becomes a fake operation with delay = ``--timeout``; it completes when
  ``now >= arrival + latency``. If latency < timeout it is pushed on a *completion
  queue* (a trio task holding a heap of (completion time, op), sleeping until its
  head is due) that calls ``force_complete`` at its completion time; then
  ``try_complete_else_watch(op, keys)`` is called. Requests with latency >= timeout
  expire through the purgatory's timer. (Kafka's 2024 Java port completes every
  request at now + timeout; this tool keeps the Scala original's now + latency.)
- One purgatory ("fake purgatory", purge interval 1000) on one timer (``--timer``),
  driven by one ``Reaper`` that also runs the purge check after every advance.
- The generator paces requests by arrival time without sleeping once per request:
  it wakes, enqueues every request whose arrival time had passed when it woke, and
  sleeps until the next one (a zero-length sleep when it is behind, so the other
  tasks still run between its batches).

All random numbers come from ``random.Random(--seed)`` and are drawn before the clock
starts, so every timer and every rate of a sweep sees the same requests (a sweep
rescales the same exponential draws). Time runs on trio's real clock, or with
``--virtual`` on ``MockClock(autojump_threshold=0)`` with deterministic task
scheduling: then everything but the CPU and GC columns is a pure function of the
arguments, lateness is 0 and actual rate = target rate.

Output
------
Comment lines (``#``): the latency samples (pct75, pct50, min, max, ms), the interval
samples (rate = 1000 / mean interval, min, max, ms), the count of latencies >= timeout
(the expirations expected when nothing runs late), then a header and one tab-separated
data line per run:

elapsed ms       from the start until every request completed or expired
target rate      N·1000 / (last scheduled arrival − start): the rate asked of the generator
actual rate      N·1000 / (end of enqueueing − start): the rate it achieved
cpu ms           process CPU time over the same window as elapsed (time.process_time); as in
                 Kafka it includes the harness: generator, fake operations, completion queue
cpu us/req       cpu ms · 1000 / N; with ``--virtual`` (no idle time, no sleeping) this is
                 the single-core cost of one request, whose inverse bounds the saturation rate
gc n, gc ms      Python cyclic-GC collections (all generations) and their time in the window
late p50/p99/max when ``on_complete`` ran minus when it should have (arrival + latency for a
                 completion, arrival + timeout for an expiration), ms; arrival is the ms the
                 generator created the request (not its scheduled arrival), so generator
                 lag shows in the rates, not here
completed        requests completed early (completion queue or an immediate try_complete)
expired          requests that ended on the timeout path
purges           purges of completed operations from the watcher lists
timer, rate      the timer and the nominal ``--rate`` of the run

How to read it: the purgatory keeps up when actual ≈ target and lateness stays near 0.
A generator that cannot keep up shows actual < target; a reaper, a completion queue or
the reaper's executor task that cannot keep up shows growing lateness and, with
latencies near the timeout, more expirations than expected. ``--rates`` runs the
workload at each target and prints a table and the saturation rate: the highest target
whose run kept actual >= 0.95 × target (the run's own target rate, not the nominal one,
so sampling noise does not count). Like Kafka's, that criterion only sees the
generator: read the late p99 printed beside it, which shows when the timer path falls
behind first. ``--compare`` runs kafka and heap, interleaved per rate, in the same
process. Targets never affect the exit status: 0, or 2 for bad arguments, or 1 if a
virtual run ends with requests still pending (a bug in the purgatory or the timer).

Deviations from Kafka's tool: latencies and intervals are drawn per request (N each)
instead of from pools of 1,000,000; there is no ``--size`` (no payload) and no
``--verbose`` switch (comment lines are always printed, except with ``--json``); GC
columns are Python's cyclic GC instead of one pair per JVM collector; lateness, counts,
``--timer``, ``--rates``, ``--compare``, ``--virtual``, ``--workload``, ``--seed`` and
``--json`` are additions. Everything runs on one thread (trio), where Kafka has a
generator thread, a completion thread, a reaper thread and an executor thread.

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import gc
import heapq
import json
import math
import os
import platform
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import trio
import trio.testing

from minibroker.purgatory import DelayedOperation, DelayedOperationPurgatory
from minibroker.runtime import MsClock, Reaper, deterministic_scheduling
from minibroker.timer import TIMERS, make_timer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_baseline import Figure, add_arguments, check, compare_tool

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [
    Figure("runs.[timer,rate].late_p99_ms", "lower"),
    Figure("runs.[timer,rate].late_p50_ms", "lower"),
    Figure("runs.[timer,rate].cpu_us_per_req", "lower"),
    Figure("runs.[timer,rate].gc_collections", "lower"),
    Figure("runs.[timer,rate].gc_ms", "lower"),
]

#: --workload presets: (pct50, pct75, timeout) in ms, the Confluent blog's two workloads
WORKLOADS = {"low": (20.0, 60.0, 200), "high": (200.0, 400.0, 200)}
Z75 = 0.674490  # the standard normal's 75th percentile
SATURATION = 0.95
PURGE_INTERVAL = 1000
COLUMNS = (
    "elapsed ms",
    "target rate",
    "actual rate",
    "cpu ms",
    "cpu us/req",
    "gc n",
    "gc ms",
    "late p50",
    "late p99",
    "late max",
    "completed",
    "expired",
    "purges",
    "timer",
    "rate",
)


@dataclass(frozen=True)
class Workload:
    num: int
    rate: float
    pct50: float
    pct75: float
    timeout: int
    keys: int
    key_space_size: int
    seed: int


@dataclass(frozen=True)
class Samples:
    arrivals: list[int]  # ms after the start, non-decreasing
    latencies: list[int]  # ms
    keys: list[str]


def sample(w: Workload) -> Samples:
    """Draw the keys, arrival times and latencies of ``w`` (deterministic for ``w.seed``)."""
    rng = random.Random(w.seed)
    keys = [f"fakeKey{rng.randrange(w.key_space_size)}" for _ in range(w.keys)]
    lam = w.rate / 1000
    arrivals, t, residue = [], 0, 0.0
    for _ in range(w.num):
        interval = rng.expovariate(lam) + residue
        whole = int(interval)
        residue = interval - whole
        t += whole
        arrivals.append(t)
    mu = math.log(w.pct50)
    sigma = (math.log(w.pct75) - mu) / Z75
    latencies = [int(rng.lognormvariate(mu, sigma)) for _ in range(w.num)]
    return Samples(arrivals, latencies, keys)


@dataclass
class Result:
    timer: str
    rate: float
    virtual: bool
    elapsed_ms: float
    target_rate: float | None
    actual_rate: float | None
    cpu_ms: float
    cpu_us_per_req: float
    wall_ms: float
    gc_collections: int
    gc_ms: float
    late_p50_ms: float
    late_p99_ms: float
    late_max_ms: float
    completed: int
    expired: int
    expected_expired: int
    purges: int
    purgatory_expirations: int

    @property
    def keeps_up(self) -> bool:
        """actual >= 0.95 × target (a rate of None is infinite: everything at the start)."""
        if self.actual_rate is None:
            return True
        return self.target_rate is not None and self.actual_rate >= SATURATION * self.target_rate


class FakeOperation(DelayedOperation):
    """Completes once now >= arrival + latency; reports its lateness to the run."""

    __slots__ = ("run_state", "arrival_ms", "latency_ms", "completes_at")

    def __init__(self, run_state: RunState, arrival_ms: int, latency_ms: int) -> None:
        super().__init__(run_state.timeout)
        self.run_state = run_state
        self.arrival_ms = arrival_ms
        self.latency_ms = latency_ms
        self.completes_at = arrival_ms + latency_ms

    def try_complete(self) -> bool:
        if self.run_state.clock.now_ms() >= self.completes_at:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        run = self.run_state
        if self.expired:
            run.lateness.append(run.now() - self.arrival_ms - run.timeout)
        else:
            run.lateness.append(run.now() - self.completes_at)
            run.completed += 1
        if len(run.lateness) == run.num:
            run.finish()

    def on_expiration(self) -> None:
        self.run_state.expired += 1


class RunState:
    """Counters of one run; ``now()`` is the clock's time in float ms, for lateness and rates."""

    def __init__(self, w: Workload, clock: MsClock) -> None:
        self.num = w.num
        self.timeout = w.timeout
        self.clock = clock
        current_time, origin = trio.lowlevel.current_clock().current_time, clock.origin
        self.now = lambda: (current_time() - origin) * 1000
        self.lateness: list[float] = []
        self.completed = 0
        self.expired = 0
        self.done = trio.Event()
        self.end_ms = 0.0
        self.end_cpu = 0.0
        self.end_wall = 0.0
        self.gc = GcMeter()

    def finish(self) -> None:
        self.end_cpu, self.end_wall = time.process_time(), time.perf_counter()
        self.end_ms = self.now()
        self.gc.stop()
        self.done.set()


class GcMeter:
    """Counts and times Python's cyclic-GC collections while registered."""

    def __init__(self) -> None:
        self.collections = 0
        self.seconds = 0.0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.collections += 1
            self.seconds += time.perf_counter() - self._started

    def start(self) -> None:
        gc.callbacks.append(self)

    def stop(self) -> None:
        if self in gc.callbacks:
            gc.callbacks.remove(self)


class CompletionQueue:
    """Kafka's CompletionQueue: force-completes each operation when its completion time arrives."""

    def __init__(self, clock: MsClock) -> None:
        self.clock = clock
        self.heap: list[tuple[int, int, FakeOperation]] = []
        self._sleep: trio.CancelScope | None = None

    def add(self, due_ms: int, seq: int, op: FakeOperation) -> None:
        heap = self.heap
        heapq.heappush(heap, (due_ms, seq, op))
        scope = self._sleep
        if scope is not None and heap[0][2] is op:
            deadline = self.clock.to_seconds(due_ms)
            if deadline < scope.deadline:
                scope.deadline = deadline

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        heap, clock, pop = self.heap, self.clock, heapq.heappop
        while True:
            now = clock.now_ms()
            while heap and heap[0][0] <= now:
                pop(heap)[2].force_complete()
            deadline = clock.to_seconds(heap[0][0]) if heap else math.inf
            with trio.CancelScope(deadline=deadline) as self._sleep:
                await trio.sleep_forever()
            self._sleep = None


async def _run(w: Workload, s: Samples, timer_kind: str, virtual: bool) -> Result:
    clock = MsClock()
    timer = make_timer(timer_kind)
    reaper = Reaper(timer, clock)
    purgatory: DelayedOperationPurgatory[FakeOperation] = DelayedOperationPurgatory(
        "fake purgatory", timer, purge_interval=PURGE_INTERVAL
    )
    reaper.add_hook(purgatory.maybe_purge)
    queue = CompletionQueue(clock)
    run = RunState(w, clock)
    async with trio.open_nursery() as nursery:
        await nursery.start(reaper.run)
        await nursery.start(queue.run)
        start_ms = clock.now_ms()
        wall0, cpu0 = time.perf_counter(), time.process_time()
        run.gc.start()
        # the generator: everything due at each wake-up, then sleep until the next arrival
        n, timeout, keys, latencies = w.num, w.timeout, s.keys, s.latencies
        arrivals = [start_ms + a for a in s.arrivals]
        watch, push, now_ms = purgatory.try_complete_else_watch, queue.add, clock.now_ms
        i = 0
        while i < n:
            due = now_ms()
            while i < n and arrivals[i] <= due:
                now = now_ms()  # the request's arrival: the ms it is created, as in Kafka
                latency = latencies[i]
                op = FakeOperation(run, now, latency)
                if latency < timeout:
                    push(now + latency, i, op)
                watch(op, keys)
                i += 1
            if i < n:
                await clock.sleep_until(arrivals[i])
        enqueued_ms = run.now()
        if virtual:  # a request that never ends would otherwise let the reaper spin virtual time forever
            with trio.move_on_at(clock.to_seconds(arrivals[-1] + timeout + 1000)):
                await run.done.wait()
            if not run.done.is_set():
                raise RuntimeError(f"only {len(run.lateness)} of {n} requests ended")
        await run.done.wait()
        nursery.cancel_scope.cancel()
    cpu_ms = (run.end_cpu - cpu0) * 1000
    late = sorted(run.lateness)
    return Result(
        timer=timer_kind,
        rate=w.rate,
        virtual=virtual,
        elapsed_ms=_round(run.end_ms - start_ms),
        target_rate=_rate(n, arrivals[-1] - start_ms),
        actual_rate=_rate(n, enqueued_ms - start_ms),
        cpu_ms=round(cpu_ms, 1),
        cpu_us_per_req=round(cpu_ms * 1000 / n, 2),
        wall_ms=round((run.end_wall - wall0) * 1000, 1),
        gc_collections=run.gc.collections,
        gc_ms=round(run.gc.seconds * 1000, 1),
        late_p50_ms=_round(_percentile(late, 0.50)),
        late_p99_ms=_round(_percentile(late, 0.99)),
        late_max_ms=_round(late[-1]),
        completed=run.completed,
        expired=run.expired,
        expected_expired=sum(1 for latency in latencies if latency >= timeout),
        purges=purgatory.purges,
        purgatory_expirations=purgatory.expirations,
    )


def run_once(w: Workload, s: Samples, timer_kind: str, virtual: bool) -> Result:
    """One run in a fresh ``trio.run``: virtual time is deterministic for ``w.seed``."""
    gc.collect()
    if not virtual:
        return trio.run(_run, w, s, timer_kind, virtual)
    with deterministic_scheduling(w.seed):
        return trio.run(_run, w, s, timer_kind, virtual, clock=trio.testing.MockClock(autojump_threshold=0))


def _rate(n: int, span_ms: float) -> float | None:
    return round(n * 1000 / span_ms, 1) if span_ms > 0 else None


def _round(ms: float) -> float:
    return round(ms, 3) + 0.0  # + 0.0 turns -0.0 into 0.0


def _percentile(ordered: list[float], q: float) -> float:
    """Nearest-rank percentile of a sorted, non-empty list."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def saturation(results: list[Result], timer_kind: str) -> float | None:
    """The highest nominal rate at which ``timer_kind`` kept actual >= 0.95 × target, or None."""
    rates = [r.rate for r in results if r.timer == timer_kind and r.keeps_up]
    return max(rates) if rates else None


# --------------------------------------------------------------------------- output


def _fmt(value: Any) -> str:
    if value is None:
        return "inf"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def sample_lines(w: Workload, s: Samples) -> list[str]:
    lat = sorted(s.latencies)
    intervals = [b - a for a, b in zip([0, *s.arrivals], s.arrivals, strict=False)]
    mean = s.arrivals[-1] / len(s.arrivals)
    rate = f"{1000 / mean:.1f}" if mean else "inf"
    expected = sum(1 for latency in lat if latency >= w.timeout)
    return [
        f"# latency samples: pct75 = {_percentile(lat, 0.75)}, pct50 = {_percentile(lat, 0.50)}, "
        f"min = {lat[0]}, max = {lat[-1]}",
        f"# interval samples: rate = {rate}, min = {min(intervals)}, max = {max(intervals)}",
        f"# latency >= timeout ({w.timeout} ms): {expected} of {w.num} requests should expire",
    ]


def data_line(r: Result) -> str:
    values = (
        r.elapsed_ms,
        r.target_rate,
        r.actual_rate,
        r.cpu_ms,
        r.cpu_us_per_req,
        r.gc_collections,
        r.gc_ms,
        r.late_p50_ms,
        r.late_p99_ms,
        r.late_max_ms,
        r.completed,
        r.expired,
        r.purges,
        r.timer,
        r.rate,
    )
    return "\t".join(_fmt(v) for v in values)


def summary_lines(results: list[Result], timers: list[str], virtual: bool) -> list[str]:
    """The sweep table (actual ÷ target per rate and timer) and the saturation rates side by side."""
    if virtual:
        return ["# saturation: not measured in virtual time (actual = target by construction)"]
    lines = [
        f"# saturation table: actual / target (ok when >= {SATURATION}) and late p99 (ms)",
        "# rate\t" + "\t".join(timers),
    ]
    by_run = {(r.rate, r.timer): r for r in results}
    for rate in sorted({r.rate for r in results}):
        cells = []
        for t in timers:
            r = by_run[rate, t]
            ratio = f"{r.actual_rate / r.target_rate:.3f}" if r.actual_rate and r.target_rate else "n/a"
            cells.append(f"{ratio} {'ok' if r.keeps_up else 'MISS'} {_fmt(r.late_p99_ms)}")
        lines.append(f"# {_fmt(rate)}\t" + "\t".join(cells))
    rates = [saturation(results, t) for t in timers]
    lines.append(
        "# saturation rate: "
        + "  |  ".join(
            f"{t} {_fmt(rate) if rate else 'none'} req/s" for t, rate in zip(timers, rates, strict=True)
        )
    )
    return lines


# --------------------------------------------------------------------------- command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        """One line on stderr and exit 2, without the usage block."""
        self.exit(2, f"{self.prog}: error: {message}\n")


def _positive(kind: type) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value > 0 or (isinstance(value, float) and math.isinf(value)):
            raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
        return value

    return parse


def _rates(text: str) -> list[float]:
    parse = _positive(float)
    rates = [parse(part) for part in text.split(",") if part.strip()]
    if not rates:
        raise argparse.ArgumentTypeError("expected a comma-separated list of rates")
    return sorted(set(rates))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = _Parser(
        prog="purgatory_perf.py",
        description="Kafka's TestPurgatoryPerformance on minibroker's purgatory and timers (trio).",
    )
    p.add_argument("--num", type=_positive(int), required=True, help="number of requests")
    p.add_argument("--rate", type=_positive(float), help="target request rate per second")
    p.add_argument("--rates", type=_rates, help="comma-separated target rates: sweep and report saturation")
    p.add_argument(
        "--workload", choices=sorted(WORKLOADS), help="preset: low = 20/60/200, high = 200/400/200"
    )
    p.add_argument("--pct50", type=_positive(float), help="50th percentile of completion latency, ms")
    p.add_argument("--pct75", type=_positive(float), help="75th percentile of completion latency, ms")
    p.add_argument("--timeout", type=int, help="request timeout, ms (>= 0)")
    p.add_argument("--keys", type=_positive(int), default=3, help="watch keys per request (default 3)")
    p.add_argument("--key-space-size", type=_positive(int), default=100, help="key space size (default 100)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--timer", choices=sorted(TIMERS), help="timer under test (default kafka)")
    p.add_argument("--compare", action="store_true", help="run kafka and heap side by side")
    p.add_argument("--virtual", action="store_true", help="virtual time: deterministic, measures CPU only")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the text")
    add_arguments(p)
    args = p.parse_args(argv)
    preset = WORKLOADS.get(args.workload, (None, None, None))
    for name, value in zip(("pct50", "pct75", "timeout"), preset, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    missing = [f"--{name}" for name in ("pct50", "pct75", "timeout") if getattr(args, name) is None]
    if missing:
        p.error(f"{', '.join(missing)} required (or --workload low|high)")
    if args.timeout < 0:
        p.error(f"argument --timeout: must be >= 0: {args.timeout}")
    if args.pct75 < args.pct50:
        p.error(f"--pct75 ({args.pct75:g}) must be >= --pct50 ({args.pct50:g})")
    if (args.rate is None) == (args.rates is None):
        p.error("give exactly one of --rate and --rates")
    if args.compare and args.timer is not None:
        p.error("give --timer or --compare, not both")
    args.timers = ["kafka", "heap"] if args.compare else [args.timer or "kafka"]
    args.commit = check(p, args)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.commit is not None:
        return compare_tool(__file__, argv, FIGURES, args.commit, args.pairs, args.json, rev=args.baseline)
    rates = args.rates or [args.rate]

    def workload(rate: float) -> Workload:
        return Workload(
            args.num, rate, args.pct50, args.pct75, args.timeout, args.keys, args.key_space_size, args.seed
        )

    def emit(line: str) -> None:
        if not args.json:
            print(line, flush=True)

    emit(
        f"# {args.num} requests, pct50 {args.pct50:g} ms, pct75 {args.pct75:g} ms, "
        f"timeout {args.timeout} ms, {args.keys} keys of {args.key_space_size}, seed {args.seed}, "
        f"{'virtual' if args.virtual else 'real'} time, timers {','.join(args.timers)}"
    )
    results: list[Result] = []
    for n, rate in enumerate(rates):  # timers interleaved per rate, so machine noise hits them alike
        w = workload(rate)
        s = sample(w)
        lines = sample_lines(w, s)
        for line in lines if n == 0 else lines[1:2]:  # the latencies are the same at every rate
            emit(line)
        if n == 0:
            emit(f"# enqueue rate ({args.num} requests):")
            emit("# " + "\t".join(COLUMNS))
        for timer_kind in args.timers:
            try:
                results.append(run_once(w, s, timer_kind, args.virtual))
            except RuntimeError as exc:
                print(f"purgatory_perf.py: {timer_kind} at {rate:g}/s: {exc}", file=sys.stderr)
                return 1
            emit(data_line(results[-1]))
    if args.rates or args.compare:
        for line in summary_lines(results, args.timers, args.virtual):
            emit(line)
    if args.json:
        report = {
            "config": {
                **{k: v for k, v in asdict(workload(rates[0])).items() if k != "rate"},
                "rates": rates,
                "timers": args.timers,
                "virtual": args.virtual,
                "python": platform.python_version(),
                "cpus": os.cpu_count(),
            },
            "runs": [{**asdict(r), "keeps_up": r.keeps_up} for r in results],
            "saturation": None if args.virtual else {t: saturation(results, t) for t in args.timers},
        }
        print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
