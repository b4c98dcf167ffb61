"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat and LeaveGroup over the wire.

FindCoordinator answers from the controller's state, like Metadata: the leader of
the group's partition, or COORDINATOR_NOT_AVAILABLE while it has none. The request
that finds no ``__consumer_offsets`` creates it and answers COORDINATOR_NOT_AVAILABLE
for its group keys, as Kafka does (its creation is asynchronous there; clients ask
again after their backoff). v4+ takes a batch of keys. Transactional ids (key type
1) are located the same way on ``__transaction_state``, created by the first such request.

The group requests travel to the connection's broker over the emulated network
(latency, dropped links and crashes apply) and its ``GroupCoordinator`` answers,
NOT_COORDINATOR if it does not lead the group's partition. A JoinGroup may be
parked for up to its rebalance timeout (the initial rebalance delay included):
the connection waits that long plus a grace, and, as in Kafka, answers nothing
else meanwhile. JoinGroup v0-v3 members get their id at once (no KIP-394 round).

ConsumerGroupHeartbeat (KIP-848, v0-v1) names topics by id on the wire: the ids are
the ones Metadata gives (``metadata.topic_id``); owned partitions of an unknown id
are left out, and the assignment is answered with ids.
"""

from __future__ import annotations

from kafka.protocol.consumer import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    SyncGroupResponse,
)
from kafka.protocol.metadata import FindCoordinatorResponse

from minibroker.common.errors import Errors
from minibroker.coordinator.group import OFFSETS_TOPIC
from minibroker.coordinator.group import messages as m
from minibroker.coordinator.transaction import TRANSACTION_STATE_TOPIC
from minibroker.server.codec import Request
from minibroker.server.context import RESPONSE_GRACE_MS, Connection
from minibroker.server.metadata import topic_id
from minibroker.server.schemas import ConsumerGroupHeartbeatResponse

Coordinator = FindCoordinatorResponse.Coordinator
GROUP_KEY = 0
TRANSACTION_KEY = 1


def client_host(conn: Connection) -> str:
    """The client's address as Kafka shows it (``/127.0.0.1``)."""
    return "/" + conn.peer.rsplit(":", 1)[0].strip("[]")


async def find_coordinator(request: Request, conn: Connection) -> FindCoordinatorResponse:
    body = request.body
    version = request.api_version
    key_type = body.key_type if version >= 1 else GROUP_KEY
    keys = list(body.coordinator_keys) if version >= 4 else [body.key]
    if key_type == GROUP_KEY:
        creating = OFFSETS_TOPIC not in conn.cluster.topics
        if creating:
            conn.cluster.ensure_offsets_topic()
    else:
        creating = TRANSACTION_STATE_TOPIC not in conn.cluster.topics
        if creating and key_type == TRANSACTION_KEY:
            conn.cluster.ensure_transaction_state_topic()
    found = [_locate(conn, key, key_type, creating) for key in keys]
    if version >= 4:
        coordinators = [
            Coordinator(key=key, node_id=node, host=host, port=port, error_code=error, error_message=message)
            for key, (error, message, node, host, port) in zip(keys, found, strict=False)
        ]
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
    error, message, node, host, port = found[0]
    return FindCoordinatorResponse(
        throttle_time_ms=0, error_code=error, error_message=message, node_id=node, host=host, port=port
    )


def _locate(
    conn: Connection, key: str, key_type: int, creating: bool
) -> tuple[int, str | None, int, str, int]:
    """(error, message, node, host, port) for one key."""
    unavailable = Errors.COORDINATOR_NOT_AVAILABLE
    if key_type not in (GROUP_KEY, TRANSACTION_KEY):
        return Errors.INVALID_REQUEST, f"unknown coordinator key type {key_type}", -1, "", -1
    topic = OFFSETS_TOPIC if key_type == GROUP_KEY else TRANSACTION_STATE_TOPIC
    if creating:
        return unavailable, f"{topic} is being created", -1, "", -1
    if key_type == GROUP_KEY:
        broker = conn.cluster.coordinator_for(key)
    else:
        broker = conn.cluster.transaction_coordinator_for(key)
    listener = conn.state.listeners.get(broker)
    if broker < 0 or listener is None or not conn.cluster.brokers[broker].alive:
        return unavailable, f"the key's {topic} partition has no leader", -1, "", -1
    return Errors.NONE, None, broker, listener[0], listener[1]


async def join_group(request: Request, conn: Connection) -> JoinGroupResponse:
    body = request.body
    version = request.api_version
    rebalance = body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
    message = m.JoinGroupRequest(
        body.group_id,
        body.member_id,
        body.session_timeout_ms,
        rebalance,
        body.protocol_type,
        tuple((p.name, bytes(p.metadata)) for p in body.protocols),
        instance_id=body.group_instance_id if version >= 5 else None,
        client_id=request.client_id or "",
        client_host=client_host(conn),
        require_known_member_id=version >= 4,
        reason=body.reason if version >= 8 else None,
    )
    wait = max(rebalance, body.session_timeout_ms, 0) + RESPONSE_GRACE_MS
    answer: m.JoinGroupResponse = await conn.call(message, wait)
    members = [
        JoinGroupResponse.JoinGroupResponseMember(
            member_id=x.member_id, group_instance_id=x.instance_id, metadata=x.metadata
        )
        for x in answer.members
    ]
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=answer.error,
        generation_id=answer.generation_id,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name if (answer.protocol_name is not None or version >= 7) else "",
        leader=answer.leader,
        skip_assignment=answer.skip_assignment,
        member_id=answer.member_id,
        members=members,
    )


async def sync_group(request: Request, conn: Connection) -> SyncGroupResponse:
    body = request.body
    version = request.api_version
    message = m.SyncGroupRequest(
        body.group_id,
        body.generation_id,
        body.member_id,
        tuple((a.member_id, bytes(a.assignment)) for a in body.assignments),
        instance_id=body.group_instance_id if version >= 3 else None,
        protocol_type=body.protocol_type if version >= 5 else None,
        protocol_name=body.protocol_name if version >= 5 else None,
    )
    answer: m.SyncGroupResponse = await conn.call(message, _coordinator_wait(conn))
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=answer.error,
        protocol_type=answer.protocol_type,
        protocol_name=answer.protocol_name,
        assignment=answer.assignment,
    )


async def heartbeat(request: Request, conn: Connection) -> HeartbeatResponse:
    body = request.body
    message = m.HeartbeatRequest(
        body.group_id,
        body.generation_id,
        body.member_id,
        body.group_instance_id if request.api_version >= 3 else None,
    )
    answer: m.HeartbeatResponse = await conn.call(message, _coordinator_wait(conn))
    return HeartbeatResponse(throttle_time_ms=0, error_code=answer.error)


async def leave_group(request: Request, conn: Connection) -> LeaveGroupResponse:
    body = request.body
    version = request.api_version
    if version >= 3:
        leaving = tuple(
            m.LeavingMember(x.member_id, x.group_instance_id, x.reason if version >= 5 else None)
            for x in body.members
        )
    else:
        leaving = (m.LeavingMember(body.member_id),)
    answer: m.LeaveGroupResponse = await conn.call(
        m.LeaveGroupRequest(body.group_id, leaving), _coordinator_wait(conn)
    )
    error = answer.error
    if version < 3 and error is Errors.NONE and answer.members:
        error = answer.members[0][2]  # Kafka: the one member's error becomes the top-level one
    members = [
        LeaveGroupResponse.MemberResponse(member_id=mid, group_instance_id=iid, error_code=e)
        for mid, iid, e in answer.members
    ]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=members)


def _coordinator_wait(conn: Connection) -> int:
    """How long a connection waits for a group answer that involves a write."""
    return conn.cluster.brokers[conn.broker_id].config.offsets_commit_timeout_ms + RESPONSE_GRACE_MS


async def consumer_group_heartbeat(request: Request, conn: Connection) -> ConsumerGroupHeartbeatResponse:
    body = request.body
    version = request.api_version
    owned = None
    if body.topic_partitions is not None:
        names = {topic_id(name): name for name in conn.cluster.topics}
        owned = tuple(
            (names[tp.topic_id], tuple(tp.partitions)) for tp in body.topic_partitions if tp.topic_id in names
        )
    message = m.ConsumerGroupHeartbeatRequest(
        body.group_id,
        body.member_id,
        body.member_epoch,
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=body.rebalance_timeout_ms,
        subscribed_topic_names=None
        if body.subscribed_topic_names is None
        else tuple(body.subscribed_topic_names),
        subscribed_topic_regex=body.subscribed_topic_regex if version >= 1 else None,
        server_assignor=body.server_assignor,
        owned_partitions=owned,
        client_id=request.client_id or "",
        client_host=client_host(conn),
        api_version=version,
    )
    answer: m.ConsumerGroupHeartbeatResponse = await conn.call(message, _coordinator_wait(conn))
    assignment = None
    if answer.assignment is not None:
        Assignment = ConsumerGroupHeartbeatResponse.Assignment
        assignment = Assignment(
            topic_partitions=[
                Assignment.TopicPartitions(topic_id=topic_id(name), partitions=list(parts))
                for name, parts in answer.assignment
            ]
        )
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0,
        error_code=answer.error,
        error_message=answer.error_message,
        member_id=answer.member_id,
        member_epoch=answer.member_epoch,
        heartbeat_interval_ms=answer.heartbeat_interval_ms,
        assignment=assignment,
    )
