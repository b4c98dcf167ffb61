"""Transactions over the wire: the transaction coordinator's answers and real clients (KIP-98).

One served cluster of three brokers for the module; each test uses its own transactional ids
and topic partitions, so the tests do not depend on each other's order.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
)

from minibroker.common.messages import TopicPartition
from minibroker.coordinator.transaction import partition_for
from tests.server.conftest import WAIT_S, RawClient, ServedThread, scenario

TOPICS = (
    'name = "t"\npartitions = 2\nreplication_factor = 3\n\n'
    '[[topics]]\nname = "u"\npartitions = 1\nreplication_factor = 3\n\n'
    '[[topics]]\nname = "in"\npartitions = 1\nreplication_factor = 3\n\n'
    '[[topics]]\nname = "out"\npartitions = 1\nreplication_factor = 3\n\n'
    '[[topics]]\nname = "v"\npartitions = 1\nreplication_factor = 3\n\n'
    '[[topics]]\nname = "w"\npartitions = 1\nreplication_factor = 3'
)


@pytest.fixture(scope="module")
def server() -> Iterator[ServedThread]:
    served = ServedThread(scenario(3, '"min.insync.replicas" = 2', TOPICS)).start()
    try:
        yield served
    finally:
        served.stop()


def _coordinator(server: ServedThread, txn_id: str) -> closing[RawClient]:
    """A raw connection to ``txn_id``'s coordinator, found with FindCoordinator key type 1."""
    with closing(RawClient(server.port(0))) as client:
        deadline = time.monotonic() + WAIT_S
        while True:
            found = client.request(FindCoordinatorRequest(key=txn_id, key_type=1), FindCoordinatorResponse, 3)
            if found.error_code == 0 or time.monotonic() > deadline:
                break
            assert found.error_code == 15  # COORDINATOR_NOT_AVAILABLE while __transaction_state is created
            time.sleep(0.05)
    assert found.error_code == 0
    # Kafka's arithmetic: abs(hashCode) % 50, and partition p of __transaction_state is led by p % 3
    assert found.node_id == partition_for(txn_id, 50) % 3
    return closing(RawClient(server.port(found.node_id)))


def _init(client: RawClient, txn_id: str, timeout_ms: int = 60_000, pid: int = -1, epoch: int = -1):
    answer = client.request(
        InitProducerIdRequest(
            transactional_id=txn_id, transaction_timeout_ms=timeout_ms, producer_id=pid, producer_epoch=epoch
        ),
        InitProducerIdResponse,
        4,
    )
    return answer.error_code, answer.producer_id, answer.producer_epoch


def _add(client: RawClient, txn_id: str, pid: int, epoch: int, *partitions: tuple[str, int]):
    topics: dict[str, list[int]] = {}
    for topic, p in partitions:
        topics.setdefault(topic, []).append(p)
    request = AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn_id,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
            for t, ps in topics.items()
        ],
    )
    answer = client.request(request, AddPartitionsToTxnResponse, 3)
    return {
        (t.name, r.partition_index): r.partition_error_code
        for t in answer.results_by_topic_v3_and_below
        for r in t.results_by_partition
    }


def _end(client: RawClient, txn_id: str, pid: int, epoch: int, committed: bool) -> int:
    request = EndTxnRequest(
        transactional_id=txn_id, producer_id=pid, producer_epoch=epoch, committed=committed
    )
    return client.request(request, EndTxnResponse, 3).error_code


def _until(call, wanted: int, what: str):
    """Repeat ``call`` while it answers CONCURRENT_TRANSACTIONS (51), as clients retry it."""
    deadline = time.monotonic() + WAIT_S
    while True:
        result = call()
        code = result[0] if isinstance(result, tuple) else result
        if code != 51 or time.monotonic() > deadline:
            assert code == wanted, f"{what}: {result}"
            return result
        time.sleep(0.02)


def test_the_coordinator_answers_kafkas_error_codes(server):
    txn = "codes"
    with _coordinator(server, txn) as client:
        assert _init(client, txn, timeout_ms=900_001)[0] == 50  # INVALID_TRANSACTION_TIMEOUT (> max)
        assert _init(client, txn, timeout_ms=0)[0] == 50
        error, pid, epoch = _init(client, txn)
        assert (error, epoch) == (0, 0) and pid >= 1_000_000
        assert _init(client, txn) == (0, pid, 1)  # a second InitProducerId bumps the epoch
        assert _end(client, txn, pid, 1, True) == 48  # INVALID_TXN_STATE: nothing is open
        assert _add(client, txn, pid, 0, ("t", 0)) == {("t", 0): 90}  # PRODUCER_FENCED: old epoch
        assert _add(client, txn, pid + 1, 1, ("t", 0)) == {("t", 0): 49}  # INVALID_PRODUCER_ID_MAPPING
        # one unknown partition: it gets UNKNOWN_TOPIC_OR_PARTITION, the others OPERATION_NOT_ATTEMPTED
        assert _add(client, txn, pid, 1, ("t", 0), ("t", 9)) == {("t", 0): 55, ("t", 9): 3}
        assert _add(client, txn, pid, 1, ("t", 0), ("t", 1)) == {("t", 0): 0, ("t", 1): 0}
        assert _add(client, txn, pid, 1, ("t", 1)) == {("t", 1): 0}  # already in: answered at once
        offsets = client.request(
            AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=1, group_id="g"),
            AddOffsetsToTxnResponse,
            3,
        )
        assert offsets.error_code == 0
        assert _end(client, txn, pid, 0, True) == 90  # PRODUCER_FENCED
        assert _until(lambda: _end(client, txn, pid, 1, True), 0, "commit") == 0
        # a retried commit is answered NONE (once complete); an abort of it is INVALID_TXN_STATE
        assert _until(lambda: _end(client, txn, pid, 1, True), 0, "retried commit") == 0
        assert _end(client, txn, pid, 1, False) == 48
    other = (partition_for(txn, 50) % 3 + 1) % 3
    with closing(RawClient(server.port(other))) as elsewhere:
        assert _init(elsewhere, txn)[0] == 16  # NOT_COORDINATOR


def test_a_new_init_producer_id_fences_an_open_transaction(server):
    txn = "fencing"
    with _coordinator(server, txn) as client:
        error, pid, epoch = _init(client, txn)
        assert (error, epoch) == (0, 0)
        assert _add(client, txn, pid, 0, ("u", 0)) == {("u", 0): 0}
        # the open transaction is aborted with epoch 1; the caller is told to retry until it completes
        assert _init(client, txn)[0] == 51  # CONCURRENT_TRANSACTIONS
        assert _until(lambda: _init(client, txn), 0, "init") == (0, pid, 2)
        assert _end(client, txn, pid, 0, True) == 90  # the zombie is fenced
        # KIP-360: the current id and epoch may ask for the bump; an older pair is fenced
        assert _init(client, txn, pid=pid, epoch=2) == (0, pid, 3)
        assert _init(client, txn, pid=pid, epoch=1)[0] == 90


def _protocol(server: ServedThread, txn_id: str) -> tuple[int, int]:
    """The transaction protocol version ``txn_id``'s last EndTxn used, and its producer epoch now."""
    state = TopicPartition("__transaction_state", partition_for(txn_id, 50))
    meta = server.cluster.brokers[server.cluster.leader_of(state)].transaction_coordinator.transactions[
        txn_id
    ]
    return meta.transaction_version, meta.producer_epoch


def _consume(bootstrap: str, isolation: str, partitions: list[tuple[str, int]]) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}",
            "isolation.level": isolation,
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(t, p, 0) for t, p in partitions])
    got: list[bytes] = []
    ends = 0
    deadline = time.monotonic() + WAIT_S
    try:
        while ends < len(partitions) and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                ends += 1
                continue
            got.append(message.value())
    finally:
        consumer.close()
    assert ends == len(partitions), "the consumer did not reach the end of every partition"
    return sorted(got)


def test_confluent_kafka_commits_and_aborts_and_read_committed_sees_only_commits(server):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "confluent"})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(4):
        producer.produce("t", value=b"committed-%d" % i, partition=i % 2)
    producer.commit_transaction(WAIT_S)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("t", value=b"aborted-%d" % i, partition=i % 2)
    producer.flush(WAIT_S)
    producer.abort_transaction(WAIT_S)
    producer.begin_transaction()
    producer.produce("t", value=b"committed-last", partition=1)
    producer.commit_transaction(WAIT_S)
    # librdkafka 2.16 ignores the advertised transaction.version 2: EndTxn v4 or below, no epoch bump
    assert _protocol(server, "confluent") == (1, 0)
    partitions = [("t", 0), ("t", 1)]
    committed = sorted([b"committed-%d" % i for i in range(4)] + [b"committed-last"])
    assert _consume(server.bootstrap, "read_committed", partitions) == committed
    every = sorted(committed + [b"aborted-%d" % i for i in range(3)])
    assert _consume(server.bootstrap, "read_uncommitted", partitions) == every


def test_consume_transform_produce_processes_every_input_exactly_once(server):
    """confluent-kafka: read "in", write "out" and the offsets in one transaction; an aborted round
    leaves nothing behind, and a new consumer of the group starts after the committed input."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    source = Producer({"bootstrap.servers": server.bootstrap})
    for i in range(10):
        source.produce("in", value=b"%d" % i, partition=0)
    assert source.flush(WAIT_S) == 0

    def consumer() -> Consumer:
        made = Consumer(
            {
                "bootstrap.servers": server.bootstrap,
                "group.id": "transform",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
            }
        )
        made.subscribe(["in"])
        return made

    def round_of(reader: Consumer, producer: Producer, count: int, commit: bool) -> list[bytes]:
        taken: list[bytes] = []
        deadline = time.monotonic() + WAIT_S
        producer.begin_transaction()
        while len(taken) < count and time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is None or message.error():
                continue
            taken.append(message.value())
            producer.produce("out", value=b"x" + message.value(), partition=0)
        producer.send_offsets_to_transaction(
            reader.position(reader.assignment()), reader.consumer_group_metadata(), WAIT_S
        )
        if commit:
            producer.commit_transaction(WAIT_S)
        else:
            producer.abort_transaction(WAIT_S)
        return taken

    producer = Producer({"bootstrap.servers": server.bootstrap, "transactional.id": "transform"})
    producer.init_transactions(WAIT_S)
    reader = consumer()
    assert round_of(reader, producer, 4, True) == [b"0", b"1", b"2", b"3"]
    assert round_of(reader, producer, 3, False) == [b"4", b"5", b"6"]
    reader.close()  # the aborted round's offsets were dropped: a new member starts again at 4
    reader = consumer()
    assert round_of(reader, producer, 6, True) == [b"%d" % i for i in range(4, 10)]
    committed = reader.committed([TopicPartition("in", 0)], WAIT_S)
    assert [(tp.topic, tp.offset) for tp in committed] == [("in", 10)]
    reader.close()
    outputs = [v.removeprefix(b"x") for v in _consume(server.bootstrap, "read_committed", [("out", 0)])]
    assert sorted(outputs) == sorted(b"%d" % i for i in range(10))  # each input exactly once


def test_kafka_python_transactional_producer_commits_offsets_and_records_atomically(server):
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata
    from kafka import TopicPartition as KafkaTopicPartition

    producer = KafkaProducer(bootstrap_servers=server.bootstrap, transactional_id="kafka-python")
    producer.init_transactions()
    source = KafkaTopicPartition("t", 0)
    producer.begin_transaction()
    producer.send("u", value=b"kept", partition=0)
    producer.send_offsets_to_transaction({source: OffsetAndMetadata(7, "", -1)}, "kp-group")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send("u", value=b"dropped", partition=0)
    producer.send_offsets_to_transaction({source: OffsetAndMetadata(9, "", -1)}, "kp-group")
    producer.flush()
    producer.abort_transaction()
    producer.close()
    assert _protocol(server, "kafka-python") == (1, 0)  # kafka-python speaks transaction version 1
    reader = KafkaConsumer(bootstrap_servers=server.bootstrap, group_id="kp-group", enable_auto_commit=False)
    try:
        assert reader.committed(source) == 7  # the aborted transaction's offset 9 was dropped
    finally:
        reader.close()
    values = _consume(server.bootstrap, "read_committed", [("u", 0)])
    assert values == [b"kept"]


def _transactional_produce(
    port: int, txn: str, pid: int, epoch: int, seq: int, *values: bytes, topic: str = "v", version: int = 9
) -> tuple[int, int]:
    from kafka.protocol.producer import ProduceRequest, ProduceResponse
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, seq, 2**31 - 1)
    for i, value in enumerate(values):
        builder.append(i, timestamp=0, key=None, value=value, headers=[])
    data = ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=bytes(builder.build()))
    request = ProduceRequest(
        transactional_id=txn,
        acks=-1,
        timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[data])],
    )
    with closing(RawClient(port)) as client:
        part = client.request(request, ProduceResponse, version).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def _latest(port: int, isolation: int) -> int:
    from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

    topic = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation,
        topics=[topic(name="v", partitions=[topic.ListOffsetsPartition(partition_index=0, timestamp=-1)])],
    )
    with closing(RawClient(port)) as client:
        (part,) = client.request(request, ListOffsetsResponse, 6).topics[0].partitions
    assert part.error_code == 0
    return part.offset


def _producers(port: int):
    from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

    topic = DescribeProducersRequest.TopicRequest(name="v", partition_indexes=[0])
    with closing(RawClient(port)) as client:
        answer = client.request(DescribeProducersRequest(topics=[topic]), DescribeProducersResponse, 0)
    (part,) = answer.topics[0].partitions
    if part.error_code == 6:
        return "NOT_LEADER"
    return [
        (p.producer_id, p.producer_epoch, p.last_sequence, p.current_txn_start_offset)
        for p in part.active_producers
    ]


def test_list_offsets_read_committed_answers_the_lso_while_a_transaction_is_open(server):
    txn = "offsets"
    leader = server.cluster.leader_of(TopicPartition("v", 0))
    port = server.port(leader)
    with _coordinator(server, txn) as client:
        _, pid, epoch = _init(client, txn)
        assert _add(client, txn, pid, epoch, ("v", 0)) == {("v", 0): 0}
        first = _transactional_produce(port, txn, pid, epoch, 0, b"a", b"b")
        assert first[0] == 0
        # records up to first + 2 are below the HW, but the open transaction holds the LSO at its start
        assert (_latest(port, 0), _latest(port, 1)) == (first[1] + 2, first[1])
        # DescribeProducers (KIP-664) shows the open transaction's first offset on the partition's leader
        assert _producers(port) == [(pid, epoch, 1, first[1])]
        assert _producers(server.port((leader + 1) % 3)) == "NOT_LEADER"
        assert _until(lambda: _end(client, txn, pid, epoch, False), 0, "abort") == 0
        deadline = time.monotonic() + WAIT_S
        while _latest(port, 1) != first[1] + 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert (_latest(port, 0), _latest(port, 1)) == (first[1] + 3, first[1] + 3)  # the marker is offset +2


def test_confluent_kafka_commits_across_a_crash_of_the_transaction_coordinator(serve):
    """The coordinator's broker crashes mid-transaction: the new leader of the id's __transaction_state
    partition reloads it, and the commit (retried by the client against it) writes every marker."""
    from confluent_kafka import Producer

    crashing = serve(
        scenario(3, '"min.insync.replicas" = 2', 'name = "c"\npartitions = 3\nreplication_factor = 3')
    )
    txn = "survivor"
    producer = Producer({"bootstrap.servers": crashing.bootstrap, "transactional.id": txn})
    producer.init_transactions(WAIT_S)
    producer.begin_transaction()
    for i in range(6):
        producer.produce("c", value=b"%d" % i, partition=i % 3)
    assert producer.flush(WAIT_S) == 0
    coordinator = partition_for(txn, 50) % 3
    crashing.call(crashing.cluster.crash, coordinator)
    producer.commit_transaction(WAIT_S)
    crashing.call_async(crashing.cluster.restart, coordinator)
    partitions = [("c", p) for p in range(3)]
    assert _consume(crashing.bootstrap, "read_committed", partitions) == [b"%d" % i for i in range(6)]


def test_describe_and_list_transactions_read_the_coordinators_state(server):
    from kafka.protocol.admin import (
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
    )

    txn = "described"
    here = partition_for(txn, 50) % 3
    nobody = next(f"nobody-{i}" for i in range(100) if partition_for(f"nobody-{i}", 50) % 3 == here)
    with _coordinator(server, txn) as client:
        _, pid, epoch = _init(client, txn, timeout_ms=45_000)
        assert _add(client, txn, pid, epoch, ("u", 0)) == {("u", 0): 0}
        described = client.request(
            DescribeTransactionsRequest(transactional_ids=[txn, nobody]), DescribeTransactionsResponse, 0
        ).transaction_states
        assert [(d.transactional_id, d.error_code) for d in described] == [(txn, 0), (nobody, 105)]
        ongoing = described[0]
        assert (ongoing.transaction_state, ongoing.transaction_timeout_ms) == ("Ongoing", 45_000)
        assert (ongoing.producer_id, ongoing.producer_epoch) == (pid, epoch)
        assert [(t.topic, list(t.partitions)) for t in ongoing.topics] == [("u", [0])]
        assert ongoing.transaction_start_time_ms > 0
        listed = client.request(
            ListTransactionsRequest(
                state_filters=["Ongoing", "Bogus"], producer_id_filters=[pid], duration_filter=-1
            ),
            ListTransactionsResponse,
            1,
        )
        assert listed.error_code == 0 and list(listed.unknown_state_filters) == ["Bogus"]
        assert [
            (t.transactional_id, t.producer_id, t.transaction_state) for t in listed.transaction_states
        ] == [(txn, pid, "Ongoing")]
        assert _until(lambda: _end(client, txn, pid, epoch, False), 0, "abort") == 0
    with closing(RawClient(server.port((here + 1) % 3))) as elsewhere:
        (refused,) = elsewhere.request(
            DescribeTransactionsRequest(transactional_ids=[txn]), DescribeTransactionsResponse, 0
        ).transaction_states
        assert refused.error_code == 16  # NOT_COORDINATOR


def test_write_txn_markers_aborts_a_hanging_transaction_on_the_partition_leader(server):
    """KIP-664's abortTransaction: an admin sends the ABORT marker to the leader itself."""
    from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

    txn = "hanging"
    leader = server.cluster.leader_of(TopicPartition("v", 0))

    def abort(broker: int, pid: int, epoch: int) -> int:
        marker = WriteTxnMarkersRequest.WritableTxnMarker
        request = WriteTxnMarkersRequest(
            markers=[
                marker(
                    producer_id=pid,
                    producer_epoch=epoch,
                    transaction_result=False,
                    topics=[marker.WritableTxnMarkerTopic(name="v", partition_indexes=[0])],
                    coordinator_epoch=-1,
                )
            ]
        )
        with closing(RawClient(server.port(broker))) as client:
            (result,) = client.request(request, WriteTxnMarkersResponse, 1).markers
        assert result.producer_id == pid
        return result.topics[0].partitions[0].error_code

    with _coordinator(server, txn) as client:
        _, pid, epoch = _init(client, txn)
        assert _add(client, txn, pid, epoch, ("v", 0)) == {("v", 0): 0}
        error, first = _transactional_produce(server.port(leader), txn, pid, epoch, 0, b"stuck")
        assert error == 0 and _latest(server.port(leader), 1) == first
        assert abort((leader + 1) % 3, pid, epoch) == 6  # NOT_LEADER_OR_FOLLOWER
        assert abort(leader, pid, epoch) == 0
        # the marker is offset first + 1: the LSO passes it, the producer has no open transaction there
        assert _latest(server.port(leader), 1) == first + 2
        assert [p for p in _producers(server.port(leader)) if p[0] == pid] == [(pid, epoch, 0, -1)]
        values = _consume(server.bootstrap, "read_committed", [("v", 0)])
        assert b"stuck" not in values
        assert _until(lambda: _end(client, txn, pid, epoch, False), 0, "abort") == 0


def test_transaction_version_2_over_the_wire_bumps_the_epoch_at_each_end_txn_v5(server):
    """KIP-890: ApiVersions finalizes transaction.version 2; Produce v12 adds the partition itself,
    EndTxn v5 answers the bumped epoch, and the next transaction writes with it."""
    from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

    txn = "tv2-wire"
    leader = server.cluster.leader_of(TopicPartition("w", 0))
    with closing(RawClient(server.port(leader))) as client:
        versions = client.request(ApiVersionsRequest(), ApiVersionsResponse, 3)
    assert [(f.name, f.max_version_level) for f in versions.finalized_features] == [
        ("transaction.version", 2)
    ]
    with _coordinator(server, txn) as client:
        _, pid, epoch = _init(client, txn)

        def end(epoch: int, committed: bool):
            request = EndTxnRequest(
                transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=committed
            )
            answer = client.request(request, EndTxnResponse, 5)
            return answer.error_code, answer.producer_id, answer.producer_epoch

        for value, committed in ((b"first", True), (b"second", False), (b"third", True)):
            deadline = time.monotonic() + WAIT_S
            # NOT_ENOUGH_REPLICAS (19) while the last transaction's markers are written: clients retry it
            while (
                error := _transactional_produce(
                    server.port(leader), txn, pid, epoch, 0, value, topic="w", version=12
                )[0]
            ) == 19 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert error == 0
            assert _until(lambda epoch=epoch, c=committed: end(epoch, c), 0, "end") == (0, pid, epoch + 1)
            epoch += 1
        # the first transaction's epoch is fenced at the partition (INVALID_PRODUCER_EPOCH)
        late, _ = _transactional_produce(server.port(leader), txn, pid, 0, 1, b"late", topic="w", version=12)
        assert late == 47
    assert _protocol(server, txn) == (2, 3)
    assert _consume(server.bootstrap, "read_committed", [("w", 0)]) == [b"first", b"third"]
