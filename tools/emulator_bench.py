"""Benchmark the whole emulator: produce requests (acks=-1, RF 3) simulated per CPU second.

Usage::

    python tools/emulator_bench.py                       # the default workload (10,000 virtual ms)
    python tools/emulator_bench.py --quick               # 1,000 virtual ms: a smoke run of a few seconds
    python tools/emulator_bench.py --partitions 12 --rate 50000 --json
    python tools/emulator_bench.py --trace               # plus a traced run: events per second
    python tools/emulator_bench.py --tracemalloc         # plus an untimed run under tracemalloc
    python tools/emulator_bench.py --matrix              # default, partitions 1/12, rate 5000/50000
    python tools/emulator_bench.py --no-gc               # the timed run with the cyclic GC off
    python tools/emulator_bench.py --gc-threshold 50000  # GC on, gen0 threshold 50,000 instead of 700
    python tools/emulator_bench.py --profile [--no-gc]   # a run under cProfile, by layer

Workload
--------
A cluster of 3 brokers (``open_cluster``) runs in virtual time
(``trio.run(..., clock=MockClock(autojump_threshold=0))``) inside
``deterministic_scheduling(--seed)``, links of ``--latency-ms`` (default 1) in
every direction, and one topic of ``--partitions`` (default 6) partitions with
replication factor 3 (Kafka's default assignment: partition p led by broker p mod 3).

Load: ``--rate`` (default 20,000) produce requests per virtual second in total,
for ``--duration-ms`` (default 10,000) virtual ms. Request ``i`` (0-based) is sent
at virtual ms ``floor(i * 1000 / rate)`` to partition ``i mod partitions`` by
producer ``(i // partitions) mod producers`` (``--producers``, default 3), so every
partition gets the same share. Each request carries ``--records`` records
(default 1) of 100 bytes in all, acks=-1, Kafka's default request.timeout.ms
(30,000). Each producer is one trio task that sleeps until the next virtual ms
in which it has something to send and then sends all of that ms's requests at
once (``Producer.send``: no sleep per request, no timer entry per request).

``--consumers`` (default 1) assign()-based consumers are assigned every partition
from offset 0 and poll in a loop (``Consumer.poll``: one fetch per leader, wait
for all answers) with fetch.max.wait.ms 500 and fetch.min.bytes 1.

When the load ends the harness waits (in virtual time, at most 40,000 ms: more
than request.timeout.ms + the client's grace) until every produce request it
issued has completed, then closes the cluster. A request still incomplete then
is a bug: the run exits 1. The consumers stop with the cluster, so the records
they consumed may trail the acked ones by the last few fetches.

What is measured
----------------
Wall time (``time.perf_counter``) and CPU time (``time.process_time``) of the whole
``trio.run``: cluster start, load, drain and shutdown. The harness's own share
(deciding which requests to send) is a few percent at most; see ``--profile``.
The cyclic GC stays on, as in real use; the time spent in collections is
measured with ``gc.callbacks`` and reported per generation. ``--no-gc`` times the
run with ``gc.disable()`` instead (its cyclic garbage is collected afterwards,
untimed; ``ru_maxrss`` then includes that garbage): the difference between the
two is what the emulator's reference cycles and its many live objects cost.
``--gc-threshold N`` keeps the GC on with ``gc.set_threshold(N, 10, 10)``
(Python's default N is 700), to try a runner-level remedy.

- **produce requests completed**: produce ``ClientRequest`` records of
  ``cluster.requests`` that have a ``completed_ms``, whatever their outcome; the
  completion causes and the per-partition error names are listed too.
- **per wall s / per CPU s**: completed produce requests divided by those times.
  The target is >= 20,000 per CPU second at RF 3; it is printed with
  PASS/MISS and never affects the exit status.
- **latency**: ``completed_ms - created_ms`` of the completed produce requests,
  virtual ms, nearest-rank p50/p99 and max.
- **events per second** (``--trace`` only): a *separate* run of the same workload
  with a ``RecordingTracer`` whose only sink counts events (per kind). The timed
  run is never traced.
- **peak memory**: ``ru_maxrss`` (Linux: KiB) read right after the timed run: the
  high-water mark of the whole process (interpreter, imports, the cluster, every
  ``ClientRequest``, every log batch). The value read before the run is printed
  beside it. ``--tracemalloc`` adds a separate untimed run under ``tracemalloc``
  and reports its peak of traced memory (Python allocations made during that run).
- **digest**: a hash of every produce request's id, times, cause and errors. The
  same arguments and seed give the same digest; it shows the run is reproducible.

The report also names the minibroker that was measured (its directory, and its
git commit and whether it has uncommitted changes, when it is a checkout): put
another tree first on ``PYTHONPATH`` to measure it.

``--matrix`` runs the default and the variants partitions 1 and 12, rate 5,000
and 50,000 (other options as given, ``--no-gc``/``--trace``/``--tracemalloc``
passed on), each in a fresh ``sys.executable`` subprocess, and prints one row per run.

``--profile`` replaces the timed run by a run under cProfile (enabled around
``trio.run`` only): the top 30 functions by tottime, then tottime summed by
layer (time in builtins and the standard library is charged to its callers'
layers, in proportion to the time each caller spent in it) and by module. Rates
under cProfile are lower than without it; compare only shares. A cyclic GC
collection runs inside whichever allocation crossed the threshold, and cProfile
charges it to that Python function, so with the GC on the layers include the
collections (mostly under ``purgatory``); ``--profile --no-gc`` shows the
emulator's own work only.

Exit status: 0; 1 if a produce request was still incomplete at the end (or the
load did not issue the scheduled number); 2 if a ``--matrix`` child crashed.
The target never affects it.

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import hashlib
import io
import json
import math
import platform
import pstats
import re
import resource
import subprocess
import sys
import time
import tracemalloc
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import trio
import trio.testing

import minibroker
from minibroker.clients import Consumer, Producer
from minibroker.common.messages import TopicPartition
from minibroker.runtime import MsClock, deterministic_scheduling, quiet_gc
from minibroker.sim import Cluster, TopicSpec, open_cluster
from minibroker.trace import RecordingTracer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_baseline import Figure, add_arguments, check, compare_tool

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [
    Figure("per_cpu_s", "higher"),
    Figure("cpu_s", "lower"),
    Figure("produce.latency_ms.p99", "lower"),
    Figure("gc.wall_s", "lower"),
    Figure("memory.maxrss_mib", "lower"),
    Figure("*.cpu_s", "lower"),  # --matrix: one document per workload, by name
]

TARGET_PER_CPU_S = 20_000  # simulated produce requests per CPU second at RF 3: the performance goal
BROKERS = 3
REPLICATION_FACTOR = 3
TOPIC = "bench"
QUICK_DURATION_MS = 1_000
DRAIN_MS = 40_000  # > request.timeout.ms (30,000) + minibroker.response.grace.ms (1,000)
RECORD_BYTES = 100
MATRIX = [
    ("default", {}),
    ("partitions=1", {"partitions": 1}),
    ("partitions=12", {"partitions": 12}),
    ("rate=5000", {"rate": 5_000}),
    ("rate=50000", {"rate": 50_000}),
]


@dataclass(frozen=True)
class Workload:
    partitions: int = 6
    rate: int = 20_000
    producers: int = 3
    consumers: int = 1
    duration_ms: int = 10_000
    latency_ms: int = 1
    records: int = 1
    fetch_max_wait_ms: int = 500
    seed: int = 0

    @property
    def requests(self) -> int:
        """Produce requests the load issues: those with a send time before ``duration_ms``."""
        return -(-self.duration_ms * self.rate // 1000)

    def describe(self) -> str:
        return (
            f"{BROKERS} brokers, RF {REPLICATION_FACTOR}, {self.partitions} partition(s), "
            f"{self.rate:,} produce req/s (acks=-1, {self.records} record(s) each) from "
            f"{self.producers} producer(s), {self.consumers} consumer(s), {self.duration_ms:,} virtual ms, "
            f"latency {self.latency_ms} ms, seed {self.seed}"
        )


# --------------------------------------------------------------------------- the simulation


class CountingSink:
    """A tracer sink that only counts events, in all and per kind."""

    def __init__(self) -> None:
        self.count = 0
        self.kinds: Counter[str] = Counter()

    def __call__(self, event: dict[str, Any]) -> None:
        self.count += 1
        self.kinds[event["kind"]] += 1


@dataclass
class RunResult:
    cluster: Cluster
    consumers: list[Consumer]
    load_end_ms: int
    end_ms: int
    wall_s: float
    cpu_s: float
    gc_s: list[float]  # per generation
    gc_collections: list[int]


async def _produce(cluster: Cluster, producer: Producer, index: int, w: Workload) -> None:
    """Producer ``index``: at each virtual ms, send the requests of the schedule that are its own."""
    clock = cluster.clock
    start = clock.now_ms()
    rate, partitions, producers, total = w.rate, w.partitions, w.producers, w.requests
    send = producer.send
    for ms in range(w.duration_ms):
        lo = -(-ms * rate // 1000)
        hi = min(-(-(ms + 1) * rate // 1000), total)
        mine = [i % partitions for i in range(lo, hi) if (i // partitions) % producers == index]
        if not mine:
            continue
        if clock.now_ms() < start + ms:
            await clock.sleep_until(start + ms)
        for partition in mine:
            send(TOPIC, partition, w.records, RECORD_BYTES * w.records)


async def _consume(cluster: Cluster, consumer: Consumer) -> None:
    clock = cluster.clock
    while True:
        started = clock.now_ms()
        await consumer.poll()
        if clock.now_ms() == started:  # never spin at one instant (latency 0 and immediate answers)
            await clock.sleep_until(started + 1)


def simulate(
    w: Workload,
    sink: CountingSink | None = None,
    cyclic_gc: bool = True,
    profiler: cProfile.Profile | None = None,
) -> RunResult:
    """Run the workload once; time the whole ``trio.run``.

    ``cyclic_gc=False`` runs it with the cyclic GC off; the collection that frees the run's cyclic
    garbage afterwards is neither timed nor profiled. ``profiler`` is enabled around ``trio.run`` only.
    """
    box: dict[str, Any] = {}

    async def main() -> None:
        options: dict[str, Any] = {"latency_ms": w.latency_ms}
        if sink is not None:
            # same trio instant as the cluster's own MsClock, hence the same origin
            options["tracer"] = RecordingTracer(MsClock().now_ms, [sink])
        topic = TopicSpec(TOPIC, w.partitions, REPLICATION_FACTOR)
        async with open_cluster(BROKERS, [topic], **options) as cluster:
            tps = [TopicPartition(TOPIC, p) for p in range(w.partitions)]
            producers = [cluster.producer(f"producer-{k}", acks=-1) for k in range(w.producers)]
            consumers = [
                cluster.consumer(f"consumer-{k}", fetch_max_wait_ms=w.fetch_max_wait_ms)
                for k in range(w.consumers)
            ]
            async with trio.open_nursery() as clients:
                for consumer in consumers:
                    consumer.assign(tps)
                    clients.start_soon(_consume, cluster, consumer)
                async with trio.open_nursery() as load:
                    for k, producer in enumerate(producers):
                        load.start_soon(_produce, cluster, producer, k, w)
                box["load_end_ms"] = cluster.now()
                waiting = [r for r in cluster.requests if r.kind == "produce" and not r.completed]
                with trio.move_on_after(DRAIN_MS / 1000):
                    for request in waiting:
                        await request.wait()
                clients.cancel_scope.cancel()
            box["cluster"] = cluster
            box["consumers"] = consumers
            box["end_ms"] = cluster.now()

    gc_started = [0.0]
    gc_seconds = [0.0, 0.0, 0.0]  # per generation
    gc_counts = [0, 0, 0]

    def on_gc(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            gc_started[0] = time.perf_counter()
        else:
            generation = info["generation"]
            gc_seconds[generation] += time.perf_counter() - gc_started[0]
            gc_counts[generation] += 1

    gc.collect()
    gc.callbacks.append(on_gc)
    was_enabled = gc.isenabled()
    if not cyclic_gc:
        gc.disable()
    try:
        with deterministic_scheduling(w.seed):
            if profiler is not None:
                profiler.enable()
            wall0, cpu0 = time.perf_counter(), time.process_time()
            trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
            wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
            if profiler is not None:
                profiler.disable()
    finally:
        if profiler is not None:
            profiler.disable()
        gc.callbacks.remove(on_gc)
        if was_enabled and not gc.isenabled():
            gc.collect()  # the run's cyclic garbage, untimed
            gc.enable()
    return RunResult(
        box["cluster"],
        box["consumers"],
        box["load_end_ms"],
        box["end_ms"],
        wall,
        cpu,
        gc_seconds,
        gc_counts,
    )


# --------------------------------------------------------------------------- figures


def percentile(sorted_values: list[int], p: float) -> int | None:
    """Nearest rank."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(p / 100 * len(sorted_values)) - 1)]


def summarize(w: Workload, run: RunResult) -> dict[str, Any]:
    cluster = run.cluster
    produce = [r for r in cluster.requests if r.kind == "produce"]
    fetch = [r for r in cluster.requests if r.kind == "fetch"]
    done = [r for r in produce if r.completed_ms is not None]
    latencies = sorted(r.completed_ms - r.created_ms for r in done)  # type: ignore[operator]
    errors: Counter[str] = Counter()
    for r in done:
        errors.update(r.errors.values())
    ok = sum(1 for r in done if all(e == "NONE" for e in r.errors.values()))
    sha = hashlib.sha256()
    for r in produce:
        errs = ",".join(f"{k}={v}" for k, v in sorted(r.errors.items()))
        sha.update(f"{r.id}|{r.created_ms}|{r.completed_ms}|{r.cause}|{errs}\n".encode())
    consumed = sum(count for c in run.consumers for batches in c.received.values() for _, count in batches)
    managers = [b.replica_manager for b in cluster.brokers if b.replica_manager is not None]
    fetchers = sum(f.fetches for m in managers for f in m.fetchers.values())
    purgatory = {
        name: {
            "completions": sum(getattr(m, attr).completions for m in managers),
            "expirations": sum(getattr(m, attr).expirations for m in managers),
            "purges": sum(getattr(m, attr).purges for m in managers),
        }
        for name, attr in (("produce", "produce_purgatory"), ("fetch", "fetch_purgatory"))
    }
    cpu = run.cpu_s
    per_cpu = len(done) / cpu if cpu > 0 else 0.0
    return {
        "workload": asdict(w),
        "produce": {
            "issued": len(produce),
            "expected": w.requests,
            "completed": len(done),
            "incomplete": len(produce) - len(done),
            "ok": ok,
            "causes": dict(Counter(r.cause for r in done).most_common()),
            "errors": dict(errors.most_common()),
            "latency_ms": {
                "p50": percentile(latencies, 50),
                "p99": percentile(latencies, 99),
                "max": latencies[-1] if latencies else None,
                "mean": round(sum(latencies) / len(latencies), 3) if latencies else None,
            },
        },
        "consumers": {
            "fetch_requests": len(fetch),
            "causes": dict(Counter(r.cause for r in fetch if r.completed_ms is not None).most_common()),
            "records_consumed": consumed,
            "records_expected": ok * w.records * w.consumers,  # acked records x consumers
        },
        "cluster": {
            "replica_fetches": fetchers,
            "network_messages": cluster.network.sent,
            "purgatory": purgatory,
        },
        "virtual_ms": {"load": run.load_end_ms, "end": run.end_ms},
        "wall_s": round(run.wall_s, 4),
        "cpu_s": round(run.cpu_s, 4),
        "gc": {
            "threshold": list(gc.get_threshold()),
            "collections": run.gc_collections,
            "wall_s": round(sum(run.gc_s), 4),
            "wall_s_by_gen": [round(t, 4) for t in run.gc_s],
        },
        "per_wall_s": round(len(done) / run.wall_s, 1) if run.wall_s > 0 else 0.0,
        "per_cpu_s": round(per_cpu, 1),
        "virtual_per_wall": round(run.end_ms / 1000 / run.wall_s, 3) if run.wall_s > 0 else 0.0,
        "target": {"per_cpu_s": TARGET_PER_CPU_S, "pass": per_cpu >= TARGET_PER_CPU_S},
        "digest": sha.hexdigest()[:16],
    }


def source_info() -> dict[str, Any]:
    """Which minibroker was measured: its directory, and its git commit and dirtiness in a checkout."""
    where = Path(minibroker.__file__).resolve().parent
    info: dict[str, Any] = {"path": str(where), "commit": None, "dirty": None}
    try:
        commit = subprocess.run(
            ["git", "-C", str(where), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        if commit.returncode == 0:
            info["commit"] = commit.stdout.strip()
            status = subprocess.run(
                ["git", "-C", str(where), "status", "--porcelain", "--", "."],
                capture_output=True,
                text=True,
                timeout=10,
            )
            info["dirty"] = bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return info


def maxrss_mib() -> float:
    """ru_maxrss of this process in MiB (Linux reports KiB, macOS bytes)."""
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / (1 << 20) if sys.platform == "darwin" else rss / 1024


def traced_run(w: Workload) -> dict[str, Any]:
    sink = CountingSink()
    run = simulate(w, sink)
    done = sum(1 for r in run.cluster.requests if r.kind == "produce" and r.completed_ms is not None)
    return {
        "events": sink.count,
        "wall_s": round(run.wall_s, 4),
        "cpu_s": round(run.cpu_s, 4),
        "events_per_wall_s": round(sink.count / run.wall_s, 1),
        "events_per_cpu_s": round(sink.count / run.cpu_s, 1),
        "produce_per_cpu_s": round(done / run.cpu_s, 1),
        "kinds": dict(sink.kinds.most_common()),
    }


def tracemalloc_run(w: Workload) -> dict[str, Any]:
    gc.collect()
    tracemalloc.start()
    try:
        run = simulate(w)
        _, peak = tracemalloc.get_traced_memory()
        current, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del run
    return {"peak_mib": round(peak / (1 << 20), 1), "at_end_mib": round(current / (1 << 20), 1)}


# --------------------------------------------------------------------------- profile by layer

LAYERS = [
    ("minibroker.timer", "timer"),
    ("minibroker.purgatory", "purgatory"),
    ("minibroker.clients", "client"),
    ("minibroker.sim.network", "network"),
    ("minibroker.runtime", "runtime (scheduler, reaper, executor, clock)"),
    ("minibroker.broker", "cluster (replica manager, partition, log, delayed ops, fetcher)"),
    ("minibroker.controller", "cluster (replica manager, partition, log, delayed ops, fetcher)"),
    ("minibroker.coordinator", "cluster (replica manager, partition, log, delayed ops, fetcher)"),
    ("minibroker.common", "cluster (replica manager, partition, log, delayed ops, fetcher)"),
    ("minibroker.sim", "cluster (replica manager, partition, log, delayed ops, fetcher)"),
    ("minibroker.trace", "trace"),
    ("minibroker", "minibroker (other)"),
    ("trio", "trio"),
    ("outcome", "trio"),
    ("sniffio", "trio"),
    ("emulator_bench", "harness"),
]
_ATTRS_GENERATED = re.compile(r"<attrs generated [\w ]+? ([\w.]+)>")
Func = tuple[str, int, str]


def module_of(filename: str) -> str | None:
    """A dotted module for files of minibroker, trio and this harness; None for builtins and stdlib."""
    m = _ATTRS_GENERATED.match(filename)
    if m:
        return m.group(1)
    path = filename.replace("\\", "/")
    if path.endswith("/emulator_bench.py"):
        return "emulator_bench"
    for package in ("minibroker", "trio", "outcome", "sniffio"):
        marker = f"/{package}/"
        at = path.rfind(marker)
        if at >= 0 and path.endswith(".py"):
            rest = path[at + 1 : -3].replace("/", ".")
            return rest.removesuffix(".__init__")
    return None


def layer_of_module(module: str) -> str:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return "other"


def layer_shares(stats: pstats.Stats) -> tuple[Counter[str], Counter[str]]:
    """tottime by layer (unowned code charged to its callers) and tottime by module (owned code only)."""
    raw: dict[Func, Any] = stats.stats  # type: ignore[attr-defined]
    memo: dict[Func, dict[str, float]] = {}

    def distribution(func: Func, active: frozenset[Func]) -> dict[str, float]:
        if func in memo:
            return memo[func]
        module = module_of(func[0])
        if module is not None:
            result = {layer_of_module(module): 1.0}
        else:
            callers = raw[func][4] if func in raw else {}
            weights = {c: v[2] for c, v in callers.items() if c not in active}
            total = sum(weights.values())
            if total <= 0:
                weights = {c: float(v[1]) for c, v in callers.items() if c not in active}
                total = sum(weights.values())
            if total <= 0:
                result = {"other (builtins with no caller)": 1.0}
            else:
                result = {}
                for caller, weight in weights.items():
                    for layer, share in distribution(caller, active | {func}).items():
                        result[layer] = result.get(layer, 0.0) + share * weight / total
        if not active:
            memo[func] = result
        return result

    by_layer: Counter[str] = Counter()
    by_module: Counter[str] = Counter()
    for func, (_, _, tottime, _, _) in raw.items():
        if tottime <= 0:
            continue
        for layer, share in distribution(func, frozenset()).items():
            by_layer[layer] += tottime * share
        module = module_of(func[0])
        by_module[module or "(builtins, stdlib, other packages)"] += tottime
    return by_layer, by_module


def profile_run(w: Workload, out: str | None, cyclic_gc: bool = True) -> dict[str, Any]:
    profiler = cProfile.Profile()
    run = simulate(w, cyclic_gc=cyclic_gc, profiler=profiler)
    if out:
        profiler.dump_stats(out)
    summary = summarize(w, run)
    summary["cyclic_gc"] = cyclic_gc
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    stats.sort_stats("tottime").print_stats(30)
    by_layer, by_module = layer_shares(stats)
    total = sum(by_layer.values())
    return {
        "summary": summary,
        "total_tottime_s": round(total, 3),
        "by_layer": {k: round(v, 3) for k, v in by_layer.most_common()},
        "by_module": {k: round(v, 3) for k, v in by_module.most_common()},
        "top30": text.getvalue(),
    }


def print_profile(p: dict[str, Any]) -> None:
    s = p["summary"]
    print(
        f"under cProfile: {s['produce']['completed']:,} produce requests completed in {s['cpu_s']:.2f} CPU s "
        f"({s['per_cpu_s']:,.0f}/CPU s; cProfile inflates the time, compare shares only)"
    )
    g = s["gc"]
    if s["cyclic_gc"]:
        print(
            f"cyclic GC on: {g['wall_s']:.2f} s in {sum(g['collections']):,} collections during this run. "
            "cProfile charges a collection to the function that allocated when it started (often a "
            "purgatory function), so the layers below include it; --no-gc shows them without it."
        )
    else:
        print("cyclic GC off (--no-gc): the layers below are the emulator's own work")
    print(p["top30"].rstrip())
    total = p["total_tottime_s"]
    print(f"\ntottime by layer (builtins/stdlib charged to their callers), total {total:.2f} s:")
    for layer, t in p["by_layer"].items():
        print(f"  {layer:<66} {t:8.2f} s  {100 * t / total:5.1f}%")
    print("\ntottime by module (own code only):")
    for module, t in list(p["by_module"].items())[:20]:
        print(f"  {module:<66} {t:8.2f} s  {100 * t / total:5.1f}%")


# --------------------------------------------------------------------------- report


def fmt_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v:,}" for k, v in counts.items()) or "-"


def print_report(r: dict[str, Any]) -> None:
    w = Workload(**r["workload"])
    p = r["produce"]
    lat = p["latency_ms"]
    c = r["consumers"]
    print(f"minibroker emulator bench: {w.describe()}")
    print(f"python {platform.python_version()}, trio {trio.__version__}, {platform.platform()}")
    src = r["source"]
    if src["commit"] is None:
        print(f"minibroker from {src['path']} (not a git checkout)")
    else:
        dirty = ", with uncommitted changes" if src["dirty"] else ""
        print(f"minibroker from {src['path']} at {src['commit']}{dirty}")
    print()
    print(
        f"produce requests   issued {p['issued']:,} (schedule {p['expected']:,}), "
        f"completed {p['completed']:,}, incomplete {p['incomplete']:,}, all-NONE {p['ok']:,}"
    )
    print(f"  causes           {fmt_counts(p['causes'])}")
    print(f"  errors           {fmt_counts(p['errors'])}  (per partition)")
    print(
        f"  latency          p50 {lat['p50']} ms, p99 {lat['p99']} ms, max {lat['max']} ms, "
        f"mean {lat['mean']} ms (virtual)"
    )
    print(
        f"consumers          {c['fetch_requests']:,} fetch requests ({fmt_counts(c['causes'])}), "
        f"{c['records_consumed']:,} records consumed of {c['records_expected']:,} (acked x consumers)"
    )
    cl = r["cluster"]
    pg = cl["purgatory"]
    print(
        f"cluster            {cl['replica_fetches']:,} replica fetches, {cl['network_messages']:,} network "
        f"messages; produce purgatory {pg['produce']['completions']:,} completions / "
        f"{pg['produce']['expirations']:,} expirations, fetch purgatory {pg['fetch']['completions']:,} / "
        f"{pg['fetch']['expirations']:,}"
    )
    vm = r["virtual_ms"]
    print(f"virtual time       {vm['load']:,} ms of load, {vm['end']:,} ms at the end (drain included)")
    print(
        f"wall / CPU         {r['wall_s']:.2f} s / {r['cpu_s']:.2f} s (virtual:wall {r['virtual_per_wall']}x)"
    )
    g = r["gc"]
    state = "on " if r.get("cyclic_gc", True) else "OFF"
    print(f"cyclic GC {state}      thresholds {'/'.join(str(t) for t in g['threshold'])}")
    print(
        f"                   {g['wall_s']:.2f} s wall in {sum(g['collections']):,} collections "
        f"(gen0/1/2: {'/'.join(f'{n:,}' for n in g['collections'])}; "
        f"{'/'.join(f'{t:.2f}' for t in g['wall_s_by_gen'])} s)"
    )
    print(
        f"throughput         {r['per_wall_s']:,.0f} completed produce requests per wall s, "
        f"{r['per_cpu_s']:,.0f} per CPU s"
    )
    verdict = "PASS" if r["target"]["pass"] else "MISS"
    print(
        f"target             >= {TARGET_PER_CPU_S:,} per CPU s at RF 3: {verdict} "
        f"({r['per_cpu_s']:,.0f} = {r['per_cpu_s'] / TARGET_PER_CPU_S:.2f} x target)"
    )
    m = r["memory"]
    line = (
        f"peak memory        ru_maxrss {m['maxrss_mib']:.1f} MiB after the timed run (whole process "
        f"high-water mark; {m['maxrss_before_mib']:.1f} MiB before it)"
    )
    print(line)
    if "tracemalloc" in m:
        t = m["tracemalloc"]
        print(
            f"                   tracemalloc peak {t['peak_mib']:.1f} MiB in a separate untimed run "
            f"({t['at_end_mib']:.1f} MiB still allocated at its end)"
        )
    if "trace" in r:
        t = r["trace"]
        kinds = ", ".join(f"{k} {v:,}" for k, v in list(t["kinds"].items())[:8])
        print(
            f"trace (separate)   {t['events']:,} events, {t['events_per_wall_s']:,.0f} per wall s, "
            f"{t['events_per_cpu_s']:,.0f} per CPU s; {t['produce_per_cpu_s']:,.0f} produce req per CPU s "
            f"when traced"
        )
        print(f"  top kinds        {kinds}")
    print(f"digest             {r['digest']} (same arguments and seed => same digest)")


def workload_args(w: Workload) -> list[str]:
    return [
        f"--partitions={w.partitions}",
        f"--rate={w.rate}",
        f"--producers={w.producers}",
        f"--consumers={w.consumers}",
        f"--duration-ms={w.duration_ms}",
        f"--latency-ms={w.latency_ms}",
        f"--records={w.records}",
        f"--seed={w.seed}",
    ]


def run_matrix(base: Workload, extra: list[str], as_json: bool) -> int:
    rows = []
    for name, change in MATRIX:
        w = replace(base, **change)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--json", *workload_args(w), *extra]
        print(f"{name}: {' '.join(cmd[1:])}", file=sys.stderr)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if proc.returncode not in (0, 1) or not proc.stdout.strip():
            print(proc.stderr, file=sys.stderr)
            print(f"error: the {name} run exited {proc.returncode}", file=sys.stderr)
            return 2
        rows.append((name, json.loads(proc.stdout), proc.returncode))
    if as_json:
        print(json.dumps({name: r for name, r, _ in rows}, indent=2))
    else:
        head = (
            f"{'variant':<14} {'part':>4} {'rate':>6} {'issued':>8} {'done':>8} {'p50':>4} {'p99':>4} "
            f"{'wall s':>7} {'CPU s':>7} {'GC s':>6} {'req/wall s':>10} {'req/CPU s':>10} {'target':>6} "
            f"{'maxrss':>8}"
        )
        print(head)
        for name, r, _ in rows:
            w, p = r["workload"], r["produce"]
            print(
                f"{name:<14} {w['partitions']:>4} {w['rate']:>6} {p['issued']:>8,} {p['completed']:>8,} "
                f"{p['latency_ms']['p50']!s:>4} {p['latency_ms']['p99']!s:>4} {r['wall_s']:>7.2f} "
                f"{r['cpu_s']:>7.2f} {r['gc']['wall_s']:>6.2f} {r['per_wall_s']:>10,.0f} "
                f"{r['per_cpu_s']:>10,.0f} {'PASS' if r['target']['pass'] else 'MISS':>6} "
                f"{r['memory']['maxrss_mib']:>7.0f}M"
            )
        print(f"target: >= {TARGET_PER_CPU_S:,} completed produce requests per CPU s at RF 3")
    return max(code for _, _, code in rows)


def main(argv: list[str] | None = None) -> int:
    defaults = Workload()
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--partitions", type=int, default=defaults.partitions)
    p.add_argument("--rate", type=int, default=defaults.rate, help="produce requests per virtual s in all")
    p.add_argument("--producers", type=int, default=defaults.producers)
    p.add_argument("--consumers", type=int, default=defaults.consumers)
    p.add_argument("--duration-ms", type=int, default=None, help="virtual ms of load (default 10,000)")
    p.add_argument("--latency-ms", type=int, default=defaults.latency_ms, help="every link's latency")
    p.add_argument("--records", type=int, default=defaults.records, help="records per produce request")
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK_DURATION_MS:,} virtual ms")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of the report")
    p.add_argument("--no-gc", action="store_true", help="timed run with the cyclic GC off (gc.disable)")
    p.add_argument(
        "--python-gc",
        action="store_true",
        help="Python's default GC thresholds (default: minibroker's quiet_gc, as `minibroker run` uses)",
    )
    p.add_argument(
        "--gc-threshold", type=int, metavar="N", help="gc.set_threshold(N, ...) for every run (default 700)"
    )
    p.add_argument("--trace", action="store_true", help="also run traced (counting sink): events per second")
    p.add_argument("--tracemalloc", action="store_true", help="also run untimed under tracemalloc")
    p.add_argument("--matrix", action="store_true", help="default + partitions 1/12 + rate 5000/50000")
    p.add_argument("--profile", action="store_true", help="run under cProfile instead: top 30 and layers")
    p.add_argument("--profile-out", metavar="FILE", help="with --profile: also dump the pstats file")
    add_arguments(p)
    args = p.parse_args(argv)
    duration = args.duration_ms
    if duration is None:
        duration = QUICK_DURATION_MS if args.quick else defaults.duration_ms
    w = Workload(
        partitions=args.partitions,
        rate=args.rate,
        producers=args.producers,
        consumers=args.consumers,
        duration_ms=duration,
        latency_ms=args.latency_ms,
        records=args.records,
        seed=args.seed,
    )
    if min(w.partitions, w.rate, w.producers, w.duration_ms, w.records) < 1 or w.consumers < 0:
        p.error("--partitions, --rate, --producers, --duration-ms and --records must be >= 1")
    if w.latency_ms < 0:
        p.error("--latency-ms must be >= 0")
    if args.gc_threshold is not None:
        if args.gc_threshold < 1:
            p.error("--gc-threshold must be >= 1")
        gc.set_threshold(args.gc_threshold, *gc.get_threshold()[1:])
    commit = check(p, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)

    gc_policy = contextlib.nullcontext()
    if not (args.no_gc or args.python_gc or args.gc_threshold is not None):
        gc_policy = quiet_gc()  # the policy run_scenario applies

    if args.matrix:
        flags = (
            ("--no-gc", args.no_gc),
            ("--python-gc", args.python_gc),
            ("--trace", args.trace),
            ("--tracemalloc", args.tracemalloc),
        )
        extra = [flag for flag, on in flags if on]
        if args.gc_threshold is not None:
            extra.append(f"--gc-threshold={args.gc_threshold}")
        return run_matrix(w, extra, args.json)
    if args.profile:
        result = profile_run(w, args.profile_out, cyclic_gc=not args.no_gc)
        if args.json:
            print(json.dumps(result, indent=2))
        else:
            print(f"minibroker emulator bench: {w.describe()}")
            print_profile(result)
        return 0

    before = maxrss_mib()
    with gc_policy:
        threshold = list(gc.get_threshold())
        run = simulate(w, cyclic_gc=not args.no_gc)
    after = maxrss_mib()
    report = summarize(w, run)
    report["gc"]["threshold"] = threshold
    report["cyclic_gc"] = not args.no_gc
    report["gc_policy"] = (
        "off"
        if args.no_gc
        else "python"
        if args.python_gc
        else f"threshold {args.gc_threshold}"
        if args.gc_threshold is not None
        else "quiet_gc"
    )
    report["source"] = source_info()
    del run
    report["memory"] = {"maxrss_mib": round(after, 1), "maxrss_before_mib": round(before, 1)}
    if args.tracemalloc:
        report["memory"]["tracemalloc"] = tracemalloc_run(w)
    if args.trace:
        report["trace"] = traced_run(w)
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)
    return 1 if report["produce"]["incomplete"] or report["produce"]["issued"] != w.requests else 0


if __name__ == "__main__":
    sys.exit(main())
