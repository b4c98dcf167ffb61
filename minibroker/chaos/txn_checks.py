"""Invariant 8: transactions keep Kafka's promises under faults (runs with transactions).

Live, on every ``append`` and ``hw`` of a partition leader: the LSO the leader serves is at most its
HW and at most the first offset of every transaction still open in its log (a transactional batch
of a producer id with no marker after it). The open transactions are found by this module's own
walk of the log, not by the broker's producer state.

At ``check_ms`` (the transaction bound after the last heal, ``txn_schedule.transaction_bound``):
no leader's log holds an open transaction and no coordinator holds one (Ongoing, PrepareCommit,
PrepareAbort, PrepareEpochFence): every transaction ended in time.

At the end, from the final logs of the partition leaders (each transactional batch resolved by the
next marker of its producer id: COMMIT or ABORT):

- a READ_COMMITTED consumer never received a batch of an aborted transaction;
- the READ_COMMITTED reader (``rc-reader``, every partition from offset 0 after the bound) received
  every batch of every committed transaction, and each transaction is committed on all its
  partitions or aborted on all (all or none), aborted when its producer aborted it, committed on
  every send that was answered NONE when its commit was answered NONE;
- a fenced producer never appends: no data batch of a producer id follows, in a partition's log, a
  marker of that producer id with a higher epoch (the marker the coordinator wrote when it fenced);
- the consume-transform-produce loop: with C the group ``ctp``'s committed offset of ``ctp-in-0``,
  every input offset below C has exactly one output in the committed output, and none at or past C.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from minibroker.chaos.records import parse_tp
from minibroker.chaos.schedule import RC_READER
from minibroker.chaos.txn_schedule import INPUT_TOPIC, OUTPUT_BYTES, OUTPUT_TOPIC, TRANSFORM_GROUP
from minibroker.chaos.violations import Violation
from minibroker.common.messages import TXN_COMMITTED, TopicPartition
from minibroker.common.record_batch import COMMIT_MARKER
from minibroker.coordinator.group import OFFSETS_TOPIC

if TYPE_CHECKING:
    from minibroker.broker.log import Log
    from minibroker.chaos.live_run import LiveRun
    from minibroker.chaos.records import Received
    from minibroker.chaos.schedule import Schedule
    from minibroker.scenario.run import RunResult
    from minibroker.sim.cluster import Cluster

OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
COMMITTED, ABORTED, OPEN = "committed", "aborted", "open"


@attrs.define
class _Scan:
    """How far this module walked one leader's log, and the transactions open there."""

    batches: int = 0
    #: the last batch walked (the object: a truncation followed by appends can put another batch at
    #: the same index and base offset, a replicated marker where a truncated batch was)
    last: Any = None
    open: dict[int, int] = attrs.Factory(dict)  # producer id -> first offset of its open transaction


@attrs.frozen
class TxnBatch:
    """A transactional data batch of a final log, with how its transaction ended there."""

    partition: str
    base_offset: int
    size: int
    count: int
    producer_id: int
    epoch: int
    outcome: str


def _violation(message: str, time_ms: int, partition: str | None = None, offsets: str = "") -> Violation:
    return Violation(8, partition, offsets, time_ms, message, {"kind": "none"})


class TxnChecks:
    """The live LSO rule and the check at ``check_ms``; ``live`` gives the cluster and ``violate``."""

    def __init__(self, live: LiveRun) -> None:
        self.live = live
        self._scans: dict[tuple[int, str], tuple[Log, _Scan]] = {}

    def __call__(self, kind: str, event: dict[str, Any]) -> None:
        cluster = self.live.cluster
        broker, label = event["broker"], event["partition"]
        manager = cluster.brokers[broker].replica_manager if cluster is not None else None
        partition = manager.partitions.get(parse_tp(label)) if manager is not None else None
        if partition is None or not partition.is_leader:
            return
        log = partition.log
        first = self.first_open(broker, label, log)
        lso, hw = partition.max_offset(TXN_COMMITTED), log.high_watermark
        now = event["time_ms"]
        if lso > hw:
            self._lso(
                label, now, f"the LSO {lso} on broker {broker} is above its HW {hw}", min(first or hw, hw)
            )
        elif first is not None and lso > first:
            self._lso(
                label,
                now,
                f"the LSO {lso} on broker {broker} is past {first}, the first offset of a transaction "
                f"still open in its log (HW {hw})",
                first,
            )

    def _lso(self, label: str, now: int, message: str, held: int) -> None:
        evidence = {"kind": "lso", "partition": label, "at": now, "lso": held}
        violation = Violation(8, label, f"LSO {held}", now, message, evidence)
        self.live.violate(("lso", label), violation)

    def first_open(self, broker: int, label: str, log: Log) -> int | None:
        """The first offset of the earliest transaction open in ``log`` (None when none is)."""
        known = self._scans.get((broker, label))
        batches = log.batches()
        scan = known[1] if known is not None and known[0] is log else None
        if (
            scan is None
            or len(batches) < scan.batches
            or (scan.batches and batches[scan.batches - 1] is not scan.last)
        ):
            scan = _Scan()  # a new log (a restart) or a truncated one: walk it again
        for batch in batches[scan.batches :]:
            for producer in batch.producers:
                if producer.control >= 0:
                    scan.open.pop(producer.producer_id, None)
                elif producer.transactional:
                    scan.open.setdefault(producer.producer_id, batch.base_offset + producer.first_delta)
        scan.batches = len(batches)
        scan.last = batches[-1] if batches else None
        self._scans[(broker, label)] = (log, scan)
        return min(scan.open.values()) if scan.open else None

    def at_bound(self, schedule: Schedule) -> None:
        """At ``check_ms``: no transaction open on a leader or a coordinator."""
        cluster = self.live.cluster
        assert cluster is not None
        now, within = cluster.now(), schedule.settle_ms
        for broker in cluster.brokers:
            if not broker.alive:
                continue
            coordinator = broker.transaction_coordinator
            for txn_id, meta in sorted(coordinator.transactions.items()) if coordinator is not None else ():
                if meta.state in OPEN_STATES and broker.broker_id == cluster.transaction_coordinator_for(
                    txn_id
                ):
                    self.live.violate(
                        ("txn-open", txn_id),
                        _violation(
                            f"transaction {txn_id} (producer id {meta.producer_id}, epoch "
                            f"{meta.producer_epoch}, begun at {meta.start_ms} ms) is still {meta.state} on "
                            f"coordinator {broker.broker_id} {within} ms after the heal at "
                            f"{schedule.heal_ms} ms",
                            now,
                        ),
                    )
            manager = broker.replica_manager
            for tp, partition in sorted(manager.partitions.items()) if manager is not None else ():
                if not partition.is_leader:
                    continue
                first = self.first_open(broker.broker_id, str(tp), partition.log)
                if first is not None:
                    self.live.violate(
                        ("log-open", str(tp)),
                        _violation(
                            f"a transaction open at offset {first} on leader {broker.broker_id} has no "
                            "marker "
                            f"{within} ms after the heal at {schedule.heal_ms} ms",
                            now,
                            str(tp),
                            str(first),
                        ),
                    )


def final_batches(cluster: Cluster) -> dict[tuple[str, int], TxnBatch]:
    """Every transactional data batch in the leaders' final logs, by (partition, base offset), and
    fenced appends (data after a higher-epoch marker of the producer id) as ``epoch`` -1 entries."""
    found: dict[tuple[str, int], TxnBatch] = {}
    for tp in sorted(cluster.controller.state):
        leader = cluster.leader_of(tp)
        log = cluster.brokers[leader].logs.get(tp) if leader >= 0 and not tp.topic.startswith("__") else None
        if log is None:
            continue
        label = str(tp)
        pending: dict[int, list[tuple[Any, Any]]] = {}
        for batch in log.batches():
            for producer in batch.producers:
                pid = producer.producer_id
                if producer.control >= 0:
                    outcome = COMMITTED if producer.control == COMMIT_MARKER else ABORTED
                    for data, data_producer in pending.pop(pid, []):
                        found[(label, data.base_offset)] = TxnBatch(
                            label, data.base_offset, data.size, data.count, pid, data_producer.epoch, outcome
                        )
                elif producer.transactional:
                    pending.setdefault(pid, []).append((batch, producer))
        for pid, left in pending.items():
            for data, data_producer in left:
                found[(label, data.base_offset)] = TxnBatch(
                    label, data.base_offset, data.size, data.count, pid, data_producer.epoch, OPEN
                )
    return found


def fenced_appends(cluster: Cluster, end: int) -> list[Violation]:
    """A data batch of a producer id after a marker of it with a higher epoch, in a leader's log."""
    out = []
    for tp in sorted(cluster.controller.state):
        leader = cluster.leader_of(tp)
        log = cluster.brokers[leader].logs.get(tp) if leader >= 0 else None
        if log is None:
            continue
        fenced: dict[int, int] = {}  # producer id -> highest marker epoch so far
        for batch in log.batches():
            for producer in batch.producers:
                pid = producer.producer_id
                if producer.control >= 0:
                    fenced[pid] = max(fenced.get(pid, -1), producer.epoch)
                elif producer.transactional and producer.epoch < fenced.get(pid, -1):
                    out.append(
                        _violation(
                            f"producer id {pid} appended a batch with epoch {producer.epoch} after a marker "
                            f"with epoch {fenced[pid]} fenced it",
                            end,
                            str(tp),
                            str(batch.base_offset),
                        )
                    )
                    break
    return out


def check_transactions(
    schedule: Schedule,
    result: RunResult,
    received: list[Received],
    cluster: Cluster,
    transform_commits: int | None,
) -> list[Violation]:
    """The end-of-run half of invariant 8 (see the module docstring)."""
    violations: list[Violation] = []
    end = result.end_ms
    batches = final_batches(cluster)
    by_size: dict[int, list[TxnBatch]] = {}
    for item in batches.values():
        by_size.setdefault(item.size, []).append(item)
    read_committed = {c.id for c in schedule.consumers if c.config.get("isolation.level") == "read_committed"}
    read_committed.add(RC_READER)
    seen: set[tuple[str, int]] = set()
    for item in received:
        if item.client not in read_committed:
            continue
        key = (item.partition, item.batch.base_offset)
        if item.client == RC_READER:
            seen.add(key)
        txn = batches.get(key)
        if txn is not None and txn.size == item.batch.size and txn.outcome != COMMITTED:
            violations.append(
                _violation(
                    f"READ_COMMITTED consumer {item.client} received {item.batch.count} records of "
                    "producer id "
                    f"{txn.producer_id}'s transaction, which is {txn.outcome} in the log",
                    item.time_ms,
                    item.partition,
                    f"{item.batch.base_offset}..{item.batch.last_offset}",
                )
            )
    for (label, base), txn in sorted(batches.items()):
        if txn.outcome == COMMITTED and (label, base) not in seen:
            violations.append(
                _violation(
                    f"the READ_COMMITTED reader did not receive the {txn.count} committed records of "
                    "producer "
                    f"id {txn.producer_id} at {base}",
                    end,
                    label,
                    str(base),
                )
            )
            break
    requests = result.named
    for spec in schedule.txns:
        sends = [s for s in spec.steps if s.action == "send"]
        placed = [b for s in sends for b in by_size.get(s.bytes, [])]
        outcomes = {b.outcome for b in placed}
        where = ", ".join(f"{b.partition}@{b.base_offset} {b.outcome}" for b in placed)
        if len(outcomes) > 1:
            violations.append(_violation(f"transaction {spec.id} is not all or none: {where}", end))
        if spec.ending == "abort" and COMMITTED in outcomes:
            violations.append(_violation(f"transaction {spec.id} was aborted but is committed: {where}", end))
        end_step = next((s for s in spec.steps if s.action in ("commit", "abort")), None)
        answered = requests.get(end_step.id or "", []) if end_step is not None else []
        if (
            spec.ending == "commit"
            and answered
            and all(e == "NONE" for r in answered for e in r.errors.values())
        ):
            for step in sends:
                sent = requests.get(step.id or "", [])
                acked = sent and all(e == "NONE" for r in sent for e in r.errors.values())
                mine = [b for b in by_size.get(step.bytes, [])]
                if acked and (not mine or any(b.outcome != COMMITTED for b in mine)):
                    violations.append(
                        _violation(
                            f"transaction {spec.id}'s commit was answered NONE but its send {step.id} "
                            f"(acknowledged) is {'not in the log' if not mine else mine[0].outcome}",
                            end,
                        )
                    )
    violations += fenced_appends(cluster, end)
    if schedule.transform is not None:
        violations += _exactly_once(cluster, batches, end, transform_commits)
    return violations


def _exactly_once(
    cluster: Cluster, batches: dict[tuple[str, int], TxnBatch], end: int, transform_commits: int | None
) -> list[Violation]:
    committed = 0
    if OFFSETS_TOPIC in cluster.topics:
        broker = cluster.coordinator_for(TRANSFORM_GROUP)
        coordinator = cluster.brokers[broker].coordinator if broker >= 0 else None
        if coordinator is not None:
            offsets = coordinator.offset_metadata_manager.offsets.get(TRANSFORM_GROUP, {})
            value = offsets.get(TopicPartition(INPUT_TOPIC, 0))
            committed = value.offset if value is not None else 0
    outputs: dict[int, int] = {}
    for txn in batches.values():
        if txn.partition.startswith(f"{OUTPUT_TOPIC}-") and txn.outcome == COMMITTED:
            outputs[txn.size - OUTPUT_BYTES] = outputs.get(txn.size - OUTPUT_BYTES, 0) + 1
    out = []
    twice = sorted(o for o, n in outputs.items() if n > 1)
    missing = [o for o in range(committed) if o not in outputs]
    beyond = sorted(o for o in outputs if o >= committed)
    if twice:
        out.append(
            _violation(f"inputs {twice[:5]} have more than one committed output", end, f"{OUTPUT_TOPIC}")
        )
    if missing:
        out.append(
            _violation(
                f"inputs {missing[:5]} are below the committed input offset {committed} but have no "
                "committed output",
                end,
                f"{INPUT_TOPIC}-0",
            )
        )
    if beyond:
        out.append(
            _violation(
                f"inputs {beyond[:5]} have committed output but are at or past the committed input "
                f"offset {committed}",
                end,
                f"{INPUT_TOPIC}-0",
            )
        )
    return out
