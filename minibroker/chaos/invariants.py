"""The end-of-run checks, on the final state, the requests and what the consumers received.

- invariant 1: every delayed operation whose deadline passed before the end, on a
  broker that did not crash meanwhile, completed;
- invariant 2: every acks=-1 produce acknowledged (NONE) while the leader's
  effective min ISR was >= 2 is read back by the ``reader`` (which polls every
  partition from offset 0 once the cluster settled): at its acknowledged offset,
  the same batch (its size names the request), once; the reader's batches are
  contiguous from 0;
- invariant 3: every batch another consumer received is still there, identical,
  for the reader;
- invariant 4: every replica's log is contiguous and its HW within [0, LEO];
- invariant 5: no request's batch is read back twice;
- invariant 6: the probes answered NONE and every ISR was whole at the liveness
  bound (scenario expectations), and every produce sent before the last heal was
  answered;
- invariant 7: the group is Stable with every member at ``group_check_ms`` (the
  ``group`` expectation) and every subscribed partition has exactly one owner.

Timed-out (and other failed) acks=-1 produces may or may not be in the log: Kafka
promises nothing about them. They are counted ("in doubt"), never violations; so
are acks=1 records lost with a leader.
"""

from __future__ import annotations

from typing import Any

import attrs

from minibroker.chaos.groups import check_assignment
from minibroker.chaos.observe import Observer
from minibroker.chaos.records import Append
from minibroker.chaos.schedule import COMPACTOR, PROBE, READER, Schedule
from minibroker.chaos.violations import Violation
from minibroker.common.messages import TopicPartition
from minibroker.scenario.run import RunResult
from minibroker.sim.cluster import Cluster


@attrs.define
class Tally:
    """Counts for the report (none of them are violations)."""

    produces: int = 0
    acked: int = 0  # produce requests answered NONE, any acks
    protected: int = 0  # acked acks=-1 with effective min ISR >= 2
    read_back: int = 0  # records the reader read
    acks1_lost: int = 0  # acked acks=1 requests whose records the reader did not find
    unprotected_lost: int = 0  # acked acks=-1 with min ISR 1, not read back
    in_doubt: int = 0  # failed produces (timeouts, ...) whose records are in the log anyway
    failed: int = 0  # produce requests answered with an error


def _read(append: Append, op: str) -> dict[str, Any]:
    return {
        "kind": "read",
        "partition": append.partition,
        "offset": append.offset,
        "count": append.count,
        "bytes": append.bytes,
        "op": op,
    }


def _markers(cluster: Cluster, label: str) -> dict[int, int]:
    """The control batches (transaction markers) of a partition's leader log: base -> next offset."""
    topic, _, number = label.rpartition("-")
    tp = TopicPartition(topic, int(number))
    leader = cluster.leader_of(tp) if tp in cluster.controller.state else -1
    log = cluster.brokers[leader].logs.get(tp) if leader >= 0 else None
    if log is None:
        return {}
    return {
        b.base_offset: b.next_offset
        for b in log.batches()
        if b.producers and all(p.control >= 0 for p in b.producers)
    }


def check_end(
    schedule: Schedule, result: RunResult, observer: Observer, cluster: Cluster
) -> tuple[list[Violation], Tally]:
    violations: list[Violation] = []
    tally = Tally()
    end = result.end_ms
    # invariant 1: operations that never completed
    for (broker, purgatory, op), state in observer.ops.items():
        deadline = state.created_ms + state.delay_ms
        if not state.completed and deadline < end and observer.lives.get(broker, 0) == state.life:
            violations.append(
                Violation(
                    1,
                    None,
                    "",
                    deadline,
                    f"{purgatory} operation {op} on broker {broker} (created at "
                    f"{state.created_ms} ms, delay {state.delay_ms} ms) never completed",
                    {
                        "kind": "event",
                        "fields": {"kind": "op.complete", "broker": broker, "purgatory": purgatory, "op": op},
                        "count": 1,
                    },
                )
            )
    # what the reader read, per partition: offset -> batch
    reader: dict[str, dict[int, Any]] = {}
    sizes: dict[tuple[str, int], list[int]] = {}
    for item in observer.received:
        if item.client == READER:
            reader.setdefault(item.partition, {})[item.batch.base_offset] = item.batch
            if not any(p.transactional for p in item.batch.producers):  # a loop's retried output repeats
                sizes.setdefault((item.partition, item.batch.size), []).append(item.batch.base_offset)
            tally.read_back += item.batch.count
    for label, batches in sorted(reader.items()):
        expected = 0
        markers = _markers(cluster, label)
        for offset in sorted(batches):
            while offset != expected and expected in markers:
                expected = markers[expected]  # consumers never hand over transaction markers
            if offset != expected:
                violations.append(
                    Violation(
                        2,
                        label,
                        f"{expected}..{offset - 1}",
                        end,
                        f"the reader's batches are not contiguous: it skipped from {expected} to {offset}",
                    )
                )
                break
            expected = batches[offset].next_offset
    for (label, size), offsets in sorted(sizes.items()):
        if len(offsets) > 1 and size > 1:
            violations.append(
                Violation(
                    5,
                    label,
                    " and ".join(map(str, offsets)),
                    end,
                    f"the batch of {size} bytes (one request) is in the log {len(offsets)} times",
                )
            )
    acks = {c.id: c.config["acks"] for c in schedule.producers}
    acks[PROBE] = -1
    for request in result.requests:
        if request.kind != "produce" or request.client in (PROBE, COMPACTOR):
            continue  # the compacted topic's produces: invariant 11 (compaction_checks)
        tally.produces += 1
        for label, error in sorted(request.errors.items()):
            appends = observer.appends.get((request.id, label), [])
            append = next((a for a in appends if a.broker == request.broker), None)
            batch = reader.get(label, {}).get(append.offset) if append else None
            present = append is not None and batch is not None and batch.size == append.bytes
            if error != "NONE":
                tally.failed += 1
                tally.in_doubt += bool(append is not None and (label, append.bytes) in sizes)
                continue
            tally.acked += 1
            if acks.get(request.client, -1) != -1 or append is None:
                if acks.get(request.client) == 1 and append is not None and not present:
                    tally.acks1_lost += 1
                continue
            if append.min_isr < 2:
                tally.unprotected_lost += not present
                continue
            tally.protected += 1
            if present and batch.count == append.count:
                continue
            read_to = max((b.next_offset for b in reader.get(label, {}).values()), default=0)
            seen = (
                f"a different batch of {batch.count} records, {batch.size} bytes, epoch {batch.leader_epoch}"
                if batch is not None
                else f"nothing (the reader read up to {read_to})"
            )
            unclean = observer.unclean.get(label)
            note = f"; unclean election at {unclean[0]} ms" if unclean else ""
            violations.append(
                Violation(
                    2,
                    label,
                    f"{append.offset}..{append.offset + append.count - 1}",
                    request.completed_ms or end,
                    f"acks=-1 request {request.id} was acknowledged at {request.completed_ms} ms "
                    f"(appended in epoch {append.epoch}, min ISR {append.min_isr}) "
                    f"but the reader found {seen}{note}",
                    _read(append, request.id),
                )
            )
    # invariant 3: what other consumers read is still there
    for item in observer.received:
        if item.client == READER:
            continue
        batch = reader.get(item.partition, {}).get(item.batch.base_offset)
        if batch is None or batch.size != item.batch.size or batch.count != item.batch.count:
            unclean = observer.unclean.get(item.partition)
            note = f"; unclean election at {unclean[0]} ms" if unclean else ""
            violations.append(
                Violation(
                    3,
                    item.partition,
                    f"{item.batch.base_offset}..{item.batch.last_offset}",
                    item.time_ms,
                    f"consumer {item.client} read {item.batch.count} records ({item.batch.size} bytes, epoch "
                    f"{item.batch.leader_epoch}, HW {item.high_watermark}) that were later truncated{note}",
                    {
                        "kind": "read",
                        "partition": item.partition,
                        "offset": item.batch.base_offset,
                        "count": item.batch.count,
                        "bytes": item.batch.size,
                        "op": None,
                    },
                )
            )
            break  # one per run: the rest usually follow from it
    # invariant 4: every log contiguous, HW within the log
    for broker in cluster.brokers:
        for tp, log in sorted(broker.logs.items()):
            expected = log.log_start_offset
            holes = schedule.compacted is not None and tp.topic == schedule.compacted.name  # cleaned
            for batch in log.batches():
                if batch.base_offset != expected and not (holes and batch.base_offset > expected):
                    violations.append(
                        Violation(
                            4,
                            str(tp),
                            f"{expected}..{batch.base_offset}",
                            end,
                            f"broker {broker.broker_id}'s log is not contiguous",
                        )
                    )
                    break
                expected = batch.next_offset
            ends = expected <= log.log_end_offset if holes else expected == log.log_end_offset
            if not 0 <= log.high_watermark <= log.log_end_offset or not ends:
                violations.append(
                    Violation(
                        4,
                        str(tp),
                        f"HW {log.high_watermark} LEO {log.log_end_offset}",
                        end,
                        f"broker {broker.broker_id}'s HW or LEO disagrees with its log",
                    )
                )
    # invariant 6: the scenario's own expectations (probes, ISR) and unanswered produces
    for item in result.results:
        if not item.passed:
            group = item.expected.startswith("group ")
            within = schedule.group_check_ms - schedule.heal_ms if group else schedule.settle_ms
            violations.append(
                Violation(
                    7 if group else 6,
                    None,
                    "",
                    schedule.group_check_ms if group else schedule.check_ms,
                    f"after healing at {schedule.heal_ms} ms, within {within} ms: expected "
                    f"{item.expected}; seen {item.seen}",
                    {"kind": "expect", "where": item.where},
                )
            )
    violations += check_assignment(schedule, cluster)
    for request in result.requests:
        if request.kind == "produce" and request.created_ms < schedule.heal_ms and not request.completed:
            violations.append(
                Violation(
                    6,
                    ",".join(str(tp) for tp in request.partitions),
                    "",
                    request.created_ms,
                    f"produce {request.id} sent at {request.created_ms} ms was never answered",
                    {"kind": "none"},
                )
            )
    return violations, tally
