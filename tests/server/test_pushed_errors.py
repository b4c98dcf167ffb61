"""Pushed errors for every API the broker answers: each in its API's shape, counted, and without effect.

Raw requests on loopback to broker 0 of a 3-broker MiniCluster (topic t: 2 partitions, RF 3, t-0 led by 0).
"""

from __future__ import annotations

import time

import pytest
from kafka.protocol.admin import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from minibroker.server.codec import SUPPORTED, Request, encode_response
from minibroker.server.error_responses import ERROR_RESPONSES, _top_level, pushable
from minibroker.server.nulls import non_nullable_null
from minibroker.testing import MiniCluster
from tests.server.conftest import RawClient


@pytest.fixture
def cluster(minibroker_factory) -> MiniCluster:
    return minibroker_factory(3, topics=["t:2:3"])


@pytest.fixture
def client(cluster):
    raw = RawClient(int(cluster.bootstrap_servers.split(",")[0].rsplit(":", 1)[1]))
    yield raw
    raw.close()


def list_offsets(client: RawClient, partitions=(0, 1)):
    part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
    topics = [
        ListOffsetsRequest.ListOffsetsTopic(
            name="t", partitions=[part(partition_index=p, timestamp=-1) for p in partitions]
        )
    ]
    response = client.request(ListOffsetsRequest(replica_id=-1, topics=topics), ListOffsetsResponse, 6)
    return [(p.partition_index, p.error_code, p.offset) for p in response.topics[0].partitions]


def metadata(client: RawClient):
    request = MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name="t")], allow_auto_topic_creation=False
    )
    return client.request(request, MetadataResponse, 12)


def test_every_supported_api_has_an_error_answer_that_encodes_at_every_version():
    for key, spec in SUPPORTED.items():
        assert pushable(key), spec.name
        for version in range(spec.min_version, spec.max_version + 1):
            request = Request(key, version, 7, "c", spec.request(version=version))
            body = ERROR_RESPONSES.get(key, _top_level)(request, 6)
            if not isinstance(body, bytes):
                assert non_nullable_null(spec.response._struct, body, version) is None, (spec.name, version)
            data = body if isinstance(body, bytes) else encode_response(request, body)
            decoded = spec.response.decode(data[4:], version=version, header=True)
            assert decoded.header.correlation_id == 7


#: the admin APIs: served (the codec's SUPPORTED table), so errors can be pushed for them too
ADMIN = (
    "CreateTopics",
    "DeleteTopics",
    "DeleteRecords",
    "DescribeConfigs",
    "CreatePartitions",
    "ElectLeaders",
    "IncrementalAlterConfigs",
    "DescribeCluster",
)


def test_the_admin_apis_error_answers_name_what_the_request_named():
    import kafka.protocol.admin as admin

    served = {spec.name: spec.key for spec in SUPPORTED.values()}
    for name in ADMIN:
        assert pushable(served[name]), name
    part = admin.DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition
    delete = admin.DeleteRecordsRequest(
        topics=[
            admin.DeleteRecordsRequest.DeleteRecordsTopic(
                name="t", partitions=[part(partition_index=1, offset=5)]
            )
        ],
        timeout_ms=1000,
    )
    (topic,) = ERROR_RESPONSES[21](Request(21, 2, 1, "c", delete), 6).topics
    assert [(p.partition_index, p.error_code, p.low_watermark) for p in topic.partitions] == [(1, 6, -1)]
    resource = admin.DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name="t")
    describe = admin.DescribeConfigsRequest(resources=[resource], include_synonyms=False)
    (result,) = ERROR_RESPONSES[32](Request(32, 4, 1, "c", describe), 41).results
    assert (result.error_code, result.resource_type, result.resource_name, result.configs) == (41, 2, "t", [])
    elect = admin.ElectLeadersRequest(
        election_type=0,
        topic_partitions=[admin.ElectLeadersRequest.TopicPartitions(topic="t", partitions=[0, 1])],
        timeout_ms=1000,
    )
    answer = ERROR_RESPONSES[43](Request(43, 2, 1, "c", elect), 41)
    assert answer.error_code == 41
    assert [(p.partition_id, p.error_code) for p in answer.replica_election_results[0].partition_result] == [
        (0, 41),
        (1, 41),
    ]
    test_every_supported_api_has_an_error_answer_that_encodes_at_every_version()


def test_a_whole_metadata_request_fails_then_one_partition_then_none(cluster, client):
    cluster.push_errors("Metadata", ["NOT_CONTROLLER"], broker=0)
    cluster.push_errors(3, [5], broker=0, topic="t", partition=1)
    assert cluster.pending_errors(0) == {"metadata *": 1, "metadata t-1": 1}
    (topic,) = metadata(client).topics
    assert (topic.name, topic.error_code, topic.partitions) == ("t", 41, [])
    (topic,) = metadata(client).topics
    assert [(p.partition_index, p.error_code) for p in topic.partitions] == [(0, 0), (1, 5)]
    (topic,) = metadata(client).topics
    assert [p.error_code for p in topic.partitions] == [0, 0]
    assert cluster.pending_errors(0) == {}
    assert cluster.requests(0)["Metadata"] == 3


def test_list_offsets_and_offset_for_leader_epoch_fail_per_request_and_per_partition(cluster, client):
    cluster.push_errors("list_offsets", ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_SERVER_ERROR"], broker=0)
    cluster.push_errors("ListOffsets", ["OFFSET_NOT_AVAILABLE"], broker=0, topic="t", partition=0)
    assert list_offsets(client) == [(0, 6, -1), (1, 6, -1)]
    assert list_offsets(client) == [(0, -1, -1), (1, -1, -1)]
    # broker 0 leads t-0 (offset 0 = its HW) and not t-1
    assert list_offsets(client) == [(0, 78, -1), (1, 6, -1)]
    assert list_offsets(client) == [(0, 0, 0), (1, 6, -1)]

    part = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition
    topics = [
        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
            topic="t", partitions=[part(partition=0, current_leader_epoch=-1, leader_epoch=0)]
        )
    ]
    cluster.push_errors(23, ["FENCED_LEADER_EPOCH"], broker=0, topic="t", partition=0)
    answers = []
    for _ in range(2):
        response = client.request(
            OffsetForLeaderEpochRequest(replica_id=-1, topics=topics), OffsetForLeaderEpochResponse, 4
        )
        (p,) = response.topics[0].partitions
        answers.append((p.error_code, p.end_offset))
    assert answers == [(74, -1), (0, 0)]


def test_group_apis_answer_top_level_or_per_group_errors_and_do_nothing(cluster, client):
    cluster.push_errors("FindCoordinator", ["COORDINATOR_NOT_AVAILABLE"] * 2, broker=0)
    old = client.request(FindCoordinatorRequest(key="g", key_type=0), FindCoordinatorResponse, 3)
    assert (old.error_code, old.node_id, old.port) == (15, -1, -1)
    new = client.request(
        FindCoordinatorRequest(key_type=0, coordinator_keys=["g", "h"]), FindCoordinatorResponse, 4
    )
    assert [(c.key, c.error_code, c.node_id) for c in new.coordinators] == [("g", 15, -1), ("h", 15, -1)]

    cluster.push_errors("heartbeat", ["REBALANCE_IN_PROGRESS"], broker=0)
    beat = client.request(
        HeartbeatRequest(group_id="g", generation_id=1, member_id="m"), HeartbeatResponse, 4
    )
    assert beat.error_code == 27

    cluster.push_errors("describe_groups", ["NOT_COORDINATOR"], broker=0)
    described = client.request(DescribeGroupsRequest(groups=["a", "b"]), DescribeGroupsResponse, 5)
    assert [(g.group_id, g.error_code) for g in described.groups] == [("a", 16), ("b", 16)]
    cluster.push_errors(42, ["GROUP_AUTHORIZATION_FAILED"], broker=0)
    deleted = client.request(DeleteGroupsRequest(groups_names=["a"]), DeleteGroupsResponse, 2)
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("a", 30)]

    # a failed OffsetCommit commits nothing: OffsetFetch still finds no offset (asked of the coordinator)
    # the first real FindCoordinator creates __consumer_offsets and is answered COORDINATOR_NOT_AVAILABLE,
    # as Kafka answers it; the client asks again (real time: at most 5 s at 0.1 s steps)
    found = client.request(FindCoordinatorRequest(key="solo", key_type=0), FindCoordinatorResponse, 3)
    assert found.error_code == 15
    for _ in range(50):
        found = client.request(FindCoordinatorRequest(key="solo", key_type=0), FindCoordinatorResponse, 3)
        if found.error_code == 0:
            break
        time.sleep(0.1)
    assert found.error_code == 0
    coordinator = RawClient(found.port)
    try:
        commit_then_fetch(cluster, coordinator, found.node_id)
    finally:
        coordinator.close()


def _commit_request(offsets: dict[int, int]) -> OffsetCommitRequest:
    """Group ``solo``'s commit (no generation) of ``offsets`` (partition of t -> offset)."""
    part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
    partitions = [part(partition_index=p, committed_offset=o) for p, o in offsets.items()]
    return OffsetCommitRequest(
        group_id="solo",
        generation_id_or_member_epoch=-1,
        member_id="",
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="t", partitions=partitions)],
    )


def commit_then_fetch(cluster: MiniCluster, client: RawClient, broker: int) -> None:
    commit = _commit_request({0: 5})
    cluster.push_errors("offset_commit", ["NOT_COORDINATOR"], broker=broker)
    committed = client.request(commit, OffsetCommitResponse, 8)
    assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [(0, 16)]
    fetch = OffsetFetchRequest(
        group_id="solo", topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0])]
    )
    cluster.push_errors("OffsetFetch", ["COORDINATOR_LOAD_IN_PROGRESS"], broker=broker)
    failed = client.request(fetch, OffsetFetchResponse, 7)
    assert failed.error_code == 14
    assert [(p.partition_index, p.error_code) for p in failed.topics[0].partitions] == [(0, 14)]
    fetched = client.request(fetch, OffsetFetchResponse, 7)
    assert fetched.error_code == 0
    assert [(p.error_code, p.committed_offset) for p in fetched.topics[0].partitions] == [(0, -1)]
    # the same commit without a pushed error is stored, and a partition's pushed error hides it once
    assert client.request(commit, OffsetCommitResponse, 8).topics[0].partitions[0].error_code == 0
    cluster.push_errors(9, ["UNSTABLE_OFFSET_COMMIT"], broker=broker, topic="t", partition=0)
    answers = [client.request(fetch, OffsetFetchResponse, 7).topics[0].partitions[0] for _ in range(2)]
    assert [(p.error_code, p.committed_offset) for p in answers] == [(88, -1), (0, 5)]

    # a partition's OffsetCommit error: that partition is not written, the other one is
    both = _commit_request({0: 9, 1: 9})
    cluster.push_errors("OffsetCommit", ["OFFSET_METADATA_TOO_LARGE"], broker=broker, topic="t", partition=0)
    (topic,) = client.request(both, OffsetCommitResponse, 8).topics
    assert sorted((p.partition_index, p.error_code) for p in topic.partitions) == [(0, 12), (1, 0)]
    fetch_both = OffsetFetchRequest(
        group_id="solo",
        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="t", partition_indexes=[0, 1])],
    )
    (topic,) = client.request(fetch_both, OffsetFetchResponse, 7).topics
    assert sorted((p.partition_index, p.committed_offset) for p in topic.partitions) == [(0, 5), (1, 9)]
    assert cluster.pending_errors(broker) == {}


def test_init_producer_id_and_api_versions_answer_their_top_level_error(cluster, client):
    cluster.push_errors("InitProducerId", ["COORDINATOR_NOT_AVAILABLE"], broker=0)
    request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=-1)
    answers = [client.request(request, InitProducerIdResponse, 4) for _ in range(2)]
    assert [(a.error_code, a.producer_id) for a in answers] == [(15, -1), (0, 1000)]
    cluster.push_errors(18, ["UNKNOWN_SERVER_ERROR"], broker=0)
    versions = client.request(
        ApiVersionsRequest(client_software_name="t", client_software_version="1"), ApiVersionsResponse, 3
    )
    assert (versions.error_code, versions.api_keys) == (-1, [])


def test_bad_pushes_are_one_line_errors(cluster):
    with pytest.raises(
        ValueError, match=r"^api 'UpdateFeatures': errors can be pushed for Produce \(0\), Fetch \(1\)"
    ):
        cluster.push_errors("UpdateFeatures", [6], broker=0)
    with pytest.raises(ValueError, match=r"^api 'heartbeat': its errors are per request"):
        cluster.push_errors("heartbeat", [6], broker=0, topic="t", partition=0)
    assert cluster.pending_errors(0) == {}


def test_any_kafka_error_by_any_of_its_names_or_its_code_on_produce_and_admin_apis(cluster, client):
    from kafka.protocol.producer import ProduceResponse

    from minibroker.common.errors import ErrorCode
    from minibroker.server.control import parse_error
    from tests.server.test_purgatories import produce_request

    assert parse_error("message_too_large") == parse_error("MESSAGE_SIZE_TOO_LARGE") == 10
    assert isinstance(parse_error(89), ErrorCode) and parse_error(89).name == "THROTTLING_QUOTA_EXCEEDED"
    cluster.push_errors("produce", ["MESSAGE_TOO_LARGE", 89], broker=0, topic="t", partition=0)
    cluster.push_errors("DescribeLogDirs", ["CLUSTER_AUTHORIZATION_FAILED"], broker=0)
    codes = [
        client.request(produce_request(-1, 5000, b"v"), ProduceResponse, 9)
        .responses[0]
        .partition_responses[0]
        for _ in range(3)
    ]
    assert [c.error_code for c in codes] == [10, 89, 0]
    from kafka.protocol.admin import DescribeLogDirsRequest, DescribeLogDirsResponse

    answer = client.request(DescribeLogDirsRequest(topics=None), DescribeLogDirsResponse, 4)
    assert (answer.error_code, answer.results) == (31, [])
