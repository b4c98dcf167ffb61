"""The scenario model: what a TOML scenario says, as frozen attrs classes.

A scenario is a cluster, topics, clients, a timeline of steps at virtual
milliseconds, and expectations. ``loader`` builds these from TOML and rejects
anything it cannot make sense of; ``run.py`` plays them; ``expect.py`` checks
the expectations. See docs/scenarios.md for the format.
"""

from __future__ import annotations

from typing import Any

import attrs

Node = int | str  # a broker id, or a client id


# --- setup -------------------------------------------------------------------------------------
def _within_limits(instance: Any, attribute: attrs.Attribute, settings: dict[str, Any]) -> None:
    """Kafka-named settings stay within loader/limits.py's bounds, however the model is made or
    evolved (a sweep overrides settings with attrs.evolve); ConfigError, like the config classes."""
    from minibroker.broker.config import ConfigError
    from minibroker.scenario.loader.limits import setting_problem

    for name, value in settings.items():
        problem = setting_problem(name, value)
        if problem is not None:
            raise ConfigError(f"config.{name}: {problem}")


@attrs.frozen
class ClusterSpec:
    brokers: int = 3
    config: dict[str, Any] = attrs.field(factory=dict, validator=_within_limits)
    broker_overrides: dict[int, dict[str, Any]] = attrs.field(
        factory=dict,
        validator=attrs.validators.deep_mapping(
            attrs.validators.instance_of(int), _within_limits, attrs.validators.instance_of(dict)
        ),
    )
    latency_ms: int = 0
    isr_commit_delay_ms: int = 0
    crash_detection_ms: int = 0


@attrs.frozen
class LinkSpec:
    between: tuple[Node, Node]
    latency_ms: int


@attrs.frozen
class TopicSpecModel:
    name: str
    partitions: int = 1
    replication_factor: int = 1
    assignment: tuple[tuple[int, ...], ...] | None = None
    #: Kafka topic configs by name, as strings (``cleanup.policy = "compact"``, ``segment.ms``, ...)
    configs: dict[str, str] = attrs.field(factory=dict, hash=False)


@attrs.frozen
class ClientSpec:
    id: str
    type: str  # "producer" or "consumer"
    config: dict[str, Any] = attrs.field(factory=dict, validator=_within_limits)
    assign: tuple[tuple[str, int, int], ...] = ()  # consumers: (topic, partition, offset)
    subscribe: tuple[str, ...] = ()  # consumers with a group.id: topics, joined at a ``join`` step


@attrs.frozen
class RetrySpec:
    """The ``[retry]`` section: a retrying consumer of ``topic`` with a scripted handler (docs/retry.md).

    ``fail``: (partition, offset, times or None, error name) rules; otherwise a delivery fails with
    probability ``fail_rate`` (seeded by the scenario's seed), raising ``error``.
    """

    topic: str
    attempts: int = 3
    backoff: str = "fixed"
    delay_ms: int = 1000
    multiplier: float = 2.0
    max_delay_ms: int = 30_000
    retryable: tuple[str, ...] = ()
    backend: str = "wheel"
    redis_url: str | None = None
    blocking: bool = False
    fail: tuple[tuple[int, int, int | None, str], ...] = ()
    fail_rate: float = 0.0
    error: str = "RuntimeError"


# --- steps -------------------------------------------------------------------------------------
@attrs.frozen
class Step:
    at: int
    index: int  # position in the file: steps at the same ms run in file order


@attrs.frozen
class Produce(Step):
    client: str
    topic: str
    partition: int
    records: int = 1
    bytes: int = 100
    id: str | None = None
    #: a delayed send (``minibroker.delayed_messages``), through ``delay_via`` ("levels" or "wheel")
    delay_ms: int | None = None
    delay_via: str | None = None
    #: one record per key (Kafka's record keys, for compacted topics); ``tombstone``: null values
    keys: tuple[str, ...] | None = None
    tombstone: bool = False


@attrs.frozen
class Fetch(Step):
    client: str
    id: str | None = None


@attrs.frozen
class Poll(Step):
    """A consumer fetching again as soon as each fetch returns, for ``duration_ms``."""

    client: str
    duration_ms: int
    id: str | None = None


@attrs.frozen
class Load(Step):
    """``rate`` produce requests per second for ``duration_ms``, spread over ``partitions``."""

    client: str
    topic: str
    rate: int
    duration_ms: int
    partitions: tuple[int, ...] | None = None
    records: int = 1
    bytes: int = 100
    id: str | None = None
    delay_ms: int | None = None
    delay_via: str | None = None


@attrs.frozen
class DeleteRecords(Step):
    """An admin client's DeleteRecords: records below ``offset`` (-1: the HW) go; it waits for the
    low watermark in the leader's DeleteRecords purgatory, at most ``timeout_ms``."""

    client: str
    topic: str
    partition: int
    offset: int
    timeout_ms: int = 30_000
    id: str | None = None


@attrs.frozen
class ElectLeaders(Step):
    """An admin client's ElectLeaders for one partition (``election`` 0: preferred, 1: unclean), sent
    to ``broker`` (None: the lowest live one); it waits in that broker's ElectLeader purgatory until
    the elected leader is in its metadata, at most ``timeout_ms``."""

    client: str
    topic: str
    partition: int
    election: int = 0
    timeout_ms: int = 30_000
    broker: int | None = None
    id: str | None = None


@attrs.frozen
class ListOffsets(Step):
    """An admin's or a consumer's ListOffsets for one partition, to its leader: ``timestamp`` is a time
    in ms or a special one (-1 latest, -2 earliest, -4 earliest local, -5 latest tiered); on a tiered
    topic a lookup by time waits in the leader's RemoteListOffsets purgatory."""

    client: str
    topic: str
    partition: int
    timestamp: int
    id: str | None = None


@attrs.frozen
class BrokerFault(Step):
    """pause / resume (a follower's fetchers), crash / restart / shutdown (a broker)."""

    action: str
    broker: int


@attrs.frozen
class LinkFault(Step):
    """latency / drop / heal on the link between two nodes: both directions, or with ``one_way`` only
    messages from ``between[0]`` to ``between[1]`` (drop and heal)."""

    action: str
    between: tuple[Node, Node]
    latency_ms: int = 0
    one_way: bool = False


@attrs.frozen
class SetConfig(Step):
    """Change Kafka-named broker settings, on one broker or (broker None) all of them."""

    settings: dict[str, Any]
    broker: int | None = None


@attrs.frozen
class MemberAction(Step):
    """join / leave / stall / hang / commit: a group member's application (a consumer with subscribe).

    ``duration_ms`` (stall, hang): how long until it polls (and heartbeats) again; None: for good.
    """

    action: str
    client: str
    duration_ms: int | None = None


@attrs.frozen
class TransactionStep(Step):
    """A transactional producer's call (``minibroker.clients.transactional_producer``): init, begin,
    send (``topic``, ``partition``, ``records``, ``bytes``), send_offsets (``group``, ``offsets``:
    "t-0" -> offset), commit, abort, or crash (the producer dies without EndTxn)."""

    action: str
    client: str
    id: str | None = None
    topic: str = ""
    partition: int = 0
    records: int = 1
    bytes: int = 100
    group: str = ""
    offsets: dict[str, int] = attrs.Factory(dict)


@attrs.frozen
class ShareStep(Step):
    """A share consumer's application (``minibroker.clients.share_consumer``): ``acknowledge`` (from now on,
    ``type`` for the records at ``offsets``, all when None, of ``partition``, any when None) or ``crash``."""

    action: str
    client: str
    type: str = "ACCEPT"
    offsets: tuple[int, ...] | None = None
    partition: str | None = None


# --- expectations ------------------------------------------------------------------------------
@attrs.frozen
class Expectation:
    index: int
    where: str  # "expect[3]", for messages


@attrs.frozen
class RequestOutcome(Expectation):
    request: str
    error: str | dict[str, str] | None = None
    cause: str | None = None
    completed_at: int | None = None
    completed_within: tuple[int, int] | None = None
    records: int | None = None
    low_watermark: int | None = None  # a delete_records request's answer (one partition)
    offset: int | None = None  # a list_offsets request's answer (one partition)


@attrs.frozen
class PartitionState(Expectation):
    at: int
    partition: str
    replica: int | None = None  # whose LEO/HW; default: the leader
    leader: int | None = None
    epoch: int | None = None
    isr: tuple[int, ...] | None = None
    hw: int | None = None
    leo: int | None = None
    log_start: int | None = None
    #: the leader's last stable offset
    lso: int | None = None
    local_log_start: int | None = None


@attrs.frozen
class PurgatoryFigures(Expectation):
    at: int
    broker: int
    purgatory: str  # "Produce" or "Fetch"
    num_delayed: int | None = None
    watched: int | None = None
    watched_keys: int | None = None
    expirations: int | None = None
    purges: int | None = None


@attrs.frozen
class Count(Expectation):
    """A count over the run: requests matching filters, purgatory totals, or trace events."""

    count: str  # requests | expirations | completions | purges | purged | events
    equals: int | None = None
    at_least: int | None = None
    at_most: int | None = None
    filters: dict[str, Any] = attrs.Factory(dict)


@attrs.frozen
class Event(Expectation):
    """At least one (or exactly ``count``) trace events with these fields."""

    fields: dict[str, Any]
    count: int | None = None


@attrs.frozen
class Delivered(Expectation):
    """The delayed messages of a produce step with ``delay_ms`` reached their real partition (at / within)."""

    request: str
    #: the TOML's ``at`` (not named ``at``: that is a timed expectation's time)
    delivered_at: int | None = None
    within: tuple[int, int] | None = None
    partition: str | None = None
    duplicates: int | None = None


@attrs.frozen
class DelayHeld(Expectation):
    """A level partition's held count and paused state at a time (its leader's DelayService)."""

    at: int
    partition: str
    held: int | None = None
    paused: bool | None = None


@attrs.frozen
class WheelFigures(Expectation):
    """A broker's file wheel copy at a time."""

    at: int
    broker: int
    slots_with_messages: int | None = None
    open_files: int | None = None
    pointer: int | None = None
    in_sync: bool | None = None


@attrs.frozen
class GroupState(Expectation):
    """A group (classic or consumer protocol) on its coordinator at the end of ``at``; members and
    leader by client id."""

    at: int
    group: str
    state: str | None = None
    generation: int | None = None
    members: tuple[str, ...] | None = None
    leader: str | None = None
    assignment: dict[str, tuple[str, ...]] | None = None
    committed: dict[str, int] | None = None
    #: a consumer protocol group's (KIP-848): its epochs, each member's epoch and target partitions
    group_epoch: int | None = None
    assignment_epoch: int | None = None
    epochs: dict[str, int] | None = None
    target: dict[str, tuple[str, ...]] | None = None


@attrs.frozen
class MemberErrors(Expectation):
    """The errors a group member was answered over the run, in order (of one API if ``api`` is set)."""

    member: str
    errors: tuple[str, ...]
    api: str | None = None


@attrs.frozen
class RetryCounts(Expectation):
    """The retrying consumer at the end of ``at``: records processed, dead-lettered, handler calls, the
    scheduler's pending count, and records in topics (``records``: topic -> count below the HW)."""

    at: int
    topic: str
    processed: int | None = None
    dead: int | None = None
    deliveries: int | None = None
    pending: int | None = None
    records: dict[str, int] | None = None


@attrs.frozen
class TransactionState(Expectation):
    """A transactional id on its coordinator at the end of ``at`` (Kafka's state names)."""

    at: int
    transaction: str
    state: str | None = None
    epoch: int | None = None
    partitions: tuple[str, ...] | None = None
    coordinator: int | None = None


@attrs.frozen
class SharePartitionState(Expectation):
    """A share partition on the partition's leader at the end of ``at``: its SPSO and SPEO, the state and
    delivery count of offsets in flight, and its running totals."""

    at: int
    partition: str
    group: str
    spso: int | None = None
    speo: int | None = None
    states: dict[int, str] | None = None
    delivery_counts: dict[int, int] | None = None
    lock_expiries: int | None = None
    archived: int | None = None
    leader: int | None = None


TimedExpectation = (
    TransactionState | PartitionState | PurgatoryFigures | GroupState | DelayHeld | WheelFigures | RetryCounts
)


@attrs.frozen
class Scenario:
    name: str
    description: str
    path: str
    seed: int
    end_ms: int | None
    cluster: ClusterSpec
    links: tuple[LinkSpec, ...]
    topics: tuple[TopicSpecModel, ...]
    clients: tuple[ClientSpec, ...]
    steps: tuple[Step, ...]
    expectations: tuple[Expectation, ...]
    #: Kafka-style settings of the delay levels / the file wheel, when the scenario has them
    delay_service: dict[str, Any] | None = None
    delay_wheel: dict[str, Any] | None = None
    retry: RetrySpec | None = None

    @property
    def request_ids(self) -> set[str]:
        return {s.id for s in self.steps if getattr(s, "id", None)}

    @property
    def last_step_ms(self) -> int:
        ends = [0]
        for step in self.steps:
            ends.append(step.at + (getattr(step, "duration_ms", 0) or 0))
        for expectation in self.expectations:
            ends.append(getattr(expectation, "at", 0))
        return max(ends)
