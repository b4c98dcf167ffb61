"""Each API over a raw socket, with exact answers: Metadata, ListOffsets, InitProducerId,
OffsetForLeaderEpoch, and the Fetch corners (sessions, isolation, errors)."""

from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.consumer import (
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceResponse
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from minibroker.common.messages import TopicPartition
from minibroker.server.metadata import topic_id
from tests.server.conftest import RawClient, scenario
from tests.server.test_purgatories import fetch_request, produce_request


@pytest.fixture
def server(serve):
    return serve(scenario(config='"auto.create.topics.enable" = false'))


@pytest.fixture
def client(server):
    raw = RawClient(server.port(0))
    yield raw
    raw.close()


def metadata(client: RawClient, names: list[str] | None, version: int = 12, allow: bool = True):
    topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=n) for n in names]
    return client.request(
        MetadataRequest(topics=topics, allow_auto_topic_creation=allow), MetadataResponse, version
    )


def test_metadata_lists_listeners_controller_and_partition_state(server, client):
    response = metadata(client, None)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (b, "127.0.0.1", server.port(b)) for b in range(3)
    ]
    assert (response.cluster_id, response.controller_id) == ("minibroker", 0)
    (topic,) = response.topics
    assert (topic.error_code, topic.name, topic.topic_id) == (0, "t", topic_id("t"))
    (part,) = topic.partitions
    assert (part.error_code, part.partition_index, part.leader_id, part.leader_epoch) == (0, 0, 0, 0)
    assert (part.replica_nodes, part.isr_nodes, part.offline_replicas) == ([0, 1, 2], [0, 1, 2], [])


def test_metadata_v0_empty_list_means_every_topic(client):
    assert [t.name for t in metadata(client, [], version=0).topics] == ["t"]
    assert metadata(client, [], version=1).topics == []


def test_metadata_after_a_crash_shows_offline_replicas_and_the_new_leader(server, client):
    server.call(server.cluster.crash, 2)
    server.call(server.cluster.crash, 1)
    # the controller fences a crashed broker from a timer task (crash_detection_ms, 0 here), which the
    # reaper runs on its next turn: wait for both fences before asking, or the answer may predate one
    controller = server.cluster.controller
    server.wait_for(lambda: controller.state[TopicPartition("t", 0)].isr == (0,), "both fences")
    response = metadata(client, ["t"])
    assert [b.node_id for b in response.brokers] == [0]
    (part,) = response.topics[0].partitions
    assert (part.leader_id, part.isr_nodes, part.offline_replicas) == (0, [0], [1, 2])


def test_unknown_topics_honour_auto_create_and_topic_name_rules(serve):
    disabled = serve(scenario(config='"auto.create.topics.enable" = false'))
    raw = RawClient(disabled.port(0))
    assert [(t.name, t.error_code) for t in metadata(raw, ["nope", "bad name"]).topics] == [
        ("nope", 3),  # UNKNOWN_TOPIC_OR_PARTITION
        ("bad name", 17),  # INVALID_TOPIC_EXCEPTION
    ]
    raw.close()
    enabled = serve(scenario(config='"default.replication.factor" = 4'))
    raw = RawClient(enabled.port(0))
    assert [(t.name, t.error_code) for t in metadata(raw, ["fresh"]).topics] == [("fresh", 38)]
    assert [(t.name, t.error_code) for t in metadata(raw, ["fresh"], allow=False).topics] == [("fresh", 3)]
    raw.close()
    assert "fresh" not in enabled.cluster.topics
    (line,) = [line for line in enabled.logs if "auto-create" in line]
    assert line.endswith(
        "Metadata: cannot auto-create 'fresh': "
        "topic 'fresh': replication factor must be between 1 and 3 (brokers)"
    )


def test_an_auto_created_topic_is_leader_not_available_first_then_has_its_leaders(serve):
    server = serve(scenario(config='"num.partitions" = 2, "default.replication.factor" = 3'))
    raw = RawClient(server.port(0))
    try:
        (first,) = metadata(raw, ["fresh"]).topics
        assert (first.name, first.error_code, first.partitions) == ("fresh", 5, [])  # LEADER_NOT_AVAILABLE
        assert first.topic_id == topic_id("fresh")
        (second,) = metadata(raw, ["fresh"]).topics
        assert second.error_code == 0
        assert [(p.partition_index, p.error_code, p.leader_id) for p in second.partitions] == [
            (0, 0, 0),
            (1, 0, 1),
        ]
    finally:
        raw.close()


def _stamped(values: list[tuple[int, bytes]]) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for timestamp, value in values:
        builder.append(timestamp=timestamp, key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


def list_offsets(client: RawClient, timestamp: int, version: int = 6, partition: int = 0):
    part = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=partition, timestamp=timestamp
    )
    topics = [ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=[part])]
    response = client.request(ListOffsetsRequest(replica_id=-1, topics=topics), ListOffsetsResponse, version)
    (answer,) = response.topics[0].partitions
    return answer.error_code, answer.timestamp, answer.offset, answer.leader_epoch


def test_list_offsets_earliest_latest_and_by_time(server, client):
    request = produce_request(-1, 5000)
    request.topic_data[0].partition_data[0].records = _stamped([(1000, b"a"), (2000, b"b"), (3000, b"c")])
    assert client.request(request, ProduceResponse, 9).responses[0].partition_responses[0].error_code == 0
    assert list_offsets(client, -2) == (0, -1, 0, 0)
    assert list_offsets(client, -1) == (0, -1, 3, 0)
    assert list_offsets(client, 1500) == (0, 2000, 1, 0)
    assert list_offsets(client, 9999) == (0, -1, -1, 0)
    assert list_offsets(client, -1, partition=7)[0] == 3  # UNKNOWN_TOPIC_OR_PARTITION
    follower = RawClient(server.port(1))
    assert list_offsets(follower, -1)[0] == 6  # NOT_LEADER_OR_FOLLOWER
    follower.close()


def test_list_offsets_max_timestamp_earliest_local_and_latest_tiered(server, client):
    assert list_offsets(client, -3, version=7) == (0, -1, -1, 0)  # an empty log: no record
    request = produce_request(-1, 5000)
    request.topic_data[0].partition_data[0].records = _stamped([(1000, b"a"), (3000, b"b"), (2000, b"c")])
    assert client.request(request, ProduceResponse, 9).responses[0].partition_responses[0].error_code == 0
    assert list_offsets(client, -3, version=7) == (0, 3000, 1, 0)
    assert list_offsets(client, -4, version=8) == (0, -1, 0, 0)
    assert list_offsets(client, -5, version=9) == (0, -1, -1, -1)


def test_init_producer_id_allocates_a_new_id_at_epoch_0_every_time_as_kafka_does(client):
    def init(version: int, **fields):
        response = client.request(
            InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, **fields),
            InitProducerIdResponse,
            version,
        )
        return response.error_code, response.producer_id, response.producer_epoch

    assert init(0) == (0, 1000, 0)
    assert init(4) == (0, 1001, 0)
    # an idempotent producer asking to bump its epoch (KIP-360) gets a fresh id, as from Kafka
    assert init(4, producer_id=1001, producer_epoch=0) == (0, 1002, 0)
    transactional = client.request(
        InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), InitProducerIdResponse, 4
    )
    # a transactional id goes to its transaction coordinator: none leads it before __transaction_state exists
    assert (transactional.error_code, transactional.producer_id) == (16, -1)  # NOT_COORDINATOR


def test_offset_for_leader_epoch_answers_from_the_epoch_cache(server, client):
    assert client.request(produce_request(-1, 5000, b"a", b"b"), ProduceResponse, 9)
    part = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition

    def ask(leader_epoch: int, current: int = -1):
        topics = [
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                topic="t",
                partitions=[part(partition=0, current_leader_epoch=current, leader_epoch=leader_epoch)],
            )
        ]
        response = client.request(
            OffsetForLeaderEpochRequest(replica_id=-1, topics=topics), OffsetForLeaderEpochResponse, 4
        )
        (answer,) = response.topics[0].partitions
        return answer.error_code, answer.leader_epoch, answer.end_offset

    assert ask(0) == (0, 0, 2)
    assert ask(0, current=0) == (0, 0, 2)
    assert ask(0, current=5)[0] == 75  # UNKNOWN_LEADER_EPOCH


def test_fetch_corners(server, client):
    assert client.request(produce_request(-1, 5000, b"x"), ProduceResponse, 9)
    incremental = fetch_request(0, 0, 1)
    incremental.session_id, incremental.session_epoch = 12345, 3
    response = client.request(incremental, FetchResponse, 12)
    assert (response.error_code, response.session_id, response.responses) == (70, 0, [])

    committed = fetch_request(0, 0, 1)
    committed.isolation_level = 1
    (part,) = client.request(committed, FetchResponse, 12).responses[0].partitions
    assert (part.error_code, part.high_watermark, part.last_stable_offset, part.aborted_transactions) == (
        0,
        1,
        1,
        [],
    )

    (part,) = client.request(fetch_request(5, 0, 1), FetchResponse, 12).responses[0].partitions
    assert (part.error_code, part.high_watermark, part.records) == (1, -1, b"")  # OFFSET_OUT_OF_RANGE

    fenced = fetch_request(0, 0, 1)
    fenced.topics[0].partitions[0].current_leader_epoch = 7
    (part,) = client.request(fenced, FetchResponse, 12).responses[0].partitions
    assert part.error_code == 75  # UNKNOWN_LEADER_EPOCH

    (part,) = client.request(fetch_request(0, 0, 1, topic="nope"), FetchResponse, 12).responses[0].partitions
    assert part.error_code == 3


def test_topic_ids_are_stable_uuids():
    assert topic_id("t") == topic_id("t") != topic_id("u")
    assert isinstance(topic_id("t"), uuid.UUID) and topic_id("t").version == 5


def tiered_server(serve, read_latency_ms: int = 20):
    """One broker, t-0 in tiered storage, three one-batch segments of which [0] and [1] are copied and
    deleted locally (local log start 2, highest offset in remote storage 1); and a client.

    segment.bytes 100 holds one of these batches, not two (a produce larger than a segment would be
    refused RECORD_LIST_TOO_LARGE, as Kafka refuses it)."""
    tiered = (
        'name = "t"\npartitions = 1\nreplication_factor = 1\n'
        'configs = { "remote.storage.enable" = true, "segment.bytes" = 100, "local.retention.bytes" = 0 }'
    )
    server = serve(
        scenario(
            config='"remote.log.storage.system.enable" = true, "remote.log.manager.task.interval.ms" = 10, '
            '"log.retention.check.interval.ms" = 10, '
            f'"minibroker.remote.storage.read.latency.ms" = {read_latency_ms}',
            topics=tiered,
        )
    )
    raw = RawClient(server.port(0))
    for value in (b"a", b"b", b"c"):  # one batch, one segment each: [0] and [1] close and are copied
        request = produce_request(-1, 5000)
        request.topic_data[0].partition_data[0].records = _stamped([(1000, value)])
        assert raw.request(request, ProduceResponse, 9).responses[0].partition_responses[0].error_code == 0
    log = server.cluster.brokers[0].logs[TopicPartition("t", 0)]
    server.wait_for(lambda: log.local_log_start_offset == 2, "local retention after the copies")
    return server, raw


def test_list_offsets_earliest_local_latest_tiered_and_by_time_through_the_remote_tier(serve):
    server, raw = tiered_server(serve)
    try:
        assert list_offsets(raw, -2)[2] == 0
        assert list_offsets(raw, -4)[2] == 2  # earliest local
        assert list_offsets(raw, -5)[2] == 1  # latest tiered
        error, timestamp, offset, _ = list_offsets(raw, 0)  # by time: the remote tier first
        assert (error, offset) == (0, 0) and timestamp > 0
        remote = server.cluster.brokers[0].replica_manager.remote_list_offsets_purgatory
        assert (remote.completions, remote.expirations, remote.num_delayed()) == (1, 0, 0)  # it waited there
    finally:
        raw.close()


def test_a_fetch_below_the_local_log_start_gets_the_remote_records_over_the_wire(serve):
    server, raw = tiered_server(serve)
    try:
        response = raw.request(fetch_request(0, 100, 1), FetchResponse, 12)
        (part,) = response.responses[0].partitions
        assert (part.error_code, part.high_watermark, part.log_start_offset) == (0, 3, 0)
        records = [(r.offset, r.value) for batch in MemoryRecords(part.records) for r in batch]
        assert records == [(0, b"a")]  # one remote segment per read
        remote = server.cluster.brokers[0].replica_manager.remote_fetch_purgatory
        assert (remote.completions, remote.expirations) == (1, 0)
    finally:
        raw.close()


def test_a_confluent_kafka_consumer_from_the_beginning_reads_through_the_remote_tier(serve):
    from confluent_kafka import OFFSET_BEGINNING, Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    server, raw = tiered_server(serve)
    raw.close()
    errors: list = []
    consumer = Consumer(
        {
            "bootstrap.servers": server.bootstrap,
            "group.id": "tiered",  # librdkafka requires one; assign() never joins the group
            "enable.auto.commit": False,
            "error_cb": errors.append,
        }
    )
    got = []
    try:
        consumer.assign([KafkaTopicPartition("t", 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append((message.offset(), message.value()))
    finally:
        consumer.close()
    assert got == [(0, b"a"), (1, b"b"), (2, b"c")]  # 0 and 1 from the remote tier, 2 from the local log
    assert errors == []
    remote = server.cluster.brokers[0].replica_manager.remote_fetch_purgatory
    assert (remote.completions, remote.expirations) == (2, 0)
