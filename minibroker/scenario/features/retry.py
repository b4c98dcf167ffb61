"""Retries in scenarios: the ``[retry]`` section, the ``retry`` expectation, and the section's retrying
consumer and scheduler, started in its run.

``backend = "redis"`` without ``redis_url`` starts a private redis-server for the run (stopped when
the run ends); the sorted set is ``minibroker:retry:<scenario>:<seed>``, emptied first (with the
backend's other keys).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import attrs

from minibroker.common.messages import TopicPartition
from minibroker.retry import RetryPolicy, WheelScheduler, dlt_topic, retry_topic
from minibroker.retry.consumer import RetryingConsumer
from minibroker.retry.handler import FailRule, ScriptedHandler, error_class
from minibroker.retry.redis_server import RedisServer, RedisUnavailable, connect
from minibroker.scenario.expect import ExpectationResult, _compare
from minibroker.scenario.feature import ExpectationKind, Feature, Section
from minibroker.scenario.loader.document import ScenarioError
from minibroker.scenario.loader.retry import read_retry, read_retry_counts
from minibroker.scenario.model import RetryCounts

if TYPE_CHECKING:
    from minibroker.scenario.model import RetrySpec, Scenario
    from minibroker.sim.cluster import Cluster

#: the retrying consumer's client id (its partitions' clients are ``retry-<topic>-<p>``)
CLIENT = "retry"


@attrs.frozen
class RetryTopicView:
    """One topic of the retry chain: records below the HW, summed over partitions."""

    name: str
    records: int


@attrs.frozen
class RetryView:
    """The retrying consumer now, for the TUI."""

    topic: str
    backend: str
    blocking: bool
    topics: tuple[RetryTopicView, ...]
    pending: int
    processed: int
    dead: int
    deliveries: int
    paused: tuple[tuple[int, int], ...]  # (partition, resume ms) of blocking retries


def policy_of(spec: RetrySpec) -> RetryPolicy:
    return RetryPolicy(
        spec.attempts,
        spec.backoff,
        spec.delay_ms,
        spec.multiplier,
        spec.max_delay_ms,
        tuple(error_class(name) for name in spec.retryable),
    )


class Retries:
    """The scenario's retrying consumer (absent without a ``[retry]`` section).

    ``prepare`` (before the run, outside trio) reaches or starts Redis; ``start`` (inside the run)
    starts the consumer in the cluster's nursery; ``close`` stops a private Redis.
    """

    def __init__(self, scenario: Scenario, seed: int) -> None:
        self.spec = scenario.retry
        self.scenario, self.seed = scenario, seed
        self.consumer: RetryingConsumer | None = None
        self.cluster: Cluster | None = None
        self._redis: Any = None
        self._stack = contextlib.ExitStack()

    def prepare(self) -> None:
        """Reach the Redis server a redis backend needs; a ScenarioError names what is missing."""
        spec = self.spec
        if spec is None or spec.blocking or spec.backend != "redis" or self._redis is not None:
            return
        try:
            if spec.redis_url is not None:
                self._redis = self._stack.enter_context(contextlib.closing(connect(spec.redis_url)))
            else:
                self._redis = self._stack.enter_context(RedisServer()).client
        except RedisUnavailable as error:
            raise ScenarioError(f"{self.scenario.path}: retry.backend: {error}") from None

    def close(self) -> None:
        self._stack.close()

    def _scheduler(self, cluster: Cluster) -> Any:
        if self._redis is None:
            return WheelScheduler(cluster.now())
        from minibroker.retry.redis_scheduler import RedisScheduler

        key = f"minibroker:retry:{self.scenario.name}:{self.seed}"
        scheduler = RedisScheduler(self._redis, key)
        self._redis.delete(scheduler.key, scheduler.inflight, scheduler.tombstones, scheduler.ids)
        return scheduler

    async def start(self, cluster: Cluster) -> None:
        spec = self.spec
        if spec is None:
            return
        self.cluster = cluster
        handler = ScriptedHandler(
            tuple(FailRule(*rule) for rule in spec.fail), spec.fail_rate, spec.error, self.seed
        )
        self.consumer = RetryingConsumer(
            cluster,
            spec.topic,
            handler,
            policy_of(spec),
            self._scheduler(cluster),
            CLIENT,
            blocking=spec.blocking,
            keep_deliveries=False,
        )
        await cluster.nursery.start(self.consumer.run)

    def topic_records(self) -> dict[str, int]:
        """Records below the HW of each topic of the chain (retry topics, then the DLT)."""
        assert self.spec is not None and self.cluster is not None
        spec, cluster = self.spec, self.cluster
        names = [] if spec.blocking else [retry_topic(spec.topic, n) for n in range(1, spec.attempts)]
        return {name: records_in(cluster, name) for name in [spec.topic, *names, dlt_topic(spec.topic)]}

    def view(self) -> RetryView | None:
        consumer = self.consumer
        if consumer is None or self.spec is None:
            return None
        counts = self.topic_records()
        return RetryView(
            self.spec.topic,
            "blocking" if self.spec.blocking else self.spec.backend,
            self.spec.blocking,
            tuple(RetryTopicView(name, n) for name, n in counts.items()),
            consumer.pending(),
            len(consumer.processed),
            len(consumer.dead),
            consumer.delivery_count,
            tuple(sorted(consumer.paused.items())),
        )


def records_in(cluster: Cluster, topic: str) -> int:
    """Records below the high watermark of ``topic``'s partitions (their current leaders' logs)."""
    total = 0
    for partition in range(cluster.topics[topic].partitions):
        tp = TopicPartition(topic, partition)
        logs = [b.logs[tp] for b in cluster.brokers if tp in b.logs]
        if logs:
            log = max(logs, key=lambda log: log.high_watermark)
            total += log.high_watermark - log.log_start_offset
    return total


def check_retry(expectation: RetryCounts, retries: Retries) -> ExpectationResult:
    consumer = retries.consumer
    assert consumer is not None
    cluster = retries.cluster
    records = {t: records_in(cluster, t) for t in expectation.records or {}}  # type: ignore[arg-type]
    expected, passed, seen = _compare(
        [
            ("processed", expectation.processed, len(consumer.processed)),
            ("dead", expectation.dead, len(consumer.dead)),
            ("deliveries", expectation.deliveries, consumer.delivery_count),
            ("pending", expectation.pending, consumer.pending()),
        ]
        + [(f"records in {t}", n, records[t]) for t, n in sorted((expectation.records or {}).items())]
    )
    what = f"retries of {expectation.topic} at {expectation.at} ms: {expected}"
    return ExpectationResult(expectation.where, what, passed, seen)


#: registered by ``minibroker.scenario.features``
FEATURE = Feature(
    "retry",
    (Section("retry", read_retry, ("scenario", "topics"), ("clients", "steps", "expect")),),
    (ExpectationKind("retry", read_retry_counts, RetryCounts, check_retry, True, "member"),),
    Retries,
)
