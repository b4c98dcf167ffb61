"""``minibroker serve``: a scenario's cluster, in real time, with Kafka listeners in front.

The scenario (a file, or an empty one with ``brokers`` brokers) gives the
cluster, its broker settings, topics, links and timeline. ``open_served``
plays it with ``ScenarioRunner`` on trio's real clock, so its steps (pause a
follower, crash a broker, slow a link, its own producers' requests, ...) happen
at their ms after start while Kafka clients come and go. Its expectations are
not checked (real clients change what they would see) and its ``end_ms`` is
ignored: the cluster runs until the serve is stopped.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import attrs
import trio

from minibroker.broker.config import BrokerConfig
from minibroker.scenario import Scenario, ScenarioRunner
from minibroker.scenario.model import ClusterSpec, TopicSpecModel
from minibroker.server.server import WireServer, stderr_log
from minibroker.sim.cluster import Cluster
from minibroker.sim.storage.data_dir import DataDir
from minibroker.trace import Event as TraceEvent

#: "forever", in ms: the runner's timeline ends at its end_ms, and serving has none
FOREVER_MS = 10**15


def for_serving(
    scenario: Scenario,
    config: Mapping[str, Any] | None = None,
    topics: Iterable[TopicSpecModel] = (),
) -> Scenario:
    """``scenario`` with extra broker settings and topics, no expectations, and no end."""
    cluster = scenario.cluster
    if config:
        cluster = attrs.evolve(cluster, config={**cluster.config, **config})
    return attrs.evolve(
        scenario,
        cluster=cluster,
        topics=scenario.topics + tuple(topics),
        expectations=(),
        end_ms=FOREVER_MS,
    )


def build_scenario(
    loaded: Scenario | None,
    brokers: int,
    config: Mapping[str, Any],
    topics: Callable[[int], Iterable[TopicSpecModel]],
    *,
    name: str,
    where: str,
) -> Scenario:
    """What a serve runs: the ``loaded`` scenario, else ``brokers`` brokers with no topics and no steps
    (named ``name``); plus broker settings ``config`` (Kafka's names, checked: a ``ConfigError`` names
    ``where``) and the topics ``topics(broker count)`` gives (see ``for_serving``). A topic named twice
    (given twice, or given and in the scenario) is a ``ValueError``."""
    base = loaded
    if base is None:
        base = Scenario(name, f"{brokers} brokers", "", 0, None, ClusterSpec(brokers), (), (), (), (), ())
    BrokerConfig.from_kafka({**base.cluster.config, **config}, where)
    scenario = for_serving(base, config, topics(base.cluster.brokers))
    names = [t.name for t in scenario.topics]
    if len(set(names)) != len(names):
        raise ValueError(f"a topic is named twice: {', '.join(sorted(names))}")
    return scenario


def freeze_startup_heap() -> None:
    """Leave what a serve process started with out of the garbage collector's passes (``gc.freeze``).

    Modules, the cluster, its brokers and logs live as long as the process. Once they are up, a
    full collection need not walk them again: without this, each one over a process serving small
    requests walks every object the imports made, and takes a quarter of its CPU. Only for a
    process that serves until it exits (``minibroker serve``): frozen objects are never collected.
    """
    gc.collect()
    gc.freeze()


@attrs.define
class Served:
    """A running serve: the scenario runner (its ``cluster``) and the wire server (its ``listeners``)."""

    runner: ScenarioRunner
    server: WireServer

    @property
    def cluster(self) -> Cluster:
        assert self.runner.cluster is not None
        return self.runner.cluster

    @property
    def listeners(self) -> dict[int, tuple[str, int]]:
        return self.server.listeners

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{host}:{port}" for host, port in self.listeners.values())


@contextlib.asynccontextmanager
async def open_served(
    scenario: Scenario,
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    log: Callable[[str], None] = stderr_log,
    sinks: Sequence[Callable[[TraceEvent], object]] = (),
    storage: DataDir | None = None,
) -> AsyncIterator[Served]:
    """Run ``scenario`` (see ``for_serving``) in real time and serve Kafka clients until the block ends.

    With ``storage`` the cluster is recovered from its data dir and kept there as it runs; without,
    everything is in memory and gone when the block ends.
    """
    runner = ScenarioRunner(scenario, sinks, None, storage=storage)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(runner.run, scenario.seed)
        await runner.ready.wait()
        assert runner.cluster is not None
        server = WireServer(runner.cluster, host, port, log=log)
        if storage is not None:
            server.state.producer_ids = storage.producer_ids
        await nursery.start(server.run)
        try:
            yield Served(runner, server)
        finally:
            nursery.cancel_scope.cancel()
