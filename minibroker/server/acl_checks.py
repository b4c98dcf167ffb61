"""Where Kafka's ``KafkaApis`` checks ACLs, and with which error, when an authorizer is set.

Whole-request checks (``denied``) are made before the handler runs; a denied
request gets the API's error response with the authorization error, as Kafka's
``authorizeClusterOperation`` / group checks answer:

- ElectLeaders: ALTER on the cluster; DescribeCluster: DESCRIBE on the cluster
  (CLUSTER_AUTHORIZATION_FAILED);
- JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, TxnOffsetCommit: READ on
  the group; OffsetFetch (one group, before v8) and FindCoordinator for a group:
  DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED); FindCoordinator for a
  transactional id: DESCRIBE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
- InitProducerId: WRITE on the transactional id, or without one IDEMPOTENT_WRITE on
  the cluster or WRITE on some topic (CLUSTER_AUTHORIZATION_FAILED);
- a transactional Produce, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit: WRITE
  on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), checked first;
- share groups (KIP-932): ShareGroupHeartbeat, ShareFetch, ShareAcknowledge and AlterShareGroupOffsets
  READ on the group, DeleteShareGroupOffsets DELETE on it (GROUP_AUTHORIZATION_FAILED); a
  ShareGroupHeartbeat's subscribed topics DESCRIBE each (TOPIC_AUTHORIZATION_FAILED).

In a batched FindCoordinator (v4+) or OffsetFetch (v8+) each group (or transactional id) the
authorizer refuses gets its own error in the answer (``restrict_groups``).

The per-topic, per-group and per-resource checks are the handlers' (``topic_denied``,
``config_denied``): Produce WRITE, Fetch READ, Metadata and ListOffsets DESCRIBE,
CreateTopics CREATE (on the cluster or the topic), DeleteTopics and DeleteRecords
DELETE, CreatePartitions ALTER, DescribeConfigs DESCRIBE_CONFIGS and the alters
ALTER_CONFIGS (topics, groups, or the cluster for brokers, loggers and client
metrics), DescribeGroups DESCRIBE and DeleteGroups DELETE on each group, ListGroups DESCRIBE on the
cluster or on each group it lists; OffsetCommit READ on each topic (``error_responses.handle``);
ShareGroupDescribe and DescribeShareGroupOffsets DESCRIBE on each group, ShareFetch, ShareAcknowledge,
AlterShareGroupOffsets and DeleteShareGroupOffsets READ on each topic, DescribeShareGroupOffsets DESCRIBE
on each topic (``server.share``, ``server.share_admin``).
"""

from __future__ import annotations

from typing import Any

from minibroker.common.errors import Errors
from minibroker.server.authorizer import (
    ALTER,
    CLUSTER,
    CLUSTER_NAME,
    DELETE,
    DESCRIBE,
    GROUP,
    IDEMPOTENT_WRITE,
    READ,
    TOPIC,
    TRANSACTIONAL_ID,
    WRITE,
)
from minibroker.server.codec import Request
from minibroker.server.context import Connection

#: Kafka's default messages of the authorization errors
MESSAGES = {
    Errors.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    Errors.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    Errors.CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Transactional Id authorization failed.",
}
#: the config resource types (DescribeConfigs, ...) -> the ACL resource and its error
_CONFIG_RESOURCES = {
    2: (TOPIC, Errors.TOPIC_AUTHORIZATION_FAILED),
    32: (GROUP, Errors.GROUP_AUTHORIZATION_FAILED),
}
_GROUP_READ = (
    11,
    12,
    13,
    14,
    8,
    28,
)  # JoinGroup, Heartbeat, LeaveGroup, SyncGroup, OffsetCommit, TxnOffsetCommit

#: ShareGroupHeartbeat, ShareFetch, ShareAcknowledge, AlterShareGroupOffsets, DeleteShareGroupOffsets -> the
#: operation each needs on its group
_SHARE_GROUP_OPERATION = {76: READ, 78: READ, 79: READ, 91: READ, 92: DELETE}


def enforced(conn: Connection) -> bool:
    return bool(conn.cluster.brokers[conn.broker_id].config.authorizer_class_name)


def denied(request: Request, conn: Connection) -> Errors | None:
    """The authorization error that answers the whole request, or None (module docstring)."""
    if not enforced(conn):
        return None
    key, body = request.api_key, request.body
    transactional_id = _transactional_id(request)
    if transactional_id is not None and not conn.authorize(WRITE, TRANSACTIONAL_ID, transactional_id):
        return Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if key in (43, 60):
        operation = ALTER if key == 43 else DESCRIBE
        return (
            None if conn.authorize(operation, CLUSTER, CLUSTER_NAME) else Errors.CLUSTER_AUTHORIZATION_FAILED
        )
    if key in _GROUP_READ:
        return None if conn.authorize(READ, GROUP, body.group_id) else Errors.GROUP_AUTHORIZATION_FAILED
    if key in _SHARE_GROUP_OPERATION:
        if not conn.authorize(_SHARE_GROUP_OPERATION[key], GROUP, body.group_id):
            return Errors.GROUP_AUTHORIZATION_FAILED
        topics = body.subscribed_topic_names if key == 76 else None
        if topics and any(not conn.authorize(DESCRIBE, TOPIC, name) for name in topics):
            return Errors.TOPIC_AUTHORIZATION_FAILED
        return None
    if key == 9 and request.api_version < 8:
        return None if conn.authorize(DESCRIBE, GROUP, body.group_id) else Errors.GROUP_AUTHORIZATION_FAILED
    if key == 10 and request.api_version < 4:
        if body.key_type == 1:
            allowed = conn.authorize(DESCRIBE, TRANSACTIONAL_ID, body.key)
            return None if allowed else Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None if conn.authorize(DESCRIBE, GROUP, body.key) else Errors.GROUP_AUTHORIZATION_FAILED
    if key == 22:
        if body.transactional_id is not None:
            allowed = conn.authorize(WRITE, TRANSACTIONAL_ID, body.transactional_id)
            return None if allowed else Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        if conn.authorize(IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME):
            return None
        if any(conn.authorize(WRITE, TOPIC, name) for name in conn.cluster.topics):
            return None
        return Errors.CLUSTER_AUTHORIZATION_FAILED
    return None


def _transactional_id(request: Request) -> str | None:
    """The transactional id a Produce or a transaction API writes for (WRITE on it is needed)."""
    key, body = request.api_key, request.body
    if key == 24:
        return body.v3_and_below_transactional_id
    if key in (0, 25, 26, 28):
        return body.transactional_id
    return None


def topic_denied(conn: Connection, operation: int, topic: str) -> bool:
    """Whether ``operation`` on ``topic`` is refused (TOPIC_AUTHORIZATION_FAILED)."""
    return enforced(conn) and not conn.authorize(operation, TOPIC, topic)


def group_denied(conn: Connection, operation: int, group: str) -> bool:
    return enforced(conn) and not conn.authorize(operation, GROUP, group)


def config_denied(conn: Connection, operation: int, resource_type: int, name: str) -> Errors | None:
    """The error for DESCRIBE_CONFIGS / ALTER_CONFIGS on a config resource, or None when allowed."""
    if not enforced(conn):
        return None
    acl_type, error = _CONFIG_RESOURCES.get(resource_type, (CLUSTER, Errors.CLUSTER_AUTHORIZATION_FAILED))
    acl_name = CLUSTER_NAME if acl_type == CLUSTER else name
    return None if conn.authorize(operation, acl_type, acl_name) else error


def restrict_groups(request: Request, conn: Connection, response: Any) -> None:
    """A batched FindCoordinator's or OffsetFetch's refused keys answered with their authorization error."""
    if request.api_key == 10 and request.api_version >= 4:
        transactional = request.body.key_type == 1
        for coordinator in response.coordinators:
            if transactional:
                refused = not conn.authorize(DESCRIBE, TRANSACTIONAL_ID, coordinator.key)
                error = Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            else:
                refused = not conn.authorize(DESCRIBE, GROUP, coordinator.key)
                error = Errors.GROUP_AUTHORIZATION_FAILED
            if refused:
                coordinator.error_code, coordinator.error_message = error, MESSAGES[error]
                coordinator.node_id, coordinator.host, coordinator.port = -1, "", -1
    elif request.api_key == 9 and request.api_version >= 8:
        for group in response.groups:
            if not conn.authorize(DESCRIBE, GROUP, group.group_id):
                group.error_code, group.topics = Errors.GROUP_AUTHORIZATION_FAILED, []
