"""Consumer groups in scenarios: a consumer's ``subscribe``, the member steps, the ``group`` expectation.

- ``[[clients]]`` of type consumer may say ``subscribe = ["t"]`` (its config then needs a
  ``group.id``, and it cannot also ``assign``); it joins at its ``join`` step;
  ``group_protocol = "consumer"`` (Kafka's ``group.protocol``) makes it a KIP-848 member.
- steps ``join``, ``leave``, ``commit`` (``client``), and ``stall`` / ``hang`` (``client``,
  optional ``duration_ms``): the client must be a subscribing consumer.
- ``[[expect]] group = "g"`` with ``at`` and any of ``state``, ``generation``, ``members``
  and ``leader`` (client ids), ``assignment`` (client id -> ["t-0", ...]) and
  ``committed`` ("t-0" -> offset); for a consumer protocol group also ``group_epoch``,
  ``assignment_epoch``, ``epochs`` (client id -> member epoch) and ``target`` (client id ->
  its target partitions; ``assignment`` is then what each member owns now);
- ``[[expect]] member = "c1"`` with ``errors`` (the error names it was answered, in order)
  and optionally ``api`` (only that API's).
"""

from __future__ import annotations

from typing import Any

from minibroker.coordinator.group.consumer_group import ASSIGNING, RECONCILING
from minibroker.coordinator.group.group import (
    COMPLETING_REBALANCE,
    DEAD,
    EMPTY,
    PREPARING_REBALANCE,
    STABLE,
)
from minibroker.scenario.loader.document import Table, describe
from minibroker.scenario.loader.scope import Scope, partition_label, topic_of
from minibroker.scenario.loader.share import refuse_member_action
from minibroker.scenario.model import ClientSpec, Expectation, GroupState, MemberAction, MemberErrors, Step

STATES = (EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE, DEAD, ASSIGNING, RECONCILING)
APIS = (
    "JoinGroup",
    "SyncGroup",
    "Heartbeat",
    "OffsetCommit",
    "OffsetFetch",
    "LeaveGroup",
    "ConsumerGroupHeartbeat",
)
PROTOCOLS = ("classic", "consumer")


def read_group_protocol(table: Table, config: dict[str, Any]) -> dict[str, Any]:
    """``group_protocol`` of a consumer table: Kafka's ``group.protocol``, for a subscribing consumer."""
    protocol = table.str("group_protocol", choices=PROTOCOLS)
    if not table.has("subscribe"):
        raise table.error("group_protocol", 'expected subscribe = ["t"] beside it (a group member has one)')
    configured = config.get("group.protocol", protocol)
    if configured != protocol:
        raise table.error(
            "group_protocol", f"expected the config's group.protocol {configured!r}, got {describe(protocol)}"
        )
    return {**config, "group.protocol": protocol}


def read_subscribe(table: Table, spec: ClientSpec, scope_topics: tuple) -> ClientSpec:
    """Validate ``subscribe`` of a consumer table (already read into ``spec`` otherwise)."""
    raw = table.array("subscribe")
    if not raw or any(not isinstance(t, str) for t in raw):
        raise table.error("subscribe", f"expected a list of topic names, got {describe(raw)}")
    for i, topic in enumerate(raw):
        topic_of(table, f"subscribe[{i}]", topic, scope_topics)
    if not spec.config.get("group.id"):
        raise table.error(
            "subscribe", 'expected a group.id in config to subscribe, like { "group.id" = "g" }'
        )
    if spec.assign:
        raise table.error("subscribe", "expected either assign or subscribe, not both")
    return ClientSpec(spec.id, spec.type, spec.config, spec.assign, tuple(raw))


def _member(table: Table, scope: Scope) -> str:
    client_id = table.str("client")
    spec = next((c for c in scope.clients if c.id == client_id), None)
    if spec is None or not spec.subscribe:
        names = ", ".join(c.id for c in scope.clients if c.subscribe) or "(no consumer subscribes)"
        raise table.error("client", f"expected a consumer that subscribes: {names}; got {client_id!r}")
    return client_id


def member_step(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    refuse_member_action(table, scope, action)
    client = _member(table, scope)
    duration = table.ms("duration_ms", None) if action in ("stall", "hang") else None
    return MemberAction(at, index, action, client, duration)


def group_expectation(table: Table, scope: Scope, index: int) -> Expectation:
    members = _names(table, "members", scope)
    leader = None
    if table.has("leader"):
        leader = table.str("leader")
        _check_client(table, "leader", leader, scope)
    assignment = _assignment(table, "assignment", scope)
    target = _assignment(table, "target", scope)
    epochs = None
    if table.has("epochs"):
        raw = table.raw("epochs")
        if not isinstance(raw, dict) or any(
            not isinstance(v, int) or isinstance(v, bool) or v < -2 for v in raw.values()
        ):
            raise table.error("epochs", f"expected member epochs like {{ c1 = 2 }}, got {describe(raw)}")
        for client in raw:
            _check_client(table, f"epochs.{client}", client, scope)
        epochs = dict(sorted(raw.items()))
    committed = None
    if table.has("committed"):
        raw = table.raw("committed")
        if not isinstance(raw, dict) or any(
            not isinstance(v, int) or isinstance(v, bool) or v < -1 for v in raw.values()
        ):
            raise table.error("committed", f'expected a table like {{ "t-0" = 5 }}, got {describe(raw)}')
        committed = {_partition(table, f"committed.{k}", k, scope): v for k, v in raw.items()}
    return GroupState(
        index,
        table.path,
        table.ms("at"),
        table.str("group"),
        table.str("state", None, STATES),
        table.int("generation", None),
        members,
        leader,
        assignment,
        committed,
        table.int("group_epoch", None),
        table.int("assignment_epoch", None),
        epochs,
        target,
    )


def _assignment(table: Table, key: str, scope: Scope) -> dict[str, tuple[str, ...]] | None:
    if not table.has(key):
        return None
    raw = table.raw(key)
    if not isinstance(raw, dict):
        raise table.error(key, f'expected a table like {{ c1 = ["t-0"] }}, got {describe(raw)}')
    assignment = {}
    for client, partitions in raw.items():
        _check_client(table, f"{key}.{client}", client, scope)
        if not isinstance(partitions, list):
            raise table.error(f"{key}.{client}", f"expected a list like ['t-0'], got {describe(partitions)}")
        assignment[client] = tuple(sorted(_partition(table, f"{key}.{client}", p, scope) for p in partitions))
    return assignment


def _names(table: Table, key: str, scope: Scope) -> tuple[str, ...] | None:
    if not table.has(key):
        return None
    raw = table.raw(key)
    if not isinstance(raw, list) or any(not isinstance(c, str) for c in raw):
        raise table.error(key, f"expected a list of client ids, got {describe(raw)}")
    for client in raw:
        _check_client(table, key, client, scope)
    return tuple(sorted(raw))


def _check_client(table: Table, key: str, client: Any, scope: Scope) -> None:
    if not any(c.id == client and c.subscribe for c in scope.clients):
        names = ", ".join(c.id for c in scope.clients if c.subscribe) or "(no consumer subscribes)"
        raise table.error(key, f"expected a consumer that subscribes: {names}; got {describe(client)}")


def _partition(table: Table, key: str, label: Any, scope: Scope) -> str:
    return partition_label(table, key, label, scope.topics)


def member_expectation(table: Table, scope: Scope, index: int) -> Expectation:
    member = table.str("member")
    _check_client(table, "member", member, scope)
    raw = table.raw("errors")
    if not isinstance(raw, list) or any(not isinstance(e, str) or not e.isupper() for e in raw):
        raise table.error(
            "errors", f'expected a list of Kafka error names like ["MEMBER_ID_REQUIRED"], got {describe(raw)}'
        )
    return MemberErrors(index, table.path, member, tuple(raw), table.str("api", None, APIS))
