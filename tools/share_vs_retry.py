"""The same poison-record workload through retry topics + a DLT and through a share group, side by side.

Usage::

    python tools/share_vs_retry.py                  # 100 records, the poison one at offset 7
    python tools/share_vs_retry.py --records 1000 --poison 500 --json
    python tools/share_vs_retry.py --quick          # 20 records (a CI smoke run)

Both designs run on the emulator in virtual time (one broker, no link latency; a scenario each, built
here) with the same workload: ``--records`` records produced at 0 ms to one partition, of which the one
at ``--poison`` fails every time it is handled. Each design gives it ``--attempts`` deliveries:

- **retry topics + DLT** (``minibroker.retry``, non-blocking): the handler raises a retryable error;
  the record goes to ``orders-retry-1`` .. ``-<attempts-1>`` with ``--delay-ms`` between deliveries
  (fixed backoff), then to ``orders-dlt``;
- **share group** (KIP-932, the emulator's share consumer): the handler RELEASEs it;
  ``group.share.delivery.count.limit`` = ``--attempts`` archives it at its last delivery. RELEASE has
  no backoff: the next ShareFetch hands it out again at once.

Per design the tool reports what was delivered (records done, dead-lettered or archived), handler
calls, duplicates (a record done more than once), records done out of offset order (done before a
lower offset was settled), the time from produce to done (p50, max) and to the poison record's end,
and the cost: records written besides the source topic (retry and DLT topics; the share-group state
written to ``__share_group_state``), timer tasks armed for it (the scheduler's entries; the acquisition
locks), and the wall-clock time of the run. Virtual-time figures are exact and the same every run; only
``wall_ms`` varies.

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from minibroker.scenario import parse_scenario, run_scenario

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_baseline import Figure, add_arguments, check, compare_tool

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [Figure("rows.[design].wall_ms", "lower")]

RETRY = """\
[scenario]
name = "share_vs_retry_retry"
end_ms = {end}

[cluster]
brokers = 1

[[topics]]
name = "orders"
partitions = 1

[retry]
topic = "orders"
attempts = {attempts}
backoff = "fixed"
delay_ms = {delay}
retryable = ["TimeoutError"]

[retry.handler]
fail = [{{ partition = 0, offset = {poison}, error = "TimeoutError" }}]

[[clients]]
id = "shop"
type = "producer"

[[steps]]
at = 0
action = "produce"
client = "shop"
topic = "orders"
records = {records}
"""

SHARE = """\
[scenario]
name = "share_vs_retry_share"
end_ms = {end}

[cluster]
brokers = 1
config = {{ "offsets.topic.num.partitions" = 1, "share.coordinator.state.topic.num.partitions" = 1, \
"group.share.delivery.count.limit" = {attempts} }}

[[topics]]
name = "orders"
partitions = 1

[[clients]]
id = "shop"
type = "producer"

[[clients]]
id = "worker"
type = "share_consumer"
config = {{ "group.id" = "workers" }}
subscribe = ["orders"]

[[steps]]
at = 0
action = "join"
client = "worker"

[[steps]]
at = 0
action = "acknowledge"
client = "worker"
type = "RELEASE"
offsets = [{poison}]

[[steps]]
at = 100
action = "produce"
client = "shop"
topic = "orders"
records = {records}
"""


def _events(text: str) -> tuple[list[dict], float]:
    events: list[dict] = []
    started = time.perf_counter()
    result = run_scenario(
        parse_scenario(text, "share_vs_retry.toml"), sinks=[lambda e: events.append(dict(e))]
    )
    wall_ms = (time.perf_counter() - started) * 1000
    if not result.passed:
        raise SystemExit("share_vs_retry: a run did not hold")
    return events, wall_ms


class Outcome:
    """What one design's run did, gathered from its trace."""

    def __init__(self, design: str, produced_ms: int) -> None:
        self.design = design
        self.produced_ms = produced_ms
        self.done: dict[int, int] = {}  # offset -> ms from produce to done
        self.done_seq: dict[int, int] = {}  # offset -> trace seq of its being done
        self.settled: dict[int, int] = {}  # offset -> trace seq of its first end (done, dead, archived)
        self.calls = self.duplicates = self.extra_records = self.timer_tasks = 0
        self.poison_end_ms: int | None = None

    def finish(self, offset: int, event: dict) -> None:
        """``offset`` was handled successfully at ``event``."""
        if offset in self.done:
            self.duplicates += 1
        else:
            self.done[offset] = event["time_ms"] - self.produced_ms
            self.done_seq[offset] = event["seq"]
        self.settled.setdefault(offset, event["seq"])

    def give_up(self, offset: int, event: dict) -> None:
        """``offset`` was dead-lettered or archived at ``event``."""
        self.poison_end_ms = event["time_ms"] - self.produced_ms
        self.settled.setdefault(offset, event["seq"])

    def row(self, wall_ms: float) -> dict:
        latencies = sorted(self.done.values())
        out_of_order = sum(
            1
            for offset, at in self.done_seq.items()
            if any(o < offset and t > at for o, t in self.settled.items())
        )
        return {
            "design": self.design,
            "done": len(self.done),
            "handler_calls": self.calls,
            "duplicates": self.duplicates,
            "out_of_order": out_of_order,  # done before a lower offset was settled
            "done_p50_ms": statistics.median(latencies) if latencies else None,
            "done_max_ms": max(latencies) if latencies else None,
            "dead_or_archived": int(self.poison_end_ms is not None),
            "poison_end_ms": self.poison_end_ms,
            "extra_records": self.extra_records,
            "timer_tasks": self.timer_tasks,
            "wall_ms": round(wall_ms, 1),
        }


def retry_row(records: int, poison: int, attempts: int, delay_ms: int) -> dict:
    end = (attempts + 2) * delay_ms + 1000
    events, wall_ms = _events(
        RETRY.format(end=end, attempts=attempts, delay=delay_ms, poison=poison, records=records)
    )
    outcome = Outcome("retry topics + DLT", 0)
    for e in events:
        kind = e["kind"]
        if kind == "retry.deliver":
            outcome.calls += 1
        elif kind == "retry.handoff":  # a record in a retry topic, an entry in the scheduler
            outcome.extra_records += 1
            outcome.timer_tasks += 1
        elif kind == "retry.processed":
            outcome.finish(int(e["origin"].rpartition("@")[2]), e)
        elif kind == "retry.dead":
            outcome.extra_records += 1  # the record in the DLT
            outcome.give_up(int(e["origin"].rpartition("@")[2]), e)
    return outcome.row(wall_ms)


def share_row(records: int, poison: int, attempts: int) -> dict:
    events, wall_ms = _events(SHARE.format(end=2000, attempts=attempts, poison=poison, records=records))
    # produced at 100: the share consumer's window starts at its first ShareFetch, so it joins first
    outcome = Outcome("share group", 100)
    for e in events:
        kind = e["kind"]
        if kind == "share.acquire":
            outcome.timer_tasks += 1  # one acquisition lock
            outcome.calls += e["last_offset"] - e["offset"] + 1
        elif kind == "share.state.write":
            outcome.extra_records += 1
        elif kind == "share.ack":
            size = e["last_offset"] - e["offset"] + 1
            types = e["types"] if len(e["types"]) > 1 else e["types"] * size
            for i, ack_type in enumerate(types):
                if ack_type == "ACCEPT":
                    outcome.finish(e["offset"] + i, e)
        elif kind == "share.archive":
            outcome.give_up(e["offset"], e)
    return outcome.row(wall_ms)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="share_vs_retry.py", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100, help="records produced (default 100)")
    parser.add_argument("--poison", type=int, default=7, help="the poison record's offset (default 7)")
    parser.add_argument("--attempts", type=int, default=5, help="deliveries of the poison record (5)")
    parser.add_argument("--delay-ms", type=int, default=1000, help="retry backoff (default 1000)")
    parser.add_argument("--quick", action="store_true", help="20 records (a CI smoke run)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_arguments(parser)
    args = parser.parse_args(argv)
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    records = 20 if args.quick else args.records
    for name, value, least in (("records", records, 1), ("delay-ms", args.delay_ms, 1)):
        if value < least:
            parser.exit(2, f"{parser.prog}: error: --{name} must be at least {least}, got {value}\n")
    if not 0 <= args.poison < records:
        parser.exit(
            2, f"{parser.prog}: error: --poison must be an offset 0..{records - 1}, got {args.poison}\n"
        )
    if args.attempts < 2:
        parser.exit(2, f"{parser.prog}: error: --attempts must be at least 2, got {args.attempts}\n")
    rows = [
        retry_row(records, args.poison, args.attempts, args.delay_ms),
        share_row(records, args.poison, args.attempts),
    ]
    if args.json:
        print(json.dumps({"rows": rows, "load_average": os.getloadavg()}, indent=2))
        return 0
    keys = [k for k in rows[0] if k != "design"]
    print(f"{'':22}" + "".join(f"{row['design']:>22}" for row in rows))
    for key in keys:
        print(f"{key:22}" + "".join(f"{'-' if row[key] is None else row[key]!s:>22}" for row in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
