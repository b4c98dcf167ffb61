"""ShareGroupHeartbeat (76), ShareGroupDescribe (77), ShareFetch (78) and ShareAcknowledge (79) over the wire.

Version 1 of each, Kafka 4.1's (KIP-932 share groups; the schemas are in ``minibroker/server/schemas``, as
kafka-python ships none). Topics travel by id (``metadata.topic_id``). The heartbeat and describe go to the
connection's broker's share group coordinator, ShareFetch and ShareAcknowledge to its
``SharePartitionManager``, over the emulated network like every other request. A ShareFetch parked in the
broker's ShareFetch purgatory holds the connection for up to its ``MaxWaitMs`` (plus a grace).
A ShareFetch answer carries, per partition, the whole log batches that hold the acquired records and the
acquired runs (first offset, last offset, delivery count); the client delivers only acquired records.

With an authorizer (``acl_checks``; the group checks are made before these run): ShareGroupDescribe
answers each group the caller may not DESCRIBE with GROUP_AUTHORIZATION_FAILED, and ShareFetch and
ShareAcknowledge answer each partition of a topic it may not READ with TOPIC_AUTHORIZATION_FAILED (its
acknowledgements too) without passing it on, as Kafka's ``KafkaApis`` does.
"""

from __future__ import annotations

import uuid
from typing import Any

from minibroker.broker.share import (
    AcknowledgementBatch,
    ShareAcknowledgeRequest,
    ShareFetchRequest,
)
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.share import ShareGroupDescribeRequest, ShareGroupHeartbeatRequest
from minibroker.coordinator.share.messages import DescribedShareGroup
from minibroker.server import share_messages as w
from minibroker.server.acl_checks import group_denied, topic_denied
from minibroker.server.authorizer import DESCRIBE, READ
from minibroker.server.codec import Request
from minibroker.server.context import RESPONSE_GRACE_MS, Connection
from minibroker.server.groups import client_host
from minibroker.server.metadata import topic_id
from minibroker.server.records import encode_batches

HeartbeatAssignment = w.ShareGroupHeartbeatResponse.Assignment
HeartbeatTopic = HeartbeatAssignment.TopicPartitions
DescribedGroup = w.ShareGroupDescribeResponse.DescribedGroup
DescribedMember = DescribedGroup.Member
DescribedTopic = DescribedMember.Assignment.TopicPartitions
FetchTopic = w.ShareFetchResponse.ShareFetchableTopicResponse
FetchData = FetchTopic.PartitionData
AckTopic = w.ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
AckData = AckTopic.PartitionData


def _wait(conn: Connection) -> int:
    return conn.cluster.brokers[conn.broker_id].config.offsets_commit_timeout_ms + RESPONSE_GRACE_MS


def _names(conn: Connection) -> dict[uuid.UUID, str]:
    return {topic_id(name): name for name in conn.cluster.topics}


async def share_group_heartbeat(request: Request, conn: Connection) -> Any:
    body = request.body
    topics = body.subscribed_topic_names
    message = ShareGroupHeartbeatRequest(
        body.group_id,
        body.member_id,
        body.member_epoch,
        tuple(topics) if topics is not None else None,
        body.rack_id,
        request.client_id or "",
        client_host(conn),
    )
    answer = await conn.call(message, _wait(conn))
    assignment = None
    if answer.assignment is not None:
        assignment = HeartbeatAssignment(
            topic_partitions=[
                HeartbeatTopic(topic_id=topic_id(t), partitions=list(ps))
                for t, ps in answer.assignment.items()
            ]
        )
    return w.ShareGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=answer.error,
        error_message=None,
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval_ms=answer.heartbeat_interval_ms,
        assignment=assignment,
    )


async def share_group_describe(request: Request, conn: Connection) -> Any:
    group_ids = tuple(request.body.group_ids)
    refused = {g for g in group_ids if group_denied(conn, DESCRIBE, g)}
    allowed = tuple(g for g in group_ids if g not in refused)
    described = iter(
        (await conn.call(ShareGroupDescribeRequest(allowed), _wait(conn))).groups if allowed else ()
    )
    answered = [
        DescribedShareGroup(g, Errors.GROUP_AUTHORIZATION_FAILED) if g in refused else next(described)
        for g in group_ids
    ]
    groups = [
        DescribedGroup(
            error_code=g.error,
            error_message=None,
            group_id=g.group_id,
            group_state=g.state,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor_name=g.assignor,
            members=[
                DescribedMember(
                    member_id=m.member_id,
                    rack_id=m.rack_id,
                    member_epoch=m.member_epoch,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    subscribed_topic_names=list(m.subscribed_topics),
                    assignment=DescribedMember.Assignment(
                        topic_partitions=[
                            DescribedTopic(topic_id=topic_id(t), topic_name=t, partitions=list(ps))
                            for t, ps in m.assignment.items()
                        ]
                    ),
                )
                for m in g.members
            ],
            authorized_operations=-2147483648,
        )
        for g in answered
    ]
    return w.ShareGroupDescribeResponse(throttle_time_ms=0, groups=groups)


def _unreadable(conn: Connection, topics: Any, names: dict[uuid.UUID, str]) -> set[uuid.UUID]:
    """The ids of the request's topics the caller may not READ (TOPIC_AUTHORIZATION_FAILED)."""
    return {t.topic_id for t in topics if t.topic_id in names and topic_denied(conn, READ, names[t.topic_id])}


def _acknowledgements(
    topics: Any, names: dict[uuid.UUID, str], unreadable: set[uuid.UUID]
) -> dict[TopicPartition, tuple]:
    acks: dict[TopicPartition, tuple] = {}
    for topic in topics:
        name = names.get(topic.topic_id)
        if name is None or topic.topic_id in unreadable:
            continue
        for part in topic.partitions:
            batches = tuple(
                AcknowledgementBatch(b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                for b in part.acknowledgement_batches
            )
            if batches:
                acks[TopicPartition(name, part.partition_index)] = batches
    return acks


async def share_fetch(request: Request, conn: Connection) -> Any:
    body = request.body
    names = _names(conn)
    if not body.group_id or not body.member_id:
        return w.ShareFetchResponse(
            throttle_time_ms=0,
            error_code=Errors.INVALID_REQUEST,
            error_message="a ShareFetch needs a group id and a member id",
            acquisition_lock_timeout_ms=0,
            responses=[],
            node_endpoints=[],
        )
    unreadable = _unreadable(conn, body.topics, names)
    wanted = [
        TopicPartition(names[t.topic_id], p.partition_index)
        for t in body.topics
        if t.topic_id in names and t.topic_id not in unreadable
        for p in t.partitions
    ]
    forgotten = tuple(
        TopicPartition(names[t.topic_id], p)
        for t in body.forgotten_topics_data
        if t.topic_id in names
        for p in t.partitions
    )
    message = ShareFetchRequest(
        body.group_id or "",
        body.member_id or "",
        body.share_session_epoch,
        body.max_wait_ms,
        tuple(wanted),
        _acknowledgements(body.topics, names, unreadable),
        forgotten,
        body.max_records if body.max_records > 0 else 500,
        body.min_bytes,
        body.max_bytes,
        conn.request_id(request.correlation_id),
    )
    answer = await conn.call(message, max(0, body.max_wait_ms) + RESPONSE_GRACE_MS)
    origin = conn.state.epoch_origin_ms
    topics: dict[uuid.UUID, list] = {}
    for t in body.topics:
        if t.topic_id not in names and answer.error is Errors.NONE:  # Kafka: UNKNOWN_TOPIC_ID per partition
            topics[t.topic_id] = [
                FetchData(
                    partition_index=p.partition_index,
                    error_code=Errors.UNKNOWN_TOPIC_ID,
                    error_message=None,
                    acknowledge_error_code=0,
                    acknowledge_error_message=None,
                    current_leader=FetchData.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                    records=b"",
                    acquired_records=[],
                )
                for p in t.partitions
            ]
    for t in body.topics:
        if t.topic_id in unreadable and answer.error is Errors.NONE:
            topics[t.topic_id] = [
                FetchData(
                    partition_index=p.partition_index,
                    error_code=Errors.TOPIC_AUTHORIZATION_FAILED,
                    error_message=None,
                    acknowledge_error_code=Errors.TOPIC_AUTHORIZATION_FAILED
                    if p.acknowledgement_batches
                    else 0,
                    acknowledge_error_message=None,
                    current_leader=FetchData.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
                    records=b"",
                    acquired_records=[],
                )
                for p in t.partitions
            ]
    leaders: set[int] = set()
    for tp, part in answer.partitions.items():
        leader = FetchData.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
        if part.error is Errors.NOT_LEADER_OR_FOLLOWER:
            current = conn.cluster.leader_of(tp)
            leader = FetchData.LeaderIdAndEpoch(leader_id=current, leader_epoch=-1)
            if current >= 0:
                leaders.add(current)
        topics.setdefault(topic_id(tp.topic), []).append(
            FetchData(
                partition_index=tp.partition,
                error_code=part.error,
                error_message=None,
                acknowledge_error_code=part.acknowledge_error,
                acknowledge_error_message=None,
                current_leader=leader,
                records=encode_batches(part.batches, origin) if part.batches else b"",
                acquired_records=[
                    FetchData.AcquiredRecords(
                        first_offset=r.first_offset,
                        last_offset=r.last_offset,
                        delivery_count=r.delivery_count,
                    )
                    for r in part.acquired
                ],
            )
        )
    return w.ShareFetchResponse(
        throttle_time_ms=0,
        error_code=answer.error,
        error_message=None,
        acquisition_lock_timeout_ms=answer.acquisition_lock_timeout_ms,
        responses=[FetchTopic(topic_id=tid, partitions=parts) for tid, parts in topics.items()],
        node_endpoints=_endpoints(conn, leaders, w.ShareFetchResponse.NodeEndpoint),
    )


async def share_acknowledge(request: Request, conn: Connection) -> Any:
    body = request.body
    names = _names(conn)
    unreadable = _unreadable(conn, body.topics, names)
    message = ShareAcknowledgeRequest(
        body.group_id or "",
        body.member_id or "",
        body.share_session_epoch,
        _acknowledgements(body.topics, names, unreadable),
        conn.request_id(request.correlation_id),
    )
    answer = await conn.call(message, _wait(conn))
    partitions = dict(answer.partitions)
    if answer.error is Errors.NONE:
        for t in body.topics:
            if t.topic_id in unreadable:
                for p in t.partitions:
                    partitions[TopicPartition(names[t.topic_id], p.partition_index)] = (
                        Errors.TOPIC_AUTHORIZATION_FAILED
                    )
    topics: dict[str, list] = {}
    for tp, error in partitions.items():
        topics.setdefault(tp.topic, []).append(
            AckData(
                partition_index=tp.partition,
                error_code=error,
                error_message=None,
                current_leader=AckData.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
            )
        )
    return w.ShareAcknowledgeResponse(
        throttle_time_ms=0,
        error_code=answer.error,
        error_message=None,
        responses=[AckTopic(topic_id=topic_id(name), partitions=parts) for name, parts in topics.items()],
        node_endpoints=[],
    )


def _endpoints(conn: Connection, brokers: set[int], cls: Any) -> list:
    out = []
    for broker in sorted(brokers):
        listener = conn.state.listeners.get(broker)
        if listener is not None:
            out.append(cls(node_id=broker, host=listener[0], port=listener[1], rack=None))
    return out
