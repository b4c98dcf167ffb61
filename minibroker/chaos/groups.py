"""Invariant 7: consumer groups keep Kafka's promises under faults.

Live, on every ``group.commit`` that was written (error NONE), per partition:

- the committed offset is at most the highest HW the partition ever had until then
  (a member commits what it read, and it reads below the HW only);
- a commit of a generation (>= 0) names the generation the group was in when the
  coordinator accepted it, and one its member was assigned (``member.assigned``):
  a fenced or old-generation commit is refused, never written;
- the group's committed offset never goes backward through such commits, except as the
  consequence of an unclean election that truncated records (``unclean_election``):
  either of the partition itself (a member whose position lies past the new leader's
  log end is answered OFFSET_OUT_OF_RANGE, resets by ``auto.offset.reset`` and commits
  from there; this window closes at the first backward commit it explains, or at a
  commit at or below the new log end: the reset landed), or of the group's
  ``__consumer_offsets`` partition (the commits in the truncated records are gone, and
  the new coordinator loads an older committed offset, or none; this window closes at
  the first backward commit of each of the group's partitions). Such a commit is
  reported with the cause ``unclean-truncation`` (a profile with unclean election on
  expects it).

At the end (``check_end``): the ``group`` expectation of the compiled scenario says the
group is Stable with every member at ``group_check_ms``; then, on its coordinator,
every partition of the subscribed topics is assigned to exactly one member.

Kafka's own validation is checked here only through what the trace shows; what the
coordinator compared against is the ``group_generation`` field it traces.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minibroker.chaos.records import pin
from minibroker.chaos.violations import UNCLEAN_TRUNCATION, Violation
from minibroker.coordinator.group import OFFSETS_TOPIC, consumer_protocol, partition_for

if TYPE_CHECKING:
    from minibroker.chaos.live_run import LiveRun
    from minibroker.chaos.schedule import Schedule
    from minibroker.sim.cluster import Cluster

GROUP_EVENTS = frozenset(
    {
        "hw",
        "append",
        "member.assigned",
        "group.commit",
        "group.consumer.member",
        "group.consumer.fence",
        "group.consumer.revert",
        "group.load",
    }
)


class GroupChecks:
    def __init__(self, live: LiveRun) -> None:
        self.live = live
        self.max_hw: dict[str, int] = {}
        self.hw_since_unclean: dict[str, int] = {}  # partition -> highest HW since its last unclean election
        #: partition -> (time, new log end, highest HW before) of the unclean election whose
        #: truncation may still move a commit back
        self.truncated: dict[str, tuple[int, int, int]] = {}
        #: (group, partition) -> why its committed offset may go back: its commits were truncated
        #: from the group's ``__consumer_offsets`` partition
        self.commits_lost: dict[tuple[str, str], str] = {}
        self.assigned: set[tuple[str, str, int]] = set()  # (group, member id, generation)
        self.committed: dict[tuple[str, str], int] = {}  # (group, partition) -> last written offset
        self.commits = 0
        #: KIP-848 groups, as their coordinator traces them: (group, member) -> partitions it owns
        #: (assigned or pending revocation); the (group, member, epoch) each member has had
        self.owned: dict[tuple[str, str], set[str]] = {}
        self.epochs: set[tuple[str, str, int]] = set()
        self.consumer_groups: set[str] = set()

    def __call__(self, kind: str, event: dict[str, Any]) -> None:
        if kind in ("hw", "append"):
            label = event["partition"]
            if event["hw"] > self.max_hw.get(label, 0):
                self.max_hw[label] = event["hw"]
            if event["hw"] > self.hw_since_unclean.get(label, 0):
                self.hw_since_unclean[label] = event["hw"]
        elif kind == "member.assigned":
            self.assigned.add((event["group"], event["member"], event["generation"]))
        elif kind == "group.commit" and event["error"] == "NONE":
            self._commit(event)
        elif kind == "group.consumer.member":
            self._consumer_member(event)
        elif kind == "group.consumer.fence":
            self.owned.pop((event["group"], event["member"]), None)
        elif kind == "group.load":
            self._consumer_groups_loaded(event)
        elif kind == "group.consumer.revert":  # a refused write undone: the members own what the log says
            group = event["group"]
            for key in [key for key in self.owned if key[0] == group]:
                del self.owned[key]
            for member, owned in event["owned"].items():
                self.owned[(group, member)] = set(owned)

    def _consumer_groups_loaded(self, event: dict[str, Any]) -> None:
        """A broker loaded a ``__consumer_offsets`` partition: its consumer groups' members own what the
        log says. A previous coordinator's change whose records never reached the new leader was never
        answered, so no member acted on it."""
        cluster = self.live.cluster
        brokers = cluster.brokers if cluster is not None else []
        coordinator = getattr(brokers[event["broker"]], "coordinator", None) if brokers else None
        if coordinator is None:
            return
        manager, partition = coordinator.consumer_group_manager, int(event["partition"])
        for key in [key for key in self.owned if coordinator.context.partition_of(key[0]) == partition]:
            del self.owned[key]
        for group in manager.group_ids(partition):
            for member_id, member in manager.groups[group].members.items():
                self.owned[(group, member_id)] = {f"{t}-{p}" for t, p in member.owned()}

    def _consumer_member(self, event: dict[str, Any]) -> None:
        """A KIP-848 member's new state: no partition owned by two members of the group at once
        (a partition is handed on only once its previous owner released it)."""
        group, member = event["group"], event["member"]
        self.consumer_groups.add(group)
        self.epochs.add((group, member, event["member_epoch"]))
        owned = set(event["assigned"]) | set(event["pending_revocation"])
        self.owned[(group, member)] = owned
        for (other_group, other), theirs in sorted(self.owned.items()):
            both = sorted(owned & theirs) if other_group == group and other != member else []
            if both:
                evidence = pin({"kind": "group.consumer.member", "group": group, "time_ms": event["time_ms"]})
                message = (
                    f"group {group}: {both[0]} owned by {member} (epoch {event['member_epoch']}) "
                    f"and by {other} at once"
                )
                self.live.violate(
                    ("two-owners", group, both[0]),
                    Violation(7, both[0], "", event["time_ms"], message, evidence),
                )

    def unclean_election(self, label: str, now: int, log_end: int) -> None:
        """An out-of-sync replica now leads ``label`` with ``log_end``: records past it are gone.

        When the partition's HW since the previous unclean election (what members may have
        read and committed) was past ``log_end``, a member's next commit may go back.
        """
        highest = max([self.hw_since_unclean.get(label, 0), *self._committed_offsets(label)])
        if log_end < highest:
            self.truncated[label] = (now, log_end, highest)
            if label.startswith(f"{OFFSETS_TOPIC}-"):
                self._commits_truncated(label, now, log_end, highest)
        self.hw_since_unclean[label] = log_end

    def _commits_truncated(self, label: str, now: int, log_end: int, highest: int) -> None:
        cluster = self.live.cluster
        spec = cluster.topics.get(OFFSETS_TOPIC) if cluster is not None else None
        if spec is None:
            return
        for group, partition in self.committed:
            if f"{OFFSETS_TOPIC}-{partition_for(group, spec.partitions)}" == label:
                self.commits_lost[(group, partition)] = (
                    f"the unclean election at {now} ms truncated {label}, group {group}'s offsets "
                    f"partition, to {log_end} (its HW had reached {highest}): the commits in the lost "
                    "records are gone and the new coordinator loaded older ones"
                )

    def _committed_offsets(self, label: str) -> list[int]:
        return [offset for (_, partition), offset in self.committed.items() if partition == label]

    def _commit(self, event: dict[str, Any]) -> None:
        group, member, now = event["group"], event["member"], event["time_ms"]
        generation, accepted_in = event["generation"], event["group_generation"]
        evidence = pin({"kind": "group.commit", "group": group, "error": "NONE", "time_ms": now})
        self.commits += 1

        def violate(
            rule: str, partition: str | None, offsets: str, message: str, cause: str = "", reason: str = ""
        ) -> None:
            key = (rule, group, partition)
            violation = Violation(7, partition, offsets, now, message, evidence, cause, reason)
            self.live.violate(key, violation)

        if group in self.consumer_groups:
            if generation >= 0 and (group, member, generation) not in self.epochs:
                violate(
                    "stale-epoch",
                    None,
                    "",
                    f"group {group} wrote a commit by {member} at member epoch {generation}, "
                    "an epoch that member never had",
                )
        elif generation >= 0 and generation != accepted_in:
            violate(
                "fenced",
                None,
                "",
                f"group {group} wrote a commit of generation {generation} by {member} "
                f"while in generation {accepted_in}",
            )
        elif generation >= 0 and (group, member, generation) not in self.assigned:
            violate(
                "unassigned",
                None,
                "",
                f"group {group} wrote a commit by {member} in generation {generation}, "
                "a generation that member was never assigned",
            )
        for label, offset in sorted(event["offsets"].items()):
            if label.startswith(OFFSETS_TOPIC):
                continue
            high = self.max_hw.get(label, 0)
            if offset > high:
                violate(
                    "above-hw",
                    label,
                    str(offset),
                    f"group {group} committed offset {offset} (by {member}) above the partition's "
                    f"highest HW so far, {high}",
                )
            if generation < 0:
                continue
            before = self.committed.get((group, label), -1)
            truncated = self.truncated.get(label)
            if offset < before:
                message = (
                    f"group {group}'s committed offset went back from {before} to {offset} "
                    f"(a commit by {member}, generation {generation})"
                )
                reason = self.commits_lost.pop((group, label), None)
                if reason is None and truncated is not None:
                    at, log_end, highest = truncated
                    reason = (
                        f"the unclean election at {at} ms truncated {label} to {log_end}, below what "
                        f"members had read or committed ({highest}): positions past {log_end} pointed "
                        "into records that are gone"
                    )
                    del self.truncated[label]
                if reason is None:
                    violate("backward", label, f"{before} -> {offset}", message)
                else:
                    rule = "backward-after-truncation"
                    violate(rule, label, f"{before} -> {offset}", message, UNCLEAN_TRUNCATION, reason)
            elif truncated is not None and offset <= truncated[1]:
                del self.truncated[label]  # the reset landed: commits are within the new log again
            self.committed[(group, label)] = offset


def check_assignment(schedule: Schedule, cluster: Cluster) -> list[Violation]:
    """Every subscribed partition assigned to exactly one member of a Stable group (at the end)."""
    from minibroker.chaos.schedule import GROUP

    if not schedule.members or OFFSETS_TOPIC not in cluster.topics:
        return []
    broker = cluster.coordinator_for(GROUP)
    coordinator = cluster.brokers[broker].coordinator if broker >= 0 else None
    if coordinator is not None and GROUP in coordinator.consumer_group_manager.groups:
        return _check_consumer_assignment(schedule, coordinator.consumer_group_manager.groups[GROUP])
    group = coordinator.groups.get(GROUP) if coordinator is not None else None
    if group is None or group.state != "Stable":
        return []  # the group expectation reports it
    owners: dict[str, list[str]] = {f"{t}-{p}": [] for t, p in schedule.partitions()}
    for member in group.members.values():
        for topic, partition in consumer_protocol.decode_assignment(member.assignment):
            owners.setdefault(f"{topic}-{partition}", []).append(member.client_id)
    return _owners_violation(schedule, owners, f"Stable in generation {group.generation_id}")


def _check_consumer_assignment(schedule: Schedule, group: Any) -> list[Violation]:
    """A KIP-848 group Stable at the end: every subscribed partition owned by exactly one member."""
    if group.state != "Stable":
        return []  # the group expectation reports it
    owners: dict[str, list[str]] = {f"{t}-{p}": [] for t, p in schedule.partitions()}
    for member in group.members.values():
        for topic, partition in sorted(member.owned()):
            owners.setdefault(f"{topic}-{partition}", []).append(member.client_id)
    return _owners_violation(schedule, owners, f"Stable at group epoch {group.group_epoch}")


def _owners_violation(schedule: Schedule, owners: dict[str, list[str]], how: str) -> list[Violation]:
    from minibroker.chaos.schedule import GROUP

    wrong = {label: sorted(who) for label, who in sorted(owners.items()) if len(who) != 1}
    if not wrong:
        return []
    shown = ", ".join(f"{label}: {who or 'nobody'}" for label, who in wrong.items())
    return [
        Violation(
            7,
            next(iter(wrong)),
            "",
            schedule.end_ms,
            f"group {GROUP} is {how} but not every subscribed partition has exactly one owner ({shown})",
            {"kind": "none"},
        )
    ]
