"""Share groups in scenarios: the ``share_partition`` expectation, checked on the partition's leader.

The share consumers themselves are clients (``type = "share_consumer"``, made and driven by the runner);
this feature's run only keeps the cluster so the expectation can look at the share partitions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minibroker.common.messages import TopicPartition
from minibroker.scenario.expect import ExpectationResult, _compare
from minibroker.scenario.feature import ExpectationKind, Feature
from minibroker.scenario.loader.share import share_partition_expectation
from minibroker.scenario.model import SharePartitionState
from minibroker.sim.share_view import share_partitions

if TYPE_CHECKING:
    from minibroker.broker.share.share_partition import SharePartition
    from minibroker.scenario.model import Scenario
    from minibroker.sim.cluster import Cluster


class ShareGroups:
    """The cluster of the run, once started."""

    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.cluster: Cluster | None = None

    def prepare(self) -> None:
        pass

    async def start(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def close(self) -> None:
        pass

    def view(self) -> Any:
        """The share partitions' windows now (None when there are none)."""
        if self.cluster is None:
            return None
        return tuple(share_partitions(self.cluster)) or None


def find_share_partition(cluster: Cluster, group: str, label: str) -> tuple[int, SharePartition | None]:
    """The leader of partition ``label`` ("t-0") and the group's share partition there (None if none)."""
    topic, _, number = label.rpartition("-")
    tp = TopicPartition(topic, int(number))
    leader = cluster.leader_of(tp)
    manager = cluster.brokers[leader].share_partition_manager if leader >= 0 else None
    return leader, (manager.share_partitions.get((group, tp)) if manager is not None else None)


def check_share_partition(expectation: SharePartitionState, run: ShareGroups) -> ExpectationResult:
    assert run.cluster is not None
    leader, sp = find_share_partition(run.cluster, expectation.group, expectation.partition)
    records = sp.records if sp is not None else {}
    states = None
    if expectation.states is not None:
        states = {
            o: (records[o].state.name.capitalize() if o in records else _outside(sp, o))
            for o in expectation.states
        }
    counts = None
    if expectation.delivery_counts is not None:
        counts = {
            o: (records[o].delivery_count if o in records else None) for o in expectation.delivery_counts
        }
    expected, passed, seen = _compare(
        [
            ("spso", expectation.spso, sp.start_offset if sp is not None else None),
            ("speo", expectation.speo, sp.end_offset if sp is not None else None),
            ("states", expectation.states, states),
            ("delivery counts", expectation.delivery_counts, counts),
            ("lock expiries", expectation.lock_expiries, sp.lock_expiries if sp is not None else None),
            ("archived", expectation.archived, sp.archived_total if sp is not None else None),
            ("leader", expectation.leader, leader),
        ]
    )
    what = f"share partition {expectation.group}/{expectation.partition} at {expectation.at} ms: {expected}"
    return ExpectationResult(expectation.where, what, passed, seen)


def _outside(sp: SharePartition | None, offset: int) -> str:
    """An offset not in flight: below the SPSO (done), above the SPEO (not delivered), or no window."""
    if sp is None:
        return "no share partition"
    return "below the SPSO" if offset < sp.start_offset else "not delivered yet"


#: registered by ``minibroker.scenario.features``
FEATURE = Feature(
    "share",
    (),
    (
        ExpectationKind(
            "share_partition",
            share_partition_expectation,
            SharePartitionState,
            check_share_partition,
            True,
            "retry",
        ),
    ),
    ShareGroups,
)
