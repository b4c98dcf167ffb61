"""Request headers and bodies in, response frames out, through kafka-python's ``kafka.protocol``.

The table ``SUPPORTED`` lists every API and version range minibroker answers;
ApiVersions advertises exactly it. Decoding a frame:

1. the first 8 bytes are the same in every header version: api key, api
   version, correlation id (fewer than 8 bytes: ``MalformedRequest``);
2. an api key outside the table: ``UnknownApiKey``; a version outside its range:
   ``UnsupportedVersion`` (ApiVersions is the exception the server answers, with
   a v0 body; for everything else Kafka closes the connection);
3. the rest of the header (v1, or v2 with tagged fields for flexible versions)
   and the body are decoded by the kafka-python class of that API; a body
   that runs past the end of the frame, bytes that cannot be decoded, or a
   non-nullable field sent as null (``nulls.py``: Kafka's parsers refuse it),
   make ``MalformedRequest``.

Encoding a response writes the response header (v0, or v1 for flexible
versions; ApiVersions always v0) and the body, framed.

Invariant: every exception this module raises for bad input is a ``RequestError``;
nothing else escapes ``decode_request`` for any byte string.
"""

from __future__ import annotations

import io
import struct
from typing import Any

import attrs
from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeQuorumRequest,
    DescribeQuorumResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.schemas.fields.codecs.encode_buffer import EncodeBufferPool

from minibroker.server import share_messages as share
from minibroker.server.nulls import non_nullable_null
from minibroker.server.schemas import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

#: Kafka's UNSUPPORTED_VERSION error code
UNSUPPORTED_VERSION = 35

_FIXED_HEADER = struct.Struct(">hhi")


@attrs.frozen
class ApiSpec:
    """One API: its key, name, kafka-python request and response classes, versions we answer."""

    key: int
    name: str
    request: type[ApiMessage]
    response: type[ApiMessage]
    min_version: int
    max_version: int


def _spec(request: type[ApiMessage], response: type[ApiMessage], low: int, high: int) -> ApiSpec:
    return ApiSpec(request.API_KEY, request.name.removesuffix("Request"), request, response, low, high)


#: api key -> what we answer. Produce from v3 and Fetch from v4: record batch v2 only. Produce,
#: Fetch and Metadata stop before the versions that name topics by id (Produce 13, Fetch 13).
SUPPORTED: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        _spec(ProduceRequest, ProduceResponse, 3, 12),
        _spec(FetchRequest, FetchResponse, 4, 12),
        _spec(ListOffsetsRequest, ListOffsetsResponse, 1, 9),
        _spec(MetadataRequest, MetadataResponse, 0, 12),
        _spec(ApiVersionsRequest, ApiVersionsResponse, 0, 4),
        _spec(InitProducerIdRequest, InitProducerIdResponse, 0, 4),
        _spec(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4),
        # the transaction coordinator (server/transactions.py), transaction protocol versions 1 and 2
        # (KIP-890: the batched AddPartitionsToTxn v4+, EndTxn v5+ and Produce v12+ of version 2)
        _spec(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5),
        _spec(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4),
        _spec(EndTxnRequest, EndTxnResponse, 0, 5),
        _spec(TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 5),
        _spec(WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, 1),
        # KIP-664; ListTransactions stops before v2 (a transactional id pattern, KIP-1152)
        _spec(DescribeProducersRequest, DescribeProducersResponse, 0, 0),
        _spec(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0),
        _spec(ListTransactionsRequest, ListTransactionsResponse, 0, 1),
        # the group coordinator (server/groups.py, server/group_admin.py); OffsetCommit and OffsetFetch v10
        # name topics by id; FindCoordinator stops before v5 (share groups), DescribeGroups before v6
        _spec(FindCoordinatorRequest, FindCoordinatorResponse, 0, 4),
        _spec(JoinGroupRequest, JoinGroupResponse, 0, 9),
        _spec(SyncGroupRequest, SyncGroupResponse, 0, 5),
        _spec(HeartbeatRequest, HeartbeatResponse, 0, 4),
        _spec(LeaveGroupRequest, LeaveGroupResponse, 0, 5),
        _spec(OffsetCommitRequest, OffsetCommitResponse, 2, 10),
        _spec(OffsetFetchRequest, OffsetFetchResponse, 1, 10),
        _spec(DescribeGroupsRequest, DescribeGroupsResponse, 0, 5),
        _spec(ListGroupsRequest, ListGroupsResponse, 0, 5),
        _spec(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2),
        # KIP-848's consumer group protocol (schemas in server/schemas: kafka-python has none)
        _spec(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, 0, 1),
        _spec(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, 0, 1),
        # admin (server/admin_topics.py, admin_configs.py, admin_cluster.py): Kafka 4's version ranges
        _spec(CreateTopicsRequest, CreateTopicsResponse, 2, 7),
        _spec(DeleteTopicsRequest, DeleteTopicsResponse, 1, 6),
        _spec(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
        _spec(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4),
        _spec(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
        _spec(ElectLeadersRequest, ElectLeadersResponse, 0, 2),
        _spec(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
        _spec(DescribeClusterRequest, DescribeClusterResponse, 0, 2),
        # share groups (KIP-932, server/share.py): version 1 of each, Kafka 4.1's
        _spec(share.ShareGroupHeartbeatRequest, share.ShareGroupHeartbeatResponse, 1, 1),
        _spec(share.ShareGroupDescribeRequest, share.ShareGroupDescribeResponse, 1, 1),
        _spec(share.ShareFetchRequest, share.ShareFetchResponse, 1, 1),
        _spec(share.ShareAcknowledgeRequest, share.ShareAcknowledgeResponse, 1, 1),
        # share-group offsets admin (server/share_admin.py): version 0 of each
        _spec(share.DescribeShareGroupOffsetsRequest, share.DescribeShareGroupOffsetsResponse, 0, 0),
        _spec(share.AlterShareGroupOffsetsRequest, share.AlterShareGroupOffsetsResponse, 0, 0),
        _spec(share.DeleteShareGroupOffsetsRequest, share.DeleteShareGroupOffsetsResponse, 0, 0),
        _spec(AlterConfigsRequest, AlterConfigsResponse, 0, 2),
        # ACLs (server/admin_acls.py, authorizer.py)
        _spec(DescribeAclsRequest, DescribeAclsResponse, 1, 3),
        _spec(CreateAclsRequest, CreateAclsResponse, 1, 3),
        _spec(DeleteAclsRequest, DeleteAclsResponse, 1, 3),
        # log dirs, the quorum, paged topic descriptions (admin_log_dirs.py, admin_cluster.py,
        # describe_topic_partitions.py) and OffsetDelete (group_admin.py)
        _spec(DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 4),
        _spec(AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, 1, 2),
        _spec(DescribeQuorumRequest, DescribeQuorumResponse, 0, 2),
        _spec(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0),
        _spec(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0),
        # partition reassignments (admin_reassignments.py)
        _spec(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, 0, 1),
        _spec(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, 0, 0),
        # SCRAM credentials, stored and described (admin_scram.py)
        _spec(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, 0, 0),
        _spec(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, 0, 0),
    )
}

API_VERSIONS_KEY = ApiVersionsRequest.API_KEY


class RequestError(Exception):
    """A frame that is not a request we can answer; ``correlation_id`` when it could be read."""

    def __init__(self, message: str, api_key: int = -1, api_version: int = -1, correlation_id: int = -1):
        super().__init__(message)
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id


class MalformedRequest(RequestError):
    """Bytes that do not decode as the request their header announces."""


class UnknownApiKey(RequestError):
    """An api key minibroker does not implement."""


class UnsupportedVersion(RequestError):
    """A known api key at a version outside ``SUPPORTED``."""


@attrs.frozen
class Request:
    """A decoded request: header fields and the kafka-python body object."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any

    @property
    def spec(self) -> ApiSpec:
        return SUPPORTED[self.api_key]

    @property
    def name(self) -> str:
        return self.spec.name


def peek_header(frame: bytes) -> tuple[int, int, int]:
    """(api key, api version, correlation id): the part every request header version shares."""
    if len(frame) < _FIXED_HEADER.size:
        raise MalformedRequest(f"request of {len(frame)} bytes is shorter than a request header")
    return _FIXED_HEADER.unpack_from(frame)


def decode_request(frame: bytes) -> Request:
    """Decode one frame's payload; raise a ``RequestError`` subclass if it cannot be answered."""
    api_key, version, correlation_id = peek_header(frame)
    spec = SUPPORTED.get(api_key)
    if spec is None:
        raise UnknownApiKey(f"unknown api key {api_key}", api_key, version, correlation_id)
    if not spec.min_version <= version <= spec.max_version:
        raise UnsupportedVersion(
            f"{spec.name} v{version} is not supported (v{spec.min_version}-v{spec.max_version})",
            api_key,
            version,
            correlation_id,
        )
    cls = spec.request
    flexible = cls.flexible_version_q(version)
    try:
        header = _plain_header(frame, flexible)
        if header is None:  # tagged fields in the header, or bytes kafka-python must judge
            stream = io.BytesIO(frame)
            decoded = cls.header_class.decode(stream, flexible=flexible)
            header = decoded.client_id, stream.tell()
        decode = _body_decoders.get((api_key, version))
        if decode is None:
            decode = _body_decoders[api_key, version] = cls._struct.compiled_decode_from(
                version, compact=flexible, tagged=flexible, data_class=cls
            )
        body, end = decode(memoryview(frame), header[1])
    except Exception as error:  # kafka-python raises struct.error, ValueError, IndexError, ...
        raise MalformedRequest(
            f"{spec.name} v{version} does not decode: {type(error).__name__}: {error}",
            api_key,
            version,
            correlation_id,
        ) from None
    if end > len(frame):
        raise MalformedRequest(
            f"{spec.name} v{version} runs {end - len(frame)} bytes past the end of its frame",
            api_key,
            version,
            correlation_id,
        )
    null = non_nullable_null(cls._struct, body, version)
    if null is not None:
        raise MalformedRequest(
            f"{spec.name} v{version} does not decode: non-nullable field {null} was serialized as null",
            api_key,
            version,
            correlation_id,
        )
    return Request(api_key, version, correlation_id, header[0], body)


#: (api key, version) -> kafka-python's compiled body decoder
_body_decoders: dict[tuple[int, int], Any] = {}
#: (response class, version) -> (kafka-python's compiled body encoder, header bytes after the correlation id)
_body_encoders: dict[tuple[type, int], tuple[Any, bytes]] = {}
_CLIENT_ID_LENGTH = struct.Struct(">h")
_FRAME_AND_CORRELATION = struct.Struct(">ii")


def _plain_header(frame: bytes, flexible: bool) -> tuple[str | None, int] | None:
    """(client id, where the body starts) of a header without tagged fields, read directly; None
    for anything else (kafka-python's header decoder then reads it, and names what is wrong)."""
    fixed = _FIXED_HEADER.size
    if len(frame) < fixed + 2:
        return None
    (length,) = _CLIENT_ID_LENGTH.unpack_from(frame, fixed)
    start = fixed + 2
    if length == -1:
        client_id = None
    elif 0 <= length <= len(frame) - start:
        try:
            client_id = frame[start : start + length].decode()
        except UnicodeDecodeError:
            return None
        start += length
    else:
        return None
    if flexible:  # header v2: tagged fields, read here only when there are none
        if start >= len(frame) or frame[start] != 0:
            return None
        start += 1
    return client_id, start


def encode_response(request: Request, body: ApiMessage) -> bytes:
    """The framed response to ``request``: response header (its correlation id) and ``body``.

    The header is v0 (the correlation id), or v1 (plus no tagged fields) for a flexible version;
    ApiVersions always answers with v0. The body goes through kafka-python's compiled encoder.
    """
    version = request.api_version
    cls = type(body)
    found = _body_encoders.get((cls, version))
    if found is None:
        flexible = cls.flexible_version_q(version)
        encoder = cls._struct.compiled_encode_into(version, compact=flexible, tagged=flexible)
        found = _body_encoders[cls, version] = (
            encoder,
            b"\x00" if flexible and cls.API_KEY != API_VERSIONS_KEY else b"",
        )
    encode, tagged = found
    body.API_VERSION = version
    with EncodeBufferPool.acquire() as out:
        start = _FRAME_AND_CORRELATION.size + len(tagged)
        out.ensure(start)
        out.buf[8:start] = tagged
        out.pos = start
        encode(body, out)
        _FRAME_AND_CORRELATION.pack_into(out.buf, 0, out.pos - 4, request.correlation_id)
        return bytes(memoryview(out.buf)[: out.pos])


def frame_response(request: Request, body: bytes | bytearray) -> bytes:
    """The framed response to ``request`` around ``body``, encoded already (header: ``encode_response``)."""
    flexible = request.spec.response.flexible_version_q(request.api_version)
    tagged = b"\x00" if flexible and request.api_key != API_VERSIONS_KEY else b""
    head = _FRAME_AND_CORRELATION.pack(4 + len(tagged) + len(body), request.correlation_id)
    return b"".join((head, tagged, body))


#: feature -> (lowest supported, highest supported, finalized level) that ApiVersions v3+ advertises,
#: as a Kafka 4.0 cluster does: ``transaction.version`` 2 lets clients use KIP-890's protocol
FEATURES: dict[str, tuple[int, int, int]] = {"transaction.version": (0, 2, 2)}


def api_versions_body(version: int, error_code: int = 0) -> ApiVersionsResponse:
    """The ApiVersions response: ``SUPPORTED`` and ``FEATURES``, with ``error_code``, at ``version``."""
    keys = [
        ApiVersionsResponse.ApiVersion(api_key=s.key, min_version=s.min_version, max_version=s.max_version)
        for s in sorted(SUPPORTED.values(), key=lambda s: s.key)
    ]
    supported = [
        ApiVersionsResponse.SupportedFeatureKey(name=name, min_version=low, max_version=high)
        for name, (low, high, _) in FEATURES.items()
    ]
    finalized = [
        ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
        for name, (_, _, level) in FEATURES.items()
    ]
    return ApiVersionsResponse(
        version=version,
        error_code=error_code,
        api_keys=keys,
        throttle_time_ms=0,
        supported_features=supported,
        finalized_features_epoch=0,
        finalized_features=finalized,
    )


def unsupported_api_versions_response(correlation_id: int) -> bytes:
    """Kafka's answer to an ApiVersions request of a version it does not know: v0, UNSUPPORTED_VERSION."""
    body = api_versions_body(0, UNSUPPORTED_VERSION)
    body.with_header(correlation_id=correlation_id)
    return bytes(body.encode(header=True, framed=True))
