"""The handler of each supported API: ``HANDLERS[api_key](request, connection)``.

A handler returns the response body (a kafka-python response object), None
when the request gets no answer (Produce with acks=0), or raises
``CloseConnection``. Every key in ``codec.SUPPORTED`` has a handler here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from minibroker.server import (
    admin_acls,
    admin_cluster,
    admin_configs,
    admin_log_dirs,
    admin_reassignments,
    admin_scram,
    admin_topics,
    share,
    share_admin,
)
from minibroker.server.codec import SUPPORTED, Request
from minibroker.server.context import Connection
from minibroker.server.describe_topic_partitions import describe_topic_partitions
from minibroker.server.fetch import fetch, list_offsets, offset_for_leader_epoch
from minibroker.server.group_admin import (
    consumer_group_describe,
    delete_groups,
    describe_groups,
    list_groups,
    offset_commit,
    offset_delete,
    offset_fetch,
)
from minibroker.server.groups import (
    consumer_group_heartbeat,
    find_coordinator,
    heartbeat,
    join_group,
    leave_group,
    sync_group,
)
from minibroker.server.metadata import api_versions, metadata
from minibroker.server.produce import init_producer_id, produce
from minibroker.server.transactions import (
    add_offsets_to_txn,
    add_partitions_to_txn,
    describe_producers,
    describe_transactions,
    end_txn,
    list_transactions,
    txn_offset_commit,
    write_txn_markers,
)

Handler = Callable[[Request, Connection], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    0: produce,
    1: fetch,
    2: list_offsets,
    3: metadata,
    18: api_versions,
    22: init_producer_id,
    23: offset_for_leader_epoch,
    8: offset_commit,
    9: offset_fetch,
    10: find_coordinator,
    11: join_group,
    12: heartbeat,
    13: leave_group,
    14: sync_group,
    15: describe_groups,
    16: list_groups,
    42: delete_groups,
    68: consumer_group_heartbeat,
    69: consumer_group_describe,
    19: admin_topics.create_topics,
    20: admin_topics.delete_topics,
    21: admin_cluster.delete_records,
    32: admin_configs.describe,
    37: admin_topics.create_partitions,
    43: admin_cluster.elect_leaders,
    44: admin_configs.incremental_alter,
    33: admin_configs.alter,
    29: admin_acls.describe_acls,
    30: admin_acls.create_acls,
    31: admin_acls.delete_acls,
    34: admin_log_dirs.alter_replica_log_dirs,
    35: admin_log_dirs.describe_log_dirs,
    47: offset_delete,
    55: admin_cluster.describe_quorum,
    75: describe_topic_partitions,
    45: admin_reassignments.alter_partition_reassignments,
    46: admin_reassignments.list_partition_reassignments,
    50: admin_scram.describe_user_scram_credentials,
    51: admin_scram.alter_user_scram_credentials,
    60: admin_cluster.describe_cluster,
    24: add_partitions_to_txn,
    25: add_offsets_to_txn,
    26: end_txn,
    27: write_txn_markers,
    28: txn_offset_commit,
    61: describe_producers,
    65: describe_transactions,
    66: list_transactions,
    76: share.share_group_heartbeat,
    77: share.share_group_describe,
    78: share.share_fetch,
    79: share.share_acknowledge,
    90: share_admin.describe_share_group_offsets,
    91: share_admin.alter_share_group_offsets,
    92: share_admin.delete_share_group_offsets,
}

assert set(HANDLERS) == set(SUPPORTED), "every supported API needs a handler"
