"""Consumer groups with real clients on loopback: subscribe(), auto commit, rebalances.

Topic ``t``: 2 partitions, replication factor 3; ``__consumer_offsets`` has 5 partitions (RF 3),
so commits wait for the ISR in the coordinator's produce purgatory. Real time: every wait is
bounded, and tolerances are stated where a test measures time.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

from minibroker.coordinator.group import OFFSETS_TOPIC
from tests.server.conftest import WAIT_S, scenario

TOPIC = 'name = "t"\npartitions = 2\nreplication_factor = 3'
BASE = '"offsets.topic.num.partitions" = 5, "group.min.session.timeout.ms" = 1000'
MEMBER = os.path.join(os.path.dirname(__file__), "group_member.py")

#: Kafka's default group.initial.rebalance.delay.ms, which the kafka-python tests keep. With 0 (a
#: test-only setting) kafka-python 3.0.12's leader may answer an at-once JoinGroup before its metadata
#: names the subscribed topic (it asks for it retry.backoff.ms after bootstrap) and assign nothing.
#: The same client also drops a finished join: join_group_async() sends a fresh JoinGroup when it
#: finds its join task done, instead of reading its result. A join that completes between two poll()
#: calls is thrown away; when that member is the leader, Kafka's coordinator (and ours) starts another
#: rebalance. Two members polled in turn from one thread can repeat that generation after generation,
#: so each member here polls in its own thread, as applications do.
KAFKA_INITIAL_DELAY_MS = 3000


def _served(serve, delay_ms: int = 0):
    return serve(scenario(config=f'{BASE}, "group.initial.rebalance.delay.ms" = {delay_ms}', topics=TOPIC))


def _produce(server, start: int, count: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=server.bootstrap, acks="all")
    try:
        for i in range(start, start + count):
            producer.send("t", value=f"v{i}".encode(), partition=i % 2)
        producer.flush(timeout=WAIT_S)
    finally:
        producer.close(timeout=WAIT_S)


def _committed(server, group: str) -> dict[int, int]:
    def read():
        coordinator_id = server.cluster.coordinator_for(group)
        offsets = server.cluster.brokers[coordinator_id].coordinator.offsets.get(group, {})
        return {tp.partition: value.offset for tp, value in offsets.items()}

    return server.call(read)


def _kafka_python(server, group: str, want: int) -> list[bytes]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        "t",
        bootstrap_servers=server.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=True,
        auto_commit_interval_ms=200,
    )
    got: list[bytes] = []
    try:
        # its group forms after the initial delay: the usual bound starts after it
        deadline = time.monotonic() + WAIT_S + KAFKA_INITIAL_DELAY_MS / 1000
        while len(got) < want and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.value for r in records]
        consumer.poll(timeout_ms=300)  # nothing more arrives
        got += [r.value for records in consumer.poll(timeout_ms=100).values() for r in records]
    finally:
        consumer.close()  # commits the consumed offsets
    return got


def _confluent(server, group: str, want: int, topic: str = "t", **settings) -> list[bytes]:
    """A confluent-kafka member of ``group`` reads ``topic`` until ``want`` records (then 0.3 s more);
    ``settings`` add to its config (``group.protocol``, ...)."""
    from confluent_kafka import Consumer

    errors: list = []
    config = {
        "bootstrap.servers": server.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": 200,
        "error_cb": errors.append,
    }
    consumer = Consumer({**config, **settings})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + WAIT_S
        quiet_until = None  # once ``want`` records are in, poll 0.3 s more: nothing else may arrive
        while time.monotonic() < deadline and (quiet_until is None or time.monotonic() < quiet_until):
            message = consumer.poll(0.1)
            if message is not None:
                assert message.error() is None, message.error()
                got.append(message.value())
            if quiet_until is None and len(got) >= want:
                quiet_until = time.monotonic() + 0.3
    finally:
        consumer.close()
    assert errors == []
    return got


def _aiokafka(server, group: str, want: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer

    async def run() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            "t",
            bootstrap_servers=server.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=True,
            auto_commit_interval_ms=200,
        )
        await consumer.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + WAIT_S
            while len(got) < want and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got += [r.value for r in records]
            for records in (await consumer.getmany(timeout_ms=300)).values():
                got += [r.value for r in records]
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def _resume_exactly_once(serve, consume, delay_ms: int = 0) -> None:
    server = _served(serve, delay_ms)
    _produce(server, 0, 6)
    first = consume(server, "g", 6)
    assert sorted(first) == sorted(f"v{i}".encode() for i in range(6))
    assert _committed(server, "g") == {0: 3, 1: 3}
    _produce(server, 6, 6)
    second = consume(server, "g", 6)  # a new consumer of the group resumes at the committed offsets
    assert sorted(second) == sorted(f"v{i}".encode() for i in range(6, 12))
    assert _committed(server, "g") == {0: 6, 1: 6}
    assert OFFSETS_TOPIC in server.cluster.topics
    assert server.logs == []


def test_kafka_python_subscribe_reads_every_record_once_across_a_restart(serve):
    _resume_exactly_once(serve, _kafka_python, KAFKA_INITIAL_DELAY_MS)


def test_confluent_kafka_subscribe_reads_every_record_once_across_a_restart(serve):
    _resume_exactly_once(serve, _confluent)


def test_aiokafka_subscribe_reads_every_record_once_across_a_restart(serve):
    _resume_exactly_once(serve, _aiokafka)


def _member_process(server, group: str, session_ms: int, heartbeat_ms: int) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.Popen(
        [sys.executable, MEMBER, server.bootstrap, group, "t", str(session_ms), str(heartbeat_ms)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def _wait_line(process: subprocess.Popen, wanted: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        line = process.stdout.readline().strip()
        if line == wanted:
            return
        assert line or process.poll() is None, f"the member exited ({process.returncode})"
    raise AssertionError(f"the member never printed {wanted!r}")


def _poll_until(consumer, partitions: set[int], timeout: float = WAIT_S) -> float:
    start = time.monotonic()
    while {tp.partition for tp in consumer.assignment()} != partitions:
        assert time.monotonic() - start < timeout, (
            f"assignment {consumer.assignment()} never became {partitions}"
        )
        consumer.poll(timeout_ms=50)
    return time.monotonic() - start


def _kafka_python_member(server, group: str, session_ms: int, heartbeat_ms: int = 300):
    from kafka import KafkaConsumer

    return KafkaConsumer(
        "t",
        bootstrap_servers=server.bootstrap,
        group_id=group,
        session_timeout_ms=session_ms,
        heartbeat_interval_ms=heartbeat_ms,
        auto_offset_reset="earliest",
    )


class _PollingThread:
    """Polls one kafka-python consumer in its own thread, as an application's poll loop does."""

    def __init__(self, consumer) -> None:
        self.consumer = consumer
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(timeout_ms=200)

    def partitions(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def close(self) -> None:
        """Stop polling, then close the consumer (LeaveGroup) from this thread."""
        self._stop.set()
        self._thread.join(WAIT_S)
        assert not self._thread.is_alive(), "the poll loop did not stop"
        self.consumer.close()


def test_two_members_split_the_partitions_and_a_clean_close_rebalances_at_once(serve):
    server = _served(serve, KAFKA_INITIAL_DELAY_MS)
    # each member polls in its own thread without pause, as applications do. Polling two members in
    # turn from one thread can rebalance forever with kafka-python 3.0.12 (see the module docstring)
    a = _PollingThread(_kafka_python_member(server, "split", 10_000))
    b = _PollingThread(_kafka_python_member(server, "split", 10_000))
    members = [a, b]
    try:
        deadline = time.monotonic() + 2 * WAIT_S
        # both usually join within the initial delay (one generation); an auto commit during
        # CompletingRebalance gets REBALANCE_IN_PROGRESS (as from Kafka): that member rejoins
        while (a.partitions(), b.partitions()) not in (([0], [1]), ([1], [0])):
            assert time.monotonic() < deadline, (a.partitions(), b.partitions())
            time.sleep(0.05)

        def group():
            return server.cluster.brokers[server.cluster.coordinator_for("split")].coordinator.groups["split"]

        state, protocol, size = server.call(
            lambda: (group().state, group().protocol_name, len(group().members))
        )
        assert (protocol, size) == ("range", 2) and state in ("Stable", "PreparingRebalance")
        members.remove(b)
        b.close()  # LeaveGroup: the group rebalances at once, not after b's 10 s session timeout
        start = time.monotonic()
        while a.partitions() != [0, 1]:
            assert time.monotonic() - start < 5.0, a.partitions()  # well under session.timeout.ms (10 s)
            time.sleep(0.02)
    finally:
        for member in members:
            member.close()


def test_a_killed_member_hands_its_partitions_over_after_its_session_timeout(serve):
    session_ms, heartbeat_ms = 2000, 300
    server = _served(serve, KAFKA_INITIAL_DELAY_MS)
    survivor = _kafka_python_member(server, "kill", session_ms, heartbeat_ms)
    victim = _member_process(server, "kill", session_ms, heartbeat_ms)
    try:
        _wait_line(victim, "assigned 0,1")
        deadline = time.monotonic() + WAIT_S
        while len(survivor.assignment()) != 1 and time.monotonic() < deadline:
            survivor.poll(timeout_ms=50)
        assert len(survivor.assignment()) == 1
        victim.kill()  # SIGKILL: its sockets close, no LeaveGroup is ever sent
        killed = time.monotonic()
        victim.wait(WAIT_S)
        _poll_until(survivor, {0, 1})
        took = time.monotonic() - killed
        # the victim's session runs from its last heartbeat (at most heartbeat.interval.ms before the
        # kill); the survivor then learns of the rebalance at its next heartbeat and rejoins: allow
        # session - heartbeat <= took <= session + 2 s for that and for a loaded machine
        assert (session_ms - heartbeat_ms) / 1000 <= took <= session_ms / 1000 + 2.0, took
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(WAIT_S)
        survivor.close()


def test_find_coordinator_batched_and_single_and_the_internal_topic_in_metadata(serve):
    from kafka.protocol.metadata import (
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        MetadataRequest,
        MetadataResponse,
    )

    from minibroker.coordinator.group import partition_for
    from tests.server.conftest import RawClient

    server = serve(scenario(config='"offsets.topic.num.partitions" = 50', topics=TOPIC))
    client = RawClient(server.port(0))
    try:
        # the first FindCoordinator creates __consumer_offsets and, as from Kafka, finds no coordinator yet
        first = client.request(
            FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b"]), FindCoordinatorResponse, 4
        )
        assert [(c.key, c.node_id, c.error_code) for c in first.coordinators] == [
            ("a", -1, 15),
            ("b", -1, 15),
        ]
        assert OFFSETS_TOPIC in server.cluster.topics
        batched = client.request(
            FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "test-group"]),
            FindCoordinatorResponse,
            4,
        )
        # partition_for("a") = 97 % 50 = 47, led by broker 47 % 3 = 2; "test-group" -> 12 -> broker 0
        assert [(c.key, c.node_id, c.port, c.error_code) for c in batched.coordinators] == [
            ("a", 2, server.port(2), 0),
            ("test-group", 0, server.port(0), 0),
        ]
        assert partition_for("a", 50) == 47
        single = client.request(
            FindCoordinatorRequest(key="test-group", key_type=0), FindCoordinatorResponse, 3
        )
        assert (single.error_code, single.node_id, single.port) == (0, 0, server.port(0))
        txn = client.request(FindCoordinatorRequest(key="tx", key_type=1), FindCoordinatorResponse, 3)
        # the first transactional key creates __transaction_state: COORDINATOR_NOT_AVAILABLE meanwhile
        assert (txn.error_code, txn.node_id) == (15, -1)
        # partition_for("tx") = abs(3716) % 50 = 16, led by broker 16 % 3 = 1
        txn = client.request(FindCoordinatorRequest(key="tx", key_type=1), FindCoordinatorResponse, 3)
        assert (txn.error_code, txn.node_id, txn.port) == (0, 1, server.port(1))
        topics = [MetadataRequest.MetadataRequestTopic(name=OFFSETS_TOPIC)]
        meta = client.request(
            MetadataRequest(topics=topics, allow_auto_topic_creation=True), MetadataResponse, 9
        )
        (topic,) = meta.topics
        assert (topic.error_code, topic.is_internal, len(topic.partitions)) == (0, True, 50)
        assert {len(p.replica_nodes) for p in topic.partitions} == {3}
    finally:
        client.close()
    assert server.logs == []


def test_admin_apis_over_the_wire(serve):
    from kafka.protocol.admin import (
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        ListGroupsRequest,
        ListGroupsResponse,
    )
    from kafka.protocol.consumer import (
        HeartbeatRequest,
        HeartbeatResponse,
        LeaveGroupRequest,
        LeaveGroupResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
    )

    from tests.server.conftest import RawClient

    # one __consumer_offsets partition: broker 0 coordinates every group
    server = serve(scenario(config='"offsets.topic.num.partitions" = 1', topics=TOPIC))
    client = RawClient(server.port(0))
    try:
        from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

        # before any FindCoordinator there is no __consumer_offsets, hence no coordinator anywhere
        early = client.request(
            HeartbeatRequest(group_id="g", generation_id=0, member_id="m"), HeartbeatResponse, 4
        )
        assert early.error_code == 16  # NOT_COORDINATOR
        creating = client.request(
            FindCoordinatorRequest(key="simple", key_type=0), FindCoordinatorResponse, 3
        )
        assert (creating.error_code, creating.node_id) == (15, -1)  # COORDINATOR_NOT_AVAILABLE, as Kafka
        found = client.request(FindCoordinatorRequest(key="simple", key_type=0), FindCoordinatorResponse, 3)
        assert (found.error_code, found.node_id) == (0, 0)
        part = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition
        topic = OffsetCommitRequest.OffsetCommitRequestTopic(
            name="t",
            partitions=[
                part(partition_index=0, committed_offset=42, committed_metadata="m"),
                part(partition_index=7, committed_offset=1, committed_metadata=""),
            ],
        )
        # v2, generation -1: a simple commit creates group "simple"; partition 7 does not exist
        committed = client.request(
            OffsetCommitRequest(
                group_id="simple",
                generation_id_or_member_epoch=-1,
                member_id="",
                retention_time_ms=-1,
                topics=[topic],
            ),
            OffsetCommitResponse,
            2,
        )
        assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == [(0, 0), (7, 3)]
        group = OffsetFetchRequest.OffsetFetchRequestGroup
        fetched = client.request(
            OffsetFetchRequest(
                groups=[group(group_id="simple", topics=None), group(group_id="nobody", topics=None)],
                require_stable=True,
            ),
            OffsetFetchResponse,
            8,
        )
        simple, nobody = fetched.groups
        assert [
            (t.name, [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions])
            for t in simple.topics
        ] == [("t", [(0, 42, "m")])]
        assert (nobody.error_code, nobody.topics) == (0, [])
        listed = client.request(ListGroupsRequest(states_filter=["empty"]), ListGroupsResponse, 4)
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("simple", "Empty")]
        described = client.request(
            DescribeGroupsRequest(groups=["simple", "nobody"]), DescribeGroupsResponse, 5
        )
        assert [(g.group_id, g.error_code, g.group_state) for g in described.groups] == [
            ("simple", 0, "Empty"),
            ("nobody", 0, "Dead"),
        ]
        heartbeat = client.request(
            HeartbeatRequest(group_id="simple", generation_id=0, member_id="ghost"), HeartbeatResponse, 4
        )
        assert heartbeat.error_code == 25  # UNKNOWN_MEMBER_ID
        left = client.request(LeaveGroupRequest(group_id="simple", member_id="ghost"), LeaveGroupResponse, 0)
        assert left.error_code == 25  # v0: the one member's error is the top-level one
        deleted = client.request(
            DeleteGroupsRequest(groups_names=["simple", "nobody"]), DeleteGroupsResponse, 2
        )
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("simple", 0), ("nobody", 69)]
    finally:
        client.close()
    assert server.logs == []
