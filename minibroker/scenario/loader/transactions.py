"""Transactions in scenarios: transactional producers, their steps, the ``transaction`` expectation.

- ``[[clients]]`` of type producer may say ``transactional_id = "tx"`` and
  ``transaction_timeout_ms`` (Kafka's ``transactional.id`` and ``transaction.timeout.ms``, which its
  config may give instead); it needs acks = all. A consumer may say
  ``isolation_level = "read_committed"`` (Kafka's ``isolation.level``).
- steps ``init``, ``begin``, ``send`` (``topic``, ``partition``, ``records``, ``bytes``),
  ``send_offsets`` (``group``, ``offsets = { "t-0" = 5 }``), ``commit``, ``abort`` (``id`` names the
  request of each but ``begin``) and ``crash`` with ``client`` a transactional producer (``commit``
  with a subscribing consumer is the member's OffsetCommit, ``crash`` with ``broker`` a broker's
  crash). Per producer, in time order: ``init`` first, ``send``/``send_offsets`` and one
  ``commit``/``abort`` inside a ``begin``, nothing after ``crash``. ``produce`` and ``load`` refuse a
  transactional producer.
- ``[[expect]] transaction = "tx"`` with ``at`` and any of ``state`` (``Ongoing``,
  ``PrepareCommit``, ...), ``epoch``, ``partitions`` (["t-0", ...]) and ``coordinator`` (a broker id);
  ``lso`` on a ``partition`` expectation is the leader's last stable offset.
"""

from __future__ import annotations

from typing import Any

from minibroker.coordinator.transaction.transaction_metadata import VALID_PREVIOUS
from minibroker.scenario.loader.document import Table, describe, listing
from minibroker.scenario.loader.limits import MAX_BATCH, MAX_MS
from minibroker.scenario.loader.scope import Scope, broker, check_partition
from minibroker.scenario.model import ClientSpec, Expectation, Step, TransactionState, TransactionStep

#: the steps of a transactional producer
TRANSACTION_ACTIONS = ("init", "begin", "send", "send_offsets", "commit", "abort", "crash")
#: the states a ``transaction`` expectation may name (Kafka's TransactionState names)
STATES = tuple(sorted(VALID_PREVIOUS))


def transactional_settings(table: Table, kind: str, config: dict[str, Any]) -> dict[str, Any]:
    """The client table's ``transactional_id`` / ``transaction_timeout_ms`` (producers) and
    ``isolation_level`` (consumers), folded into its Kafka-named ``config``."""
    config = dict(config)
    if kind == "producer":
        if table.has("transactional_id"):
            config["transactional.id"] = table.str("transactional_id")
        if table.has("transaction_timeout_ms"):
            if not config.get("transactional.id"):
                raise table.error(
                    "transaction_timeout_ms",
                    'expected a transactional_id beside it, like transactional_id = "tx"',
                )
            config["transaction.timeout.ms"] = table.int(
                "transaction_timeout_ms", minimum=1, what="a whole number of ms", maximum=MAX_MS
            )
        if config.get("transactional.id") and config["acks"] != -1:
            raise table.error(
                "config.acks", f"a transactional producer needs acks = all, got {config['acks']}"
            )
    elif table.has("isolation_level"):
        config["isolation.level"] = table.str(
            "isolation_level", choices=("read_uncommitted", "read_committed")
        )
    return config


def is_transactional(spec: ClientSpec | None) -> bool:
    return spec is not None and spec.type == "producer" and bool(spec.config.get("transactional.id"))


def _producer(table: Table, scope: Scope) -> str:
    client_id = table.str("client")
    if not is_transactional(next((c for c in scope.clients if c.id == client_id), None)):
        names = (
            listing([c.id for c in scope.clients if is_transactional(c)]) or "(none has a transactional_id)"
        )
        raise table.error("client", f"expected a transactional producer: {names}; got {describe(client_id)}")
    return client_id


def transaction_step(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    client = _producer(table, scope)
    name = None if action in ("begin", "crash") else table.str("id", None)
    if action == "send":
        topic, partition = check_partition(
            table, "topic", table.str("topic"), table.int("partition", 0), scope.topics
        )
        return TransactionStep(
            at,
            index,
            action,
            client,
            name,
            topic,
            partition,
            table.int("records", 1, 1, maximum=MAX_BATCH),
            table.int("bytes", 100, 0, maximum=MAX_BATCH),
        )
    if action == "send_offsets":
        group = table.str("group")
        raw = table.raw("offsets")
        if not isinstance(raw, dict) or not raw:
            raise table.error("offsets", f'expected a table like {{ "t-0" = 5 }}, got {describe(raw)}')
        offsets = {}
        for label, offset in raw.items():
            topic, _, number = label.rpartition("-")
            if not number.isdigit():
                raise table.error(
                    f"offsets.{label}", f"expected 'topic-partition' like 't-0', got {describe(label)}"
                )
            check_partition(table, f"offsets.{label}", topic, int(number), scope.topics)
            if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
                raise table.error(f"offsets.{label}", f"expected an offset >= 0, got {describe(offset)}")
            offsets[label] = offset
        return TransactionStep(at, index, action, client, name, group=group, offsets=offsets)
    return TransactionStep(at, index, action, client, name)


def refuse_transactional(table: Table, scope: Scope, client: str) -> None:
    """``produce`` and ``load`` send outside transactions: a transactional producer cannot."""
    if is_transactional(next((c for c in scope.clients if c.id == client), None)):
        raise table.error(
            "client",
            f"producer {describe(client)} is transactional; expected a send step inside begin and commit",
        )


def check_order(scope: Scope) -> None:
    """Each transactional producer's steps in time order: init first, sends and one commit or abort
    inside a begin (an abort may follow a commit: the commit may fail), nothing after a crash (the
    first misplaced step is reported)."""
    state: dict[str, str] = {}
    steps = sorted((s for s in scope.steps if isinstance(s, TransactionStep)), key=lambda s: (s.at, s.index))
    for step in steps:
        now = state.get(step.client, "new")
        expected = {
            "init": ("new", "ready", "committed"),
            "begin": ("ready", "committed"),
            "send": ("open",),
            "send_offsets": ("open",),
            "commit": ("open",),
            "abort": ("open", "committed"),  # a commit that fails leaves the transaction to abort
            "crash": ("new", "ready", "open", "committed"),
        }[step.action]
        if now not in expected:
            wanted = {
                "init": "before its begin (or after its commit or abort)",
                "begin": "after its init, outside a transaction",
                "crash": "once",
            }.get(step.action, "between its begin and its commit or abort")
            seen = {
                "new": "before any init",
                "ready": "outside a transaction",
                "committed": "after a commit",
                "open": "inside a transaction",
                "crashed": "after its crash",
            }
            raise scope.ctx.error(
                f"steps[{step.index}]",
                f"{step.action} by {describe(step.client)} at {step.at} ms comes {seen[now]}; "
                f"expected it {wanted}",
            )
        state[step.client] = {
            "init": "ready",
            "begin": "open",
            "commit": "committed",
            "abort": "ready",
            "crash": "crashed",
        }.get(step.action, now)


def transaction_expectation(table: Table, scope: Scope, index: int) -> Expectation:
    txn_id = table.str("transaction")
    ids = sorted({c.config["transactional.id"] for c in scope.clients if is_transactional(c)})
    if txn_id not in ids:
        raise table.error(
            "transaction",
            f"expected the transactional_id of a producer: {listing(ids) or '(none)'}; "
            f"got {describe(txn_id)}",
        )
    partitions = None
    if table.has("partitions"):
        raw = table.raw("partitions")
        if not isinstance(raw, list) or any(not isinstance(p, str) for p in raw):
            raise table.error("partitions", f"expected a list like ['t-0'], got {describe(raw)}")
        partitions = tuple(sorted(raw))
    return TransactionState(
        index,
        table.path,
        table.ms("at"),
        txn_id,
        table.str("state", None, STATES),
        table.int("epoch", None),
        partitions,
        broker(table, scope.cluster, "coordinator") if table.has("coordinator") else None,
    )
