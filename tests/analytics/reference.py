"""The analyze metrics computed in plain Python, straight from docs/pipeline.md, for the tests.

Nothing here imports the pipeline: every figure is derived again from the trace files,
so a test that compares the two checks the Spark job against the definitions.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

CAUSES = ("condition", "expiry", "leadership")
ISR_KINDS = ("leader", "isr.commit", "controller.isr", "controller.elect")


def read_trace(path: Path) -> list[dict[str, Any]]:
    """Every event of a JSONL or Parquet trace, with ``data`` parsed into ``fields``."""
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    else:
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    for row in rows:
        row["fields"] = json.loads(row["data"]) if row["data"] else {}
    return rows


def nearest_rank(values: list[int], fraction: float) -> int:
    ordered = sorted(values)
    rank = 1
    while rank < len(ordered) and rank < fraction * len(ordered):
        rank += 1
    return ordered[rank - 1]


def op_kind(purgatory: str, op: str) -> str:
    if purgatory == "Produce":
        return "produce"
    if purgatory == "Fetch":
        return "follower-fetch" if re.fullmatch(r"b\d+-replica-fetch-\d+", op) else "consumer-fetch"
    return purgatory.lower()


def operations(name: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    end_ms = max(e["time_ms"] for e in events)
    has_expire = any(e["kind"] == "op.expire" for e in events)
    crashes = [
        (e["broker"], e["seq"])
        for e in events
        if e["kind"] == "fault" and e["fields"]["fault"] in ("crash", "shutdown")
    ]
    cancelled = {(e["broker"], op) for e in events if e["kind"] == "op.cancel" for op in e["fields"]["ops"]}
    by_op: dict[tuple, list[dict]] = defaultdict(list)
    for e in events:
        if e["kind"] in ("op.create", "op.complete", "op.expire"):
            by_op[(e["broker"], e["purgatory"], e["op"])].append(e)
    ops = []
    for (broker, purgatory, op), mine in by_op.items():
        creates = [e for e in mine if e["kind"] == "op.create"]
        completes = sorted((e for e in mine if e["kind"] == "op.complete"), key=lambda e: e["seq"])
        expires = [e for e in mine if e["kind"] == "op.expire"]
        created_seq = min((e["seq"] for e in creates), default=None)
        created_ms = min((e["time_ms"] for e in creates), default=None)
        delay_ms = max((e["fields"]["delay_ms"] for e in creates), default=None)
        deadline = None if created_ms is None else created_ms + delay_ms
        cause = None
        if completes:
            cause = completes[0]["cause"] if completes[0]["cause"] in CAUSES else "other"
        if completes:
            status = "completed"
        elif (broker, op) in cancelled:
            status = "cancelled"
        elif created_seq is not None and any(b == broker and s > created_seq for b, s in crashes):
            status = "crashed"
        elif deadline is not None and deadline >= end_ms:
            status = "waiting"
        else:
            status = "lost"
        expiry_seqs = [e["seq"] for e in completes if e["cause"] == "expiry"]
        expire_seq = min((e["seq"] for e in expires), default=None)
        problems = []
        if status == "lost":
            problems.append("completed 0 times")
        if len(completes) >= 2:
            problems.append("completed 2+ times")
        if expires and (not expiry_seqs or min(expiry_seqs) > expire_seq):
            problems.append("on_expiration without on_complete")
        if len(expires) >= 2:
            problems.append("on_expiration 2+ times")
        if has_expire and cause == "expiry" and not expires:
            problems.append("expiry without on_expiration")
        if len(creates) >= 2:
            problems.append("created 2+ times")
        if not creates:
            problems.append("no op.create")
        ops.append(
            {
                "trace": name,
                "broker": broker,
                "purgatory": purgatory,
                "op_kind": op_kind(purgatory, op),
                "op": op,
                "created_ms": created_ms,
                "deadline_ms": deadline,
                "completions": len(completes),
                "expirations": len(expires),
                "status": status,
                "cause": cause,
                "latency_ms": None
                if not completes or created_ms is None
                else completes[0]["time_ms"] - created_ms,
                "problems": problems,
            }
        )
    return ops


def _bucket(time_ms: int, bucket_ms: int) -> int:
    return time_ms // bucket_ms * bucket_ms


def analyze(paths: list[Path], bucket_ms: int) -> dict[str, list[dict[str, Any]]]:
    """Every table of ``minibroker analyze``, rows in the job's order."""
    traces, ops = [], []
    rate: dict[tuple, dict] = {}
    fires: dict[int, int] = defaultdict(int)
    sizes: dict[tuple, dict] = {}
    hw: dict[tuple, dict] = {}
    isr: dict[tuple, dict] = {}
    groups: list[dict[str, Any]] = []
    txns: list[dict[str, Any]] = []
    lags: list[dict[str, Any]] = []
    retried: list[dict[str, Any]] = []
    lateness: dict[str, list[int]] = defaultdict(list)
    levels: dict[tuple, int] = defaultdict(int)
    shared: list[dict[str, Any]] = []
    for path in paths:
        name = str(path.resolve())
        events = read_trace(path)
        traces.append(
            {
                "trace": name,
                "events": len(events),
                "skipped": 0,
                "start_ms": min(e["time_ms"] for e in events),
                "end_ms": max(e["time_ms"] for e in events),
                "has_expire": any(e["kind"] == "op.expire" for e in events),
            }
        )
        ops += operations(name, events)
        groups += rebalances(name, events)
        txns += transactions(name, events)
        lags += lso_lag(name, events)
        retried += retry_records(name, events)
        shared += share_groups(name, events)
        for e in events:
            if e["kind"] == "delay.delivered":
                lateness[e["fields"]["design"]].append(e["fields"]["lateness_ms"])
        for e in sorted(events, key=lambda e: e["seq"]):
            kind, b = e["kind"], _bucket(e["time_ms"], bucket_ms)
            if kind in ("op.create", "op.complete"):
                created, completed = int(kind == "op.create"), int(kind == "op.complete")
                row = rate.setdefault(
                    (b, e["purgatory"], op_kind(e["purgatory"], e["op"])),
                    {"created": 0, "completed": 0, "expired": 0},
                )
                row["created"] += created
                row["completed"] += completed
                row["expired"] += int(kind == "op.complete" and e["cause"] == "expiry")
            if kind in ("op.create", "op.complete", "purge"):
                size = sizes.setdefault(
                    (name, e["broker"], e["purgatory"], b),
                    {
                        "created": 0,
                        "completed": 0,
                        "purges": 0,
                        "purged": 0,
                        "watched": None,
                        "num_delayed": None,
                    },
                )
                if kind != "purge":
                    before = levels[(name, e["broker"], e["purgatory"])]
                    after = before + (1 if kind == "op.create" else -1)
                    levels[(name, e["broker"], e["purgatory"])] = after
                    size["max_waiting"] = max(size.get("max_waiting", before), before, after)
                if kind == "purge":
                    size["purges"] += 1
                    size["purged"] += e["count"]
                    size["watched"] = e["fields"]["watched"]
                    size["num_delayed"] = e["fields"]["num_delayed"]
                else:
                    size["created"] += int(kind == "op.create")
                    size["completed"] += int(kind == "op.complete")
            if kind == "timer.fire":
                fires[e["time_ms"] - e["fields"]["expiration"]] += 1
            if kind == "hw":
                row = hw.setdefault((name, e["partition"], b), {"changes": 0})
                row.update(hw=e["fields"]["hw"], leader=e["broker"], changes=row["changes"] + 1)
            if kind in ISR_KINDS:
                members = e["fields"]["isr"]
                row = isr.setdefault((name, e["partition"], b), {"changes": 0, "min_isr_size": len(members)})
                row.update(
                    isr=json.dumps(members, separators=(",", ":")),
                    isr_size=len(members),
                    min_isr_size=min(row["min_isr_size"], len(members)),
                    changes=row["changes"] + 1,
                )
    waiting: dict[tuple, int] = defaultdict(int)
    size_rows = []
    for key in sorted(sizes):
        row = sizes[key]
        waiting[key[:3]] += row["created"] - row["completed"]
        peak = row.pop("max_waiting", waiting[key[:3]])  # a bucket with purges only: the level held
        size_rows.append(
            dict(zip(("trace", "broker", "purgatory", "bucket_ms"), key, strict=True))
            | row
            | {"waiting": waiting[key[:3]], "max_waiting": peak}
        )
    return {
        **retry_tables(retried),
        "delay_lateness": [
            {
                "design": design,
                "delivered": len(values),
                "p50_ms": nearest_rank(values, 0.5),
                "p99_ms": nearest_rank(values, 0.99),
                "max_ms": max(values),
            }
            for design, values in sorted(lateness.items())
        ],
        "share_groups": sorted(shared, key=lambda r: (r["trace"], r["group"], r["partition"])),
        "rebalances": sorted(groups, key=lambda r: (r["trace"], r["broker"], r["group"], r["protocol"])),
        "transactions": sorted(txns, key=lambda r: (r["trace"], r["txn"], r["transaction"])),
        "lso_lag": sorted(lags, key=lambda r: (r["trace"], r["partition"])),
        "traces": sorted(traces, key=lambda r: r["trace"]),
        "skipped": [],  # the bundled scenarios write only valid events
        "operations": _summary(ops),
        "latency": _latency(ops),
        "rate": [
            {"bucket_ms": k[0], "purgatory": k[1], "op_kind": k[2]}
            | v
            | {"created_per_s": v["created"] * 1000.0 / bucket_ms}
            for k, v in sorted(rate.items())
        ],
        "timer_precision": [{"delta_ms": d, "fires": n} for d, n in sorted(fires.items())],
        "purgatory_size": size_rows,
        "hw": [
            dict(zip(("trace", "partition", "bucket_ms"), k, strict=True)) | v for k, v in sorted(hw.items())
        ],
        "isr": [
            dict(zip(("trace", "partition", "bucket_ms"), k, strict=True)) | v for k, v in sorted(isr.items())
        ],
        "audit": sorted(
            (
                {
                    k: op[k]
                    for k in (
                        "trace",
                        "broker",
                        "purgatory",
                        "op_kind",
                        "op",
                        "created_ms",
                        "deadline_ms",
                        "completions",
                        "expirations",
                        "status",
                    )
                }
                | {"problem": problem}
                for op in ops
                for problem in op["problems"]
            ),
            key=lambda r: (r["trace"], r["broker"], r["op"], r["problem"]),
        ),
    }


def retry_records(name: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (client, origin): deliveries, first delivery, outcome of the first end event."""
    found: dict[tuple, dict[str, Any]] = {}
    for e in sorted(events, key=lambda e: e["seq"]):
        if e["kind"] not in ("retry.deliver", "retry.processed", "retry.dead"):
            continue
        key = (e["fields"]["client"], e["fields"]["origin"])
        row = found.setdefault(key, {"trace": name, "attempts": 0, "first_ms": None, "outcome": "pending"})
        if e["kind"] == "retry.deliver":
            row["attempts"] += 1
            row["first_ms"] = e["time_ms"] if row["first_ms"] is None else min(row["first_ms"], e["time_ms"])
        elif row["outcome"] == "pending":
            row["outcome"] = "dead" if e["kind"] == "retry.dead" else "processed"
            row["end_ms"] = e["time_ms"]
    return [{"client": client, **row} for (client, _), row in found.items() if row["attempts"]]


def retry_tables(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """``retry_attempts`` and ``retry_dlt`` from the per-record rows (docs/pipeline.md)."""
    attempts: dict[tuple, int] = defaultdict(int)
    per_client: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        attempts[(r["trace"], r["client"], r["outcome"], r["attempts"])] += 1
        per_client[(r["trace"], r["client"])].append(r)
    dlt = []
    for (trace, client), rows in sorted(per_client.items()):
        times = [r["end_ms"] - r["first_ms"] for r in rows if r["outcome"] == "dead"]
        dlt.append(
            {"trace": trace, "client": client, "records": len(rows)}
            | {o: sum(r["outcome"] == o for r in rows) for o in ("processed", "dead", "pending")}
            | {
                "p50_ms": nearest_rank(times, 0.5) if times else None,
                "p99_ms": nearest_rank(times, 0.99) if times else None,
                "max_ms": max(times) if times else None,
            }
        )
    return {
        "retry_attempts": [
            dict(zip(("trace", "client", "outcome", "attempts"), key, strict=True)) | {"records": n}
            for key, n in sorted(attempts.items())
        ],
        "retry_dlt": dlt,
    }


SHARE_KINDS = ("share.acquire", "share.lock.expire", "share.archive", "share.accept")


def share_groups(name: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (group, partition) of a share group: records acquired and redelivered (delivery count > 1),
    lock expiries, records accepted, archived as rejected and at the delivery-count limit, and the
    nearest-rank p50 / p99 of the accepted records' produce-to-accept ``latency_ms``."""
    found: dict[tuple, dict[str, Any]] = {}
    latencies: dict[tuple, list[int]] = defaultdict(list)
    for e in events:
        if e["kind"] not in SHARE_KINDS:
            continue
        key = (e["fields"]["group"], e["partition"])
        row = found.setdefault(
            key,
            {
                "acquired": 0,
                "redelivered": 0,
                "lock_expiries": 0,
                "accepted": 0,
                "rejected": 0,
                "at_limit": 0,
            },
        )
        if e["kind"] == "share.acquire":
            row["acquired"] += e["count"]
            row["redelivered"] += e["count"] if e["fields"]["delivery_count"] > 1 else 0
        elif e["kind"] == "share.lock.expire":
            row["lock_expiries"] += 1
        elif e["kind"] == "share.archive":
            row["rejected"] += e["cause"] == "reject"
            row["at_limit"] += e["cause"] == "limit"
        else:
            row["accepted"] += 1
            if e["fields"].get("latency_ms") is not None:
                latencies[key].append(e["fields"]["latency_ms"])
    return [
        {"trace": name, "group": group, "partition": partition, **row}
        | {
            "p50_ms": nearest_rank(latencies[(group, partition)], 0.5)
            if latencies[(group, partition)]
            else None,
            "p99_ms": nearest_rank(latencies[(group, partition)], 0.99)
            if latencies[(group, partition)]
            else None,
        }
        for (group, partition), row in found.items()
    ]


def rebalances(name: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (broker, group, protocol): rebalance durations, session expiries, partition stops.

    classic: PreparingRebalance -> Stable (via CompletingRebalance); consumer: the first
    ``group.consumer.epoch`` after the group was Stable or Empty -> the next Stable, and each
    partition's ``group.consumer.release`` -> its next ``group.consumer.own``.
    """
    found: dict[tuple, dict[str, Any]] = {}
    start: dict[tuple, int | None] = {}
    previous: dict[tuple, str | None] = {}
    released: dict[tuple, int | None] = {}

    def row(key: tuple) -> dict[str, Any]:
        return found.setdefault(key, {"durations": [], "session_expiries": 0, "stops": []})

    for e in sorted(events, key=lambda e: e["seq"]):
        kind, fields = e["kind"], e["fields"]
        if kind not in ("group.state", "group.session.expire") and not kind.startswith("group.consumer."):
            continue
        protocol = "consumer" if kind.startswith("group.consumer.") else "classic"
        key = (e["broker"], fields["group"], protocol)
        if kind == "group.session.expire":
            row(key)["session_expiries"] += int(not fields["pending"])
        elif kind == "group.state":
            state = fields["state"]
            if state == "PreparingRebalance":
                start[key] = e["time_ms"]
            elif (
                state == "Stable"
                and previous.get(key) == "CompletingRebalance"
                and start.get(key) is not None
            ):
                row(key)["durations"].append(e["time_ms"] - start[key])
            previous[key] = state
        elif kind == "group.consumer.epoch":
            if start.get(key) is None:
                start[key] = e["time_ms"]
        elif kind == "group.consumer.state" and fields["state"] in ("Stable", "Empty"):
            if fields["state"] == "Stable" and start.get(key) is not None:
                row(key)["durations"].append(e["time_ms"] - start[key])
            start[key] = None
        elif kind == "group.consumer.fence" and fields["reason"] == "session timeout":
            row(key)["session_expiries"] += 1
        elif kind == "group.consumer.release":
            released[(*key, e["partition"])] = e["time_ms"]
        elif kind == "group.consumer.own":
            since = released.pop((*key, e["partition"]), None)
            if since is not None:
                row(key)["stops"].append(e["time_ms"] - since)
    out = []
    for (broker, group, protocol), r in found.items():
        durations, stops = r["durations"], r["stops"]
        if not durations and not r["session_expiries"] and not stops:
            continue
        consumer = protocol == "consumer"
        out.append(
            {
                "trace": name,
                "broker": broker,
                "group": group,
                "protocol": protocol,
                "rebalances": len(durations),
                "min_ms": min(durations) if durations else None,
                "mean_ms": round(sum(durations) / len(durations), 1) if durations else None,
                "max_ms": max(durations) if durations else None,
                "session_expiries": r["session_expiries"],
                "partition_stops": len(stops) if consumer else None,
                "max_stop_ms": (max(stops) if stops else None) if consumer else None,
            }
        )
    return out


def transactions(name: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per transactional id, each transaction from an Ongoing that follows no Ongoing to its completion."""
    last_state: dict[str, str] = {}
    found: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in sorted(events, key=lambda e: e["seq"]):
        if e["kind"] not in ("txn.state", "txn.end", "txn.timeout", "txn.markers"):
            continue
        txn, fields = e["fields"]["txn"], e["fields"]
        if e["kind"] == "txn.state":
            if fields["state"] == "Ongoing" and last_state.get(txn) != "Ongoing":
                found[txn].append({"begin_ms": e["time_ms"], "timed_out": False})
            last_state[txn] = fields["state"]
        if not found[txn]:
            continue
        row = found[txn][-1]
        if e["kind"] == "txn.end":
            row.setdefault("end_ms", e["time_ms"])
        elif e["kind"] == "txn.markers":
            row.setdefault("markers_ms", e["time_ms"])
        elif e["kind"] == "txn.timeout":
            row["timed_out"] = True
        elif fields["state"] in ("CompleteCommit", "CompleteAbort") and "complete_ms" not in row:
            row["complete_ms"] = e["time_ms"]
            row["completed"] = fields["state"]
    out = []
    for txn, rows in found.items():
        for number, row in enumerate(rows, start=1):
            completed, complete_ms = row.get("completed"), row.get("complete_ms")
            outcome = None
            if completed == "CompleteCommit":
                outcome = "commit"
            elif completed == "CompleteAbort":
                outcome = "timeout-abort" if row["timed_out"] else "abort"
            end_ms, markers_ms = row.get("end_ms"), row.get("markers_ms")
            out.append(
                {
                    "trace": name,
                    "txn": txn,
                    "transaction": number,
                    "begin_ms": row["begin_ms"],
                    "end_ms": end_ms,
                    "complete_ms": complete_ms,
                    "outcome": outcome,
                    "latency_ms": None if complete_ms is None or end_ms is None else complete_ms - end_ms,
                    "marker_ms": None
                    if complete_ms is None or markers_ms is None
                    else complete_ms - markers_ms,
                }
            )
    return out


def lso_lag(name: str, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per partition: the spans from an ``lso`` event below the HW to the next at the HW."""
    end_ms = max(e["time_ms"] for e in events)
    spans: dict[str, list[list[Any]]] = defaultdict(list)
    held: dict[str, int] = {}
    for e in sorted(events, key=lambda e: e["seq"]):
        if e["kind"] != "lso":
            continue
        partition, lso, hw = e["partition"], e["fields"]["lso"], e["fields"]["hw"]
        open_span = spans[partition] and spans[partition][-1][1] is None
        if lso < hw:
            held[partition] = max(held.get(partition, 0), hw - lso)
            if not open_span:
                spans[partition].append([e["time_ms"], None])
        elif open_span:
            spans[partition][-1][1] = e["time_ms"]
    out = []
    for partition, found in spans.items():
        if not found:
            continue
        lengths = [(end if end is not None else end_ms) - start for start, end in found]
        out.append(
            {
                "trace": name,
                "partition": partition,
                "lags": len(found),
                "total_ms": sum(lengths),
                "max_ms": max(lengths),
                "max_held": held[partition],
                "open": found[-1][1] is None,
            }
        )
    return out


def _summary(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple, list] = defaultdict(list)
    for op in ops:
        groups[(op["purgatory"], op["op_kind"])].append(op)
    rows = []
    for (purgatory, kind), mine in sorted(groups.items()):
        row = {
            "purgatory": purgatory,
            "op_kind": kind,
            "created": sum(op["created_ms"] is not None for op in mine),
        }
        for status in ("completed", "cancelled", "crashed", "waiting", "lost"):
            row[status] = sum(op["status"] == status for op in mine)
        for cause in CAUSES:
            row[cause] = sum(op["cause"] == cause for op in mine)
        row["with_problems"] = sum(bool(op["problems"]) for op in mine)
        row["expiry_rate"] = row["expiry"] / row["completed"] if row["completed"] else None
        rows.append(row)
    return rows


def _latency(ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    groups: dict[tuple, list[int]] = defaultdict(list)
    for op in ops:
        if op["latency_ms"] is None:
            continue
        groups[(op["purgatory"], op["op_kind"], op["cause"])].append(op["latency_ms"])
        groups[(op["purgatory"], op["op_kind"], "all")].append(op["latency_ms"])
    rows = []
    for (purgatory, kind, cause), values in sorted(groups.items()):
        row = {"purgatory": purgatory, "op_kind": kind, "cause": cause, "count": len(values)}
        for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p999", 0.999)):
            row[name] = nearest_rank(values, fraction)
        row["max"] = max(values)
        row["mean"] = sum(values) / len(values)
        rows.append(row)
    return rows
