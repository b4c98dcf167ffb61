"""The ``[[expect]]`` section: what must hold after the run, one parser per kind.

An expectation's kind is the one key of ``EXPECTATIONS`` it has (``request = "r1"``,
``partition = "t-0"``, ...); ``FILTERS`` are kinds that a ``count`` also takes as
filters, so they name the kind only when no other kind key is present. ``event`` with
``count`` is the one pair both readings fit: an integer ``count`` is the event kind's
exact number of matches, a string ``count`` (it must be ``"events"``) is a count kind
filtered by that event. A parser is
``(table, scope, index) -> Expectation``; ``read_expectations`` rejects keys it did not
ask for. To add a kind, write its parser and add one line to ``EXPECTATIONS`` (a feature registers its
kinds instead: ``minibroker.scenario.feature``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.scenario.feature import features
from minibroker.scenario.loader.document import Table, describe, listing
from minibroker.scenario.loader.events import COMMON, KINDS
from minibroker.scenario.loader.groups import group_expectation, member_expectation
from minibroker.scenario.loader.scope import Scope, broker, check_partition, is_broker
from minibroker.scenario.loader.transactions import transaction_expectation
from minibroker.scenario.model import (
    Count,
    Event,
    Expectation,
    PartitionState,
    PurgatoryFigures,
    RequestOutcome,
)

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
    # a transactional producer's (minibroker.clients.transactional_producer)
    "PRODUCER_FENCED",
    "INVALID_PRODUCER_EPOCH",
    "INVALID_TXN_STATE",
    "CONCURRENT_TRANSACTIONS",
    "INVALID_PRODUCER_ID_MAPPING",
    "INVALID_TRANSACTION_TIMEOUT",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "UNKNOWN_SERVER_ERROR",
    "ELECTION_NOT_NEEDED",
    "PREFERRED_LEADER_NOT_AVAILABLE",
)
#: the purgatories a ``purgatory`` expectation or a count may name
PURGATORIES = (
    "Produce",
    "Fetch",
    "DeleteRecords",
    "ElectLeader",
    "RemoteFetch",
    "RemoteListOffsets",
    "ShareFetch",
)
CAUSES = ("immediate", "condition", "expiry", "leadership", "network")
COUNTS = ("requests", "expirations", "completions", "purges", "purged", "events")

ExpectationParser = Callable[[Table, Scope, int], Expectation]


def _request(table: Table, scope: Scope, index: int) -> Expectation:
    made = scope.made
    request = table.str("request")
    if request not in made:
        known = listing(sorted(made)) or "(no step names its request with id)"
        raise table.error(
            "request", f"no step makes a request named {describe(request)}; expected one of: {known}"
        )
    error = table.raw("error", None)
    if error is not None and not (
        (isinstance(error, str) and error in ERRORS)
        or (isinstance(error, dict) and all(isinstance(v, str) and v in ERRORS for v in error.values()))
    ):
        raise table.error(
            "error",
            f"expected a Kafka error name ({', '.join(ERRORS)}) or a table of them, got {describe(error)}",
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
            raise table.error("completed_within", f"expected [earliest, latest] in ms, got {describe(raw)}")
        within = (raw[0], raw[1])
    completed_at = table.ms("completed_at", None)
    for label, value in (
        ("completed_at", completed_at),
        ("completed_within", within[1] if within else None),
    ):
        if value is not None and value < made[request]:
            raise table.error(
                label,
                f"request {describe(request)} is made at {made[request]} ms; "
                f"expected a time after that, got {value}",
            )
    return RequestOutcome(
        index,
        table.path,
        request,
        error,
        table.str("cause", None, CAUSES),
        completed_at,
        within,
        table.int("records", None),
        table.int("low_watermark", None, -1),
        table.int("offset", None, -1),
    )


def _partition(table: Table, scope: Scope, index: int) -> Expectation:
    label = table.str("partition")
    topic, _, number = label.rpartition("-")
    if not number.isdigit():
        raise table.error("partition", f"expected 'topic-partition' like 't-0', got {describe(label)}")
    check_partition(table, "partition", topic, int(number), scope.topics)
    isr = None
    if table.has("isr"):
        raw = table.raw("isr")
        if not isinstance(raw, list) or any(not is_broker(b, scope.cluster.brokers) for b in raw):
            raise table.error("isr", f"expected a list of broker ids, got {describe(raw)}")
        isr = tuple(raw)
    return PartitionState(
        index,
        table.path,
        table.ms("at"),
        label,
        broker(table, scope.cluster, "replica") if table.has("replica") else None,
        table.int("leader", None, -1),
        table.int("epoch", None),
        isr,
        table.int("hw", None),
        table.int("leo", None),
        table.int("log_start", None),
        table.int("lso", None),
        table.int("local_log_start", None),
    )


def _purgatory(table: Table, scope: Scope, index: int) -> Expectation:
    return PurgatoryFigures(
        index,
        table.path,
        table.ms("at"),
        broker(table, scope.cluster),
        table.str("purgatory", choices=PURGATORIES),
        table.int("num_delayed", None),
        table.int("watched", None),
        table.int("watched_keys", None),
        table.int("expirations", None),
        table.int("purges", None),
    )


def _count(table: Table, scope: Scope, index: int) -> Expectation:
    count = table.str("count", choices=COUNTS)
    filters: dict[str, Any] = {}
    for key in ("client", "kind", "error", "cause", "purgatory", "event"):
        if table.has(key):
            value = table.raw(key)
            if key == "event":
                _event_fields(table, value)
            elif not isinstance(value, str):
                raise table.error(key, f"expected a string, got {describe(value)}")
            filters[key] = value
    if "event" in filters and count != "events":
        raise table.error("count", f'an event filters count = "events" only; got count = {describe(count)}')
    if count == "events" and "event" not in filters:
        raise table.error("count", 'count = "events" needs event = { kind = ..., ... } to say which events')
    if table.has("broker"):
        filters["broker"] = broker(table, scope.cluster)
    bounds = {k: table.int(k, None) for k in ("equals", "at_least", "at_most")}
    if all(v is None for v in bounds.values()):
        raise table.ctx.error(table.path, "expected one of equals, at_least or at_most")
    low, high = bounds["at_least"], bounds["at_most"]
    if low is not None and high is not None and low > high:
        raise table.error("at_most", f"expected at_most >= at_least ({low}), got {high}")
    return Count(index, table.path, count, bounds["equals"], bounds["at_least"], bounds["at_most"], filters)


def _event(table: Table, scope: Scope, index: int) -> Expectation:
    fields = _event_fields(table, table.raw("event"))
    return Event(index, table.path, dict(fields), table.int("count", None))


def _event_fields(table: Table, fields: Any) -> dict[str, Any]:
    """``event = { kind = ..., ... }``: a known kind and fields that events of that kind carry."""
    if not isinstance(fields, dict) or not isinstance(fields.get("kind"), str):
        raise table.error("event", f"expected a table of trace fields with a kind, got {describe(fields)}")
    kind = fields["kind"]
    if kind not in KINDS:
        raise table.error(
            "event.kind",
            f"unknown event kind {describe(kind)}; expected one of: {listing(sorted(KINDS), 40)}",
        )
    allowed = KINDS[kind] | COMMON
    for name in fields:
        if name not in allowed:
            raise table.error(
                f"event.{name}",
                f"{kind} events have no field {describe(name)}; "
                f"expected one of: {listing(sorted(allowed), 40)}",
            )
    return fields


#: every kind of expectation, by the key that names it, in the order error messages list them
EXPECTATIONS: dict[str, ExpectationParser] = {
    "request": _request,
    "partition": _partition,
    "purgatory": _purgatory,
    "count": _count,
    "event": _event,
    "group": group_expectation,
    "member": member_expectation,
    "transaction": transaction_expectation,
}
#: kinds that are also filters of a count: they name the kind only alone (the first found wins)
FILTERS = ("event", "purgatory")


def kinds() -> dict[str, ExpectationParser]:
    """The core kinds and the registered features' (``minibroker.scenario.feature``), each listed where
    its feature says (after the kind it names)."""
    ordered = dict(EXPECTATIONS)
    for kind in (kind for feature in features() for kind in feature.expectations):
        keys = list(ordered)
        at = keys.index(kind.listed_after) + 1 if kind.listed_after in ordered else len(keys)
        ordered = (
            {k: ordered[k] for k in keys[:at]} | {kind.key: kind.parse} | {k: ordered[k] for k in keys[at:]}
        )
    return ordered


def read_expectations(root: Table, scope: Scope) -> None:
    scope.expectations = scope.items(root, "expect", lambda table, index: _expectation(table, scope, index))


def _expectation(table: Table, scope: Scope, index: int) -> Expectation:
    known = kinds()
    found = [k for k in known if k not in FILTERS and table.has(k)]
    if found == ["count"] and table.has("event") and not isinstance(table.raw("count"), str):
        found = ["event"]  # event = {...} with count = N: exactly N such events (see the docstring)
    for secondary in FILTERS:
        if not found and table.has(secondary):
            found = [secondary]
    if len(found) != 1:
        *first, last = known
        raise table.ctx.error(table.path, f"expected exactly one of the keys {', '.join(first)} or {last}")
    expectation = known[found[0]](table, scope, index)
    table.finish()
    return expectation
