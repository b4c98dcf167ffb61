"""Retries in a scenario: the ``[retry]`` section (policy, backend, handler) and the ``retry``
expectation (docs/retry.md, docs/scenarios.md).

The section adds ``<topic>-retry-1`` .. ``<topic>-retry-<attempts-1>`` (non-blocking only) and
``<topic>-dlt`` to the scenario's topics, with the source topic's partitions and replication factor,
unless ``[[topics]]`` defines them (then with as many partitions).
"""

from __future__ import annotations

from typing import Any

from minibroker.retry.handler import ERROR_NAME
from minibroker.retry.policy import dlt_topic, retry_topic
from minibroker.scenario.loader.document import Table, describe, listing
from minibroker.scenario.loader.scope import Scope, topic_of
from minibroker.scenario.model import Expectation, RetryCounts, RetrySpec, TopicSpecModel

#: attempts at most: each one is a retry topic with a poll loop per partition
MAX_ATTEMPTS = 100
BACKENDS = ("wheel", "redis")
#: the retrying consumer's idle long poll (Kafka's fetch.max.wait.ms default), for the budget
POLL_MS = 500


def _bool(table: Table, key: str, default: bool) -> bool:
    value = table.raw(key, default)
    if not isinstance(value, bool):
        raise table.error(key, f"expected true or false, got {describe(value)}")
    return value


def _error_name(table: Table, key: str, value: Any) -> str:
    if not isinstance(value, str) or not ERROR_NAME.fullmatch(value):
        raise table.error(key, f"expected an error name like TimeoutError, got {describe(value)}")
    return value


def _number(table: Table, key: str, default: float, low: float, high: float) -> float:
    value = table.raw(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise table.error(key, f"expected a number from {low:g} to {high:g}, got {describe(value)}")
    return float(value)


def _fail_rule(table: Table, source: TopicSpecModel) -> tuple[int, int, int | None, str]:
    partition = table.int("partition", 0)
    if partition >= source.partitions:
        raise table.error(
            "partition",
            f"topic {describe(source.name)} has partitions 0..{source.partitions - 1}, not {partition}",
        )
    rule = (
        partition,
        table.int("offset"),
        table.int("times", None, minimum=1),
        _error_name(table, "error", table.raw("error", "RuntimeError")),
    )
    table.finish()
    return rule


def _handler(table: Table, source: TopicSpecModel) -> tuple[tuple, float, str]:
    rules = []
    for i, raw in enumerate(table.array("fail")):
        rules.append(_fail_rule(Table(raw, table.sub(f"fail[{i}]"), table.ctx), source))
    seen = set()
    for i, (partition, offset, _, _) in enumerate(rules):
        if (partition, offset) in seen:
            raise table.error(
                f"fail[{i}]", f"partition {partition} offset {offset} has two rules; expected one"
            )
        seen.add((partition, offset))
    rate = _number(table, "fail_rate", 0.0, 0, 1)
    error = _error_name(table, "error", table.raw("error", "RuntimeError"))
    table.finish()
    return tuple(rules), rate, error


def read_retry(root: Table, scope: Scope) -> None:
    """``[retry]``: topic, attempts, backoff, delay_ms, multiplier, max_delay_ms, retryable, backend,
    redis_url, blocking and a ``[retry.handler]`` table (fail rules, fail_rate, error)."""
    if not root.has("retry"):
        root.raw("retry", None)
        return
    table = root.table("retry")
    source = topic_of(table, "topic", table.str("topic"), scope.topics)
    attempts = table.int("attempts", 3, minimum=1, maximum=MAX_ATTEMPTS)
    backoff = table.str("backoff", "fixed", ("fixed", "exponential"))
    delay = table.ms("delay_ms", 1000)
    multiplier = _number(table, "multiplier", 2.0, 1, 1000)
    longest = table.ms("max_delay_ms", max(30_000, delay))
    if longest < delay:
        raise table.error("max_delay_ms", f"expected at least delay_ms ({delay}), got {longest}")
    retryable = table.raw("retryable", [])
    if not isinstance(retryable, list):
        raise table.error("retryable", f"expected a list of error names, got {describe(retryable)}")
    names = tuple(_error_name(table, f"retryable[{i}]", v) for i, v in enumerate(retryable))
    backend = table.str("backend", "wheel", BACKENDS)
    redis_url = table.str("redis_url", None)
    if redis_url is not None and backend != "redis":
        raise table.error("redis_url", 'expected it only with backend = "redis"')
    if redis_url is not None and not redis_url.startswith(("redis://", "unix://")):
        raise table.error("redis_url", f"expected redis://host:port/db, got {describe(redis_url)}")
    blocking = _bool(table, "blocking", False)
    if blocking and table.has("backend"):
        raise table.error(
            "backend", "blocking retries wait in place and use no scheduler; expected no backend"
        )
    rules, rate, error = _handler(table.table("handler"), source)
    if scope.end_ms is None:
        raise table.error(
            "topic", "retries need scenario.end_ms past the last backoff (they follow the steps)"
        )
    table.finish()
    scope.retry = RetrySpec(
        source.name,
        attempts,
        backoff,
        delay,
        multiplier,
        longest,
        names,
        backend,
        redis_url,
        blocking,
        rules,
        rate,
        error,
    )
    scope.topics = _with_retry_topics(table, scope.topics, source, attempts, blocking)


def _with_retry_topics(
    table: Table, topics: tuple[TopicSpecModel, ...], source: TopicSpecModel, attempts: int, blocking: bool
) -> tuple[TopicSpecModel, ...]:
    names = [] if blocking else [retry_topic(source.name, n) for n in range(1, attempts)]
    names.append(dlt_topic(source.name))
    added = []
    for name in names:
        spec = next((t for t in topics if t.name == name), None)
        if spec is None:
            added.append(TopicSpecModel(name, source.partitions, source.replication_factor))
        elif spec.partitions != source.partitions:
            raise table.error(
                "topic",
                f"topic {describe(name)} has {spec.partitions} partition(s); expected {source.partitions} "
                f"as {describe(source.name)} (or leave it out: the retry section creates it)",
            )
    return (*topics, *added)


def read_retry_counts(table: Table, scope: Scope, index: int) -> Expectation:
    """``{ retry = "orders", at = 1200, processed = 2, dead = 1, pending = 0, records = { ... } }``."""
    topic = table.str("retry")
    if scope.retry is None:
        raise table.error("retry", "expected a [retry] section for it")
    if topic != scope.retry.topic:
        raise table.error(
            "retry",
            f"expected the retry section's topic {describe(scope.retry.topic)}, got {describe(topic)}",
        )
    records = table.raw("records", None)
    if records is not None:
        known = [t.name for t in scope.topics]
        if not isinstance(records, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in records.values()
        ):
            raise table.error(
                "records", f'expected a table like {{ "{topic}-dlt" = 1 }}, got {describe(records)}'
            )
        for name in records:
            if name not in known:
                raise table.error(f"records.{name}", f"unknown topic; expected one of: {listing(known)}")
    return RetryCounts(
        index,
        table.path,
        table.ms("at"),
        topic,
        table.int("processed", None),
        table.int("dead", None),
        table.int("deliveries", None),
        table.int("pending", None),
        records,
    )


def retry_events(scope: Any, span: int, records: int) -> int:
    """The retrying consumer's projected events: idle polls of its partitions over ``span`` ms, and
    up to ``attempts`` deliveries (each a produce and a fetch per replica) of each of ``records``."""
    spec = scope.retry
    if spec is None:
        return 0
    source = next(t for t in scope.topics if t.name == spec.topic)
    loops = source.partitions * (1 if spec.blocking else spec.attempts)
    return span * loops // POLL_MS + records * spec.attempts * 2 * source.replication_factor
