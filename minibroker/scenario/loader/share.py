"""Share groups in scenarios (KIP-932): share consumers, their steps, the ``share_partition`` expectation.

- ``[[clients]]`` of type ``share_consumer`` with ``subscribe = ["t"]`` and a ``group.id`` in its config
  (``fetch.max.wait.ms`` is its ShareFetch's wait); it joins at its ``join`` step.
- steps ``join`` and ``stall`` (``duration_ms``: it holds what it receives unacknowledged and fetches
  nothing meanwhile), ``acknowledge`` (``type`` ACCEPT, RELEASE or REJECT, for the records at
  ``offsets`` or, without it, all; ``partition`` "t-0" to name one) and ``crash``, each with ``client``.
- ``[[expect]] share_partition = "t-0"`` with ``share_group``, ``at`` and any of ``spso``, ``speo``,
  ``states`` ({ "3" = "Archived" }: Available, Acquired, Acknowledged, Archived), ``delivery_counts``
  ({ "3" = 2 }), ``lock_expiries``, ``archived`` (the share partition's totals on its leader now) and
  ``leader`` (the broker holding it).
"""

from __future__ import annotations

from minibroker.scenario.loader.document import Table, describe, listing
from minibroker.scenario.loader.scope import Scope, broker, partition_label
from minibroker.scenario.model import ClientSpec, SharePartitionState, ShareStep, Step

#: how records are acknowledged (Kafka's AcknowledgeType names)
TYPES = ("ACCEPT", "RELEASE", "REJECT")
#: a record's state as a ``share_partition`` expectation names it
STATES = ("Available", "Acquired", "Acknowledged", "Archived")
#: the group steps a share consumer takes
MEMBER_ACTIONS = ("join", "stall")


def is_share_consumer(spec: ClientSpec | None) -> bool:
    return spec is not None and spec.type == "share_consumer"


def check_share_consumer(table: Table, spec: ClientSpec) -> None:
    """A share consumer subscribes (with a group.id) and is never assigned partitions."""
    if not spec.subscribe:
        raise table.error("subscribe", 'a share consumer needs subscribe, like subscribe = ["t"]')


def share_consumer(table: Table, scope: Scope) -> str:
    client_id = table.str("client")
    if not is_share_consumer(next((c for c in scope.clients if c.id == client_id), None)):
        names = listing([c.id for c in scope.clients if is_share_consumer(c)]) or "(no share_consumer)"
        raise table.error("client", f"expected a share consumer: {names}; got {describe(client_id)}")
    return client_id


def refuse_member_action(table: Table, scope: Scope, action: str) -> None:
    """A share consumer takes only the ``join`` and ``stall`` group steps."""
    client = table.raw("client", None)
    if action not in MEMBER_ACTIONS and is_share_consumer(
        next((c for c in scope.clients if c.id == client), None)
    ):
        raise table.error("action", f"a share consumer takes join, stall, acknowledge or crash, got {action}")


def share_step(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    client = share_consumer(table, scope)
    if action == "crash":
        return ShareStep(at, index, action, client)
    offsets = None
    if table.has("offsets"):
        raw = table.raw("offsets")
        if (
            not isinstance(raw, list)
            or not raw
            or any(not isinstance(o, int) or isinstance(o, bool) or o < 0 for o in raw)
        ):
            raise table.error("offsets", f"expected a list of offsets >= 0 like [3], got {describe(raw)}")
        offsets = tuple(sorted(set(raw)))
    partition = None
    if table.has("partition"):
        partition = partition_label(table, "partition", table.raw("partition"), scope.topics)
    return ShareStep(at, index, action, client, table.str("type", choices=TYPES), offsets, partition)


def _offset_table(table: Table, key: str, check: object, what: str) -> dict[int, object] | None:
    if not table.has(key):
        return None
    raw = table.raw(key)
    if not isinstance(raw, dict) or not raw:
        raise table.error(key, f'expected a table like {{ "3" = {what} }}, got {describe(raw)}')
    result: dict[int, object] = {}
    for offset, value in raw.items():
        if not offset.isdigit():
            raise table.error(f"{key}.{offset}", f'expected an offset like "3", got {describe(offset)}')
        if not check(value):  # type: ignore[operator]
            raise table.error(f"{key}.{offset}", f"expected {what}, got {describe(value)}")
        result[int(offset)] = value
    return result


def share_partition_expectation(table: Table, scope: Scope, index: int) -> SharePartitionState:
    partition = partition_label(table, "share_partition", table.raw("share_partition"), scope.topics)
    groups = sorted({c.config.get("group.id") for c in scope.clients if is_share_consumer(c)})
    group = table.str("share_group")
    if group not in groups:
        raise table.error(
            "share_group",
            f"expected a share consumer's group.id: {listing(groups) or '(none)'}; got {describe(group)}",
        )
    states = _offset_table(table, "states", lambda v: v in STATES, f"one of {', '.join(STATES)}")
    counts = _offset_table(
        table,
        "delivery_counts",
        lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
        "a count >= 0",
    )
    return SharePartitionState(
        index,
        table.path,
        table.ms("at"),
        partition,
        group,
        table.int("spso", None),
        table.int("speo", None, minimum=-1),
        states,  # type: ignore[arg-type]
        counts,  # type: ignore[arg-type]
        table.int("lock_expiries", None),
        table.int("archived", None),
        broker(table, scope.cluster, "leader") if table.has("leader") else None,
    )
