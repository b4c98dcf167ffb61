"""The ``[[steps]]`` section: the timeline, one parser per ``action``.

``STEPS`` maps each action to its parser ``(table, scope, at, index, action) -> Step``;
``at`` and ``action`` are already read, the parser reads the rest and ``read_steps``
rejects keys it did not ask for. To add an action, write its parser (in a module of
its own for a new concept) and add one line to ``STEPS``; the order of ``STEPS`` is
the order the error message lists the actions in.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.broker.config import BrokerConfig
from minibroker.scenario.loader.admin import delete_records_step, elect_leaders_step, list_offsets_step
from minibroker.scenario.loader.delay import delay_of
from minibroker.scenario.loader.document import Table, describe
from minibroker.scenario.loader.groups import member_step
from minibroker.scenario.loader.limits import MAX_BATCH
from minibroker.scenario.loader.scope import (
    Scope,
    assigned_consumer,
    between,
    broker,
    check_partition,
    client_of,
    directed,
    kafka,
    topic_of,
)
from minibroker.scenario.loader.share import is_share_consumer, share_step
from minibroker.scenario.loader.transactions import (
    check_order,
    is_transactional,
    refuse_transactional,
    transaction_step,
)
from minibroker.scenario.model import (
    BrokerFault,
    Fetch,
    LinkFault,
    Load,
    Poll,
    Produce,
    SetConfig,
    Step,
)

StepParser = Callable[[Table, Scope, int, int, str], Step]


def _produce(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    client = client_of(table, scope.clients, "producer")
    refuse_transactional(table, scope, client)
    topic, partition = check_partition(
        table, "topic", table.str("topic"), table.int("partition", 0), scope.topics
    )
    keys = None
    if table.has("keys"):
        raw = table.array("keys")
        if not raw or len(raw) > MAX_BATCH or not all(isinstance(k, str) for k in raw):
            raise table.error(
                "keys", f"expected a non-empty list of record keys (strings), got {describe(raw)}"
            )
        if table.has("records") or table.has("bytes"):
            raise table.error("keys", "expected keys without records or bytes (one record per key)")
        keys = tuple(raw)
    tombstone = table.raw("tombstone", False)
    if not isinstance(tombstone, bool) or (tombstone and keys is None):
        raise table.error("tombstone", "expected true or false, beside keys")
    return Produce(
        at,
        index,
        client,
        topic,
        partition,
        len(keys) if keys else table.int("records", 1, 1, maximum=MAX_BATCH),
        table.int("bytes", 100, 0, maximum=MAX_BATCH),
        table.str("id", None),
        *delay_of(table, scope),
        keys=keys,
        tombstone=tombstone,
    )


def _fetch(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    return Fetch(at, index, assigned_consumer(table, scope.clients), table.str("id", None))


def _poll(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    client = assigned_consumer(table, scope.clients)
    return Poll(at, index, client, table.ms("duration_ms"), table.str("id", None))


def _load(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    client = client_of(table, scope.clients, "producer")
    refuse_transactional(table, scope, client)
    topic = table.str("topic")
    spec = topic_of(table, "topic", topic, scope.topics)
    partitions = None
    if table.has("partitions"):
        raw = table.array("partitions")
        if not raw or any(
            not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < spec.partitions for p in raw
        ):
            raise table.error(
                "partitions",
                f"expected a list of partitions of {describe(topic)} (0..{spec.partitions - 1}), "
                f"got {describe(raw)}",
            )
        partitions = tuple(raw)
    return Load(
        at,
        index,
        client,
        topic,
        table.int("rate", what="a whole number of requests per second", minimum=1),
        table.ms("duration_ms"),
        partitions,
        table.int("records", 1, 1, maximum=MAX_BATCH),
        table.int("bytes", 100, 0, maximum=MAX_BATCH),
        table.str("id", None),
        *delay_of(table, scope),
    )


def _broker_fault(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    return BrokerFault(at, index, action, broker(table, scope.cluster))


def _link_fault(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    if action != "latency" and (table.has("from") or table.has("to")):
        return LinkFault(at, index, action, directed(table, scope.cluster, scope.clients), one_way=True)
    nodes = between(table, scope.cluster, scope.clients)
    latency = table.ms("latency_ms") if action == "latency" else 0
    return LinkFault(at, index, action, nodes, latency)


def _commit(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    """A transactional producer's commit (EndTxn), or a group member's (OffsetCommit)."""
    client = table.raw("client", None)
    if is_transactional(next((c for c in scope.clients if c.id == client), None)):
        return transaction_step(table, scope, at, index, action)
    if table.has("id") and not any(c.id == client and c.subscribe for c in scope.clients):
        return transaction_step(table, scope, at, index, action)  # names the transactional producers
    return member_step(table, scope, at, index, action)


def _crash(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    """A broker's crash (``broker``), or a transactional producer's (``client``)."""
    if is_share_consumer(next((c for c in scope.clients if c.id == table.raw("client", None)), None)):
        return share_step(table, scope, at, index, action)
    if table.has("client"):
        if table.has("broker"):
            raise table.error(
                "client", "expected either broker (a broker crashes) or client (a producer does)"
            )
        return transaction_step(table, scope, at, index, action)
    return _broker_fault(table, scope, at, index, action)


def _config(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    target = broker(table, scope.cluster) if table.has("broker") else None
    settings = kafka(table, "settings", BrokerConfig.from_kafka)
    if not settings:
        raise table.error(
            "settings", 'expected a table of Kafka broker settings, like { "min.insync.replicas" = 2 }'
        )
    return SetConfig(at, index, settings, target)


#: every action a step may take, and its parser
STEPS: dict[str, StepParser] = {
    "produce": _produce,
    "fetch": _fetch,
    "poll": _poll,
    "load": _load,
    "pause": _broker_fault,
    "resume": _broker_fault,
    "crash": _crash,
    "restart": _broker_fault,
    "shutdown": _broker_fault,
    "latency": _link_fault,
    "drop": _link_fault,
    "heal": _link_fault,
    "config": _config,
    "join": member_step,
    "leave": member_step,
    "stall": member_step,
    "hang": member_step,
    "commit": _commit,
    "delete_records": delete_records_step,
    "init": transaction_step,
    "begin": transaction_step,
    "send": transaction_step,
    "send_offsets": transaction_step,
    "abort": transaction_step,
    "elect_leaders": elect_leaders_step,
    "acknowledge": share_step,
    "list_offsets": list_offsets_step,
}
STEP_ACTIONS = tuple(STEPS)


def read_steps(root: Table, scope: Scope) -> None:
    """``[[steps]]``, then the request names they give (``id``): unique, without '#' or '@'."""
    scope.steps = scope.items(root, "steps", lambda table, index: _step(table, scope, index))
    for step in scope.steps:
        i = step.index
        request_id = getattr(step, "id", None)
        if request_id is not None and ("#" in request_id or "@" in request_id):
            raise scope.ctx.error(
                f"steps[{i}].id", f"expected a name without '#' or '@', got {describe(request_id)}"
            )
        if request_id is not None:
            if request_id in scope.made:
                raise scope.ctx.error(
                    f"steps[{i}].id",
                    f"request name {describe(request_id)} is used twice; expected a new name",
                )
            scope.made[request_id] = step.at
    check_order(scope)


def _step(table: Table, scope: Scope, index: int) -> Step:
    at = table.ms("at")
    action = table.str("action", choices=STEP_ACTIONS)
    step = STEPS[action](table, scope, at, index, action)
    table.finish()
    return step
