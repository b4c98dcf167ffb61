"""Log dirs, the quorum, paged topic descriptions and OffsetDelete, through kafka-python and raw requests."""

from __future__ import annotations

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.protocol.admin import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse
from kafka.protocol.producer import ProduceResponse
from kafka.structs import OffsetAndMetadata

from minibroker.common.errors import Errors
from tests.server.conftest import RawClient, scenario
from tests.server.test_purgatories import produce_request, records


@pytest.fixture
def server(serve):
    topics = 'name = "t"\npartitions = 3\nreplication_factor = 2\n\n[[topics]]\nname = "u"\npartitions = 1'
    return serve(scenario(brokers=2, topics=topics))


@pytest.fixture
def admin(server):
    client = KafkaAdminClient(bootstrap_servers=server.bootstrap, request_timeout_ms=10_000)
    yield client
    client.close()


@pytest.fixture
def raw(server):
    client = RawClient(server.port(0))
    yield client
    client.close()


def test_kafka_python_describes_each_brokers_log_dir_with_sizes_from_the_logs(server, admin, raw):
    request = produce_request(-1, 5000, b"x" * 100)
    assert raw.request(request, ProduceResponse, 9).responses[0].partition_responses[0].error_code == 0
    answer = {entry["broker"]: entry["log_dirs"] for entry in admin.describe_log_dirs()}
    assert sorted(answer) == [0, 1]
    (dir0,) = answer[0]
    assert (dir0["error_code"], dir0["log_dir"], dir0["total_bytes"]) == (0, "/minibroker/broker-0", -1)
    sizes = {
        (t["name"], p["partition_index"]): p["partition_size"]
        for t in dir0["topics"]
        for p in t["partitions"]
    }
    assert sizes == {("t", 0): len(records(b"x" * 100)), ("t", 1): 0, ("t", 2): 0, ("u", 0): 0}
    assert {p["partition_index"] for t in answer[1][0]["topics"] for p in t["partitions"]} == {0, 1, 2}


def test_alter_replica_log_dirs_knows_one_dir_per_broker(raw):
    dirs_cls = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    topic_cls = dirs_cls.AlterReplicaLogDirTopic
    dirs = [
        dirs_cls(
            path="/minibroker/broker-0",
            topics=[topic_cls(name="t", partitions=[0]), topic_cls(name="x", partitions=[0])],
        ),
        dirs_cls(path="/elsewhere", topics=[topic_cls(name="t", partitions=[1])]),
    ]
    response = raw.request(AlterReplicaLogDirsRequest(dirs=dirs), AlterReplicaLogDirsResponse, 2)
    errors = {(r.topic_name, p.partition_index): p.error_code for r in response.results for p in r.partitions}
    assert errors == {
        ("t", 0): 0,
        ("x", 0): 9,
        ("t", 1): Errors.LOG_DIR_NOT_FOUND,
    }  # 9: REPLICA_NOT_AVAILABLE


def describe_page(raw, names, limit, cursor=None):
    request = DescribeTopicPartitionsRequest(
        topics=[DescribeTopicPartitionsRequest.TopicRequest(name=n) for n in names],
        response_partition_limit=limit,
        cursor=cursor,
    )
    response = raw.request(request, DescribeTopicPartitionsResponse, 0)
    pages = [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in response.topics]
    cursor = response.next_cursor
    return pages, None if cursor is None else (cursor.topic_name, cursor.partition_index)


def test_describe_topic_partitions_pages_with_kafkas_cursor(raw, admin):
    cursor_cls = DescribeTopicPartitionsRequest.Cursor
    assert describe_page(raw, [], 2) == ([("t", 0, [0, 1])], ("t", 2))
    assert describe_page(raw, [], 2, cursor_cls(topic_name="t", partition_index=2)) == (
        [("t", 0, [2]), ("u", 0, [0])],
        None,
    )
    assert describe_page(raw, [], 3) == ([("t", 0, [0, 1, 2])], ("u", 0))
    assert describe_page(raw, ["u", "nope"], 10) == ([("nope", 3, []), ("u", 0, [0])], None)
    # a cursor on a topic that was not asked for fails every named topic with INVALID_REQUEST
    assert describe_page(raw, ["u"], 10, cursor_cls(topic_name="t", partition_index=0)) == (
        [("u", 42, [])],
        None,
    )
    described = admin.describe_topic_partitions(["t"])
    assert [p["leader_id"] for p in described["topics"][0]["partitions"]] == [0, 1, 0]


def test_kafka_python_describes_the_controller_as_a_one_voter_quorum(admin):
    (topic,) = admin.describe_metadata_quorum()["topics"]
    (partition,) = topic["partitions"]
    assert (topic["topic_name"], partition["leader_id"], partition["leader_epoch"]) == (
        "__cluster_metadata",
        0,
        1,
    )
    assert [v["replica_id"] for v in partition["current_voters"]] == [0]
    assert [o["replica_id"] for o in partition["observers"]] == [1]


def offset_delete(raw, group, partitions):
    topic_cls = OffsetDeleteRequest.OffsetDeleteRequestTopic
    topics = [
        topic_cls(
            name=name, partitions=[topic_cls.OffsetDeleteRequestPartition(partition_index=p) for p in parts]
        )
        for name, parts in partitions.items()
    ]
    response = raw.request(OffsetDeleteRequest(group_id=group, topics=topics), OffsetDeleteResponse, 0)
    per_partition = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    return response.error_code, per_partition


def test_offset_delete_answers_kafkas_group_and_partition_errors(server, admin):
    consumer = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="g", enable_auto_commit=False)
    try:
        consumer.subscribe(["t"])
        consumer.poll(1000)
        while not consumer.assignment():
            consumer.poll(200)
        brokers = server.cluster.brokers
        (coordinator,) = server.call(
            lambda: [b.broker_id for b in brokers if b.coordinator.refusal("g") is None]
        )
        client = RawClient(server.port(coordinator))
        try:
            consumer.commit({TopicPartition("t", 0): OffsetAndMetadata(1, "", -1)})
            assert offset_delete(client, "g", {"t": [0], "u": [0], "none": [0]}) == (
                0,
                {("t", 0): Errors.GROUP_SUBSCRIBED_TO_TOPIC, ("u", 0): 0, ("none", 0): 3},
            )
            consumer.unsubscribe()
            consumer.close()
            server.wait_for(
                lambda: not brokers[coordinator].coordinator.groups["g"].members, "the member to leave"
            )
            assert offset_delete(client, "g", {"t": [0]}) == (0, {("t", 0): 0})
            assert offset_delete(client, "absent", {"t": [0]}) == (Errors.GROUP_ID_NOT_FOUND, {})
        finally:
            client.close()
    finally:
        consumer.close()


def test_a_topic_made_again_under_its_old_name_gets_a_new_topic_id(admin, raw):
    from kafka.admin import NewTopic
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    def current_id():
        request = MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name="again")], allow_auto_topic_creation=False
        )
        (topic,) = raw.request(request, MetadataResponse, 12).topics
        return topic.topic_id

    admin.create_topics([NewTopic("again", 1, 1)])
    first = current_id()
    admin.delete_topics(["again"])
    admin.create_topics([NewTopic("again", 2, 1)])
    assert current_id() not in (first, None)
