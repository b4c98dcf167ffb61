"""The live checker: a trace sink that looks at the running cluster as each event is emitted.

Trace events arrive synchronously, in the run's total order, while the cluster is
in exactly the state the event describes, so a check here sees transient states
that a snapshot at the end of a millisecond would miss.

Checked live:

- invariant 1: per delayed operation (broker, purgatory, op): at most one
  ``op.complete``; cause ``expiry`` exactly at creation + delay; any other cause no
  later than that; ``op.expire`` only after its expiry completion; a produce that
  completes on its condition while its broker still leads has a HW at or past every
  offset it waits for;
- invariant 3 (second half): the HW a consumer is answered with never goes down
  while the same leader epoch answers;
- invariant 4: on every partition event, the controller's ISR is within the
  replicas and holds the leader; the leader's HW is at most the LEO of every
  member of its ISR; leader and partition epochs never go down (per broker life);
- invariant 5: a request appends to a partition at most once.

It also records what the end-of-run checks need: every leader append (with the
epoch and effective min ISR at that instant), unclean elections, every batch each
consumer received, and which broker lives ended (a crash drops its purgatories).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import attrs

from minibroker.chaos.violations import Violation
from minibroker.cluster.messages import TopicPartition

if TYPE_CHECKING:
    from minibroker.cluster.cluster import Cluster
    from minibroker.cluster.log import RecordBatch
    from minibroker.scenario.run import ScenarioRunner

PARTITION_EVENTS = frozenset(
    {"append", "hw", "truncate", "replicate", "leader", "isr.commit", "controller.isr", "controller.elect"}
)


@attrs.define(slots=True)
class Append:
    op: str
    broker: int
    partition: str
    offset: int
    count: int
    bytes: int
    epoch: int
    min_isr: int  # effective min ISR on the leader when it appended
    time_ms: int


@attrs.define(slots=True)
class OpState:
    created_ms: int
    delay_ms: int
    life: int
    completed: list[tuple[int, str]] = attrs.Factory(list)
    expired: int = 0


@attrs.define(slots=True)
class Received:
    client: str
    partition: str
    batch: RecordBatch
    high_watermark: int
    time_ms: int


class RunBudgetExceeded(Exception):
    """Raised from the sink when a run spends more CPU than its budget (a livelock in virtual time)."""


def parse_tp(label: str) -> TopicPartition:
    topic, _, number = label.rpartition("-")
    return TopicPartition(topic, int(number))


class Observer:
    """A trace sink (``observer(event)``); ``runner`` is set before the run starts."""

    def __init__(self, budget_cpu_s: float = 20.0) -> None:
        self.budget_cpu_s = budget_cpu_s
        self._started_cpu = time.process_time()
        self.runner: ScenarioRunner | None = None
        self.violations: list[Violation] = []
        self._seen: set[tuple[Any, ...]] = set()
        self.ops: dict[tuple[int, str, str], OpState] = {}
        self.appends: dict[tuple[str, str], list[Append]] = {}  # (op, partition) -> appends
        self.unclean: dict[str, list[int]] = {}  # partition -> times of unclean elections
        self.received: list[Received] = []
        self.lives: dict[int, int] = {}
        self.events = 0
        self.faults: dict[str, int] = {}
        self._controller_epochs: dict[str, tuple[int, int]] = {}
        self._broker_epochs: dict[tuple[int, str], int] = {}
        self._consumer_hw: dict[tuple[str, str, int, int], int] = {}

    @property
    def cluster(self) -> Cluster | None:
        return None if self.runner is None else self.runner.cluster

    def violate(self, key: tuple[Any, ...], violation: Violation) -> None:
        """Keep the first violation of each ``key`` (one broken rule is reported once)."""
        if key not in self._seen:
            self._seen.add(key)
            self.violations.append(violation)

    # --- the sink ------------------------------------------------------------------------------
    def __call__(self, event: dict[str, Any]) -> None:
        self.events += 1
        if not self.events & 0xFFF and time.process_time() - self._started_cpu > self.budget_cpu_s:
            raise RunBudgetExceeded(
                f"the run spent over {self.budget_cpu_s:g} s of CPU ({self.events:,} events) and was "
                f"stopped at {event['time_ms']} ms virtual: a livelock?"
            )
        kind = event["kind"]
        if kind.startswith("op."):
            self._operation(kind, event)
        elif kind == "fault":
            fault = event["fault"]
            self.faults[fault] = self.faults.get(fault, 0) + 1
            if fault in ("crash", "shutdown", "restart"):
                broker = event["broker"]
                self.lives[broker] = self.lives.get(broker, 0) + 1
                for key in [k for k in self._broker_epochs if k[0] == broker]:
                    del self._broker_epochs[key]
        elif kind == "fetch.response":
            self._fetch_response(event)
        if kind in PARTITION_EVENTS and self.cluster is not None:
            if kind == "append":
                self._append(event)
            elif kind == "controller.elect":
                self._election(event)
            self._partition(event)

    # --- invariant 1 ---------------------------------------------------------------------------
    def _operation(self, kind: str, event: dict[str, Any]) -> None:
        key = (event["broker"], event["purgatory"], event["op"])
        now = event["time_ms"]
        if kind == "op.create":
            self.ops[key] = OpState(now, event["delay_ms"], self.lives.get(key[0], 0))
            return
        state = self.ops.get(key)
        if state is None:
            return
        deadline = state.created_ms + state.delay_ms
        fields = {"broker": key[0], "purgatory": key[1], "op": key[2]}
        if kind == "op.complete":
            cause = event["cause"]
            if state.completed:
                self.violate(
                    ("complete-twice", key),
                    Violation(
                        1,
                        None,
                        "",
                        now,
                        f"{key[1]} operation {key[2]} on broker {key[0]} completed "
                        f"twice (first at {state.completed[0][0]} ms)",
                        {"kind": "event", "fields": {"kind": "op.complete", **fields}, "count": 1},
                    ),
                )
            elif cause == "expiry" and now != deadline:
                self.violate(
                    ("expiry-time", key),
                    Violation(
                        1,
                        None,
                        "",
                        now,
                        f"{key[1]} operation {key[2]} on broker {key[0]} expired at "
                        f"{now} ms, not at its deadline {deadline} ms",
                        {
                            "kind": "event",
                            "fields": {"kind": "op.complete", "time_ms": now, **fields},
                            "count": 0,
                        },
                    ),
                )
            elif cause != "expiry" and now > deadline:
                self.violate(
                    ("late", key),
                    Violation(
                        1,
                        None,
                        "",
                        now,
                        f"{key[1]} operation {key[2]} on broker {key[0]} completed "
                        f"({cause}) after its deadline {deadline} ms",
                        {
                            "kind": "event",
                            "fields": {"kind": "op.complete", "time_ms": now, **fields},
                            "count": 0,
                        },
                    ),
                )
            elif cause == "condition" and key[1] == "Produce":
                self._produce_condition(key, now, fields)
            state.completed.append((now, cause))
        elif kind == "op.expire":
            state.expired += 1
            if state.expired > 1 or not state.completed or state.completed[-1] != (now, "expiry"):
                self.violate(
                    ("expire", key),
                    Violation(
                        1,
                        None,
                        "",
                        now,
                        f"{key[1]} operation {key[2]} on broker {key[0]} ran "
                        "on_expiration without completing by expiry first",
                        {
                            "kind": "event",
                            "fields": {"kind": "op.expire", "time_ms": now, **fields},
                            "count": 0,
                        },
                    ),
                )

    def _produce_condition(self, key: tuple[int, str, str], now: int, fields: dict[str, Any]) -> None:
        manager = self.cluster.brokers[key[0]].replica_manager if self.cluster else None
        if manager is None:
            return
        for (op, label), appends in self.appends.items():
            if op != key[2]:
                continue
            append = next((a for a in appends if a.broker == key[0]), None)
            partition = manager.partitions.get(parse_tp(label))
            if append is None or partition is None or not partition.is_leader:
                continue
            required = append.offset + append.count
            if partition.high_watermark < required:
                self.violate(
                    ("early", key),
                    Violation(
                        1,
                        label,
                        f"{append.offset}..{required - 1}",
                        now,
                        f"produce {op} completed on its condition with the HW at "
                        f"{partition.high_watermark}, below {required}",
                        {
                            "kind": "event",
                            "fields": {"kind": "op.complete", "time_ms": now, **fields},
                            "count": 0,
                        },
                    ),
                )

    # --- appends and elections -----------------------------------------------------------------
    def _append(self, event: dict[str, Any]) -> None:
        label = event["partition"]
        broker = event["broker"]
        manager = self.cluster.brokers[broker].replica_manager
        partition = manager.partitions.get(parse_tp(label)) if manager else None
        epoch = partition.leader_epoch if partition else -1
        min_isr = partition.effective_min_isr if partition else 0
        record = Append(
            event["op"],
            broker,
            label,
            event["offset"],
            event["count"],
            event["bytes"],
            epoch,
            min_isr,
            event["time_ms"],
        )
        earlier = self.appends.setdefault((record.op, label), [])
        earlier.append(record)
        if len(earlier) > 1:
            self.violate(
                ("append-twice", record.op, label),
                Violation(
                    5,
                    label,
                    f"{earlier[0].offset} and {record.offset}",
                    record.time_ms,
                    f"request {record.op} appended twice (brokers {earlier[0].broker} and {broker})",
                    {
                        "kind": "event",
                        "fields": {"kind": "append", "op": record.op, "partition": label},
                        "count": 1,
                    },
                ),
            )

    def _election(self, event: dict[str, Any]) -> None:
        tp = parse_tp(event["partition"])
        before = self.cluster.controller.state.get(tp)  # the controller traces before it publishes
        if before is not None and event["leader"] >= 0 and event["leader"] not in before.isr:
            self.unclean.setdefault(event["partition"], []).append(event["time_ms"])

    # --- invariant 4 ---------------------------------------------------------------------------
    def _partition(self, event: dict[str, Any]) -> None:
        label = event["partition"]
        tp = parse_tp(label)
        now = event["time_ms"]
        cluster = self.cluster
        state = cluster.controller.state.get(tp)
        pin = {k: event[k] for k in ("kind", "broker", "partition", "hw", "offset") if k in event}
        pin["time_ms"] = now
        evidence = {"kind": "event", "fields": pin, "count": 0}
        if event["kind"].startswith("controller."):
            new_isr, leader, epoch = tuple(event["isr"]), event["leader"], event["epoch"]
            replicas = state.replicas if state else ()
            if not set(new_isr) <= set(replicas):
                self.violate(
                    ("isr-replicas", label),
                    Violation(
                        4,
                        label,
                        "",
                        now,
                        f"ISR {list(new_isr)} is not within the replicas {list(replicas)}",
                        evidence,
                    ),
                )
            if leader >= 0 and leader not in new_isr:
                self.violate(
                    ("leader-isr", label),
                    Violation(
                        4, label, "", now, f"leader {leader} is not in the ISR {list(new_isr)}", evidence
                    ),
                )
            last = self._controller_epochs.get(label, (-1, -1))
            if epoch < last[0]:
                self.violate(
                    ("epoch", label),
                    Violation(
                        4, label, "", now, f"leader epoch went down from {last[0]} to {epoch}", evidence
                    ),
                )
            self._controller_epochs[label] = (max(epoch, last[0]), 0)
            return
        broker = event["broker"]
        if event["kind"] in ("leader", "isr.commit"):
            key = (broker, label)
            epoch = event["epoch"]
            if epoch < self._broker_epochs.get(key, -1):
                self.violate(
                    ("broker-epoch", key),
                    Violation(
                        4,
                        label,
                        "",
                        now,
                        f"broker {broker}'s leader epoch went down from "
                        f"{self._broker_epochs[key]} to {epoch}",
                        evidence,
                    ),
                )
            self._broker_epochs[key] = max(epoch, self._broker_epochs.get(key, -1))
        if state is None or state.leader < 0:
            return
        leader = cluster.brokers[state.leader]
        manager = leader.replica_manager
        partition = manager.partitions.get(tp) if manager else None
        if partition is None or not partition.is_leader:
            return
        hw = partition.high_watermark
        for member in partition.isr:
            log = cluster.brokers[member].logs.get(tp)
            leo = log.log_end_offset if log is not None else 0
            if leo < hw:
                self.violate(
                    ("hw-leo", label),
                    Violation(
                        4,
                        label,
                        f"HW {hw} > LEO {leo}",
                        now,
                        f"leader {state.leader}'s HW {hw} is above the LEO {leo} of ISR member {member} "
                        f"(ISR {list(partition.isr)}), seen at the {event['kind']} event",
                        evidence,
                    ),
                )
                return

    # --- consumers -----------------------------------------------------------------------------
    def on_batch(self, client: str, tp: TopicPartition, batch: RecordBatch, hw: int) -> None:
        now = self.cluster.now() if self.cluster else 0
        self.received.append(Received(client, str(tp), batch, hw, now))

    def _fetch_response(self, event: dict[str, Any]) -> None:
        op = event["op"]
        if event["error"] != "NONE" or "#" not in op or self.cluster is None:
            return
        client = op.rsplit("#", 1)[0]
        broker = event["broker"]
        label = event["partition"]
        manager = self.cluster.brokers[broker].replica_manager
        partition = manager.partitions.get(parse_tp(label)) if manager else None
        if partition is None:
            return
        key = (client, label, broker, partition.leader_epoch)
        hw = event["hw"]
        before = self._consumer_hw.get(key, -1)
        if hw < before:
            self.violate(
                ("consumer-hw", key),
                Violation(
                    3,
                    label,
                    f"HW {before} -> {hw}",
                    event["time_ms"],
                    f"consumer {client} was answered a HW {hw} after {before} by broker {broker} "
                    f"in the same leader epoch {partition.leader_epoch}",
                    {
                        "kind": "event",
                        "fields": {"kind": "fetch.response", "op": op, "partition": label, "hw": hw},
                        "count": 0,
                    },
                ),
            )
        self._consumer_hw[key] = max(hw, before)
