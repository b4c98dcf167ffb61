"""MiniCluster: ``minibroker serve`` in-process, on a background thread, for application tests.

The cluster runs in real time in its own trio run on a daemon thread, on free
loopback ports (one per broker), so a test's Kafka clients connect to
``bootstrap_servers`` as to any cluster. The handle's methods (``Control``)
act at once from the test's thread. ``stop`` (or leaving the ``mini_cluster``
block) cancels the run and joins the thread; a cluster that does not start
within ``start_timeout_s`` raises ``RuntimeError`` with the reason.

Why a thread and not a subprocess: the test reads the cluster's state
directly and every action returns after it took effect, with no polling or
extra protocol; a subprocess with ``--control`` is what non-Python tests use.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import trio

from minibroker.common.topic_names import topic_error
from minibroker.scenario import load_scenario
from minibroker.scenario.loader.budget import check_topics
from minibroker.scenario.model import Scenario, TopicSpecModel
from minibroker.server.control import Control
from minibroker.server.serve import build_scenario, open_served

#: how long ``start`` waits for the listeners, and ``stop`` for the thread
START_TIMEOUT_S = 30.0


def _topic(spec: str | Mapping[str, Any], brokers: int) -> TopicSpecModel:
    """``"name[:partitions[:rf]]"`` or ``{"name", "partitions", "replication_factor"}``; rf defaults to 3."""
    if isinstance(spec, str):
        name, *numbers = spec.split(":")
        if len(numbers) > 2 or not all(n.isdigit() for n in numbers):
            raise ValueError(f"topic {spec!r}: expected NAME[:PARTITIONS[:RF]]")
        keys = ("partitions", "replication_factor")[: len(numbers)]
        fields = {"name": name, **dict(zip(keys, map(int, numbers), strict=True))}
    elif isinstance(spec, Mapping):
        fields = dict(spec)
    else:
        raise ValueError(f"topic {spec!r}: expected 'name[:partitions[:rf]]' or a mapping")
    name = fields.get("name")
    partitions = fields.get("partitions", 1)
    rf = fields.get("replication_factor", min(3, brokers))  # the fixture's clusters are for failover
    invalid = topic_error(name) if isinstance(name, str) else "a topic needs a name"
    if invalid is not None:
        raise ValueError(f"topic {spec!r}: {invalid}")
    if not isinstance(partitions, int) or partitions < 1 or not isinstance(rf, int) or not 1 <= rf <= brokers:
        raise ValueError(f"topic {spec!r}: partitions >= 1 and replication factor 1..{brokers} expected")
    return TopicSpecModel(name, partitions, rf)


def _scenario(
    brokers: int = 3,
    topics: Iterable[str | Mapping[str, Any]] = (),
    config: Mapping[str, Any] | None = None,
    scenario: str | None = None,
) -> Scenario:
    """The scenario a MiniCluster serves: a scenario file, or ``brokers`` brokers; plus topics and config."""
    loaded = load_scenario(scenario) if scenario is not None else None
    if loaded is None and (
        isinstance(brokers, bool) or not isinstance(brokers, int) or not 1 <= brokers <= 64
    ):
        raise ValueError(f"brokers {brokers!r}: expected 1..64")
    built = build_scenario(
        loaded,
        brokers,
        dict(config or {}),
        lambda count: [_topic(spec, count) for spec in topics],
        name="testing",
        where="config",  # a ConfigError names the key
    )
    problem = check_topics(built, "MiniCluster", serving=True)  # serve's run-size budget
    if problem is not None:
        raise ValueError(problem)
    return built


class MiniCluster(Control):
    """A served cluster on a background thread; see the module docstring."""

    def __init__(
        self,
        brokers: int = 3,
        topics: Iterable[str | Mapping[str, Any]] = (),
        config: Mapping[str, Any] | None = None,
        *,
        scenario: str | None = None,
        host: str = "127.0.0.1",
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        self.scenario = _scenario(brokers, topics, config, scenario)
        self.host = host
        self.start_timeout_s = start_timeout_s
        #: the lines serve would write to stderr (connection problems, crashes), for assertions
        self.logs: list[str] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._stop: trio.Event | None = None
        self._token: trio.lowlevel.TrioToken | None = None  # set with the Control once serving
        self._thread = threading.Thread(target=self._main, name="minibroker-testing", daemon=True)

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as error:  # reported by start() or stop()
            self._error = error
            self._ready.set()

    async def _serve(self) -> None:
        self._stop = trio.Event()
        async with open_served(self.scenario, self.host, 0, log=self.logs.append) as served:
            Control.__init__(self, served, trio.lowlevel.current_trio_token())
            self._ready.set()
            await self._stop.wait()

    def start(self) -> MiniCluster:
        self._thread.start()
        if not self._ready.wait(self.start_timeout_s) or self._error is not None:
            raise RuntimeError(f"minibroker did not start: {self._error or 'timed out'}")
        return self

    def stop(self) -> None:
        if self._stop is not None and self._token is not None and self._thread.is_alive():
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(self.start_timeout_s)
        if self._thread.is_alive():
            raise RuntimeError("minibroker did not stop")
        if self._error is not None:
            raise RuntimeError(f"minibroker failed: {self._error!r}") from self._error

    def __enter__(self) -> MiniCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def mini_cluster(
    brokers: int = 3,
    topics: Iterable[str | Mapping[str, Any]] = (),
    config: Mapping[str, Any] | None = None,
    **options: Any,
) -> Iterator[MiniCluster]:
    """``with mini_cluster(3, ["orders:3:3"]) as cluster: ...`` for any test runner."""
    with MiniCluster(brokers, topics, config, **options) as cluster:
        yield cluster
