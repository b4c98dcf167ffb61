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


def _out_of_order(done: dict[int, int], settled: dict[int, int]) -> int:
    """Records done (``done``: offset -> trace sequence number) before a lower offset was settled."""
    return sum(1 for offset, at in done.items() if any(o < offset and t > at for o, t in settled.items()))


def _row(
    design: str, done: dict[int, int], calls: int, duplicates: int, order: tuple[dict, dict], **rest
) -> dict:
    """``done``: offset -> ms from produce to done; ``order``: offset -> trace sequence number, of the
    records done and of every record settled (done, dead-lettered or archived)."""
    latencies = sorted(done.values())
    return {
        "design": design,
        "done": len(done),
        "handler_calls": calls,
        "duplicates": duplicates,
        "out_of_order": _out_of_order(*order),
        "done_p50_ms": statistics.median(latencies) if latencies else None,
        "done_max_ms": max(latencies) if latencies else None,
        **rest,
    }


def retry_row(records: int, poison: int, attempts: int, delay_ms: int) -> dict:
    end = (attempts + 2) * delay_ms + 1000
    events, wall_ms = _events(
        RETRY.format(end=end, attempts=attempts, delay=delay_ms, poison=poison, records=records)
    )
    done: dict[int, int] = {}
    duplicates = 0
    settled: dict[int, int] = {}
    done_seq: dict[int, int] = {}
    dead_at = None
    calls = handoffs = 0
    for e in events:
        kind = e["kind"]
        if kind == "retry.deliver":
            calls += 1
        elif kind == "retry.handoff":
            handoffs += 1
        elif kind in ("retry.processed", "retry.dead"):
            offset = int(e["origin"].rpartition("@")[2])
            if kind == "retry.dead":
                dead_at = e["time_ms"]
            elif offset in done:
                duplicates += 1
            else:
                done[offset] = e["time_ms"]
                done_seq[offset] = e["seq"]
            settled.setdefault(offset, e["seq"])
    return _row(
        "retry topics + DLT",
        done,
        calls,
        duplicates,
        (done_seq, settled),
        dead_or_archived=1 if dead_at is not None else 0,
        poison_end_ms=dead_at,
        extra_records=handoffs + (1 if dead_at is not None else 0),
        timer_tasks=handoffs,
        wall_ms=round(wall_ms, 1),
    )


def share_row(records: int, poison: int, attempts: int) -> dict:
    produced = 100  # the share consumer's window starts at its first ShareFetch: it joins first
    events, wall_ms = _events(SHARE.format(end=2000, attempts=attempts, poison=poison, records=records))
    done: dict[int, int] = {}
    duplicates = 0
    settled: dict[int, int] = {}
    done_seq: dict[int, int] = {}
    archived_at = None
    calls = locks = writes = 0
    for e in events:
        kind = e["kind"]
        if kind == "share.acquire":
            locks += 1
            calls += e["last_offset"] - e["offset"] + 1
        elif kind == "share.state.write":
            writes += 1
        elif kind == "share.ack":
            size = e["last_offset"] - e["offset"] + 1
            types = e["types"] if len(e["types"]) > 1 else e["types"] * size
            for i, ack_type in enumerate(types):
                if ack_type != "ACCEPT":
                    continue
                offset = e["offset"] + i
                if offset in done:
                    duplicates += 1
                done[offset] = e["time_ms"] - produced
                done_seq[offset] = e["seq"]
                settled.setdefault(offset, e["seq"])
        elif kind == "share.archive":
            archived_at = e["time_ms"] - produced
            settled.setdefault(e["offset"], e["seq"])
    return _row(
        "share group",
        done,
        calls,
        duplicates,
        (done_seq, settled),
        dead_or_archived=1 if archived_at is not None else 0,
        poison_end_ms=archived_at,
        extra_records=writes,
        timer_tasks=locks,
        wall_ms=round(wall_ms, 1),
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="share_vs_retry.py", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=_positive, default=100, help="records produced (default 100)")
    parser.add_argument("--poison", type=int, default=7, help="the poison record's offset (default 7)")
    parser.add_argument("--attempts", type=_positive, default=5, help="deliveries of the poison record (5)")
    parser.add_argument("--delay-ms", type=_positive, default=1000, help="retry backoff (default 1000)")
    parser.add_argument("--quick", action="store_true", help="20 records (a CI smoke run)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_arguments(parser)
    args = parser.parse_args(argv)
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    records = 20 if args.quick else args.records
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
