"""Kafka's whole-request error responses in each API's shape; the errors a test pushed answered with them.

A test pushes errors for the next requests of an API (``Control.push_errors``).

The queues live on the broker's replica manager (``PushedErrors``, kind = the
API's snake-case name, e.g. ``list_offsets``), so a crash forgets them.
Produce and Fetch take theirs inside the replica manager, before anything is
appended or read; every other API is handled here:

- a whole-request error (no partition): the handler is not run, so the request
  has no effect, and the answer is Kafka's error response for that API
  (``AbstractRequest.getErrorResponse``): the top-level error code where the
  API has one, else the error on every topic, partition or group the request
  named (``ERROR_RESPONSES``); ApiVersions answers v0 with the error and no
  keys, which is how clients read an ApiVersions error;
- a partition's error, once per request that names the partition: for the
  APIs that only read (Metadata, ListOffsets, OffsetForLeaderEpoch,
  OffsetFetch) the request runs and that partition's entry in the answer
  carries the error (offsets -1); for those that write (OffsetCommit,
  DeleteRecords) the partition is taken out of the request first, so nothing
  is written for it, and its error entry is added to the answer.

The same whole-request error responses (``error_response``) answer a request
whose handling raised an exception, with UNKNOWN_SERVER_ERROR (``server.py``):
``ERROR_RESPONSES`` therefore has Produce and Fetch too, whose pushed errors
never come here.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.server.acl_checks import denied, enforced, restrict_groups, topic_denied
from minibroker.server.admin_error_responses import ADMIN_ERROR_RESPONSES
from minibroker.server.authorizer import READ
from minibroker.server.codec import SUPPORTED, Request, encode_response
from minibroker.server.context import CloseConnection, Connection
from minibroker.server.handlers import HANDLERS

#: the replica manager takes these itself (before appending or reading)
IN_REPLICA_MANAGER = ("produce", "fetch")


@functools.cache
def kind(api_key: int) -> str:
    """The queue name of an API: ``ListOffsets`` -> ``list_offsets``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", SUPPORTED[api_key].name).lower()


def _response(request: Request, **fields: Any) -> Any:
    cls = request.spec.response
    return cls(version=request.api_version, **fields)


def _has(request: Request, field: str) -> bool:
    """Whether the response of this version has a top-level ``field``."""
    item = request.spec.response._struct.fields.get(field)
    return item is not None and item.for_version_q(request.api_version)


def _top_level(request: Request, error: int) -> Any:
    return _response(request, error_code=error)


#: Produce's and Fetch's error responses name every partition requested: api key -> (the request's topics
#: field, the response's topic class, the topic name field, the (request, response) partitions fields, the
#: (request, response) partition index fields, the rest of each partition's entry besides its error code)
_EVERY_PARTITION: dict[int, tuple[str, str, str, tuple[str, str], tuple[str, str], dict[str, Any]]] = {
    0: (
        "topic_data",
        "TopicProduceResponse",
        "name",
        ("partition_data", "partition_responses"),
        ("index", "index"),
        {"base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1, "error_message": None},
    ),
    1: (
        "topics",
        "FetchableTopicResponse",
        "topic",
        ("partitions", "partitions"),
        ("partition", "partition_index"),
        {
            "high_watermark": -1,
            "last_stable_offset": -1,
            "log_start_offset": -1,
            "preferred_read_replica": -1,
        },
    ),
}


def _every_partition(request: Request, error: int, **extra: Any) -> list:
    """The response topics of a Produce or Fetch error response (``_EVERY_PARTITION``)."""
    topics, topic_cls_name, name, parts, index, fields = _EVERY_PARTITION[request.api_key]
    topic_cls = getattr(request.spec.response, topic_cls_name)
    part_cls = topic_cls._struct.fields[parts[1]].data_class
    return [
        topic_cls(
            **{
                name: getattr(t, name),
                parts[1]: [
                    part_cls(**{index[1]: getattr(p, index[0])}, error_code=error, **fields, **extra)
                    for p in getattr(t, parts[0])
                ],
            }
        )
        for t in getattr(request.body, topics) or ()
    ]


def _produce(request: Request, error: int) -> Any:
    """Kafka's ``ProduceRequest.getErrorResponse``: every partition named, offsets -1."""
    topics = _every_partition(request, error, record_errors=[])
    return _response(request, responses=topics, throttle_time_ms=0)


def _fetch(request: Request, error: int) -> Any:
    """Kafka's ``FetchRequest.getErrorResponse``: every partition named with the error and offsets -1,
    the top-level error and the request's session id (v7+)."""
    topics = _every_partition(request, error, aborted_transactions=None, records=b"")
    fields: dict[str, Any] = {"responses": topics, "throttle_time_ms": 0}
    if request.api_version >= 7:
        fields.update(error_code=error, session_id=request.body.session_id)
    return _response(request, **fields)


def _metadata(request: Request, error: int) -> Any:
    topic = request.spec.response.MetadataResponseTopic
    names = [t.name for t in request.body.topics or ()]
    return _response(
        request, brokers=[], topics=[topic(error_code=error, name=n, partitions=[]) for n in names]
    )


def _per_partition(topics_of: Callable[[Any], list], topic_cls: Any, part_cls: Any, name: str, index: str):
    """An error response that names every requested partition (ListOffsets, OffsetForLeaderEpoch, ...)."""

    def build(request: Request, error: int) -> Any:
        topics = []
        for topic in topics_of(request.body) or ():
            requested = getattr(topic, "partitions", None) or getattr(topic, "partition_indexes", None) or []
            parts = [
                part_cls(**{index: p if isinstance(p, int) else getattr(p, index), "error_code": error})
                for p in requested
            ]
            topics.append(topic_cls(**{name: getattr(topic, name), "partitions": parts}))
        fields = {"topics": topics}
        if _has(request, "error_code"):
            fields["error_code"] = error
        return _response(request, **fields)

    return build


def _offset_fetch(request: Request, error: int) -> Any:
    response = request.spec.response
    if request.api_version >= 8:
        groups = [
            response.OffsetFetchResponseGroup(group_id=g.group_id, topics=[], error_code=error)
            for g in request.body.groups
        ]
        return _response(request, groups=groups)
    topic = response.OffsetFetchResponseTopic
    build = _per_partition(
        lambda b: b.topics, topic, topic.OffsetFetchResponsePartition, "name", "partition_index"
    )
    return build(request, error)


def _find_coordinator(request: Request, error: int) -> Any:
    if request.api_version < 4:
        return _response(request, error_code=error, node_id=-1, host="", port=-1)
    coordinator = request.spec.response.Coordinator
    keys = request.body.coordinator_keys
    return _response(
        request,
        coordinators=[coordinator(key=k, node_id=-1, host="", port=-1, error_code=error) for k in keys],
    )


def _describe_groups(request: Request, error: int) -> Any:
    group = request.spec.response.DescribedGroup
    return _response(
        request,
        groups=[
            group(
                error_code=error, group_id=g, group_state="", protocol_type="", protocol_data="", members=[]
            )
            for g in request.body.groups
        ],
    )


def _share_group_describe(request: Request, error: int) -> Any:
    group = request.spec.response.DescribedGroup
    return _response(
        request,
        groups=[
            group(error_code=error, group_id=g, group_state="", assignor_name="", members=[])
            for g in request.body.group_ids
        ],
    )


def _describe_share_group_offsets(request: Request, error: int) -> Any:
    group = request.spec.response.DescribeShareGroupOffsetsResponseGroup
    return _response(
        request, groups=[group(group_id=g.group_id, topics=[], error_code=error) for g in request.body.groups]
    )


def _alter_share_group_offsets(request: Request, error: int) -> Any:
    topic = request.spec.response.AlterShareGroupOffsetsResponseTopic
    part = topic.AlterShareGroupOffsetsResponsePartition
    return _response(
        request,
        responses=[
            topic(
                topic_name=t.topic_name,
                topic_id=uuid.UUID(int=0),
                partitions=[part(partition_index=p.partition_index, error_code=error) for p in t.partitions],
            )
            for t in request.body.topics
        ],
    )


def _consumer_group_describe(request: Request, error: int) -> Any:
    group = request.spec.response.DescribedGroup
    return _response(
        request,
        groups=[
            group(
                error_code=error,
                group_id=g,
                group_state="",
                group_epoch=-1,
                assignment_epoch=-1,
                assignor_name="",
                members=[],
            )
            for g in request.body.group_ids
        ],
    )


def _delete_groups(request: Request, error: int) -> Any:
    result = request.spec.response.DeletableGroupResult
    return _response(
        request, results=[result(group_id=g, error_code=error) for g in request.body.groups_names]
    )


def _list_offsets(request: Request, error: int) -> Any:
    topic = request.spec.response.ListOffsetsTopicResponse
    build = _per_partition(
        lambda b: b.topics, topic, topic.ListOffsetsPartitionResponse, "name", "partition_index"
    )
    return build(request, error)


def _api_versions(request: Request, error: int) -> bytes:
    """Clients read an ApiVersions answer with an error as v0 (Kafka's rule): framed bytes, v0 header."""
    body = request.spec.response(version=0, error_code=error, api_keys=[], throttle_time_ms=0)
    return encode_response(attrs.evolve(request, api_version=0), body)


def _offset_for_leader_epoch(request: Request, error: int) -> Any:
    topic = request.spec.response.OffsetForLeaderTopicResult
    return _per_partition(lambda b: b.topics, topic, topic.EpochEndOffset, "topic", "partition")(
        request, error
    )


def _offset_commit(request: Request, error: int) -> Any:
    topic = request.spec.response.OffsetCommitResponseTopic
    part = topic.OffsetCommitResponsePartition
    return _per_partition(lambda b: b.topics, topic, part, "name", "partition_index")(request, error)


def _txn_offset_commit(request: Request, error: int) -> Any:
    topic = request.spec.response.TxnOffsetCommitResponseTopic
    part = topic.TxnOffsetCommitResponsePartition
    return _per_partition(lambda b: b.topics, topic, part, "name", "partition_index")(request, error)


def _add_partitions_to_txn(request: Request, error: int) -> Any:
    """AddPartitionsToTxn v0-v3 has no top-level error: every partition named carries it; the batched
    v4+ (KIP-890) answers the top-level error alone."""
    if request.api_version >= 4:
        return _response(request, error_code=error, results_by_transaction=[])
    topic = request.spec.response.AddPartitionsToTxnTopicResult
    part = topic.AddPartitionsToTxnPartitionResult
    results = [
        topic(
            name=t.name,
            results_by_partition=[part(partition_index=p, partition_error_code=error) for p in t.partitions],
        )
        for t in request.body.v3_and_below_topics
    ]
    return _response(request, results_by_topic_v3_and_below=results)


def _describe_transactions(request: Request, error: int) -> Any:
    state = request.spec.response.TransactionState
    states = [
        state(
            error_code=error,
            transactional_id=t,
            transaction_state="",
            transaction_timeout_ms=0,
            transaction_start_time_ms=-1,
            producer_id=-1,
            producer_epoch=-1,
            topics=[],
        )
        for t in request.body.transactional_ids
    ]
    return _response(request, transaction_states=states)


def _describe_producers(request: Request, error: int) -> Any:
    topic = request.spec.response.TopicResponse
    return _per_partition(lambda b: b.topics, topic, topic.PartitionResponse, "name", "partition_index")(
        request, error
    )


def _write_txn_markers(request: Request, error: int) -> Any:
    result = request.spec.response.WritableTxnMarkerResult
    topic = result.WritableTxnMarkerTopicResult
    part = topic.WritableTxnMarkerPartitionResult
    markers = [
        result(
            producer_id=m.producer_id,
            topics=[
                topic(
                    name=t.name,
                    partitions=[part(partition_index=p, error_code=error) for p in t.partition_indexes],
                )
                for t in m.topics
            ],
        )
        for m in request.body.markers
    ]
    return _response(request, markers=markers)


#: api key -> Kafka's error response for a whole request; keys not here answer with a top-level error code
ERROR_RESPONSES: dict[int, Callable[[Request, int], Any]] = {
    0: _produce,
    1: _fetch,
    2: _list_offsets,
    3: _metadata,
    8: _offset_commit,
    9: _offset_fetch,
    10: _find_coordinator,
    15: _describe_groups,
    18: _api_versions,
    23: _offset_for_leader_epoch,
    24: _add_partitions_to_txn,
    27: _write_txn_markers,
    28: _txn_offset_commit,
    42: _delete_groups,
    61: _describe_producers,
    65: _describe_transactions,
    69: _consumer_group_describe,
    77: _share_group_describe,
    90: _describe_share_group_offsets,
    91: _alter_share_group_offsets,
    **ADMIN_ERROR_RESPONSES,
}


def error_response(request: Request, error: int) -> bytes:
    """The framed whole-request error response to ``request`` (Kafka's ``getErrorResponse``)."""
    body = ERROR_RESPONSES.get(request.api_key, _top_level)(request, error)
    return body if isinstance(body, bytes) else encode_response(request, body)


def pushable(api_key: int) -> bool:
    """Whether a whole-request error can be answered for this API."""
    return api_key in ERROR_RESPONSES or kind(api_key) in IN_REPLICA_MANAGER or _has_top_level(api_key)


def _has_top_level(api_key: int) -> bool:
    spec = SUPPORTED[api_key]
    item = spec.response._struct.fields.get("error_code")
    return item is not None and all(
        item.for_version_q(v) for v in range(spec.min_version, spec.max_version + 1)
    )


#: APIs that write per partition: a failed partition is taken out of the request before it runs, and its
#: error entry (response topic class, partition class, other fields) added to the answer
WRITES: dict[str, tuple[str, str, dict[str, int]]] = {
    "offset_commit": ("OffsetCommitResponseTopic", "OffsetCommitResponsePartition", {}),
    "delete_records": ("DeleteRecordsTopicResult", "DeleteRecordsPartitionResult", {"low_watermark": -1}),
}
#: APIs whose pushed errors may name one partition
PER_PARTITION = (
    "produce",
    "fetch",
    "metadata",
    "list_offsets",
    "offset_for_leader_epoch",
    "offset_fetch",
    *WRITES,
)


def _withhold(
    request: Request, take: Callable[[TopicPartition], Errors | None]
) -> list[tuple[str, int, int]]:
    """Take the partitions with a pushed error out of a writing request: (topic, partition, error) each."""
    failed: list[tuple[str, int, int]] = []
    kept_topics = []
    for topic in request.body.topics or ():
        kept = []
        for part in topic.partitions:
            error = take(TopicPartition(topic.name, part.partition_index))
            if error is None:
                kept.append(part)
            else:
                failed.append((topic.name, part.partition_index, int(error)))
        topic.partitions = kept
        if kept:
            kept_topics.append(topic)
    if failed:
        request.body.topics = kept_topics
    return failed


def _add_failed(api: str, request: Request, response: Any, failed: list[tuple[str, int, int]]) -> None:
    topic_name, part_name, extra = WRITES[api]
    topic_cls = getattr(request.spec.response, topic_name)
    part_cls = getattr(topic_cls, part_name)
    if response.topics is None:
        response.topics = []
    by_name = {t.name: t for t in response.topics}
    for name, index, error in failed:
        topic = by_name.get(name)
        if topic is None:
            topic = by_name[name] = topic_cls(name=name, partitions=[])
            response.topics.append(topic)
        topic.partitions.append(part_cls(partition_index=index, error_code=error, **extra))


def _partition_entries(api: str, response: Any) -> list[tuple[str, Any]]:
    """(topic, partition entry) of every partition in a per-partition read-only API's answer."""
    if api == "offset_fetch" and getattr(response, "groups", None):
        return [(t.name, p) for g in response.groups for t in g.topics for p in t.partitions]
    name = "topic" if api == "offset_for_leader_epoch" else "name"
    return [(getattr(t, name), p) for t in response.topics or () for p in t.partitions]


def _index(entry: Any) -> int:
    for field in ("partition_index", "partition"):
        value = getattr(entry, field, None)
        if isinstance(value, int):
            return value
    raise AttributeError("a partition entry without an index")


def _fail_partitions(api: str, response: Any, take: Callable[[TopicPartition], Errors | None]) -> None:
    for topic, entry in _partition_entries(api, response):
        error = take(TopicPartition(topic, _index(entry)))
        if error is None:
            continue
        entry.error_code = int(error)
        for field, value in (("offset", -1), ("timestamp", -1), ("end_offset", -1), ("committed_offset", -1)):
            if hasattr(entry, field) and getattr(entry, field) is not None:
                setattr(entry, field, value)


async def handle(request: Request, conn: Connection) -> Any:
    """Run the API's handler, unless an authorizer or a pushed error answers the request instead.

    With an authorizer (``acl_checks``) a request it refuses as a whole gets the API's error response,
    the groups it refuses in a batched FindCoordinator or OffsetFetch get their error in the answer, and
    an OffsetCommit's partitions of topics the caller may not READ are taken out and answered
    TOPIC_AUTHORIZATION_FAILED.
    """
    if not enforced(conn):
        return await _handle(request, conn)
    refused = denied(request, conn)
    if refused is not None:
        if request.api_key == 0 and request.body.acks == 0:  # no answer to give: Kafka closes the connection
            raise CloseConnection(f"acks=0 Produce failed with {refused.name}")
        return ERROR_RESPONSES.get(request.api_key, _top_level)(request, int(refused))
    failed = []
    if request.api_key == 8:  # OffsetCommit: READ on each topic, else TOPIC_AUTHORIZATION_FAILED for it
        refused = int(Errors.TOPIC_AUTHORIZATION_FAILED)
        failed = _withhold(request, lambda tp: refused if topic_denied(conn, READ, tp.topic) else None)
    response = await _handle(request, conn)
    if response is not None and not isinstance(response, bytes):
        restrict_groups(request, conn, response)
        if failed:
            _add_failed("offset_commit", request, response, failed)
    return response


async def _handle(request: Request, conn: Connection) -> Any:
    """Run the API's handler, unless a pushed error answers the request instead (module docstring)."""
    handler: Callable[[Request, Connection], Awaitable[Any]] = HANDLERS[request.api_key]
    manager = conn.cluster.brokers[conn.broker_id].replica_manager
    pushed = manager.pushed_errors if manager is not None else None
    api = kind(request.api_key)
    if pushed is None or not pushed.any() or api in IN_REPLICA_MANAGER:
        return await handler(request, conn)
    error = pushed.take(api, None)
    if error is not None:
        build = ERROR_RESPONSES.get(request.api_key, _top_level)
        return build(request, int(error))
    if api in WRITES:
        failed = _withhold(request, lambda tp: pushed.take(api, tp))
        response = await handler(request, conn)
        if failed and response is not None:
            _add_failed(api, request, response, failed)
        return response
    response = await handler(request, conn)
    if api in PER_PARTITION and response is not None:
        _fail_partitions(api, response, lambda tp: pushed.take(api, tp))
    return response
