"""Invariant 4, live: replication state is sane at every partition event.

On every partition event: the controller's ISR is within the replicas and holds the
leader; leader epochs never go down (the controller's, and each broker's within one
life); the leader's HW is at most the LEO of every member of its ISR.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minibroker.chaos.records import parse_tp, pin
from minibroker.chaos.violations import Violation

if TYPE_CHECKING:
    from minibroker.chaos.live_run import LiveRun

PARTITION_EVENTS = frozenset(
    {"append", "hw", "truncate", "replicate", "leader", "isr.commit", "controller.isr", "controller.elect"}
)


class ReplicationChecks:
    def __init__(self, live: LiveRun) -> None:
        self.live = live
        self._controller_epochs: dict[str, int] = {}
        self._broker_epochs: dict[tuple[int, str], int] = {}

    def new_life(self, broker: int) -> None:
        """``broker`` crashed, shut down or restarted: its epochs start over."""
        for key in [k for k in self._broker_epochs if k[0] == broker]:
            del self._broker_epochs[key]

    def __call__(self, event: dict[str, Any]) -> None:
        label = event["partition"]
        now = event["time_ms"]
        fields = {k: event[k] for k in ("kind", "broker", "partition", "hw", "offset") if k in event}
        evidence = pin({**fields, "time_ms": now})

        def violate(key: tuple[Any, ...], offsets: str, message: str) -> None:
            self.live.violate(key, Violation(4, label, offsets, now, message, evidence))

        cluster = self.live.cluster
        state = cluster.controller.state.get(parse_tp(label))
        if event["kind"].startswith("controller."):
            new_isr, leader, epoch = list(event["isr"]), event["leader"], event["epoch"]
            replicas = list(state.replicas) if state else []
            if not set(new_isr) <= set(replicas):
                violate(("isr-replicas", label), "", f"ISR {new_isr} is not within the replicas {replicas}")
            if leader >= 0 and leader not in new_isr:
                violate(("leader-isr", label), "", f"leader {leader} is not in the ISR {new_isr}")
            last = self._controller_epochs.get(label, -1)
            if epoch < last:
                violate(("epoch", label), "", f"leader epoch went down from {last} to {epoch}")
            self._controller_epochs[label] = max(epoch, last)
            return
        broker = event["broker"]
        if event["kind"] in ("leader", "isr.commit"):
            key = (broker, label)
            epoch, last = event["epoch"], self._broker_epochs.get(key, -1)
            if epoch < last:
                message = f"broker {broker}'s leader epoch went down from {last} to {epoch}"
                violate(("broker-epoch", key), "", message)
            self._broker_epochs[key] = max(epoch, last)
        if state is None or state.leader < 0:
            return
        manager = cluster.brokers[state.leader].replica_manager
        partition = manager.partitions.get(parse_tp(label)) if manager else None
        if partition is None or not partition.is_leader:
            return
        hw = partition.high_watermark
        for member in partition.isr:
            log = cluster.brokers[member].logs.get(partition.tp)
            leo = log.log_end_offset if log is not None else 0
            if leo < hw:
                violate(
                    ("hw-leo", label),
                    f"HW {hw} > LEO {leo}",
                    f"leader {state.leader}'s HW {hw} is above the LEO {leo} of ISR member {member} "
                    f"(ISR {list(partition.isr)}), seen at the {event['kind']} event",
                )
                return
