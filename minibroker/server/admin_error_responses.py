"""Kafka's whole-request error responses of the admin APIs, for errors a test pushed (``error_responses``).

Each names every topic, partition or config resource the request named with the
error (Kafka's ``getErrorResponse`` of that request); DescribeCluster, which has a
top-level error code, needs no entry here. Keys missing from ``codec.SUPPORTED``
are never asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minibroker.server.codec import Request


def _build(request: Request, **fields: Any) -> Any:
    return request.spec.response(version=request.api_version, **fields)


def _nested(request: Request, path: str) -> Any:
    """The kafka-python class ``path`` (dotted) under the response class."""
    cls = request.spec.response
    for name in path.split("."):
        cls = getattr(cls, name)
    return cls


def create_topics(request: Request, error: int) -> Any:
    result = _nested(request, "CreatableTopicResult")
    return _build(request, topics=[result(name=t.name, error_code=error) for t in request.body.topics])


def delete_topics(request: Request, error: int) -> Any:
    result = _nested(request, "DeletableTopicResult")
    if request.api_version >= 6:
        names = [t.name for t in request.body.topics]
    else:
        names = list(request.body.topic_names)
    return _build(request, responses=[result(name=n, error_code=error) for n in names])


def delete_records(request: Request, error: int) -> Any:
    topic = _nested(request, "DeleteRecordsTopicResult")
    part = topic.DeleteRecordsPartitionResult
    topics = [
        topic(
            name=t.name,
            partitions=[
                part(partition_index=p.partition_index, low_watermark=-1, error_code=error)
                for p in t.partitions
            ],
        )
        for t in request.body.topics
    ]
    return _build(request, topics=topics)


def _resources(request: Request, error: int, field: str, cls_name: str, **extra: Any) -> Any:
    result = _nested(request, cls_name)
    entries = [
        result(error_code=error, resource_type=r.resource_type, resource_name=r.resource_name, **extra)
        for r in request.body.resources
    ]
    return _build(request, **{field: entries})


def describe_configs(request: Request, error: int) -> Any:
    return _resources(request, error, "results", "DescribeConfigsResult", configs=[])


def incremental_alter_configs(request: Request, error: int) -> Any:
    return _resources(request, error, "responses", "AlterConfigsResourceResponse")


def alter_configs(request: Request, error: int) -> Any:
    return _resources(request, error, "responses", "AlterConfigsResourceResponse")


def create_acls(request: Request, error: int) -> Any:
    result = _nested(request, "AclCreationResult")
    return _build(request, results=[result(error_code=error) for _ in request.body.creations])


def delete_acls(request: Request, error: int) -> Any:
    result = _nested(request, "DeleteAclsFilterResult")
    return _build(
        request, filter_results=[result(error_code=error, matching_acls=[]) for _ in request.body.filters]
    )


def describe_log_dirs(request: Request, error: int) -> Any:
    """No log dir; the error at the top level where the version has one (v3+), as Kafka's."""
    fields: dict[str, Any] = {"results": []}
    if request.api_version >= 3:
        fields["error_code"] = error
    return _build(request, **fields)


def alter_replica_log_dirs(request: Request, error: int) -> Any:
    topic = _nested(request, "AlterReplicaLogDirTopicResult")
    part = topic.AlterReplicaLogDirPartitionResult
    results = [
        topic(topic_name=t.name, partitions=[part(partition_index=p, error_code=error) for p in t.partitions])
        for d in request.body.dirs
        for t in d.topics
    ]
    return _build(request, results=results)


def describe_topic_partitions(request: Request, error: int) -> Any:
    topic = _nested(request, "DescribeTopicPartitionsResponseTopic")
    topics = [topic(error_code=error, name=t.name, partitions=[]) for t in request.body.topics]
    return _build(request, topics=topics, next_cursor=None)


def create_partitions(request: Request, error: int) -> Any:
    result = _nested(request, "CreatePartitionsTopicResult")
    return _build(request, results=[result(name=t.name, error_code=error) for t in request.body.topics])


def elect_leaders(request: Request, error: int) -> Any:
    result = _nested(request, "ReplicaElectionResult")
    part = result.PartitionResult
    results = [
        result(topic=t.topic, partition_result=[part(partition_id=p, error_code=error) for p in t.partitions])
        for t in request.body.topic_partitions or ()
    ]
    fields: dict[str, Any] = {"replica_election_results": results}
    if request.api_version >= 1:
        fields["error_code"] = error
    return _build(request, **fields)


def alter_user_scram_credentials(request: Request, error: int) -> Any:
    """One result per user the deletions and upsertions name, in order, each once."""
    result = _nested(request, "AlterUserScramCredentialsResult")
    body = request.body
    users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    return _build(request, results=[result(user=u, error_code=error, error_message=None) for u in users])


#: api key -> error response (CreateTopics 19, DeleteTopics 20, DeleteRecords 21, CreateAcls 30,
#: DeleteAcls 31, DescribeConfigs 32, AlterReplicaLogDirs 34, DescribeLogDirs 35, DescribeTopicPartitions 75,
#: AlterConfigs 33, CreatePartitions 37, ElectLeaders 43, IncrementalAlterConfigs 44)
ADMIN_ERROR_RESPONSES: dict[int, Callable[[Request, int], Any]] = {
    19: create_topics,
    20: delete_topics,
    21: delete_records,
    32: describe_configs,
    30: create_acls,
    31: delete_acls,
    33: alter_configs,
    34: alter_replica_log_dirs,
    35: describe_log_dirs,
    75: describe_topic_partitions,
    37: create_partitions,
    43: elect_leaders,
    44: incremental_alter_configs,
    51: alter_user_scram_credentials,
}
