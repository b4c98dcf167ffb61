"""DescribeTopicPartitions (KIP-966): topics and partitions a page at a time, with a cursor.

As Kafka's ``DescribeTopicPartitionsRequestHandler`` and
``KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse``:

- no topics named: every topic (those the caller may DESCRIBE), else the named ones;
  only names at or after the cursor's topic, in name order;
- at most ``min(response_partition_limit, max.request.partition.size.limit (2000))``
  partitions (at least 1) per answer, starting at the cursor's partition for its topic;
  when the limit cuts a topic, or is reached before the next topic, ``next_cursor`` names
  where the next request starts;
- a named topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION
  for an illegal name); with an authorizer, a named topic the caller may not DESCRIBE is
  TOPIC_AUTHORIZATION_FAILED with the zero topic id (listed last);
- a cursor whose topic is not among the named topics, or whose partition is negative,
  fails the request: INVALID_REQUEST for every named topic.

Each topic carries its authorized operations (every topic operation without an authorizer);
eligible leader replicas are not modelled (empty lists).
"""

from __future__ import annotations

import uuid

from kafka.protocol.admin import DescribeTopicPartitionsResponse

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.common.topic_names import topic_error
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC
from minibroker.server.acl_checks import topic_denied
from minibroker.server.authorizer import DESCRIBE, TOPIC, to_bitfield
from minibroker.server.codec import Request
from minibroker.server.context import Connection
from minibroker.server.metadata import topic_id

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = Topic.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor
#: Kafka's broker default of max.request.partition.size.limit
MAX_PARTITIONS = 2000
_ZERO_ID = uuid.UUID(int=0)
_INTERNAL = (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC)


async def describe_topic_partitions(request: Request, conn: Connection) -> DescribeTopicPartitionsResponse:
    body = request.body
    cluster = conn.cluster
    cursor = body.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    every = not body.topics
    if every:
        names = sorted(n for n, spec in cluster.topics.items() if not spec.internal and n >= start_topic)
    else:
        names = sorted({t.name for t in body.topics if t.name >= start_topic})
        if cursor is not None and cursor.topic_name not in names:
            return _failed(body)
    if cursor is not None and cursor.partition_index < 0:
        return _failed(body)
    denied = [n for n in names if topic_denied(conn, DESCRIBE, n)]
    remaining = max(min(MAX_PARTITIONS, body.response_partition_limit), 1)
    response = DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=[], next_cursor=None)
    alive = {b.broker_id for b in cluster.brokers if b.alive}
    for name in (n for n in names if n not in denied):
        if remaining == 0:
            response.next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        spec = cluster.topics.get(name)
        if spec is None:
            if not every:
                error = (
                    Errors.INVALID_TOPIC_EXCEPTION if topic_error(name) else Errors.UNKNOWN_TOPIC_OR_PARTITION
                )
                response.topics.append(
                    Topic(
                        error_code=error,
                        name=name,
                        topic_id=_ZERO_ID,
                        is_internal=name in _INTERNAL,
                        partitions=[],
                    )
                )
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        last = min(spec.partitions, first + remaining)
        partitions = [_partition(conn, TopicPartition(name, p), alive) for p in range(first, last)]
        response.topics.append(
            Topic(
                error_code=Errors.NONE,
                name=name,
                topic_id=topic_id(name, conn.cluster),
                is_internal=name in _INTERNAL,
                partitions=partitions,
                topic_authorized_operations=to_bitfield(conn.authorized_operations(TOPIC, name)),
            )
        )
        if last < spec.partitions:
            response.next_cursor = Cursor(topic_name=name, partition_index=last)
            break
        remaining -= len(partitions)
    for name in denied if not every else ():
        error = Errors.TOPIC_AUTHORIZATION_FAILED
        response.topics.append(
            Topic(error_code=error, name=name, topic_id=_ZERO_ID, is_internal=False, partitions=[])
        )
    return response


def _partition(conn: Connection, tp: TopicPartition, alive: set[int]) -> Partition:
    state = conn.cluster.controller.state[tp]
    return Partition(
        error_code=Errors.NONE if state.leader >= 0 else Errors.LEADER_NOT_AVAILABLE,
        partition_index=tp.partition,
        leader_id=state.leader,
        leader_epoch=state.leader_epoch,
        replica_nodes=list(state.replicas),
        isr_nodes=list(state.isr),
        eligible_leader_replicas=[],
        last_known_elr=[],
        offline_replicas=[b for b in state.replicas if b not in alive],
    )


def _failed(body) -> DescribeTopicPartitionsResponse:
    """Kafka's error response for an InvalidRequestException: every named topic with INVALID_REQUEST."""
    topics = [
        Topic(
            error_code=Errors.INVALID_REQUEST,
            name=t.name,
            topic_id=_ZERO_ID,
            is_internal=False,
            partitions=[],
        )
        for t in body.topics
    ]
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics, next_cursor=None)
