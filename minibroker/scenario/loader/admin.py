"""The ``delete_records`` step: an admin client's DeleteRecords on one partition.

``{ at, action = "delete_records", topic, partition = 0, offset, timeout_ms = 30000,
client = "admin", id }``: ``offset`` -1 means the HW. The admin client is made on
first use; its id must not be a producer's or consumer's.
"""

from __future__ import annotations

from minibroker.scenario.loader.document import Table, describe
from minibroker.scenario.loader.limits import MAX_MS
from minibroker.scenario.loader.scope import Scope, check_partition
from minibroker.scenario.model import DeleteRecords, Step

#: the admin client's id when a step names none
DEFAULT_ADMIN = "admin"


def delete_records_step(table: Table, scope: Scope, at: int, index: int, action: str) -> Step:
    client = table.str("client", DEFAULT_ADMIN)
    if any(c.id == client for c in scope.clients):
        raise table.error(
            "client",
            f"{describe(client)} is a {next(c.type for c in scope.clients if c.id == client)}; "
            "expected the name of an admin client (not declared under [[clients]])",
        )
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
