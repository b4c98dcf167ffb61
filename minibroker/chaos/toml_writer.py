"""Write a scenario model as TOML that the normal loader reads back to an equal model.

``scenario_toml(scenario)`` writes every field the loader reads, in the loader's
spelling (steps in index order, expectations in index order), so
``parse_scenario(scenario_toml(s), s.path) == s`` for any model the loader can
produce. ``replay_scenario`` adds, for each violation, the steps and
``[[expect]]`` entries that make ``minibroker run`` fail the same way:

- a lost or truncated record ("read" evidence): a ``check-N`` consumer assigned at
  the record's offset fetches once at the end (``fetch.max.wait.ms = 0``,
  ``max.partition.fetch.bytes = 1``, so the answer is exactly the batch at that
  offset) and an ``event`` expectation asks for one ``fetch.response`` with that
  offset, record count and size (the size names the request that wrote it); an
  acknowledged request also gets ``error = "NONE"``;
- a rule broken at an instant ("event" evidence): the trace event that shows it,
  expected ``count`` times (0: it must not happen; 1: exactly once);
- liveness ("expect" evidence): the probe and ISR expectations are already there.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from minibroker.chaos.schedule import GRACE_MS, READ_MS, Schedule, compile_schedule
from minibroker.chaos.violations import Violation
from minibroker.scenario.model import (
    BrokerFault,
    ClientSpec,
    Count,
    Event,
    Expectation,
    Fetch,
    GroupState,
    LinkFault,
    Load,
    MemberAction,
    PartitionState,
    Poll,
    Produce,
    PurgatoryFigures,
    RequestOutcome,
    Scenario,
    SetConfig,
    Step,
    TransactionStep,
)


def value(item: Any) -> str:
    """One TOML value: strings as JSON-escaped basic strings, dicts as inline tables."""
    if isinstance(item, bool):
        return "true" if item else "false"
    if isinstance(item, int):
        return str(item)
    if isinstance(item, str):
        return json.dumps(item)
    if isinstance(item, (list, tuple)):
        return "[" + ", ".join(value(v) for v in item) + "]"
    if isinstance(item, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {value(v)}" for k, v in item.items()) + " }"
    raise TypeError(f"cannot write {type(item).__name__} as TOML")


def _table(header: str, pairs: Iterable[tuple[str, Any]]) -> list[str]:
    lines = [header]
    lines += [f"{key} = {value(v)}" for key, v in pairs if v is not None]
    return [*lines, ""]


def _step_pairs(step: Step) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = [("at", step.at)]
    if isinstance(step, Produce):
        pairs += [
            ("action", "produce"),
            ("client", step.client),
            ("topic", step.topic),
            ("partition", step.partition),
            ("records", step.records if step.keys is None else None),
            ("bytes", step.bytes if step.keys is None else None),
            ("id", step.id),
            ("keys", list(step.keys) if step.keys is not None else None),
            ("tombstone", step.tombstone or None),
        ]
    elif isinstance(step, Fetch):
        pairs += [("action", "fetch"), ("client", step.client), ("id", step.id)]
    elif isinstance(step, Poll):
        pairs += [
            ("action", "poll"),
            ("client", step.client),
            ("duration_ms", step.duration_ms),
            ("id", step.id),
        ]
    elif isinstance(step, Load):
        pairs += [
            ("action", "load"),
            ("client", step.client),
            ("topic", step.topic),
            ("rate", step.rate),
            ("duration_ms", step.duration_ms),
            ("partitions", step.partitions),
            ("records", step.records),
            ("bytes", step.bytes),
            ("id", step.id),
        ]
    elif isinstance(step, BrokerFault):
        pairs += [("action", step.action), ("broker", step.broker)]
    elif isinstance(step, LinkFault):
        pairs += [("action", step.action), ("between", step.between)]
        if step.action == "latency":
            pairs.append(("latency_ms", step.latency_ms))
    elif isinstance(step, MemberAction):
        pairs += [("action", step.action), ("client", step.client), ("duration_ms", step.duration_ms)]
    elif isinstance(step, SetConfig):
        pairs += [("action", "config"), ("settings", step.settings), ("broker", step.broker)]
    elif isinstance(step, TransactionStep):
        pairs += [("action", step.action), ("client", step.client), ("id", step.id)]
        if step.action == "send":
            pairs += [
                ("topic", step.topic),
                ("partition", step.partition),
                ("records", step.records),
                ("bytes", step.bytes),
            ]
    else:
        raise TypeError(f"cannot write step {type(step).__name__}")
    return pairs


def _expect_pairs(item: Expectation) -> list[tuple[str, Any]]:
    if isinstance(item, RequestOutcome):
        return [
            ("request", item.request),
            ("error", item.error),
            ("cause", item.cause),
            ("completed_at", item.completed_at),
            ("completed_within", item.completed_within),
            ("records", item.records),
        ]
    if isinstance(item, PartitionState):
        return [
            ("partition", item.partition),
            ("at", item.at),
            ("replica", item.replica),
            ("leader", item.leader),
            ("epoch", item.epoch),
            ("isr", item.isr),
            ("hw", item.hw),
            ("leo", item.leo),
            ("lso", item.lso),
        ]
    if isinstance(item, PurgatoryFigures):
        return [
            ("broker", item.broker),
            ("purgatory", item.purgatory),
            ("at", item.at),
            ("num_delayed", item.num_delayed),
            ("watched", item.watched),
            ("watched_keys", item.watched_keys),
            ("expirations", item.expirations),
            ("purges", item.purges),
        ]
    if isinstance(item, Count):
        return [
            ("count", item.count),
            *item.filters.items(),
            ("equals", item.equals),
            ("at_least", item.at_least),
            ("at_most", item.at_most),
        ]
    if isinstance(item, Event):
        return [("event", item.fields), ("count", item.count)]
    if isinstance(item, GroupState):
        return [
            ("group", item.group),
            ("at", item.at),
            ("state", item.state),
            ("generation", item.generation),
            ("members", item.members),
            ("leader", item.leader),
            ("assignment", item.assignment),
            ("committed", item.committed),
        ]
    raise TypeError(f"cannot write expectation {type(item).__name__}")


def scenario_toml(scenario: Scenario, comments: Iterable[str] = ()) -> str:
    """The scenario as TOML text (``comments`` become ``#`` lines at the top)."""
    lines = [f"# {line}" for text in comments for line in text.splitlines()]
    if lines:
        lines.append("")
    lines += _table(
        "[scenario]",
        [
            ("name", scenario.name),
            ("description", scenario.description),
            ("seed", scenario.seed),
            ("end_ms", scenario.end_ms),
        ],
    )
    cluster = scenario.cluster
    overrides = {str(b): o for b, o in cluster.broker_overrides.items()} or None
    lines += _table(
        "[cluster]",
        [
            ("brokers", cluster.brokers),
            ("latency_ms", cluster.latency_ms),
            ("isr_commit_delay_ms", cluster.isr_commit_delay_ms),
            ("crash_detection_ms", cluster.crash_detection_ms),
            ("config", cluster.config),
            ("broker", overrides),
        ],
    )
    for link in scenario.links:
        lines += _table("[[links]]", [("between", link.between), ("latency_ms", link.latency_ms)])
    for topic in scenario.topics:
        lines += _table(
            "[[topics]]",
            [
                ("name", topic.name),
                ("partitions", topic.partitions),
                ("replication_factor", topic.replication_factor),
                ("assignment", topic.assignment),
                ("configs", topic.configs or None),
            ],
        )
    for client in scenario.clients:
        assign = [{"topic": t, "partition": p, "offset": o} for t, p, o in client.assign] or None
        lines += _table(
            "[[clients]]",
            [
                ("id", client.id),
                ("type", client.type),
                ("config", client.config),
                ("assign", assign),
                ("subscribe", client.subscribe or None),
            ],
        )
    for step in sorted(scenario.steps, key=lambda s: s.index):
        lines += _table("[[steps]]", _step_pairs(step))
    for item in sorted(scenario.expectations, key=lambda e: e.index):
        lines += _table("[[expect]]", _expect_pairs(item))
    return "\n".join(lines)


def _events(fields: dict[str, Any], count: int) -> Count:
    """Exactly ``count`` trace events with ``fields``, as a ``count = "events"`` expectation."""
    return Count(0, "", "events", equals=count, filters={"event": fields})


def replay_scenario(schedule: Schedule, violations: list[Violation]) -> Scenario:
    """``schedule``'s scenario plus what makes each violation fail ``minibroker run``."""
    clients: list[ClientSpec] = []
    steps: list[Step] = []
    expectations: list[Expectation] = []
    at = schedule.check_ms + READ_MS
    for n, violation in enumerate(violations):
        evidence = violation.evidence
        if evidence.get("kind") == "read":
            name = f"check-{n}"
            topic, _, partition = evidence["partition"].rpartition("-")
            clients.append(
                ClientSpec(
                    name,
                    "consumer",
                    {
                        "fetch.max.wait.ms": 0,
                        "max.partition.fetch.bytes": 1,
                        "minibroker.response.grace.ms": GRACE_MS,
                    },
                    ((topic, int(partition), evidence["offset"]),),
                )
            )
            steps.append(Fetch(at, 0, name, name))
            fields = {
                "kind": "fetch.response",
                "op": name,
                "partition": evidence["partition"],
                "error": "NONE",
                "offset": evidence["offset"],
                "records": evidence["count"],
                "bytes": evidence["bytes"],
            }
            expectations.append(_events(fields, 1))
            if evidence.get("op"):
                expectations.append(RequestOutcome(0, "", evidence["op"], "NONE"))
        elif evidence.get("kind") == "event":
            expectations.append(_events(dict(evidence["fields"]), evidence["count"]))
        elif evidence.get("kind") == "lso":  # the LSO the leader should have served then
            expectations.append(
                PartitionState(0, "", evidence["at"], evidence["partition"], lso=evidence["lso"])
            )
    lines = "; ".join(v.line() for v in violations)
    return compile_schedule(
        schedule,
        tuple(clients),
        tuple(steps),
        tuple(expectations),
        f"shrunk chaos run {schedule.name}: {lines}",
    )
