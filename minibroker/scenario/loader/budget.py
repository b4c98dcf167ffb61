"""The projected size of a run, checked before it starts.

A run costs wall time in two ways: background wake-ups, which go on for the whole span
of virtual time whether anything happens or not (every broker's reaper each
``minibroker.reaper.poll.ms``, every follower replica each ``replica.fetch.wait.max.ms``),
and requests (each produce is appended and fetched by every replica). The projection
takes the shortest poll and wait any setting or ``config`` step gives, and a span that
ends at ``end_ms``, or else at the last step plus the longest time a client may wait
for an answer. It is an order of magnitude, not a promise: within ``MAX_EVENTS`` a run
takes at most a few minutes.

Memory is bounded by the partition replicas a run creates: ``planned_topics`` lists every
topic a run (or ``serve``) creates before its clients ask for more, internal topics included
(``__consumer_offsets``, ``__transaction_state``, the delay levels' topics, ``__delay_wheel``,
``__delay_offsets``;
the retry section's topics are scenario topics by then), and ``check_topics`` refuses more
than ``MAX_PARTITION_REPLICAS`` of them in all. A feature that creates topics of its own
registers a function in ``INTERNAL_TOPICS``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import attrs

from minibroker.broker.config import BrokerConfig, ConsumerConfig, ProducerConfig
from minibroker.clients.admin import DEFAULT_TIMEOUT_MS as ADMIN_TIMEOUT_MS
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC
from minibroker.scenario.loader.limits import MAX_EVENTS, MAX_PARTITION_REPLICAS
from minibroker.scenario.loader.retry import retry_events
from minibroker.scenario.loader.scope import Scope
from minibroker.scenario.model import (
    DeleteRecords,
    ElectLeaders,
    Fetch,
    GroupState,
    ListOffsets,
    Load,
    Poll,
    Produce,
    Scenario,
    SetConfig,
    TransactionStep,
)

#: a Scenario, or the Scope it is loaded from (the same fields)
Planned = Scenario | Scope

#: steps that make client requests
REQUESTS = (Produce, Fetch, Poll, Load, DeleteRecords, TransactionStep, ElectLeaders, ListOffsets)


@attrs.frozen
class PlannedTopic:
    """A topic a run creates: its size and the setting (or section) that gives it."""

    name: str
    partitions: int
    replication_factor: int
    source: str

    @property
    def replicas(self) -> int:
        return self.partitions * self.replication_factor


def _offsets_topic(scope: Planned, serving: bool) -> Iterable[PlannedTopic]:
    """``__consumer_offsets``, created at a group's first request (always possible under ``serve``)."""
    groups = any(c.subscribe for c in scope.clients) or any(
        isinstance(e, GroupState) for e in scope.expectations
    )
    if not (serving or groups):
        return ()
    config = BrokerConfig.from_kafka(scope.cluster.config)
    rf = min(config.offsets_topic_replication_factor, scope.cluster.brokers)
    return (
        PlannedTopic(
            OFFSETS_TOPIC,
            config.offsets_topic_num_partitions,
            rf,
            "offsets.topic.num.partitions",
        ),
    )


def _delay_topics(scope: Planned, serving: bool) -> Iterable[PlannedTopic]:
    """The delay levels' topics and ``__delay_offsets`` (``[delay_service]``), ``__delay_wheel``
    and ``__delay_offsets`` (``[delay_wheel]``)."""
    from minibroker.delayed_messages.config import DelayConfig
    from minibroker.delayed_messages.offsets import DELAY_OFFSETS_TOPIC
    from minibroker.delayed_messages.wheel_ingest import INGEST_TOPIC
    from minibroker.delayed_messages.wheel_service import WheelConfig

    planned: dict[str, PlannedTopic] = {}
    brokers = scope.cluster.brokers
    if scope.delay_wheel is not None:
        settings = {k: v for k, v in scope.delay_wheel.items() if k != "data_dir"}
        copies = WheelConfig.from_kafka(settings).copies(brokers)
        for name in (INGEST_TOPIC, DELAY_OFFSETS_TOPIC):
            planned[name] = PlannedTopic(name, 1, copies, "delay_wheel")
    if scope.delay_service is not None:
        config = DelayConfig.from_kafka(scope.delay_service)
        rf = config.replication_factor(brokers)
        for name in config.levels.topics():
            planned[name] = PlannedTopic(name, config.topic_partitions, rf, "delay.topic.partitions")
        planned.setdefault(DELAY_OFFSETS_TOPIC, PlannedTopic(DELAY_OFFSETS_TOPIC, 1, rf, "delay_service"))
    return planned.values()


def _transaction_topics(scope: Planned, serving: bool) -> Iterable[PlannedTopic]:
    """``__transaction_state``, created at a transactional producer's first lookup, and
    ``__consumer_offsets`` for its ``send_offsets`` when no group makes it."""
    if not any(c.type == "producer" and c.config.get("transactional.id") for c in scope.clients):
        return ()
    config = BrokerConfig.from_kafka(scope.cluster.config)
    rf = min(config.transaction_state_log_replication_factor, scope.cluster.brokers)
    planned = [
        PlannedTopic(
            TRANSACTION_STATE_TOPIC,
            config.transaction_state_log_num_partitions,
            rf,
            "transaction.state.log.num.partitions",
        )
    ]
    offsets = any(isinstance(s, TransactionStep) and s.action == "send_offsets" for s in scope.steps)
    if offsets and not _offsets_topic(scope, serving):
        offsets_rf = min(config.offsets_topic_replication_factor, scope.cluster.brokers)
        planned.append(
            PlannedTopic(
                OFFSETS_TOPIC, config.offsets_topic_num_partitions, offsets_rf, "offsets.topic.num.partitions"
            )
        )
    return planned


#: features' internal topics: ``(scenario or scope, serving) -> topics``; a feature that creates
#: topics of its own (``__transaction_state``, ``__share_group_state``, ...) adds its function here
INTERNAL_TOPICS: list[Callable[[Planned, bool], Iterable[PlannedTopic]]] = [
    _offsets_topic,
    _delay_topics,
    _transaction_topics,
]


def planned_topics(scope: Planned, serving: bool = False) -> list[PlannedTopic]:
    """Every topic the run creates by itself: the scenario's and the internal ones."""
    topics = [PlannedTopic(t.name, t.partitions, t.replication_factor, "topics") for t in scope.topics]
    for internal in INTERNAL_TOPICS:
        topics.extend(internal(scope, serving))
    return topics


def check_topics(scope: Planned, path: str, serving: bool = False) -> str | None:
    """The problem (naming ``path``) when the run's topics hold more than ``MAX_PARTITION_REPLICAS``
    partition replicas in all, internal topics included; else None."""
    topics = planned_topics(scope, serving)
    total = sum(t.replicas for t in topics)
    most = min(MAX_PARTITION_REPLICAS, BrokerConfig.from_kafka(scope.cluster.config).partition_replicas_max)
    if total <= most:
        return None
    biggest = sorted(topics, key=lambda t: -t.replicas)[:3]
    shown = ", ".join(
        f"{t.name} {t.partitions:,} x {t.replication_factor} ({t.source})" for t in biggest if t.replicas
    )
    return (
        f"{path}: {total:,} partition replicas in all, internal topics included (the largest: {shown}); "
        f"expected at most {most:,}"
        + ("" if most == MAX_PARTITION_REPLICAS else " (minibroker.partition.replicas.max)")
    )


def projected_span(scope: Planned) -> int:
    """The last virtual ms the run may reach."""
    ends = [0 if scope.end_ms is None else scope.end_ms]
    ends += [step.at + (getattr(step, "duration_ms", 0) or 0) for step in scope.steps]
    ends += [getattr(e, "at", 0) for e in scope.expectations]
    last = max(ends)
    if scope.end_ms is None and any(isinstance(step, REQUESTS) for step in scope.steps):
        waits = [_client_wait(c.type, c.config) for c in scope.clients]
        waits += [s.timeout_ms for s in scope.steps if isinstance(s, (DeleteRecords, ElectLeaders))]
        waits += [ADMIN_TIMEOUT_MS for s in scope.steps if isinstance(s, ListOffsets)]
        last += max(waits, default=0)
    return last


def _client_wait(kind: str, config: dict) -> int:
    factory = ProducerConfig if kind == "producer" else ConsumerConfig
    settings = factory.from_kafka(config)
    return settings.request_timeout_ms + settings.response_grace_ms


def _smallest(scope: Planned, key: str, default: int) -> int:
    values = [scope.cluster.config.get(key, default)]
    values += [o[key] for o in scope.cluster.broker_overrides.values() if key in o]
    values += [s.settings[key] for s in scope.steps if isinstance(s, SetConfig) and key in s.settings]
    return max(1, min(values))


def projected_events(scope: Planned) -> tuple[int, int, int]:
    """(background wake-ups, request events, span in ms) of the whole run."""
    span = projected_span(scope)
    followers = sum(t.partitions * (t.replication_factor - 1) for t in planned_topics(scope))
    poll = _smallest(scope, "minibroker.reaper.poll.ms", 200)
    wait = _smallest(scope, "replica.fetch.wait.max.ms", 500)
    background = span * scope.cluster.brokers // poll + span * followers // wait
    factor = {t.name: t.replication_factor for t in scope.topics}
    clients = {c.id: c for c in scope.clients}
    requests = 0
    records = 0  # records produced to the retrying consumer's topic
    retried = scope.retry.topic if scope.retry is not None else None
    for step in scope.steps:
        if isinstance(step, Produce) or (isinstance(step, TransactionStep) and step.action == "send"):
            requests += factor[step.topic]
            records += step.records if step.topic == retried else 0
        elif isinstance(step, Load):
            requests += step.rate * step.duration_ms // 1000 * factor[step.topic]
            records += step.rate * step.duration_ms // 1000 * step.records if step.topic == retried else 0
        elif isinstance(step, (DeleteRecords, ElectLeaders, ListOffsets)):
            requests += factor[step.topic]
        elif isinstance(step, (Fetch, Poll)):
            consumer = clients[step.client]
            rounds = 1
            if isinstance(step, Poll):
                wait_ms = ConsumerConfig.from_kafka(consumer.config).fetch_max_wait_ms
                rounds += step.duration_ms // max(1, wait_ms)
            requests += rounds * len(consumer.assign)
    return background + retry_events(scope, span, records), requests, span


def check_budget(scope: Planned, path: str) -> str | None:
    """The problem (naming ``path``) when the run is projected past ``MAX_EVENTS``, else None.

    A sweep can check each variant (a Scenario) with it, as the loader checks the file.
    """
    background, requests, span = projected_events(scope)
    if background + requests <= MAX_EVENTS:
        return None
    return (
        f"{path}: the run is too big: a projected {background + requests:,} events, "
        f"expected at most {MAX_EVENTS:,} ({background:,} background wake-ups over {span:,} ms "
        f"of virtual time, {requests:,} for requests); shorten the run, lower load rates or raise "
        "minibroker.reaper.poll.ms / replica.fetch.wait.max.ms"
    )
