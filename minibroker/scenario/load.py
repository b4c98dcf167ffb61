"""Load a TOML scenario into the model, rejecting anything it cannot make sense of.

Every problem becomes one ``ScenarioError`` whose message names the file, the
line when it can be found, the key path (``steps[3].at``) and the expected form:

    scenarios/x.toml:41: steps[3].at: expected a whole number of ms >= 0, got -5
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minibroker.cluster.config import BrokerConfig, ConfigError, ConsumerConfig, ProducerConfig
from minibroker.scenario.model import (
    BrokerFault,
    ClientSpec,
    ClusterSpec,
    Count,
    Event,
    Expectation,
    Fetch,
    LinkFault,
    LinkSpec,
    Load,
    Node,
    PartitionState,
    Poll,
    Produce,
    PurgatoryFigures,
    RequestOutcome,
    Scenario,
    SetConfig,
    Step,
    TopicSpecModel,
)

_MISSING = object()
ERRORS = (
    "NONE",
    "OFFSET_OUT_OF_RANGE",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER",
    "REQUEST_TIMED_OUT",
    "NETWORK_EXCEPTION",
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "INVALID_REQUIRED_ACKS",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
)
CAUSES = ("immediate", "condition", "expiry", "leadership", "network")
COUNTS = ("requests", "expirations", "completions", "purges", "purged", "events")


class ScenarioError(Exception):
    """A scenario that cannot be loaded; ``str()`` is the one-line message for the user."""


class _Context:
    """The file being read: its name, and its text for finding line numbers."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines = text.splitlines()

    def line_of(self, key_path: str) -> int | None:
        """Best effort: the line of ``steps[3].at`` (the 4th ``[[steps]]``, then ``at =``)."""
        match = re.match(r"([A-Za-z_]+)(?:\[(\d+)\])?((?:\.[^.\[]+)*)", key_path)
        if not match:
            return None
        table, index, rest = match.group(1), match.group(2), match.group(3)
        keys = [k.strip('"') for k in rest.split(".") if k]
        start = None
        if index is not None:
            header = re.compile(rf"^\s*\[\[\s*{re.escape(table)}\s*\]\]")
            seen = -1
            for number, line in enumerate(self.lines):
                if header.match(line):
                    seen += 1
                    if seen == int(index):
                        start = number
                        break
        else:
            header = re.compile(rf"^\s*\[\s*{re.escape(table)}[\].]")
            for number, line in enumerate(self.lines):
                if header.match(line):
                    start = number
                    break
        if start is None:
            plain = re.compile(rf'^\s*"?{re.escape(table)}"?\s*=')
            return next((n + 1 for n, line in enumerate(self.lines) if plain.match(line)), None)
        for key in reversed(keys):  # the innermost key written on a line of its own
            pattern = re.compile(rf'^\s*"?{re.escape(key)}"?\s*=')
            for number in range(start + 1, len(self.lines)):
                if re.match(r"^\s*\[", self.lines[number]):
                    break
                if pattern.match(self.lines[number]):
                    return number + 1
        return start + 1

    def error(self, key_path: str, problem: str) -> ScenarioError:
        line = self.line_of(key_path) if key_path else None
        where = f"{self.path}:{line}" if line else self.path
        message = f"{where}: {key_path}: {problem}" if key_path else f"{where}: {problem}"
        return ScenarioError(_printable(message))


def _printable(text: str) -> str:
    """The message on one line: control and line-breaking characters (as in a hostile key) escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


class _Table:
    """Typed, checked access to one TOML table; ``finish`` rejects keys nobody asked for."""

    def __init__(self, data: Any, path: str, ctx: _Context) -> None:
        if not isinstance(data, dict):
            raise ctx.error(path, f"expected a table, got {_describe(data)}")
        self.data = data
        self.path = path
        self.ctx = ctx
        self.used: set[str] = set()

    def sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def error(self, key: str, problem: str) -> ScenarioError:
        return self.ctx.error(self.sub(key), problem)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        self.used.add(key)
        if key in self.data:
            return self.data[key]
        if default is _MISSING:
            raise self.ctx.error(self.path or key, f"missing key {key!r}")
        return default

    def int(self, key: str, default: Any = _MISSING, minimum: int = 0, what: str = "a whole number") -> Any:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected {what} >= {minimum}, got {_describe(value)}")
        if value < minimum:
            raise self.error(key, f"expected {what} >= {minimum}, got {value}")
        return value

    def ms(self, key: str, default: Any = _MISSING) -> Any:
        return self.int(key, default, 0, "a whole number of ms")

    def str(self, key: str, default: Any = _MISSING, choices: tuple[str, ...] | None = None) -> Any:
        value = self.raw(key, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str) or not value:
            raise self.error(key, f"expected a non-empty string, got {_describe(value)}")
        if choices is not None and value not in choices:
            raise self.error(key, f"expected one of {', '.join(choices)}, got {value!r}")
        return value

    def table(self, key: str) -> _Table:
        return _Table(self.raw(key, {}), self.sub(key), self.ctx)

    def array(self, key: str) -> list[Any]:
        value = self.raw(key, [])
        if not isinstance(value, list):
            raise self.error(key, f"expected an array, got {_describe(value)}")
        return value

    def finish(self, allowed: tuple[str, ...] | None = None) -> None:
        unknown = [k for k in self.data if k not in self.used]
        if unknown:
            expected = ", ".join(sorted(allowed or self.used))
            raise self.error(unknown[0], f"unknown key {unknown[0]!r}; expected one of: {expected}")


# --- the document ------------------------------------------------------------------------------
def read_document(path: str | Path) -> str:
    """The text of a scenario-like file; a missing or unreadable one is a one-line ScenarioError."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ScenarioError(f"{path}: cannot read the file: {error}") from None


def parse_document(text: str, path: str) -> _Table:
    """The TOML root table of a scenario-like file, ready for checked reading."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ScenarioError(f"{path}: malformed TOML: {error}") from None
    return _Table(data, "", _Context(path, text))


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    return parse_scenario(read_document(path), str(path))


def parse_scenario(text: str, path: str = "<scenario>") -> Scenario:
    root = parse_document(text, path)
    ctx = root.ctx
    meta = root.table("scenario")
    name = meta.str("name", Path(path).stem)
    description = meta.str("description", "")
    seed = meta.int("seed", 0)
    end_ms = meta.ms("end_ms", None)
    meta.finish()
    cluster = _cluster(root.table("cluster"))
    topics = tuple(
        _topic(_Table(t, f"topics[{i}]", ctx), cluster.brokers) for i, t in enumerate(root.array("topics"))
    )
    _unique([t.name for t in topics], "topics", "name", ctx)
    clients = tuple(
        _client(_Table(c, f"clients[{i}]", ctx), topics) for i, c in enumerate(root.array("clients"))
    )
    _unique([c.id for c in clients], "clients", "id", ctx)
    links = tuple(
        _link(_Table(link, f"links[{i}]", ctx), cluster, clients)
        for i, link in enumerate(root.array("links"))
    )
    steps = tuple(
        _step(_Table(s, f"steps[{i}]", ctx), i, cluster, topics, clients)
        for i, s in enumerate(root.array("steps"))
    )
    made: dict[str, int] = {}
    for i, step in enumerate(steps):
        request_id = getattr(step, "id", None)
        if request_id is not None and ("#" in request_id or "@" in request_id):
            raise ctx.error(f"steps[{i}].id", f"expected a name without '#' or '@', got {request_id!r}")
        if request_id is not None:
            if request_id in made:
                raise ctx.error(
                    f"steps[{i}].id", f"request name {request_id!r} is used twice; expected a new name"
                )
            made[request_id] = step.at
    expectations = tuple(
        _expectation(_Table(e, f"expect[{i}]", ctx), i, cluster, topics, clients, made)
        for i, e in enumerate(root.array("expect"))
    )
    root.finish(("scenario", "cluster", "links", "topics", "clients", "steps", "expect"))
    return Scenario(
        name, description, path, seed, end_ms, cluster, links, topics, clients, steps, expectations
    )


def _unique(values: list[str], table: str, key: str, ctx: _Context) -> None:
    seen: set[str] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise ctx.error(f"{table}[{i}].{key}", f"{value!r} is defined twice; expected a unique {key}")
        seen.add(value)


def _kafka(
    table: _Table, key: str, factory: Callable[..., Any], fix: Callable[[dict], dict] | None = None
) -> dict:
    settings = table.table(key)
    settings.used.update(settings.data)
    values = dict(settings.data)
    if fix is not None:
        values = fix(values)
    try:
        factory(values, settings.path)
    except ConfigError as error:
        message = str(error)
        where, _, problem = message.partition(": ")
        raise settings.ctx.error(where, problem) from None
    return values


def _cluster(table: _Table) -> ClusterSpec:
    brokers = table.int("brokers", 3, 1)
    config = _kafka(table, "config", BrokerConfig.from_kafka)
    overrides: dict[int, dict[str, Any]] = {}
    per_broker = table.table("broker")
    for key in list(per_broker.data):
        if not key.isdigit() or int(key) >= brokers:
            raise per_broker.error(key, f"expected a broker id 0..{brokers - 1}, got {key!r}")
        overrides[int(key)] = _kafka(
            per_broker, key, lambda values, where: BrokerConfig.from_kafka({**config, **values}, where)
        )
    spec = ClusterSpec(
        brokers,
        config,
        overrides,
        table.ms("latency_ms", 0),
        table.ms("isr_commit_delay_ms", 0),
        table.ms("crash_detection_ms", 0),
    )
    table.finish()
    return spec


def _topic(table: _Table, brokers: int) -> TopicSpecModel:
    name = table.str("name")
    partitions = table.int("partitions", 1, 1)
    rf = table.int("replication_factor", 1, 1)
    if rf > brokers:
        raise table.error(
            "replication_factor", f"expected at most {brokers} (the number of brokers), got {rf}"
        )
    assignment = None
    if table.has("assignment"):
        raw = table.array("assignment")
        if len(raw) != partitions or any(
            not isinstance(r, list)
            or len(r) != rf
            or len(set(r)) != rf
            or any(not _is_broker(b, brokers) for b in r)
            for r in raw
        ):
            raise table.error(
                "assignment",
                f"expected {partitions} lists of {rf} distinct broker ids 0..{brokers - 1}, "
                f"got {_describe(raw)}",
            )
        assignment = tuple(tuple(r) for r in raw)
    table.finish()
    return TopicSpecModel(name, partitions, rf, assignment)


def _is_broker(value: Any, brokers: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < brokers


def _fix_acks(values: dict) -> dict:
    acks = values.get("acks", -1)
    if acks in ("all", "-1"):
        acks = -1
    elif acks in ("0", "1"):
        acks = int(acks)
    values["acks"] = acks
    return values


def _client(table: _Table, topics: tuple[TopicSpecModel, ...]) -> ClientSpec:
    client_id = table.str("id")
    if client_id == "controller" or client_id.isdigit():
        raise table.error("id", f"expected a name that is not 'controller' or a broker id, got {client_id!r}")
    kind = table.str("type", choices=("producer", "consumer"))
    if kind == "producer":
        config = _kafka(table, "config", ProducerConfig.from_kafka, _fix_acks)
        if config["acks"] not in (-1, 0, 1):
            config_path = table.sub("config.acks")
            raise table.ctx.error(config_path, f"expected all, -1, 0 or 1, got {config['acks']!r}")
        assign: tuple[tuple[str, int, int], ...] = ()
    else:
        config = _kafka(table, "config", ConsumerConfig.from_kafka)
        assign = tuple(_assignment(table, i, value, topics) for i, value in enumerate(table.array("assign")))
    table.finish()
    return ClientSpec(client_id, kind, config, assign)


def _assignment(
    table: _Table, i: int, value: Any, topics: tuple[TopicSpecModel, ...]
) -> tuple[str, int, int]:
    where = f"assign[{i}]"
    if isinstance(value, str):
        topic, _, partition = value.rpartition("-")
        if not topic or not partition.isdigit():
            raise table.error(where, f"expected 'topic-partition' like 't-0', got {value!r}")
        return (*_check_partition(table, where, topic, int(partition), topics), 0)
    item = _Table(value, table.sub(where), table.ctx)
    result = (
        *_check_partition(item, "topic", item.str("topic"), item.int("partition", 0), topics),
        item.int("offset", 0),
    )
    item.finish()
    return result


def _check_partition(
    table: _Table, key: str, topic: str, partition: int, topics: tuple[TopicSpecModel, ...]
) -> tuple[str, int]:
    spec = next((t for t in topics if t.name == topic), None)
    if spec is None:
        raise table.error(
            key, f"unknown topic {topic!r}; expected one of: {', '.join(t.name for t in topics)}"
        )
    if not 0 <= partition < spec.partitions:
        raise table.error(key, f"topic {topic!r} has partitions 0..{spec.partitions - 1}, not {partition}")
    return topic, partition


def _node(table: _Table, key: str, value: Any, cluster: ClusterSpec, clients: tuple[ClientSpec, ...]) -> Node:
    if _is_broker(value, cluster.brokers):
        return value
    if isinstance(value, str) and any(c.id == value for c in clients):
        return value
    raise table.error(
        key, f"expected a broker id 0..{cluster.brokers - 1} or a client id, got {_describe(value)}"
    )


def _between(table: _Table, cluster: ClusterSpec, clients: tuple[ClientSpec, ...]) -> tuple[Node, Node]:
    value = table.raw("between")
    if not isinstance(value, list) or len(value) != 2 or value[0] == value[1]:
        raise table.error("between", f"expected two different nodes like [0, 2], got {_describe(value)}")
    return _node(table, "between", value[0], cluster, clients), _node(
        table, "between", value[1], cluster, clients
    )


def _link(table: _Table, cluster: ClusterSpec, clients: tuple[ClientSpec, ...]) -> LinkSpec:
    spec = LinkSpec(_between(table, cluster, clients), table.ms("latency_ms"))
    table.finish()
    return spec


STEP_ACTIONS = (
    "produce",
    "fetch",
    "poll",
    "load",
    "pause",
    "resume",
    "crash",
    "restart",
    "shutdown",
    "latency",
    "drop",
    "heal",
    "config",
)


def _client_of(table: _Table, clients: tuple[ClientSpec, ...], kind: str) -> str:
    client_id = table.str("client")
    spec = next((c for c in clients if c.id == client_id), None)
    if spec is None or spec.type != kind:
        names = ", ".join(c.id for c in clients if c.type == kind) or f"(no {kind} is defined)"
        raise table.error("client", f"expected a {kind} client: {names}; got {client_id!r}")
    return client_id


def _broker(table: _Table, cluster: ClusterSpec, key: str = "broker") -> int:
    value = table.raw(key)
    if not _is_broker(value, cluster.brokers):
        raise table.error(key, f"expected a broker id 0..{cluster.brokers - 1}, got {_describe(value)}")
    return value


def _step(
    table: _Table,
    index: int,
    cluster: ClusterSpec,
    topics: tuple[TopicSpecModel, ...],
    clients: tuple[ClientSpec, ...],
) -> Step:
    at = table.ms("at")
    action = table.str("action", choices=STEP_ACTIONS)
    step: Step
    if action == "produce":
        client = _client_of(table, clients, "producer")
        topic, partition = _check_partition(
            table, "topic", table.str("topic"), table.int("partition", 0), topics
        )
        step = Produce(
            at,
            index,
            client,
            topic,
            partition,
            table.int("records", 1, 1),
            table.int("bytes", 100, 0),
            table.str("id", None),
        )
    elif action == "fetch":
        step = Fetch(at, index, _client_of(table, clients, "consumer"), table.str("id", None))
    elif action == "poll":
        step = Poll(
            at, index, _client_of(table, clients, "consumer"), table.ms("duration_ms"), table.str("id", None)
        )
    elif action == "load":
        client = _client_of(table, clients, "producer")
        topic = table.str("topic")
        spec = next((t for t in topics if t.name == topic), None)
        if spec is None:
            raise table.error(
                "topic", f"unknown topic {topic!r}; expected one of: {', '.join(t.name for t in topics)}"
            )
        partitions = None
        if table.has("partitions"):
            raw = table.array("partitions")
            if not raw or any(
                not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < spec.partitions for p in raw
            ):
                raise table.error(
                    "partitions",
                    f"expected a list of partitions of {topic!r} (0..{spec.partitions - 1}), "
                    f"got {_describe(raw)}",
                )
            partitions = tuple(raw)
        step = Load(
            at,
            index,
            client,
            topic,
            table.int("rate", what="a whole number of requests per second", minimum=1),
            table.ms("duration_ms"),
            partitions,
            table.int("records", 1, 1),
            table.int("bytes", 100, 0),
            table.str("id", None),
        )
    elif action in ("pause", "resume", "crash", "restart", "shutdown"):
        step = BrokerFault(at, index, action, _broker(table, cluster))
    elif action in ("latency", "drop", "heal"):
        between = _between(table, cluster, clients)
        latency = table.ms("latency_ms") if action == "latency" else 0
        step = LinkFault(at, index, action, between, latency)
    else:
        broker = _broker(table, cluster) if table.has("broker") else None
        settings = _kafka(table, "settings", BrokerConfig.from_kafka)
        if not settings:
            raise table.error(
                "settings", 'expected a table of Kafka broker settings, like { "min.insync.replicas" = 2 }'
            )
        step = SetConfig(at, index, settings, broker)
    table.finish()
    return step


def _expectation(
    table: _Table,
    index: int,
    cluster: ClusterSpec,
    topics: tuple[TopicSpecModel, ...],
    clients: tuple[ClientSpec, ...],
    made: dict[str, int],
) -> Expectation:
    where = table.path
    kinds = [k for k in ("request", "partition", "count") if table.has(k)]
    for secondary in ("event", "purgatory"):  # in a count, these two are filters
        if not kinds and table.has(secondary):
            kinds = [secondary]
    if len(kinds) != 1:
        raise table.ctx.error(
            where, "expected exactly one of the keys request, partition, purgatory, count or event"
        )
    kind = kinds[0]
    expectation: Expectation
    if kind == "request":
        request = table.str("request")
        if request not in made:
            known = ", ".join(sorted(made)) or "(no step names its request with id)"
            raise table.error(
                "request", f"no step makes a request named {request!r}; expected one of: {known}"
            )
        error = table.raw("error", None)
        if error is not None and not (
            (isinstance(error, str) and error in ERRORS)
            or (isinstance(error, dict) and all(isinstance(v, str) and v in ERRORS for v in error.values()))
        ):
            raise table.error(
                "error",
                f"expected a Kafka error name ({', '.join(ERRORS)}) or a table of them, "
                f"got {_describe(error)}",
            )
        within = None
        if table.has("completed_within"):
            raw = table.raw("completed_within")
            if not (
                isinstance(raw, list)
                and len(raw) == 2
                and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in raw)
                and raw[0] <= raw[1]
            ):
                raise table.error(
                    "completed_within", f"expected [earliest, latest] in ms, got {_describe(raw)}"
                )
            within = (raw[0], raw[1])
        completed_at = table.ms("completed_at", None)
        for label, value in (
            ("completed_at", completed_at),
            ("completed_within", within[1] if within else None),
        ):
            if value is not None and value < made[request]:
                raise table.error(
                    label,
                    f"request {request!r} is made at {made[request]} ms; "
                    f"expected a time after that, got {value}",
                )
        expectation = RequestOutcome(
            index,
            where,
            request,
            error,
            table.str("cause", None, CAUSES),
            completed_at,
            within,
            table.int("records", None),
        )
    elif kind == "partition":
        label = table.str("partition")
        topic, _, number = label.rpartition("-")
        if not number.isdigit():
            raise table.error("partition", f"expected 'topic-partition' like 't-0', got {label!r}")
        _check_partition(table, "partition", topic, int(number), topics)
        isr = None
        if table.has("isr"):
            raw = table.raw("isr")
            if not isinstance(raw, list) or any(not _is_broker(b, cluster.brokers) for b in raw):
                raise table.error("isr", f"expected a list of broker ids, got {_describe(raw)}")
            isr = tuple(raw)
        expectation = PartitionState(
            index,
            where,
            table.ms("at"),
            label,
            _broker(table, cluster, "replica") if table.has("replica") else None,
            table.int("leader", None, -1),
            table.int("epoch", None),
            isr,
            table.int("hw", None),
            table.int("leo", None),
        )
    elif kind == "purgatory":
        expectation = PurgatoryFigures(
            index,
            where,
            table.ms("at"),
            _broker(table, cluster),
            table.str("purgatory", choices=("Produce", "Fetch")),
            table.int("num_delayed", None),
            table.int("watched", None),
            table.int("watched_keys", None),
            table.int("expirations", None),
            table.int("purges", None),
        )
    elif kind == "count":
        count = table.str("count", choices=COUNTS)
        filters: dict[str, Any] = {}
        for key in ("client", "kind", "error", "cause", "purgatory", "event"):
            if table.has(key):
                value = table.raw(key)
                if key == "event":
                    if not isinstance(value, dict) or "kind" not in value:
                        raise table.error(
                            key, f"expected a table of trace fields with a kind, got {_describe(value)}"
                        )
                elif not isinstance(value, str):
                    raise table.error(key, f"expected a string, got {_describe(value)}")
                filters[key] = value
        if table.has("broker"):
            filters["broker"] = _broker(table, cluster)
        bounds = {k: table.int(k, None) for k in ("equals", "at_least", "at_most")}
        if all(v is None for v in bounds.values()):
            raise table.ctx.error(where, "expected one of equals, at_least or at_most")
        expectation = Count(
            index, where, count, bounds["equals"], bounds["at_least"], bounds["at_most"], filters
        )
    else:
        fields = table.raw("event")
        if not isinstance(fields, dict) or not isinstance(fields.get("kind"), str):
            raise table.error(
                "event", f"expected a table of trace fields with a kind, got {_describe(fields)}"
            )
        expectation = Event(index, where, dict(fields), table.int("count", None))
    table.finish()
    return expectation
