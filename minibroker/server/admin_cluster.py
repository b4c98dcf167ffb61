"""DescribeCluster, ElectLeaders and DeleteRecords over the wire.

- DescribeCluster: the live brokers at their listeners, the controller id (the
  lowest live broker, as Metadata says), and with ``include_fenced_brokers`` (v2)
  the down ones too, ``is_fenced``. Asking for controller endpoints (v1+,
  endpoint type 2) is UNSUPPORTED_ENDPOINT_TYPE, as a broker answers. No
  authorizer: authorized operations are never reported.
- ElectLeaders: per partition (all partitions when the list is null, then without
  the ELECTION_NOT_NEEDED ones) a preferred election, or an unclean one (v1+), sent to
  this broker over the emulated network: the controller elects at once and the answer
  waits in the broker's ElectLeader purgatory until every elected leader is in its
  metadata, at most ``timeout_ms`` (then REQUEST_TIMED_OUT for the partitions still waiting).
- DeleteRecords: one emulated DeleteRecords request to this broker over the
  emulated network; the broker answers for the partitions it leads
  (NOT_LEADER_OR_FOLLOWER for the others) once its DeleteRecords purgatory lets it.
"""

from __future__ import annotations

from kafka.protocol.admin import DeleteRecordsResponse, DescribeClusterResponse, ElectLeadersResponse

from minibroker.common.errors import Errors
from minibroker.common.messages import DeleteRecordsRequest, ElectLeadersRequest, TopicPartition
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
        authorized_operations=None,  # not reported (-2^31 on the wire)
    )
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
    offsets = {TopicPartition(t.name, p.partition_index): p.offset for t in body.topics for p in t.partitions}
    timeout_ms = max(0, body.timeout_ms)
    message = DeleteRecordsRequest(offsets, timeout_ms, conn.request_id(request.correlation_id))
    answer = await conn.call(message, timeout_ms + RESPONSE_GRACE_MS)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            part = answer.partitions[TopicPartition(t.name, p.partition_index)]
            parts.append(
                DeletedPartition(
                    partition_index=p.partition_index, low_watermark=part.low_watermark, error_code=part.error
                )
            )
        topics.append(DeletedTopic(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
