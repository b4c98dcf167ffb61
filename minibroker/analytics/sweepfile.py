"""Sweep files: a base scenario and a grid of overrides, validated like scenarios.

    [sweep]
    name = "lag_timeout"              # default: the file name
    description = "one line"
    scenario = "../lagging_link.toml"  # relative to this file
    seeds = [0, 1]                    # default: the scenario's seed
    trace = false                     # also write each variant's trace (Parquet)

    [[axes]]                          # a link's latency, both directions
    name = "lag_ms"                   # the column; default "link <a>-<b> ms"
    link = [0, 2]
    values = [1, 100, 400]

    [[axes]]                          # a client setting, by its Kafka name
    client = "producer"
    config = "request.timeout.ms"
    values = [150, 600]

    [[axes]]                          # a broker setting: every broker, or one with broker = N
    config = "min.insync.replicas"
    values = [2, 3]

    [[heatmaps]]                      # default: the first two axes, timeout_rate
    x = "lag_ms"
    y = "request.timeout.ms"
    metric = "timeout_rate"
    where = { "min.insync.replicas" = 3 }   # optional: fix other axes; the rest are averaged

Variants are the product of the axes' values and the seeds, in file order (the last
axis varies fastest, seeds fastest of all). Each value is checked on the driver
with the same validators the scenario loader uses, and every problem is one
``ScenarioError`` line naming the file, line, key path and the expected form:

    scenarios/sweeps/x.toml:14: axes[1].values[2]: expected a whole number, got 'x' (request.timeout.ms)

A broker setting set for every broker replaces it in per-broker overrides too; a
``config`` step in the scenario's timeline still changes it later.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import attrs

from minibroker.broker.config import BrokerConfig, ConfigError, ConsumerConfig, ProducerConfig
from minibroker.scenario import Scenario, load_scenario
from minibroker.scenario.loader import _describe, _fix_acks, _Table, parse_document, read_document
from minibroker.scenario.model import LinkSpec, Node

#: what each variant reports (sweep_job.variant_metrics), in table order
METRICS = (
    "requests",
    "produce",
    "fetch",
    "produce_ok",
    "timeouts",
    "timeout_rate",
    "errors",
    "error_rate",
    "produce_p50",
    "produce_p99",
    "produce_max",
    "fetch_p50",
    "fetch_p99",
    "expirations",
    "produce_expirations",
    "fetch_expirations",
    "completions",
    "purges",
    "expectations_passed",
    "expectations_failed",
    "end_ms",
)

#: result columns an axis may not be named after
RESERVED = frozenset(("variant", "seed", *METRICS, "events", "trace", "wall_ms"))


@attrs.frozen
class Axis:
    """One dimension of the grid: where it writes (``client``/``broker``/``link``) and its values."""

    name: str
    values: tuple[Any, ...]
    config: str | None = None  # a Kafka setting name
    client: str | None = None  # ... of this client
    broker: int | None = None  # ... of this broker only (None: every broker)
    link: tuple[Node, Node] | None = None  # or the latency of this link

    @property
    def target(self) -> tuple[Any, ...]:
        if self.link is not None:
            return ("link", frozenset(self.link))
        return ("config", self.client, self.broker, self.config)


@attrs.frozen
class Heatmap:
    x: str
    y: str
    metric: str
    where: tuple[tuple[str, Any], ...] = ()


@attrs.frozen
class Variant:
    """One point of the grid: its settings as (axis name, value) pairs, a seed, the scenario to run."""

    index: int
    seed: int
    values: tuple[tuple[str, Any], ...]
    scenario: Scenario


@attrs.frozen
class Sweep:
    name: str
    description: str
    path: str
    scenario: Scenario
    seeds: tuple[int, ...]
    trace: bool
    axes: tuple[Axis, ...]
    heatmaps: tuple[Heatmap, ...]

    @property
    def count(self) -> int:
        """How many variants the grid has (the product of the axes' lengths and the seeds)."""
        count = len(self.seeds)
        for axis in self.axes:
            count *= len(axis.values)
        return count

    def shape(self) -> str:
        """The grid as a product, e.g. ``4 lag_ms × 5 request.timeout.ms × 2 seeds``."""
        parts = [f"{len(axis.values)} {axis.name}" for axis in self.axes]
        return " × ".join([*parts, f"{len(self.seeds)} seed{'s' if len(self.seeds) != 1 else ''}"])

    def variants(self) -> list[Variant]:
        """Every variant, in grid order (last axis fastest, then seeds)."""
        variants = []
        grid = itertools.product(*(axis.values for axis in self.axes), self.seeds)
        for index, point in enumerate(grid):
            *values, seed = point
            scenario = self.scenario
            for axis, value in zip(self.axes, values, strict=True):
                scenario = apply(scenario, axis, value)
            names = tuple((axis.name, value) for axis, value in zip(self.axes, values, strict=True))
            variants.append(Variant(index, seed, names, scenario))
        return variants

    def over_budget(self) -> str | None:
        """The first variant past a scenario's run-size limits (loader/budget.py), named by its
        settings; None when every variant is within them. A variant is a run like any other."""
        from minibroker.scenario.loader.budget import check_budget, check_topics

        for variant in self.variants():
            problem = check_topics(variant.scenario, self.path) or check_budget(variant.scenario, self.path)
            if problem is not None:
                settings = ", ".join(f"{name} = {value!r}" for name, value in variant.values)
                return f"{problem} (variant {variant.index}: {settings})"
        return None


# --- applying one override -----------------------------------------------------------------------
def apply(scenario: Scenario, axis: Axis, value: Any) -> Scenario:
    """``scenario`` with ``axis`` set to ``value`` (attrs.evolve all the way down)."""
    if axis.link is not None:
        pair = frozenset(axis.link)
        links = tuple(link for link in scenario.links if frozenset(link.between) != pair)
        return attrs.evolve(scenario, links=(*links, LinkSpec(axis.link, value)))
    assert axis.config is not None
    if axis.client is not None:
        clients = []
        for client in scenario.clients:
            if client.id == axis.client:
                config = {**client.config, axis.config: value}
                if client.type == "producer":
                    config = _fix_acks(config)
                client = attrs.evolve(client, config=config)
            clients.append(client)
        return attrs.evolve(scenario, clients=tuple(clients))
    cluster = scenario.cluster
    if axis.broker is not None:
        overrides = dict(cluster.broker_overrides)
        overrides[axis.broker] = {**overrides.get(axis.broker, {}), axis.config: value}
        return attrs.evolve(scenario, cluster=attrs.evolve(cluster, broker_overrides=overrides))
    overrides = {
        broker: ({**settings, axis.config: value} if axis.config in settings else settings)
        for broker, settings in cluster.broker_overrides.items()
    }
    config = {**cluster.config, axis.config: value}
    return attrs.evolve(scenario, cluster=attrs.evolve(cluster, config=config, broker_overrides=overrides))


# --- loading -------------------------------------------------------------------------------------
def load_sweep(path: str | Path) -> Sweep:
    """Read and validate a sweep file and its base scenario."""
    return parse_sweep(read_document(path), str(path))


def parse_sweep(text: str, path: str = "<sweep>") -> Sweep:
    root = parse_document(text, path)
    ctx = root.ctx
    meta = root.table("sweep")
    name = meta.str("name", Path(path).stem)
    description = meta.str("description", "")
    scenario_path = Path(meta.str("scenario"))
    if not scenario_path.is_absolute():
        scenario_path = Path(path).parent / scenario_path
    if not scenario_path.is_file():
        raise meta.error(
            "scenario", f"no scenario file {str(scenario_path)!r}; expected a path from this file"
        )
    scenario = load_scenario(scenario_path)
    seeds = _seeds(meta, scenario)
    trace = meta.raw("trace", False)
    if not isinstance(trace, bool):
        raise meta.error("trace", f"expected true or false, got {_describe(trace)}")
    meta.finish()
    raw_axes = root.array("axes")
    if not raw_axes:
        raise ctx.error("axes", "expected at least one [[axes]] table")
    axes: list[Axis] = []
    for i, raw in enumerate(raw_axes):
        axis = _axis(_Table(raw, f"axes[{i}]", ctx), scenario)
        if axis.name in RESERVED:
            raise ctx.error(
                f"axes[{i}].name", f"{axis.name!r} is a column of the results; expected another name"
            )
        for j, other in enumerate(axes):
            if other.name == axis.name:
                raise ctx.error(
                    f"axes[{i}].name", f"{axis.name!r} names axes[{j}] too; expected a unique name"
                )
            if other.target == axis.target:
                raise ctx.error(f"axes[{i}]", f"sets what axes[{j}] sets; expected each setting once")
        axes.append(axis)
    heatmaps = tuple(
        _heatmap(_Table(raw, f"heatmaps[{i}]", ctx), axes) for i, raw in enumerate(root.array("heatmaps"))
    )
    if not heatmaps and len(axes) >= 2:
        heatmaps = (Heatmap(axes[0].name, axes[1].name, "timeout_rate"),)
    root.finish(("sweep", "axes", "heatmaps"))
    return Sweep(name, description, path, scenario, seeds, trace, tuple(axes), heatmaps)


def _seeds(meta: _Table, scenario: Scenario) -> tuple[int, ...]:
    raw = meta.raw("seeds", [scenario.seed])
    if (
        not isinstance(raw, list)
        or not raw
        or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in raw)
        or len(set(raw)) != len(raw)
    ):
        raise meta.error("seeds", f"expected a list of distinct whole numbers >= 0, got {_describe(raw)}")
    return tuple(raw)


def _axis(table: _Table, scenario: Scenario) -> Axis:
    values = table.raw("values")
    if not isinstance(values, list) or not values:
        raise table.error("values", f"expected a non-empty list, got {_describe(values)}")
    if len({repr(v) for v in values}) != len(values):
        raise table.error("values", f"expected distinct values, got {_describe(values)}")
    if table.has("link"):
        link = _link(table, scenario)
        for j, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise table.error(
                    f"values[{j}]", f"expected a whole number of ms >= 0, got {_describe(value)}"
                )
        axis = Axis(table.str("name", f"link {link[0]}-{link[1]} ms"), tuple(values), link=link)
        table.finish(("name", "link", "values"))
        return axis
    key = table.str("config")
    client_id = table.str("client", None)
    broker = None
    if table.has("broker"):
        broker = table.raw("broker")
        if (
            isinstance(broker, bool)
            or not isinstance(broker, int)
            or not 0 <= broker < scenario.cluster.brokers
        ):
            raise table.error(
                "broker", f"expected a broker id 0..{scenario.cluster.brokers - 1}, got {_describe(broker)}"
            )
        if client_id is not None:
            raise table.error("broker", "expected client or broker, not both")
    if client_id is not None and not any(c.id == client_id for c in scenario.clients):
        known = ", ".join(c.id for c in scenario.clients) or "(the scenario has no client)"
        raise table.error("client", f"no client {client_id!r} in the scenario; expected one of: {known}")
    if any(isinstance(v, (list, dict)) for v in values):
        raise table.error(
            "values", f"expected settings (numbers, strings, booleans), got {_describe(values)}"
        )
    axis = Axis(table.str("name", key), tuple(values), config=key, client=client_id, broker=broker)
    for j, value in enumerate(values):
        try:
            _check(apply(scenario, axis, value), axis)
        except ConfigError as error:
            problem = str(error).partition(": ")[2] or str(error)
            if problem.startswith("unknown setting"):
                raise table.error("config", problem) from None
            raise table.error(f"values[{j}]", f"{problem} ({key})") from None
    if len({type(v) for v in values}) != 1:
        raise table.error("values", f"expected values of one type, got {_describe(values)}")
    table.finish(("name", "config", "client", "broker", "values"))
    return axis


def _check(scenario: Scenario, axis: Axis) -> None:
    """The scenario's settings after an override, through the loader's validators."""
    if axis.client is not None:
        client = next(c for c in scenario.clients if c.id == axis.client)
        if client.type == "producer":
            ProducerConfig.from_kafka(client.config, "config")
            if client.config["acks"] not in (-1, 0, 1):
                raise ConfigError(f"config: expected all, -1, 0 or 1, got {client.config['acks']!r}")
        else:
            ConsumerConfig.from_kafka(client.config, "config")
        return
    cluster = scenario.cluster
    BrokerConfig.from_kafka(cluster.config, "config")
    for settings in cluster.broker_overrides.values():
        BrokerConfig.from_kafka({**cluster.config, **settings}, "config")


def _link(table: _Table, scenario: Scenario) -> tuple[Node, Node]:
    raw = table.raw("link")
    nodes = {c.id for c in scenario.clients} | set(range(scenario.cluster.brokers))
    if (
        not isinstance(raw, list)
        or len(raw) != 2
        or raw[0] == raw[1]
        or any(isinstance(n, bool) or n not in nodes for n in raw)
    ):
        raise table.error(
            "link",
            f"expected two different nodes (broker ids 0..{scenario.cluster.brokers - 1} or client ids) "
            f"like [0, 2], got {_describe(raw)}",
        )
    return raw[0], raw[1]


def _heatmap(table: _Table, axes: list[Axis]) -> Heatmap:
    names = [axis.name for axis in axes] + ["seed"]
    choices = ", ".join(names)
    x = table.str("x")
    y = table.str("y")
    for key, value in (("x", x), ("y", y)):
        if value not in names:
            raise table.error(key, f"expected an axis name ({choices}), got {value!r}")
    if x == y:
        raise table.error("y", f"expected an axis other than x ({x!r})")
    metric = table.str("metric", "timeout_rate", METRICS)
    where = table.table("where")
    fixed = []
    for key, value in where.data.items():
        where.used.add(key)
        axis = next((a for a in axes if a.name == key), None)
        if axis is None or key in (x, y):
            raise where.error(key, f"expected an axis other than x and y ({choices}), got {key!r}")
        if value not in axis.values:
            raise where.error(
                key, f"expected one of the axis' values {list(axis.values)}, got {_describe(value)}"
            )
        fixed.append((key, value))
    table.finish(("x", "y", "metric", "where"))
    return Heatmap(x, y, metric, tuple(fixed))
