"""AlterPartitionReassignments and ListPartitionReassignments over the wire (KIP-455).

As KRaft's ``ReplicationControlManager`` answers them (the checks in ``topic_admin``,
the moves in the controller):

- AlterPartitionReassignments (v0-v1) needs ALTER on the cluster (else
  CLUSTER_AUTHORIZATION_FAILED for the whole request). Per partition: a target list
  starts or replaces a move, null cancels one (NO_REASSIGNMENT_IN_PROGRESS when none
  is under way); UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty,
  duplicate or unknown brokers), and with v1's ``allow_replication_factor_change``
  false a target of another size is INVALID_REPLICATION_FACTOR. The answer comes when
  the move has started; it completes later, when the adding replicas are in the ISR.
- ListPartitionReassignments (v0) needs DESCRIBE on the cluster: the ongoing moves
  (all, or of the asked partitions) with their replicas, adding and removing replicas;
  unknown topics and partitions without a move are left out.
"""

from __future__ import annotations

from kafka.protocol.admin import AlterPartitionReassignmentsResponse, ListPartitionReassignmentsResponse

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.server import acl_checks
from minibroker.server.authorizer import ALTER, CLUSTER, CLUSTER_NAME, DESCRIBE
from minibroker.server.codec import Request
from minibroker.server.context import Connection
from minibroker.sim import topic_admin
from minibroker.sim.topic_admin import AdminError

AlteredTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
AlteredPartition = AlteredTopic.ReassignablePartitionResponse
OngoingTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
OngoingPartition = OngoingTopic.OngoingPartitionReassignment


def _denied(conn: Connection, operation: int) -> bool:
    return acl_checks.enforced(conn) and not conn.authorize(operation, CLUSTER, CLUSTER_NAME)


async def alter_partition_reassignments(
    request: Request, conn: Connection
) -> AlterPartitionReassignmentsResponse:
    body = request.body
    allow_rf_change = body.allow_replication_factor_change if request.api_version >= 1 else True
    response = AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=Errors.NONE, error_message=None, responses=[]
    )
    if request.api_version >= 1:
        response.allow_replication_factor_change = allow_rf_change
    if _denied(conn, ALTER):
        response.error_code = Errors.CLUSTER_AUTHORIZATION_FAILED
        response.error_message = "The request needs ALTER on the cluster."
        return response
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            error, message = Errors.NONE, None
            try:
                topic_admin.alter_reassignment(
                    conn.cluster, TopicPartition(topic.name, p.partition_index), p.replicas, allow_rf_change
                )
            except AdminError as refused:
                error, message = refused.error, str(refused)
            parts.append(
                AlteredPartition(partition_index=p.partition_index, error_code=error, error_message=message)
            )
        response.responses.append(AlteredTopic(name=topic.name, partitions=parts))
    return response


async def list_partition_reassignments(
    request: Request, conn: Connection
) -> ListPartitionReassignmentsResponse:
    body = request.body
    response = ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=Errors.NONE, error_message=None, topics=[]
    )
    if _denied(conn, DESCRIBE):
        response.error_code = Errors.CLUSTER_AUTHORIZATION_FAILED
        response.error_message = "The request needs DESCRIBE on the cluster."
        return response
    asked = (
        None
        if body.topics is None
        else [TopicPartition(t.name, p) for t in body.topics for p in t.partition_indexes]
    )
    by_topic: dict[str, list] = {}
    for tp, replicas, adding, removing in topic_admin.list_reassignments(conn.cluster, asked):
        by_topic.setdefault(tp.topic, []).append(
            OngoingPartition(
                partition_index=tp.partition,
                replicas=list(replicas),
                adding_replicas=list(adding),
                removing_replicas=list(removing),
            )
        )
    response.topics = [OngoingTopic(name=name, partitions=parts) for name, parts in by_topic.items()]
    return response
