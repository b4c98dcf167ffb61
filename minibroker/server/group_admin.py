"""OffsetCommit, OffsetFetch, DescribeGroups, ListGroups and DeleteGroups over the wire.

Each becomes one coordinator message sent to the connection's broker over the
emulated network. OffsetCommit v2-v10 keeps the request's topic and partition
order (v10 names topics by the ids Metadata gives; an unknown id answers
UNKNOWN_TOPIC_ID); v2-v4's retention time is honoured. OffsetFetch v1-v10 (v10:
topics by id, as OffsetCommit v10): v2+ may ask for every committed offset
(topics null), v8+ for several groups at once (each group answered by this
broker: NOT_COORDINATOR for the ones it does not coordinate); v2-v7 carry the
group's error at the top level too; v9+ carry a consumer group member's id and
epoch (checked, KIP-848). ListGroups lists this broker's groups (an admin client
asks every broker); v4+ filter by state, v5+ by type (``classic`` or
``consumer``). OffsetDelete (KIP-496) asks the coordinator
to delete a group's offsets of some partitions, with Kafka's checks (KafkaApis'
``handleOffsetDeleteRequest``): with an authorizer DELETE on the group (else
GROUP_AUTHORIZATION_FAILED) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED); a
partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION; the coordinator answers the
group's error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR, ...) or each partition's
(GROUP_SUBSCRIBED_TO_TOPIC for a topic the members consume). ConsumerGroupDescribe (KIP-848)
shows a consumer group's epochs, assignor and each member's current and target assignment,
topics named and by id.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import DeleteGroupsResponse, DescribeGroupsResponse, ListGroupsResponse
from kafka.protocol.consumer import OffsetCommitResponse, OffsetDeleteResponse, OffsetFetchResponse

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group import messages as m
from minibroker.server.acl_checks import enforced, group_denied, topic_denied
from minibroker.server.authorizer import CLUSTER, CLUSTER_NAME, DELETE, DESCRIBE, GROUP, READ
from minibroker.server.codec import Request
from minibroker.server.context import RESPONSE_GRACE_MS, Connection
from minibroker.server.metadata import topic_id
from minibroker.server.schemas import ConsumerGroupDescribeResponse

CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
CommitPartition = CommitTopic.OffsetCommitResponsePartition
FetchGroup = OffsetFetchResponse.OffsetFetchResponseGroup
FetchGroupTopic = FetchGroup.OffsetFetchResponseTopics
FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic
Described = DescribeGroupsResponse.DescribedGroup
DescribedMember = Described.DescribedGroupMember


#: response fields filled from the coordinator's answers: ``field`` (same attribute) or ``field=attribute``
_DESCRIBED = "error_code=error group_id group_state=state protocol_type protocol_data"
_DESCRIBED_MEMBER = (
    "member_id group_instance_id=instance_id client_id client_host member_metadata=metadata"
    " member_assignment=assignment"
)
_LISTED = "group_id protocol_type group_state=state group_type"


def _wait(conn: Connection) -> int:
    return conn.cluster.brokers[conn.broker_id].config.offsets_commit_timeout_ms + RESPONSE_GRACE_MS


async def _ask(conn: Connection, message: object) -> Any:
    """The coordinator's answer to ``message``, asked of the connection's broker."""
    return await conn.call(message, _wait(conn))


def _row(cls: Any, item: object, fields: str, **extra: Any) -> Any:
    """``cls`` built from ``item`` as ``fields`` says (see ``_DESCRIBED``), plus ``extra``."""
    pairs = (spec.partition("=") for spec in fields.split())
    return cls(**{name: getattr(item, attribute or name) for name, _, attribute in pairs}, **extra)


def commit_offsets(topics: Any, with_leader_epoch: bool) -> tuple[m.CommitOffset, ...]:
    """The offsets of an OffsetCommit or TxnOffsetCommit body's topics."""
    return tuple(
        m.CommitOffset(
            t.name,
            p.partition_index,
            p.committed_offset,
            p.committed_leader_epoch if with_leader_epoch else -1,
            p.committed_metadata,
        )
        for t in topics
        for p in t.partitions
    )


def _names_by_id(conn: Connection) -> dict[Any, str]:
    """Topic id -> name, with the ids Metadata gives (v10 of OffsetCommit and OffsetFetch name topics so)."""
    return {topic_id(name): name for name in conn.cluster.topics}


async def offset_commit(request: Request, conn: Connection) -> OffsetCommitResponse:
    body = request.body
    version = request.api_version
    unknown: list[Any] = []  # v10: the request's topics whose id names no topic
    if version >= 10:
        names = _names_by_id(conn)
        for t in body.topics:
            t.name = names.get(t.topic_id, "")
        unknown = [t for t in body.topics if not t.name]
    offsets = commit_offsets([t for t in body.topics if t.name], version >= 6)
    message = m.OffsetCommitRequest(
        body.group_id,
        offsets,
        body.generation_id_or_member_epoch,
        body.member_id,
        body.group_instance_id if version >= 7 else None,
        body.retention_time_ms if version <= 4 else -1,
        version,
    )
    answer: m.OffsetCommitResponse = await _ask(conn, message)
    topics: dict[str, list] = {}
    for topic, partition, error in answer.partitions:
        topics.setdefault(topic, []).append(CommitPartition(partition_index=partition, error_code=error))
    if version < 10:
        return OffsetCommitResponse(
            throttle_time_ms=0,
            topics=[CommitTopic(name=name, partitions=parts) for name, parts in topics.items()],
        )
    missing = [
        CommitTopic(
            topic_id=t.topic_id,
            partitions=[
                CommitPartition(partition_index=p.partition_index, error_code=Errors.UNKNOWN_TOPIC_ID)
                for p in t.partitions
            ],
        )
        for t in unknown
    ]
    known = [CommitTopic(topic_id=topic_id(name), partitions=parts) for name, parts in topics.items()]
    return OffsetCommitResponse(throttle_time_ms=0, topics=known + missing)


async def offset_fetch(request: Request, conn: Connection) -> OffsetFetchResponse:
    body = request.body
    version = request.api_version
    unknown: dict[str, list] = {}  # v10: group -> its requested topics whose id names no topic
    if version >= 10:
        names = _names_by_id(conn)
        for g in body.groups:
            for t in g.topics or ():
                t.name = names.get(t.topic_id, "")
            unknown[g.group_id] = [t for t in g.topics or () if not t.name]
            if g.topics is not None:
                g.topics = [t for t in g.topics if t.name]
    if version >= 8:
        groups = tuple(
            m.OffsetFetchGroup(
                g.group_id, _topics(g.topics), *((g.member_id, g.member_epoch) if version >= 9 else ())
            )
            for g in body.groups
        )
    else:
        groups = (m.OffsetFetchGroup(body.group_id, _topics(body.topics)),)
    message = m.OffsetFetchRequest(groups, body.require_stable if version >= 7 else False)
    answer: m.OffsetFetchResponse = await _ask(conn, message)
    if version >= 8:
        return OffsetFetchResponse(
            throttle_time_ms=0,
            groups=[
                FetchGroup(
                    group_id=g.group_id,
                    error_code=g.error,
                    topics=_fetched(g, FetchGroupTopic, version >= 10)
                    + _unknown_ids(unknown.get(g.group_id)),
                )
                for g in answer.groups
            ],
        )
    (group,) = answer.groups
    return OffsetFetchResponse(throttle_time_ms=0, topics=_fetched(group, FetchTopic), error_code=group.error)


def _topics(topics) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    if topics is None:
        return None
    return tuple((t.name, tuple(t.partition_indexes)) for t in topics)


def _unknown_ids(topics: list | None) -> list:
    """OffsetFetch v10's answer for requested topic ids that name no topic: UNKNOWN_TOPIC_ID each."""
    partition = FetchGroupTopic.OffsetFetchResponsePartitions
    return [
        FetchGroupTopic(
            topic_id=t.topic_id,
            partitions=[
                partition(partition_index=p, committed_offset=-1, error_code=Errors.UNKNOWN_TOPIC_ID)
                for p in t.partition_indexes
            ],
        )
        for t in topics or ()
    ]


def _fetched(group: m.OffsetFetchResult, topic_class, by_id: bool = False) -> list:
    partition_class = next(
        getattr(topic_class, n) for n in dir(topic_class) if n.startswith("OffsetFetchResponsePartition")
    )
    by_topic: dict[str, list] = {}
    for o in group.offsets:
        by_topic.setdefault(o.topic, []).append(
            partition_class(
                partition_index=o.partition,
                committed_offset=o.offset,
                committed_leader_epoch=o.leader_epoch,
                metadata=o.metadata,
                error_code=o.error,
            )
        )
    if by_id:
        return [topic_class(topic_id=topic_id(name), partitions=parts) for name, parts in by_topic.items()]
    return [topic_class(name=name, partitions=parts) for name, parts in by_topic.items()]


async def describe_groups(request: Request, conn: Connection) -> DescribeGroupsResponse:
    body = request.body
    answer: m.DescribeGroupsResponse = await _ask(conn, m.DescribeGroupsRequest(tuple(body.groups)))
    groups = [
        _row(
            Described, g, _DESCRIBED, members=[_row(DescribedMember, x, _DESCRIBED_MEMBER) for x in g.members]
        )
        for g in answer.groups
    ]
    asked = request.api_version >= 3 and body.include_authorized_operations
    for group in groups:
        if group_denied(conn, DESCRIBE, group.group_id):  # Kafka: denied groups are named, nothing else
            group.error_code, group.group_state, group.protocol_type, group.protocol_data = 30, "", "", ""
            group.members = []
        elif asked:
            group.authorized_operations = conn.authorized_operations(GROUP, group.group_id)
    return DescribeGroupsResponse(throttle_time_ms=0, groups=groups)


async def list_groups(request: Request, conn: Connection) -> ListGroupsResponse:
    body = request.body
    version = request.api_version
    message = m.ListGroupsRequest(
        tuple(body.states_filter) if version >= 4 else (), tuple(body.types_filter) if version >= 5 else ()
    )
    answer: m.ListGroupsResponse = await _ask(conn, message)
    # with an authorizer: every group for DESCRIBE on the cluster, else those the caller may DESCRIBE
    everything = not enforced(conn) or conn.authorize(DESCRIBE, CLUSTER, CLUSTER_NAME)
    listed = [
        _row(ListGroupsResponse.ListedGroup, g, _LISTED)
        for g in answer.groups
        if everything or not group_denied(conn, DESCRIBE, g.group_id)
    ]
    return ListGroupsResponse(throttle_time_ms=0, error_code=answer.error, groups=listed)


async def delete_groups(request: Request, conn: Connection) -> DeleteGroupsResponse:
    names = list(request.body.groups_names)
    allowed = tuple(g for g in names if not group_denied(conn, DELETE, g))
    answer: m.DeleteGroupsResponse = await _ask(conn, m.DeleteGroupsRequest(allowed))
    results = [
        DeleteGroupsResponse.DeletableGroupResult(group_id=gid, error_code=error)
        for gid, error in answer.results
    ]
    results += [
        DeleteGroupsResponse.DeletableGroupResult(group_id=g, error_code=30)
        for g in names
        if g not in allowed
    ]
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)


async def offset_delete(request: Request, conn: Connection) -> OffsetDeleteResponse:
    body = request.body
    topic_cls = OffsetDeleteResponse.OffsetDeleteResponseTopic
    part_cls = topic_cls.OffsetDeleteResponsePartition
    if group_denied(conn, DELETE, body.group_id):
        return OffsetDeleteResponse(
            error_code=Errors.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[]
        )
    local: dict[TopicPartition, Errors] = {}
    asked: list[TopicPartition] = []
    for t in body.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            if topic_denied(conn, READ, t.name):
                local[tp] = Errors.TOPIC_AUTHORIZATION_FAILED
            elif not conn.cluster.known(tp):
                local[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                asked.append(tp)
    answer: m.OffsetDeleteResponse = await _ask(conn, m.OffsetDeleteRequest(body.group_id, tuple(asked)))
    if answer.error is not Errors.NONE:
        return OffsetDeleteResponse(error_code=answer.error, throttle_time_ms=0, topics=[])
    errors = {**local, **dict(answer.partitions)}
    topics: dict[str, list] = {}
    for t in body.topics:
        for p in t.partitions:
            error = errors[TopicPartition(t.name, p.partition_index)]
            topics.setdefault(t.name, []).append(
                part_cls(partition_index=p.partition_index, error_code=error)
            )
    return OffsetDeleteResponse(
        error_code=Errors.NONE,
        throttle_time_ms=0,
        topics=[topic_cls(name=name, partitions=parts) for name, parts in topics.items()],
    )


async def consumer_group_describe(request: Request, conn: Connection) -> ConsumerGroupDescribeResponse:
    answer: m.ConsumerGroupDescribeResponse = await _ask(
        conn, m.ConsumerGroupDescribeRequest(tuple(request.body.group_ids))
    )
    Group = ConsumerGroupDescribeResponse.DescribedGroup
    Assignment = Group.Member.Assignment

    def assignment(pairs: m.TopicPartitions) -> Any:
        return Assignment(
            topic_partitions=[
                Assignment.TopicPartitions(topic_id=topic_id(name), topic_name=name, partitions=list(parts))
                for name, parts in pairs
            ]
        )

    groups = [
        Group(
            error_code=g.error,
            error_message=g.error_message,
            group_id=g.group_id,
            group_state=g.state,
            group_epoch=g.group_epoch,
            assignment_epoch=g.assignment_epoch,
            assignor_name=g.assignor_name,
            members=[
                Group.Member(
                    member_id=x.member_id,
                    instance_id=x.instance_id,
                    rack_id=x.rack_id,
                    member_epoch=x.member_epoch,
                    client_id=x.client_id,
                    client_host=x.client_host,
                    subscribed_topic_names=list(x.subscribed_topic_names),
                    subscribed_topic_regex=x.subscribed_topic_regex,
                    assignment=assignment(x.assignment),
                    target_assignment=assignment(x.target_assignment),
                    member_type=1,
                )
                for x in g.members
            ],
            authorized_operations=-(2**31),
        )
        for g in answer.groups
    ]
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=groups)
