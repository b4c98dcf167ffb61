"""What 100,000 in-flight acquired records of one share partition cost the broker's timer (KIP-932).

Usage::

    python tools/share_lock_bench.py                 # 100,000 records, ShareFetches of 500 and of 1
    python tools/share_lock_bench.py --records 20000 --json
    python tools/share_lock_bench.py --quick         # 10,000 records (a CI smoke run)

Both figures come from one run, on Kafka's SystemTimer (tick 1 ms, 20 buckets) in virtual time:

- **SystemTimer per task**: ``--records`` plain timer tasks, each added with a 30,000 ms delay, then the
  clock advanced past them (all fire; the executor is ``list.append``): ns per task, add + fire.
- **per acquired record**: one ``SharePartition`` (``group.share.partition.max.record.locks`` raised
  to ``--records``) acquires ``--records`` records in ShareFetches of ``--batch`` (and of 1), each
  acquisition arming one acquisition lock (30,000 ms); then the clock is advanced past the locks (all
  fire). The timer's part is the acquire loop's time on the SystemTimer minus the same loop on a timer
  whose ``add`` does nothing, plus the advance: ns per in-flight record.

The ratio divides the per-record figure by the per-task figure. One lock per acquisition, not per record,
is what keeps it at or below 1: with ShareFetches of 500 a lock covers 500 records; with ShareFetches of 1
each record has its own lock and the ratio is the SystemTimer's own figure (about 1). Each figure is the
best of ``--repeat`` runs (the cyclic GC off while timing).

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.broker.share.share_partition import SharePartition
from minibroker.common.messages import TopicPartition
from minibroker.timer import SystemTimer, TimerTask

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_baseline import Figure, add_arguments, check, compare_tool

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [
    Figure("system_timer_ns_per_task", "lower"),
    Figure("rows.[batch].timer_ns_per_record", "lower"),
]
LOCK_MS = 30_000


class _NullTimer:
    """A timer that arms nothing: the acquire loop's cost without the timer."""

    def add(self, task: TimerTask) -> None:
        pass


def _timed(fn) -> int:
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter_ns()
        fn()
        return time.perf_counter_ns() - started
    finally:
        gc.enable()


def system_timer_ns(records: int) -> float:
    """ns per plain task on the SystemTimer: add, then fire."""
    fired: list = []
    timer = SystemTimer(executor=fired.append)
    tasks = [TimerTask(LOCK_MS) for _ in range(records)]

    def run() -> None:
        add = timer.add
        for task in tasks:
            add(task)
        timer.advance_clock(LOCK_MS + 1)

    elapsed = _timed(run)
    assert len(fired) == records
    return elapsed / records


def _acquire_loop(timer, records: int, batch: int) -> tuple[int, SharePartition]:
    sp = SharePartition(
        "sg",
        TopicPartition("t", 0),
        timer,
        lambda: 0,
        lock_duration_ms=LOCK_MS,
        delivery_count_limit=5,
        max_record_locks=records,
    )
    sp.initialize(0)
    rounds = records // batch

    def run() -> None:
        acquire = sp.acquire
        for _ in range(rounds):
            acquire("m", batch, records)

    elapsed = _timed(run)
    assert sp.next_fetch_offset == rounds * batch
    return elapsed, sp


def share_timer_ns(records: int, batch: int) -> dict:
    """The timer's ns per in-flight record when ``records`` are acquired ``batch`` at a time."""
    fired: list = []
    timer = SystemTimer(executor=fired.append)
    with_timer, sp = _acquire_loop(timer, records, batch)
    without_timer, _ = _acquire_loop(_NullTimer(), records, batch)
    advance = _timed(lambda: timer.advance_clock(LOCK_MS + 1))
    assert len(fired) == len(sp.locks) == records // batch
    timer_ns = max(0, with_timer - without_timer) + advance
    return {
        "batch": batch,
        "locks": len(sp.locks),
        "timer_ns_per_record": timer_ns / records,
        "acquire_ns_per_record": with_timer / records,
    }


def run(records: int, batches: list[int], repeat: int) -> dict:
    per_task = min(system_timer_ns(records) for _ in range(repeat))
    rows = []
    for batch in batches:
        best = min(
            (share_timer_ns(records, batch) for _ in range(repeat)), key=lambda r: r["timer_ns_per_record"]
        )
        rows.append({**best, "ratio": best["timer_ns_per_record"] / per_task})
    return {"records": records, "system_timer_ns_per_task": per_task, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="share_lock_bench.py", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000, help="records in flight (100,000)")
    parser.add_argument("--batch", type=int, default=500, help="records per ShareFetch (default 500)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is kept (3)")
    parser.add_argument("--quick", action="store_true", help="10,000 records, one run (a CI smoke run)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_arguments(parser)
    args = parser.parse_args(argv)
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    records, repeat = (10_000, 1) if args.quick else (args.records, args.repeat)
    smallest = min((records, "records"), (args.batch, "batch"), (repeat, "repeat"))
    if smallest[0] < 1:
        parser.exit(2, f"{parser.prog}: error: --{smallest[1]} must be at least 1, got {smallest[0]}\n")
    if records % args.batch:
        parser.exit(
            2, f"{parser.prog}: error: --records ({records}) must be a multiple of --batch ({args.batch})\n"
        )
    result = run(records, sorted({args.batch, 1}, reverse=True), repeat)
    if args.json:
        print(json.dumps({**result, "load_average": os.getloadavg()}, indent=2))
        return 0
    print(
        f"SystemTimer: {result['system_timer_ns_per_task']:,.0f} ns per task (add + fire), {records:,} tasks"
    )
    for row in result["rows"]:
        print(
            f"{records:,} records acquired {row['batch']:,} per ShareFetch ({row['locks']:,} locks): "
            f"timer {row['timer_ns_per_record']:,.1f} ns per record, ratio {row['ratio']:.3f}; "
            f"acquire in all {row['acquire_ns_per_record']:,.0f} ns per record"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
