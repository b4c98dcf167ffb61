"""The admin steps: an admin client's DeleteRecords or ElectLeaders on one partition.

``{ at, action = "delete_records", topic, partition = 0, offset, timeout_ms = 30000,
client = "admin", id }``: ``offset`` -1 means the HW.
``{ at, action = "elect_leaders", topic, partition = 0, election = "preferred", timeout_ms = 30000,
broker, client = "admin", id }``: ``election`` is ``preferred`` or ``unclean``; the request goes
to ``broker`` (default: the lowest live broker, the node Metadata names as the controller).
``{ at, action = "list_offsets", topic, partition = 0, timestamp, client = "admin", id }``:
``timestamp`` is a time in ms or ``earliest``, ``latest``, ``earliest_local``, ``latest_tiered``;
``client`` may also name a consumer.
The admin client is made on first use; its id must not be a producer's (nor, but for
``list_offsets``, a consumer's).
"""

from __future__ import annotations

from minibroker.common.messages import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
)
from minibroker.scenario.loader.document import Table, describe
from minibroker.scenario.loader.limits import MAX_MS
from minibroker.scenario.loader.scope import Scope, check_partition
from minibroker.scenario.loader.scope import broker as check_broker
from minibroker.scenario.model import DeleteRecords, ElectLeaders, ListOffsets, Step

#: the admin client's id when a step names none
DEFAULT_ADMIN = "admin"


#: ElectLeaders' election types by name (Kafka's ElectionType)
ELECTIONS = {"preferred": 0, "unclean": 1}

#: ListOffsets' special timestamps by name (Kafka's ListOffsetsRequest constants)
TIMESTAMPS = {
    "earliest": EARLIEST_TIMESTAMP,
    "latest": LATEST_TIMESTAMP,
    "earliest_local": EARLIEST_LOCAL_TIMESTAMP,
    "latest_tiered": LATEST_TIERED_TIMESTAMP,
}


def _admin_client(table: Table, scope: Scope, consumer: bool = False) -> str:
    client = table.str("client", DEFAULT_ADMIN)
    kinds = ("consumer",) if consumer else ()
    if any(c.id == client and c.type not in kinds for c in scope.clients):
        raise table.error(
            "client",
            f"{describe(client)} is a {next(c.type for c in scope.clients if c.id == client)}; "
            "expected the name of an admin client (not declared under [[clients]])"
            + (" or of a consumer" if consumer else ""),
        )
    return client


def delete_records_step(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    client = _admin_client(table, scope)
    topic, partition = check_partition(
        table, "topic", table.str("topic"), table.int("partition", 0), scope.topics
    )
    return DeleteRecords(
        at,
        index,
        client,
        topic,
        partition,
        table.int("offset", what="an offset (-1: the high watermark)", minimum=-1),
        table.int("timeout_ms", 30_000, 0, maximum=MAX_MS),
        table.str("id", None),
    )


def elect_leaders_step(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    client = _admin_client(table, scope)
    topic, partition = check_partition(
        table, "topic", table.str("topic"), table.int("partition", 0), scope.topics
    )
    election = table.str("election", "preferred", choices=tuple(ELECTIONS))
    broker = check_broker(table, scope.cluster) if table.has("broker") else None
    return ElectLeaders(
        at,
        index,
        client,
        topic,
        partition,
        ELECTIONS[election],
        table.int("timeout_ms", 30_000, 0, maximum=MAX_MS),
        broker,
        table.str("id", None),
    )


def list_offsets_step(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    client = _admin_client(table, scope, consumer=True)
    topic, partition = check_partition(
        table, "topic", table.str("topic"), table.int("partition", 0), scope.topics
    )
    raw = table.raw("timestamp")
    if isinstance(raw, str) and raw in TIMESTAMPS:
        timestamp = TIMESTAMPS[raw]
    elif isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw <= MAX_MS:
        timestamp = raw
    else:
        raise table.error(
            "timestamp",
            f"expected a time in ms >= 0 or one of {', '.join(TIMESTAMPS)}, got {describe(raw)}",
        )
    return ListOffsets(at, index, client, topic, partition, timestamp, table.str("id", None))
