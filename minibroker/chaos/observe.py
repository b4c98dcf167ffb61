"""The live checker: a trace sink that looks at the running cluster as each event is emitted.

Trace events arrive synchronously, in the run's total order, while the cluster is
in exactly the state the event describes, so a check here sees transient states
that a snapshot at the end of a millisecond would miss.

Checked live, each rule in a module of its own:

- invariant 1 (``operations``): delayed operations complete once, in time, and
  not before their condition holds;
- invariant 3 (second half, here): the HW a consumer is answered with never goes
  down while the same leader epoch answers;
- invariant 4 (``replication``): ISR within the replicas and holding the leader,
  the HW at most every ISR member's LEO, epochs that never go down;
- invariant 5 (here): a request appends to a partition at most once;
- invariant 7 (``groups``): written commits are of the group's generation, at most
  the partition's highest HW, and never backward;
- invariant 8 (``txn_checks``, runs with transactions): the LSO a leader serves is at
  most its HW and the first offset of every transaction open in its log;
- invariant 11 (``compaction_checks``, runs with a compacted topic): a cleaning leaves no
  key twice below the cleaner checkpoint.

It also records what the end-of-run checks need: every leader append (with the
epoch and effective min ISR at that instant), unclean elections, every batch each
consumer received, and which broker lives ended (a crash drops its purgatories).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from minibroker.chaos.compaction_checks import CompactionChecks
from minibroker.chaos.groups import GROUP_EVENTS, GroupChecks
from minibroker.chaos.live_run import LiveRun
from minibroker.chaos.operations import OperationChecks
from minibroker.chaos.records import Append, Received, RunBudgetExceeded, parse_tp, pin
from minibroker.chaos.replication import PARTITION_EVENTS, ReplicationChecks
from minibroker.chaos.txn_checks import TxnChecks
from minibroker.chaos.violations import Violation

if TYPE_CHECKING:
    from minibroker.common.messages import TopicPartition
    from minibroker.common.record_batch import RecordBatch

__all__ = ["Append", "Observer", "RunBudgetExceeded"]


class Observer(LiveRun):
    """A trace sink (``observer(event)``) that dispatches each event to the live checks."""

    def __init__(self, budget_cpu_s: float = 20.0) -> None:
        super().__init__()
        self.budget_cpu_s = budget_cpu_s
        self._started_cpu = time.process_time()
        self.unclean: dict[str, list[int]] = {}  # partition -> times of unclean elections
        self.received: list[Received] = []
        self.events = 0
        self.faults: dict[str, int] = {}
        self._consumer_hw: dict[tuple[str, str, int, int], int] = {}
        self.operations = OperationChecks(self)
        self.ops = self.operations.ops
        self.on_fetch = self.operations.on_fetch
        self.replication = ReplicationChecks(self)
        self.groups = GroupChecks(self)
        #: invariant 8's live rule (``txn_checks``), set for runs with transactions
        self.transactions: TxnChecks | None = None
        #: invariant 11's live rule (``compaction_checks``), set for runs with a compacted topic
        self.compaction: CompactionChecks | None = None

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
            self.operations(kind, event)
        elif kind == "fault":
            fault = event["fault"]
            self.faults[fault] = self.faults.get(fault, 0) + 1
            if fault in ("crash", "shutdown", "restart"):
                broker = event["broker"]
                self.lives[broker] = self.lives.get(broker, 0) + 1
                self.replication.new_life(broker)
        elif kind == "fetch.response":
            self.operations.fetch_answered(event["op"], event["broker"])
            self._fetch_response(event)
        elif kind == "log.clean" and self.compaction is not None:
            self.compaction(event)
        if kind in GROUP_EVENTS:
            self.groups(kind, event)
        if kind in PARTITION_EVENTS and self.cluster is not None:
            if kind == "append":
                self._append(event)
            elif kind == "controller.elect":
                self._election(event)
            self.replication(event)
            if self.transactions is not None and kind in ("append", "hw"):
                self.transactions(kind, event)

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
                    pin({"kind": "append", "op": record.op, "partition": label}, 1),
                ),
            )

    def _election(self, event: dict[str, Any]) -> None:
        tp = parse_tp(event["partition"])
        before = self.cluster.controller.state.get(tp)  # the controller traces before it publishes
        if before is not None and event["leader"] >= 0 and event["leader"] not in before.isr:
            self.unclean.setdefault(event["partition"], []).append(event["time_ms"])
            log = self.cluster.brokers[event["leader"]].logs.get(tp)  # a restarting broker's too
            log_end = log.log_end_offset if log is not None else 0
            self.groups.unclean_election(event["partition"], event["time_ms"], log_end)

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
                    pin({"kind": "fetch.response", "op": op, "partition": label, "hw": hw}),
                ),
            )
        self._consumer_hw[key] = max(hw, before)
