"""What the loader knows so far, and the checks of references to it (brokers, topics, clients).

Sections are read in order (``load.SECTIONS``); each one stores what it read on the
``Scope`` and later sections check their references against it: a step's client must
be a client, its topic a topic, a broker id below ``cluster.brokers``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from minibroker.broker.config import ConfigError
from minibroker.controller.quorum_controller import CONTROLLER
from minibroker.scenario.loader.document import Context, ScenarioError, Table, describe, listing
from minibroker.scenario.loader.limits import setting_problem
from minibroker.scenario.model import (
    ClientSpec,
    ClusterSpec,
    Expectation,
    LinkSpec,
    Node,
    RetrySpec,
    Step,
    TopicSpecModel,
)


@attrs.define
class Scope:
    """The scenario being loaded: every section's result, for the sections after it."""

    ctx: Context
    name: str = ""
    description: str = ""
    seed: int = 0
    end_ms: int | None = None
    cluster: ClusterSpec = attrs.Factory(ClusterSpec)
    links: tuple[LinkSpec, ...] = ()
    topics: tuple[TopicSpecModel, ...] = ()
    clients: tuple[ClientSpec, ...] = ()
    delay_service: dict[str, Any] | None = None
    delay_wheel: dict[str, Any] | None = None
    retry: RetrySpec | None = None
    steps: tuple[Step, ...] = ()
    made: dict[str, int] = attrs.Factory(dict)  # request name -> the ms of the step that makes it
    expectations: tuple[Expectation, ...] = ()
    problems: list[str] = attrs.Factory(list)  # one line each, in file order

    def items(self, root: Table, section: str, read: Callable[[Table, int], Any]) -> tuple[Any, ...]:
        """``read`` applied to each table of the array ``section`` (``steps[3]``, ...), in file order.

        An item with a problem is left out and its problem kept, so every item is checked.
        """
        items = []
        for i, raw in enumerate(root.array(section)):
            try:
                items.append(read(Table(raw, f"{section}[{i}]", self.ctx), i))
            except ScenarioError as error:
                self.problems.extend(error.problems)
        return tuple(items)


def unique(values: list[str], table: str, key: str, ctx: Context) -> None:
    seen: set[str] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise ctx.error(
                f"{table}[{i}].{key}", f"{describe(value)} is defined twice; expected a unique {key}"
            )
        seen.add(value)


def kafka(
    table: Table, key: str, factory: Callable[..., Any], fix: Callable[[dict], dict] | None = None
) -> dict:
    """The Kafka-named settings table ``key``, validated by ``factory`` (a ``*Config.from_kafka``)."""
    settings = table.table(key)
    settings.used.update(settings.data)
    values = dict(settings.data)
    if fix is not None:
        values = fix(values)
    for name, value in values.items():  # bounds of our own first: they are the narrower
        problem = setting_problem(name, value)
        if problem is not None:
            raise settings.ctx.error(f"{settings.path}.{name}", problem)
    try:
        factory(values, settings.path)
    except ConfigError as error:
        message = str(error)
        where, _, problem = message.partition(": ")
        raise settings.ctx.error(where, problem) from None
    return values


def is_broker(value: Any, brokers: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < brokers


def broker(table: Table, cluster: ClusterSpec, key: str = "broker") -> int:
    value = table.raw(key)
    if not is_broker(value, cluster.brokers):
        raise table.error(key, f"expected a broker id 0..{cluster.brokers - 1}, got {describe(value)}")
    return value


def topic_of(table: Table, key: str, topic: str, topics: tuple[TopicSpecModel, ...]) -> TopicSpecModel:
    spec = next((t for t in topics if t.name == topic), None)
    if spec is None:
        raise table.error(
            key,
            f"unknown topic {describe(topic)}; "
            f"expected one of: {listing([t.name for t in topics]) or '(no topic is defined)'}",
        )
    return spec


def check_partition(
    table: Table, key: str, topic: str, partition: int, topics: tuple[TopicSpecModel, ...]
) -> tuple[str, int]:
    spec = topic_of(table, key, topic, topics)
    if not 0 <= partition < spec.partitions:
        raise table.error(
            key, f"topic {describe(topic)} has partitions 0..{spec.partitions - 1}, not {partition}"
        )
    return topic, partition


def partition_label(table: Table, key: str, label: Any, topics: tuple[TopicSpecModel, ...]) -> str:
    """``label`` checked as an existing partition's "topic-partition" ("t-0")."""
    topic, _, number = str(label).rpartition("-")
    if not isinstance(label, str) or not number.isdigit():
        raise table.error(key, f"expected 'topic-partition' like 't-0', got {describe(label)}")
    check_partition(table, key, topic, int(number), topics)
    return label


def client_of(table: Table, clients: tuple[ClientSpec, ...], kind: str) -> str:
    client_id = table.str("client")
    spec = next((c for c in clients if c.id == client_id), None)
    if spec is None or spec.type != kind:
        names = listing([c.id for c in clients if c.type == kind]) or f"(no {kind} is defined)"
        raise table.error("client", f"expected a {kind} client: {names}; got {describe(client_id)}")
    return client_id


def assigned_consumer(table: Table, clients: tuple[ClientSpec, ...]) -> str:
    """A consumer with partitions to fetch, or a subscription (Kafka's poll refuses one with neither)."""
    client_id = client_of(table, clients, "consumer")
    spec = next(c for c in clients if c.id == client_id)
    if not spec.assign and not spec.subscribe:  # a subscribed one fetches what its group assigns it
        raise table.error(
            "client",
            f"consumer {describe(client_id)} has no assigned partitions; "
            "expected assign = [...] or subscribe = [...] on it",
        )
    return client_id


def node(table: Table, key: str, value: Any, cluster: ClusterSpec, clients: tuple[ClientSpec, ...]) -> Node:
    if is_broker(value, cluster.brokers):
        return value
    if isinstance(value, str) and (value == CONTROLLER or any(c.id == value for c in clients)):
        return value
    raise table.error(
        key,
        f'expected a broker id 0..{cluster.brokers - 1}, a client id or "controller", got {describe(value)}',
    )


def between(table: Table, cluster: ClusterSpec, clients: tuple[ClientSpec, ...]) -> tuple[Node, Node]:
    value = table.raw("between")
    if not isinstance(value, list) or len(value) != 2 or value[0] == value[1]:
        raise table.error("between", f"expected two different nodes like [0, 2], got {describe(value)}")
    return node(table, "between", value[0], cluster, clients), node(
        table, "between", value[1], cluster, clients
    )


def directed(table: Table, cluster: ClusterSpec, clients: tuple[ClientSpec, ...]) -> tuple[Node, Node]:
    """``from`` and ``to``: one direction of a link (a one-way ``drop`` or ``heal``)."""
    if table.has("between"):
        raise table.error("between", "expected either between = [a, b] (both ways) or from and to (one way)")
    if not table.has("from") or not table.has("to"):
        missing = "to" if table.has("from") else "from"
        raise table.error(
            missing, f"expected {missing} beside {'from' if missing == 'to' else 'to'}: a one-way link"
        )
    src = node(table, "from", table.raw("from"), cluster, clients)
    dst = node(table, "to", table.raw("to"), cluster, clients)
    if src == dst:
        raise table.error(
            "to", f"expected a node other than from ({describe(src)}): a node has no link to itself"
        )
    return src, dst
