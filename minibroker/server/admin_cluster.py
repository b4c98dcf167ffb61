"""DescribeCluster, ElectLeaders, DeleteRecords and DescribeQuorum over the wire.

- DescribeCluster: the live brokers at their listeners, the controller id (the
  lowest live broker, as Metadata says), and with ``include_fenced_brokers`` (v2)
  the down ones too, ``is_fenced``. Asking for controller endpoints (v1+,
  endpoint type 2) is UNSUPPORTED_ENDPOINT_TYPE, as a broker answers. With
  ``include_cluster_authorized_operations`` the cluster's bitfield (``acl_checks``).
- ElectLeaders: per partition (all partitions when the list is null, then without
  the ELECTION_NOT_NEEDED ones) a preferred election, or an unclean one (v1+), sent to
  this broker over the emulated network: the controller elects at once and the answer
  waits in the broker's ElectLeader purgatory until every elected leader is in its
  metadata, at most ``timeout_ms`` (then REQUEST_TIMED_OUT for the partitions still waiting).
- DescribeQuorum: the emulated controller as a one-voter KRaft quorum of
  ``__cluster_metadata``-0 (Kafka's ``KafkaRaftClient.handleDescribeQuorumRequest``):
  the voter and leader is the controller (the lowest live broker, leader epoch 1), the
  live brokers are observers; every replica's log end offset is the high watermark, the
  count of metadata changes the controller made (ISR commits and elections), and their
  last fetch and caught-up times are now. Another topic or partition is
  UNKNOWN_TOPIC_OR_PARTITION; with an authorizer DESCRIBE on the cluster is needed.
  v2 lists each voter's node with a ``CONTROLLER`` listener at its broker's address.
- DeleteRecords: one emulated DeleteRecords request to this broker over the
  emulated network; the broker answers for the partitions it leads
  (NOT_LEADER_OR_FOLLOWER for the others) once its DeleteRecords purgatory lets it.
"""

from __future__ import annotations

from kafka.protocol.admin import (
    DeleteRecordsResponse,
    DescribeClusterResponse,
    DescribeQuorumResponse,
    ElectLeadersResponse,
)

from minibroker.common.errors import Errors
from minibroker.common.messages import DeleteRecordsRequest, ElectLeadersRequest, TopicPartition
from minibroker.server import acl_checks
from minibroker.server.acl_checks import topic_denied
from minibroker.server.authorizer import CLUSTER, CLUSTER_NAME, DELETE, DESCRIBE
from minibroker.server.codec import Request
from minibroker.server.context import RESPONSE_GRACE_MS, Connection
from minibroker.sim.topic_admin import PREFERRED

ClusterBroker = DescribeClusterResponse.DescribeClusterBroker
ElectionResult = ElectLeadersResponse.ReplicaElectionResult
ElectionPartition = ElectionResult.PartitionResult
DeletedTopic = DeleteRecordsResponse.DeleteRecordsTopicResult
DeletedPartition = DeletedTopic.DeleteRecordsPartitionResult

#: Kafka's UNSUPPORTED_ENDPOINT_TYPE error code; endpoint type 1 is BROKER, 2 CONTROLLER
UNSUPPORTED_ENDPOINT_TYPE = 124
BROKER_ENDPOINTS = 1


async def describe_cluster(request: Request, conn: Connection) -> DescribeClusterResponse:
    body = request.body
    version = request.api_version
    cluster = conn.cluster
    alive = [b.broker_id for b in cluster.brokers if b.alive]
    response = DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=Errors.NONE,
        error_message=None,
        cluster_id=conn.state.cluster_id,
        controller_id=alive[0] if alive else -1,
        brokers=[],
        authorized_operations=None,  # not asked for: -2^31 on the wire
    )
    if body.include_cluster_authorized_operations:
        response.authorized_operations = conn.authorized_operations(CLUSTER, CLUSTER_NAME)
    if version >= 1:
        response.endpoint_type = body.endpoint_type
        if body.endpoint_type != BROKER_ENDPOINTS:
            response.error_code = UNSUPPORTED_ENDPOINT_TYPE
            response.error_message = "The request was sent to an endpoint of type BROKER"
            return response
    fenced = version >= 2 and bool(body.include_fenced_brokers)
    for broker in cluster.brokers:
        if (broker.alive or fenced) and broker.broker_id in conn.state.listeners:
            host, port = conn.state.listeners[broker.broker_id]
            entry = ClusterBroker(broker_id=broker.broker_id, host=host, port=port, rack=None)
            if version >= 2:
                entry.is_fenced = not broker.alive
            response.brokers.append(entry)
    return response


async def elect_leaders(request: Request, conn: Connection) -> ElectLeadersResponse:
    body = request.body
    version = request.api_version
    cluster = conn.cluster
    election = body.election_type if version >= 1 else PREFERRED
    everything = body.topic_partitions is None
    if everything:
        asked = [tp for tp in sorted(cluster.controller.state) if not cluster.topics[tp.topic].internal]
    else:
        asked = [TopicPartition(t.topic, p) for t in body.topic_partitions for p in t.partitions]
    timeout_ms = max(0, body.timeout_ms)
    message = ElectLeadersRequest(tuple(asked), election, timeout_ms, conn.request_id(request.correlation_id))
    answer = await conn.call(message, timeout_ms + RESPONSE_GRACE_MS)
    by_topic: dict[str, list] = {}
    for tp in asked:
        part = answer.partitions[tp]
        if everything and part.error is Errors.ELECTION_NOT_NEEDED:
            continue
        by_topic.setdefault(tp.topic, []).append(
            ElectionPartition(partition_id=tp.partition, error_code=part.error, error_message=part.message)
        )
    response = ElectLeadersResponse(
        throttle_time_ms=0,
        replica_election_results=[
            ElectionResult(topic=topic, partition_result=parts) for topic, parts in by_topic.items()
        ],
    )
    if version >= 1:
        response.error_code = Errors.NONE
    return response


async def delete_records(request: Request, conn: Connection) -> DeleteRecordsResponse:
    body = request.body
    denied = {t.name for t in body.topics if topic_denied(conn, DELETE, t.name)}
    offsets = {
        TopicPartition(t.name, p.partition_index): p.offset
        for t in body.topics
        if t.name not in denied
        for p in t.partitions
    }
    timeout_ms = max(0, body.timeout_ms)
    message = DeleteRecordsRequest(offsets, timeout_ms, conn.request_id(request.correlation_id))
    answer = await conn.call(message, timeout_ms + RESPONSE_GRACE_MS)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.name in denied:
                parts.append(
                    DeletedPartition(
                        partition_index=p.partition_index,
                        low_watermark=-1,
                        error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                    )
                )
                continue
            part = answer.partitions[TopicPartition(t.name, p.partition_index)]
            parts.append(
                DeletedPartition(
                    partition_index=p.partition_index, low_watermark=part.low_watermark, error_code=part.error
                )
            )
        topics.append(DeletedTopic(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)


METADATA_TOPIC = "__cluster_metadata"
QuorumTopic = DescribeQuorumResponse.TopicData
QuorumPartition = QuorumTopic.PartitionData
ReplicaState = QuorumPartition.ReplicaState
QuorumNode = DescribeQuorumResponse.Node
_ZERO_DIRECTORY = "00000000-0000-0000-0000-000000000000"


async def describe_quorum(request: Request, conn: Connection) -> DescribeQuorumResponse:
    version = request.api_version
    response = DescribeQuorumResponse(error_code=Errors.NONE, topics=[])
    if version >= 2:
        response.error_message, response.nodes = None, []
    if topic_denied_cluster(conn):
        response.error_code = Errors.CLUSTER_AUTHORIZATION_FAILED
        return response
    cluster = conn.cluster
    alive = [b.broker_id for b in cluster.brokers if b.alive]
    leader = alive[0] if alive else -1
    hw = cluster.controller.isr_commits + cluster.controller.elections
    now = conn.state.epoch_origin_ms + cluster.now()

    def replica(broker: int) -> ReplicaState:
        state = ReplicaState(replica_id=broker, log_end_offset=hw)
        if version >= 1:
            state.last_fetch_timestamp = state.last_caught_up_timestamp = now
        if version >= 2:
            state.replica_directory_id = _ZERO_DIRECTORY
        return state

    for t in request.body.topics:
        parts = []
        for p in t.partitions:
            part = QuorumPartition(partition_index=p.partition_index, error_code=Errors.NONE)
            if (t.topic_name, p.partition_index) != (METADATA_TOPIC, 0) or leader < 0:
                part.error_code = (
                    Errors.UNKNOWN_TOPIC_OR_PARTITION if leader >= 0 else Errors.NOT_LEADER_OR_FOLLOWER
                )
                part.leader_id, part.leader_epoch, part.high_watermark = -1, -1, -1
                part.current_voters, part.observers = [], []
            else:
                part.leader_id, part.leader_epoch, part.high_watermark = leader, 1, hw
                part.current_voters = [replica(leader)]
                part.observers = [replica(b) for b in alive if b != leader]
            if version >= 2:
                part.error_message = None
            parts.append(part)
        response.topics.append(QuorumTopic(topic_name=t.topic_name, partitions=parts))
    if version >= 2 and leader >= 0 and leader in conn.state.listeners:
        host, port = conn.state.listeners[leader]
        response.nodes = [
            QuorumNode(
                node_id=leader, listeners=[QuorumNode.Listener(name="CONTROLLER", host=host, port=port)]
            )
        ]
    return response


def topic_denied_cluster(conn: Connection) -> bool:
    """Whether an authorizer refuses DESCRIBE on the cluster."""
    return acl_checks.enforced(conn) and not conn.authorize(DESCRIBE, CLUSTER, CLUSTER_NAME)
