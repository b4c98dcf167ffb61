"""CreateTopics, DeleteTopics and CreatePartitions over the wire (``sim.topic_admin`` does the work).

Any broker answers them (KRaft brokers forward them to the controller; here the
controller's decision is immediate). Each topic is answered on its own with
Kafka's error code and message; a topic named twice in one request is answered
once, INVALID_REQUEST, as Kafka answers (its responses are keyed by name). ``timeout_ms`` is not waited
on: the topics exist (or are gone) when the answer leaves. CreateTopics v5+
answers with the topic's partitions, replication factor and configs, v7+ with
its topic id; DeleteTopics v6 takes topics by name or id. With an authorizer
(``acl_checks``): CREATE on the cluster or the topic, DELETE and ALTER on the topic,
else TOPIC_AUTHORIZATION_FAILED for that topic.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable
from typing import TypeVar

from kafka.protocol.admin import CreatePartitionsResponse, CreateTopicsResponse, DeleteTopicsResponse

from minibroker.common.errors import Errors
from minibroker.server import acl_checks
from minibroker.server.authorizer import ALTER, CLUSTER, CLUSTER_NAME, CREATE, DELETE, TOPIC
from minibroker.server.codec import Request
from minibroker.server.context import Connection
from minibroker.server.metadata import topic_id
from minibroker.sim import topic_admin
from minibroker.sim.dynamic_configs import topic_entries
from minibroker.sim.topic_admin import AdminError

Created = CreateTopicsResponse.CreatableTopicResult
CreatedConfig = Created.CreatableTopicConfigs
Deleted = DeleteTopicsResponse.DeletableTopicResult
Grown = CreatePartitionsResponse.CreatePartitionsTopicResult

T = TypeVar("T")
TOPIC_DENIED = Errors.TOPIC_AUTHORIZATION_FAILED
_ZERO_ID = "00000000-0000-0000-0000-000000000000"


def _duplicates(names: list[str | None]) -> set[str | None]:
    return {name for name, count in Counter(names).items() if count > 1}


def _once(items: list[T], key: Callable[[T], Hashable]) -> list[T]:
    """The first of each key, in order (a name asked twice gets one answer)."""
    seen: set[Hashable] = set()
    return [item for item in items if not (key(item) in seen or seen.add(key(item)))]


def _log(conn: Connection, api: str, name: str | None, error: AdminError) -> None:
    conn.log(f"{api} {name!r}: {error.error.name} ({error})")


async def create_topics(request: Request, conn: Connection) -> CreateTopicsResponse:
    body = request.body
    version = request.api_version
    validate_only = bool(body.validate_only)
    twice = _duplicates([t.name for t in body.topics])
    results = []
    for topic in _once(body.topics, lambda t: t.name):
        error, message, spec = Errors.NONE, None, None
        try:
            if topic.name in twice:
                raise AdminError(Errors.INVALID_REQUEST, f"topic {topic.name!r} is named more than once")
            if acl_checks.enforced(conn) and not (
                conn.authorize(CREATE, CLUSTER, CLUSTER_NAME) or conn.authorize(CREATE, TOPIC, topic.name)
            ):
                raise AdminError(TOPIC_DENIED, acl_checks.MESSAGES[TOPIC_DENIED])
            spec = topic_admin.create_topic(
                conn.cluster,
                topic.name,
                topic.num_partitions,
                topic.replication_factor,
                {a.partition_index: list(a.broker_ids) for a in topic.assignments},
                {c.name: c.value for c in topic.configs},
                validate_only,
            )
        except AdminError as refused:
            error, message = refused.error, str(refused)
            _log(conn, "CreateTopics", topic.name, refused)
        result = Created(name=topic.name, error_code=error, error_message=message)
        if version >= 5:
            if spec is not None:
                result.num_partitions = spec.partitions
                result.replication_factor = spec.replication_factor
                result.configs = _configs(conn, spec.configs)
            else:
                result.num_partitions, result.replication_factor, result.configs = -1, -1, None
        if version >= 7:
            result.topic_id = topic_id(topic.name, conn.cluster) if spec is not None else _ZERO_ID
        results.append(result)
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _configs(conn: Connection, overrides: dict[str, str]) -> list:
    return [
        CreatedConfig(
            name=entry.name,
            value=entry.value,
            read_only=entry.read_only,
            config_source=entry.source,
            is_sensitive=False,
        )
        for entry in topic_entries(conn.cluster, overrides)
    ]


async def delete_topics(request: Request, conn: Connection) -> DeleteTopicsResponse:
    body = request.body
    version = request.api_version
    cluster = conn.cluster
    if version >= 6:
        by_id = {str(topic_id(name, conn.cluster)): name for name in cluster.topics}
        asked = [(t.name, t.topic_id) for t in body.topics]  # the zero topic id decodes as None
    else:
        asked = [(name, None) for name in body.topic_names]
    twice = _duplicates([name for name, _ in asked if name is not None])
    results = []
    for name, asked_id in _once(asked, lambda pair: pair):
        error, message, deleted_id = Errors.NONE, None, None
        try:
            if name is None:
                if asked_id is None:
                    raise AdminError(Errors.INVALID_REQUEST, "neither a topic name nor a topic id was given")
                name = by_id.get(str(asked_id))
                if name is None:
                    raise AdminError(Errors.UNKNOWN_TOPIC_ID, f"topic id {asked_id} is not known")
            elif name in twice:
                raise AdminError(Errors.INVALID_REQUEST, f"topic {name!r} is named more than once")
            if acl_checks.topic_denied(conn, DELETE, name):
                raise AdminError(TOPIC_DENIED, acl_checks.MESSAGES[TOPIC_DENIED])
            deleted_id = topic_id(name, cluster) if name in cluster.topics else None
            topic_admin.delete_topic(cluster, name)
        except AdminError as refused:
            error, message = refused.error, str(refused)
            _log(conn, "DeleteTopics", name or asked_id, refused)
        result = Deleted(name=name, error_code=error)
        if version >= 5:
            result.error_message = message
        if version >= 6:
            known = deleted_id or (topic_id(name, cluster) if name is not None else None)
            result.topic_id = known or asked_id or _ZERO_ID
        results.append(result)
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


async def create_partitions(request: Request, conn: Connection) -> CreatePartitionsResponse:
    body = request.body
    twice = _duplicates([t.name for t in body.topics])
    results = []
    for topic in _once(body.topics, lambda t: t.name):
        error, message = Errors.NONE, None
        try:
            if topic.name in twice:
                raise AdminError(Errors.INVALID_REQUEST, f"topic {topic.name!r} is named more than once")
            if acl_checks.topic_denied(conn, ALTER, topic.name):
                raise AdminError(TOPIC_DENIED, acl_checks.MESSAGES[TOPIC_DENIED])
            assignment = (
                None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
            )
            topic_admin.create_partitions(
                conn.cluster, topic.name, topic.count, assignment, bool(body.validate_only)
            )
        except AdminError as refused:
            error, message = refused.error, str(refused)
            _log(conn, "CreatePartitions", topic.name, refused)
        results.append(Grown(name=topic.name, error_code=error, error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
