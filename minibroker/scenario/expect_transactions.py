"""Checking a ``transaction`` expectation (a transactional id on its coordinator) and a partition's LSO."""

from __future__ import annotations

from minibroker.common.messages import TopicPartition
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC
from minibroker.scenario.expect import ExpectationResult, _compare
from minibroker.scenario.model import TransactionState
from minibroker.sim.cluster import Cluster


def check_transaction(expectation: TransactionState, cluster: Cluster) -> ExpectationResult:
    """The id's state, epoch and partitions on the broker that coordinates it now (none: "unknown")."""
    meta = None
    broker = -1
    if TRANSACTION_STATE_TOPIC in cluster.topics:
        broker = cluster.transaction_coordinator_for(expectation.transaction)
        coordinator = cluster.brokers[broker].transaction_coordinator if broker >= 0 else None
        if coordinator is not None:
            meta = coordinator.transactions.get(expectation.transaction)
    expected, passed, seen = _compare(
        [
            ("state", expectation.state, meta.state if meta is not None else "unknown"),
            ("epoch", expectation.epoch, meta.producer_epoch if meta is not None else None),
            (
                "partitions",
                list(expectation.partitions) if expectation.partitions is not None else None,
                sorted(f"{t}-{p}" for t, p in meta.partitions) if meta is not None else None,
            ),
            ("coordinator", expectation.coordinator, broker),
        ]
    )
    return ExpectationResult(
        expectation.where,
        f"transaction {expectation.transaction} at {expectation.at} ms: {expected}",
        passed,
        seen,
    )


def last_stable_offset(cluster: Cluster, label: str) -> int | None:
    """The LSO of partition ``label`` ("t-0") on its leader; None without one."""
    topic, _, number = label.rpartition("-")
    tp = TopicPartition(topic, int(number))
    leader = cluster.leader_of(tp)
    manager = cluster.brokers[leader].replica_manager if leader >= 0 else None
    partition = manager.partition(tp) if manager is not None else None
    return partition.log.last_stable_offset if partition is not None else None
