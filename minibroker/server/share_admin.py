"""DescribeShareGroupOffsets (90), AlterShareGroupOffsets (91) and DeleteShareGroupOffsets (92) over the wire.

Version 0 of each (Kafka 4.1's schemas, in ``minibroker/server/schemas``). Each goes to the connection's
broker's share group coordinator (NOT_COORDINATOR when it is not the group's), which asks the share
coordinators (``ShareGroupCoordinator.offsets_admin``). AlterShareGroupOffsets has no group-level error
field: a group-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR) is every partition's.
A topic DeleteShareGroupOffsets names that does not exist answers one partition, index -1, with
UNKNOWN_TOPIC_OR_PARTITION. Start offsets are -1 for partitions without state; leader epochs are -1 (the
share coordinator keeps none).

With an authorizer (``acl_checks``; AlterShareGroupOffsets' READ and DeleteShareGroupOffsets' DELETE on the
group are checked before these run), as Kafka's ``KafkaApis``: DescribeShareGroupOffsets answers a group the
caller may not DESCRIBE with GROUP_AUTHORIZATION_FAILED, each named partition of a topic it may not DESCRIBE
with TOPIC_AUTHORIZATION_FAILED, and leaves such topics out of a listing of every topic; Alter and Delete
answer each partition (Delete: partition -1) of a topic the caller may not READ with
TOPIC_AUTHORIZATION_FAILED and pass on only the others.
"""

from __future__ import annotations

import uuid
from typing import Any

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.share.messages import (
    AlterShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequest,
    ShareGroupOffset,
)
from minibroker.server import share_messages as w
from minibroker.server.acl_checks import group_denied, topic_denied
from minibroker.server.authorizer import DESCRIBE, READ
from minibroker.server.codec import Request
from minibroker.server.context import Connection
from minibroker.server.metadata import topic_id
from minibroker.server.share import _wait

DescribedGroup = w.DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
DescribedTopic = DescribedGroup.DescribeShareGroupOffsetsResponseTopic


def _by_topic(
    partitions: dict[TopicPartition, ShareGroupOffset],
) -> dict[str, list[tuple[int, ShareGroupOffset]]]:
    topics: dict[str, list[tuple[int, ShareGroupOffset]]] = {}
    for tp, offset in partitions.items():
        topics.setdefault(tp.topic, []).append((tp.partition, offset))
    return topics


def _results(conn: Connection, api: str, partitions: dict[TopicPartition, ShareGroupOffset]) -> list[Any]:
    """The per-topic results of AlterShareGroupOffsets or DeleteShareGroupOffsets (``api``)."""
    topic = getattr(getattr(w, f"{api}ShareGroupOffsetsResponse"), f"{api}ShareGroupOffsetsResponseTopic")
    part = getattr(topic, f"{api}ShareGroupOffsetsResponsePartition")
    return [
        topic(
            topic_name=name,
            topic_id=_topic_id(conn, name),
            partitions=[part(partition_index=p, error_code=o.error, error_message=None) for p, o in parts],
        )
        for name, parts in _by_topic(partitions).items()
    ]


def _topic_id(conn: Connection, name: str) -> uuid.UUID:
    return topic_id(name) if name in conn.cluster.topics else uuid.UUID(int=0)


async def describe_share_group_offsets(request: Request, conn: Connection) -> Any:
    groups = []
    for group in request.body.groups:
        if group_denied(conn, DESCRIBE, group.group_id):
            groups.append(
                DescribedGroup(
                    group_id=group.group_id,
                    topics=[],
                    error_code=Errors.GROUP_AUTHORIZATION_FAILED,
                    error_message=None,
                )
            )
            continue
        wanted = None
        refused: dict[TopicPartition, ShareGroupOffset] = {}
        if group.topics is not None:
            wanted = tuple(TopicPartition(t.topic_name, p) for t in group.topics for p in t.partitions)
            refused = {
                tp: ShareGroupOffset(Errors.TOPIC_AUTHORIZATION_FAILED)
                for tp in wanted
                if topic_denied(conn, DESCRIBE, tp.topic)
            }
            wanted = tuple(tp for tp in wanted if tp not in refused)
        answer = await conn.call(DescribeShareGroupOffsetsRequest(group.group_id, wanted), _wait(conn))
        partitions = {
            tp: offset
            for tp, offset in answer.partitions.items()
            if wanted is not None or not topic_denied(conn, DESCRIBE, tp.topic)
        }
        if answer.error is Errors.NONE:
            partitions.update(refused)
        groups.append(
            DescribedGroup(
                group_id=group.group_id,
                topics=[
                    DescribedTopic(
                        topic_name=name,
                        topic_id=_topic_id(conn, name),
                        partitions=[
                            DescribedTopic.DescribeShareGroupOffsetsResponsePartition(
                                partition_index=p,
                                start_offset=o.start_offset,
                                leader_epoch=-1,
                                error_code=o.error,
                                error_message=None,
                            )
                            for p, o in parts
                        ],
                    )
                    for name, parts in _by_topic(partitions).items()
                ],
                error_code=answer.error,
                error_message=None,
            )
        )
    return w.DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=groups)


async def alter_share_group_offsets(request: Request, conn: Connection) -> Any:
    body = request.body
    offsets = {
        TopicPartition(t.topic_name, p.partition_index): p.start_offset
        for t in body.topics
        for p in t.partitions
    }
    refused = {
        tp: ShareGroupOffset(Errors.TOPIC_AUTHORIZATION_FAILED)
        for tp in offsets
        if topic_denied(conn, READ, tp.topic)
    }
    allowed = {tp: offset for tp, offset in offsets.items() if tp not in refused}
    answer = await conn.call(AlterShareGroupOffsetsRequest(body.group_id, allowed), _wait(conn))
    results = {**answer.partitions, **refused}
    if answer.error is not Errors.NONE:
        results = {tp: refused.get(tp, ShareGroupOffset(answer.error)) for tp in offsets}
    return w.AlterShareGroupOffsetsResponse(throttle_time_ms=0, responses=_results(conn, "Alter", results))


async def delete_share_group_offsets(request: Request, conn: Connection) -> Any:
    body = request.body
    topics = tuple(t.topic_name for t in body.topics if not topic_denied(conn, READ, t.topic_name))
    refused = {
        TopicPartition(t.topic_name, -1): ShareGroupOffset(Errors.TOPIC_AUTHORIZATION_FAILED)
        for t in body.topics
        if t.topic_name not in topics
    }
    answer = await conn.call(DeleteShareGroupOffsetsRequest(body.group_id, topics), _wait(conn))
    results = {**answer.partitions, **refused} if answer.error is Errors.NONE else answer.partitions
    return w.DeleteShareGroupOffsetsResponse(
        throttle_time_ms=0,
        error_code=answer.error,
        error_message=None,
        responses=_results(conn, "Delete", results),
    )
