"""Invariant 11: what the log cleaner keeps of a run's compacted topic (``compaction_generate``).

Checked live, at each ``log.clean`` event, on the log of the broker that cleaned:

- **superseded records go**: below the log's cleaner checkpoint (the end of its last cleaning,
  which covered every record below it) no key appears twice;
- **tombstones outlive delete.retention.ms**: a tombstone below the cleaning's end and the HW is
  remembered with the time of the first cleaning that kept it; a later cleaning may remove it
  only ``delete.retention.ms`` after that time, unless a later record of its key supersedes it.

Checked at the end, on the partition's leader:

- **the latest value stays**: for every key whose latest record (by offset) of an acknowledged
  acks=-1 produce, appended while the effective min ISR was >= 2, is a value, that record or a
  record of the same key at a higher offset is in the log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minibroker.broker.log_cleaner import keyed_records
from minibroker.chaos.records import parse_tp
from minibroker.chaos.schedule import COMPACTOR
from minibroker.chaos.violations import Violation

if TYPE_CHECKING:
    from minibroker.broker.log import Log
    from minibroker.chaos.live_run import LiveRun
    from minibroker.chaos.schedule import Schedule
    from minibroker.scenario.run import RunResult
    from minibroker.sim.cluster import Cluster


def _violation(label: str, offsets: str, time_ms: int, message: str) -> Violation:
    return Violation(11, label, offsets, time_ms, message, {"kind": "none"})


def log_keys(log: Log) -> list[tuple[int, bytes, bool]]:
    """Every keyed record of ``log``: (offset, key, tombstone), in offset order."""
    return [record for batch in log.batches() for record in keyed_records(batch)]


def superseded(log: Log) -> tuple[int, int, bytes] | None:
    """Two records of one key below the cleaner checkpoint (earlier offset, later, key), or None."""
    checkpoint = log.cleaner_checkpoint
    if checkpoint is None or checkpoint > log.log_end_offset:
        return None
    seen: dict[bytes, int] = {}
    for offset, key, _ in log_keys(log):
        if offset >= checkpoint:
            break
        if key in seen:
            return seen[key], offset, key
        seen[key] = offset
    return None


class CompactionChecks:
    """The live rules, and what they remember: per (partition, broker) the tombstones a cleaning kept."""

    def __init__(self, live: LiveRun, topic: str, retention_ms: int) -> None:
        self.live = live
        self.topic = topic
        self.retention_ms = retention_ms  # the topic's delete.retention.ms
        self.cleanings = 0
        #: (partition, broker) -> tombstone offset -> (key, time of the cleaning that first kept it)
        self.kept: dict[tuple[str, int], dict[int, tuple[bytes, int]]] = {}

    def __call__(self, event: dict[str, Any]) -> None:
        label, broker, now = event["partition"], event["broker"], event["time_ms"]
        tp = parse_tp(label)
        if tp.topic != self.topic or self.live.cluster is None:
            return
        self.cleanings += 1
        cluster = self.live.cluster
        log = cluster.brokers[broker].logs.get(tp)
        if log is None:
            return
        found = superseded(log)
        if found is not None:
            earlier, later, key = found
            self.live.violate(
                ("compaction-superseded", label, broker),
                _violation(
                    label,
                    f"{earlier} and {later}",
                    now,
                    f"broker {broker}'s cleaning (end {event['end']}) kept key {key.decode()!r} at {earlier} "
                    f"though {later} supersedes it",
                ),
            )
        retention = self.retention_ms
        records = log_keys(log)
        last: dict[bytes, int] = {}
        for offset, key, _ in records:
            last[key] = offset
        kept = self.kept.setdefault((label, broker), {})
        for offset, (key, _) in kept.items():
            last[key] = max(last.get(key, -1), offset)  # a kept tombstone supersedes too, gone or not
        present = {offset for offset, _, _ in records}
        for offset, (key, first) in sorted(kept.items()):
            if offset in present or last[key] > offset or now >= first + retention:
                continue
            self.live.violate(
                ("compaction-tombstone", label, broker, offset),
                _violation(
                    label,
                    str(offset),
                    now,
                    f"broker {broker}'s cleaning removed the tombstone of key {key.decode()!r} at "
                    f"{offset} {now - first} ms after the cleaning that first kept it "
                    f"(delete.retention.ms {retention})",
                ),
            )
        self.kept[(label, broker)] = {
            offset: kept.get(offset, (key, now))
            for offset, key, tombstone in records
            if tombstone and offset < min(event["end"], log.high_watermark)
        }


def check_compaction(
    schedule: Schedule, result: RunResult, checks: CompactionChecks, cluster: Cluster
) -> list[Violation]:
    """Invariant 11 at the end of the run, on the compacted partition's leader."""
    topic = schedule.compacted
    assert topic is not None
    violations: list[Violation] = []
    keys_of = {p.id: (p.keys or (), p.tombstone) for p in schedule.produces if p.producer == COMPACTOR}
    end = result.end_ms
    for p in range(topic.partitions):
        label = f"{topic.name}-{p}"
        tp = parse_tp(label)
        leader = cluster.leader_of(tp) if tp in cluster.controller.state else -1
        log = cluster.brokers[leader].logs.get(tp) if leader >= 0 else None
        if log is None:
            continue
        found = superseded(log)
        if found is not None:
            earlier, later, key = found
            violations.append(
                _violation(
                    label,
                    f"{earlier} and {later}",
                    end,
                    f"leader {leader} keeps key {key.decode()!r} at {earlier} below its cleaner checkpoint "
                    f"{log.cleaner_checkpoint} though {later} supersedes it",
                )
            )
        latest: dict[str, tuple[int, bool, str]] = {}  # key -> (offset, tombstone, request)
        for request in result.requests:
            if request.kind != "produce" or request.client != COMPACTOR or request.id not in keys_of:
                continue
            if request.errors.get(label) != "NONE":
                continue
            appends = checks.live.appends.get((request.id, label), [])
            append = next((a for a in appends if a.broker == request.broker), None)
            if append is None:
                continue
            keys, tombstone = keys_of[request.id]
            for i, key in enumerate(keys):
                offset = append.offset + i
                if key not in latest or offset > latest[key][0]:
                    latest[key] = (offset, tombstone, request.id if append.min_isr >= 2 else "")
        present: dict[str, int] = {}
        for offset, key, _ in log_keys(log):
            present[key.decode()] = offset
        for key, (offset, tombstone, request) in sorted(latest.items()):
            if not request or tombstone or present.get(key, -1) >= offset:
                continue  # a tombstone's removal is judged live, by the cleaning that removed it
            violations.append(
                _violation(
                    label,
                    str(offset),
                    end,
                    f"the latest value of key {key!r} (offset {offset}, request {request}, acknowledged) "
                    f"is gone from leader {leader} and no later record of the key is there",
                )
            )
    return violations
