"""KIP-848's consumer group protocol with real clients: confluent-kafka with ``group.protocol=consumer``.

One served cluster for the module (3 brokers; topic ``t``: 4 partitions, ``r``, ``c`` and ``k``: 2
partitions, replication factor 3; ``__consumer_offsets``: 5 partitions), with a short consumer session timeout
(3 s) and heartbeat interval (300 ms) so that fencing a killed member fits in a test. Each test uses
its own group ids. Real time: every wait is bounded, and tolerances are stated where a test
measures time.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time

import pytest

from tests.server.conftest import WAIT_S, ServedThread, scenario
from tests.server.test_groups import _confluent

SESSION_MS = 3000
HEARTBEAT_MS = 300
CONFIG = (
    '"offsets.topic.num.partitions" = 5, "group.min.session.timeout.ms" = 1000, '
    f'"group.consumer.session.timeout.ms" = {SESSION_MS}, '
    f'"group.consumer.heartbeat.interval.ms" = {HEARTBEAT_MS}'
)
TOPICS = "\n\n[[topics]]\n".join(
    f'name = "{name}"\npartitions = {n}\nreplication_factor = 3'
    for name, n in (("t", 4), ("r", 2), ("c", 2), ("k", 2))
)
CONSUMER_PROTOCOL = {"group.protocol": "consumer", "log_level": 0}
MEMBER = os.path.join(os.path.dirname(__file__), "consumer_protocol_member.py")


@pytest.fixture(scope="module")
def server():
    served = ServedThread(scenario(config=CONFIG, topics=TOPICS)).start()
    yield served
    served.stop()


def _consumer(server, group: str, errors: list, **settings):
    from confluent_kafka import Consumer

    config = {
        "bootstrap.servers": server.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "error_cb": errors.append,
        "log_level": 0,
    }
    config.update(settings)
    return Consumer(config)


def _partitions(consumer) -> list[int]:
    return sorted(tp.partition for tp in consumer.assignment())


def _poll_until(consumers, condition, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, (
            f"timed out waiting for {what}: {[_partitions(c) for c in consumers]}"
        )
        for consumer in consumers:
            consumer.poll(0.02)


def _group(server, group: str):
    """(assignor, group epoch, each member's epoch) as the coordinator has them."""

    def read():
        coordinator = server.cluster.brokers[server.cluster.coordinator_for(group)].coordinator
        g = coordinator.consumer_group_manager.groups[group]
        return g.assignor, g.group_epoch, sorted(m.member_epoch for m in g.members.values())

    return server.call(read)


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_two_members_split_the_partitions_with_the_server_side_assignor(server, assignor):
    errors: list = []
    group = f"split-{assignor}"
    a = _consumer(server, group, errors, **{"group.remote.assignor": assignor})
    b = _consumer(server, group, errors, **{"group.remote.assignor": assignor})
    try:
        a.subscribe(["t"])
        _poll_until([a], lambda: _partitions(a) == [0, 1, 2, 3], "a to own every partition")
        b.subscribe(["t"])
        _poll_until([a, b], lambda: len(_partitions(a)) == len(_partitions(b)) == 2, "two partitions each")
        assert sorted(_partitions(a) + _partitions(b)) == [0, 1, 2, 3]
        chosen, epoch, member_epochs = _group(server, group)
        assert (chosen, epoch, member_epochs) == (assignor, 2, [2, 2])
        if assignor == "range":  # member ids sorted: the first has t-0, t-1
            first = a if a.memberid() < b.memberid() else b
            assert _partitions(first) == [0, 1]
    finally:
        a.close()
        b.close()
    assert errors == []


def test_a_joining_member_does_not_stop_the_others_fetching(server):
    """While b joins, a keeps fetching the partitions it keeps: only the moved ones are revoked."""
    from confluent_kafka import Producer

    errors: list = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": server.bootstrap, "linger.ms": 0, "log_level": 0})
        i = 0
        while not stop.is_set():
            producer.produce("t", value=b"x", partition=i % 4)
            producer.poll(0)
            i += 1
            time.sleep(0.01)
        producer.flush(WAIT_S)

    producing = threading.Thread(target=produce, daemon=True)
    producing.start()
    revoked: list[int] = []
    a = _consumer(server, "incremental", errors)
    b = _consumer(server, "incremental", errors)
    received: dict[int, list[float]] = {p: [] for p in range(4)}

    def poll(consumer, record: bool) -> None:
        message = consumer.poll(0.01)
        if message is not None and message.error() is None and record:
            received[message.partition()].append(time.monotonic())

    try:
        a.subscribe(["t"], on_revoke=lambda _c, parts: revoked.extend(tp.partition for tp in parts))
        deadline = time.monotonic() + WAIT_S
        while not (_partitions(a) == [0, 1, 2, 3] and all(received.values())):
            assert time.monotonic() < deadline, _partitions(a)
            poll(a, True)
        b.subscribe(["t"])
        joined = time.monotonic()
        while not (len(_partitions(a)) == 2 and len(_partitions(b)) == 2):
            assert time.monotonic() < deadline + WAIT_S, (_partitions(a), _partitions(b))
            poll(a, True)
            poll(b, False)
        stable = time.monotonic()
        settle = stable + 1.0
        while time.monotonic() < settle:
            poll(a, True)
            poll(b, False)
        kept = _partitions(a)
        assert sorted(revoked) == sorted(set(range(4)) - set(kept))  # only the moved partitions
        # each kept partition had records all along: no gap over 1 s (records come every 40 ms each)
        for p in kept:
            times = [x for x in received[p] if joined - 1.0 <= x <= settle]
            gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
            assert times and max(gaps) < 1.0, (p, max(gaps, default=None), stable - joined)
    finally:
        stop.set()
        producing.join(WAIT_S)
        a.close()
        b.close()
    assert errors == []


def test_a_killed_member_is_fenced_and_its_partitions_taken_over_within_the_session_timeout(server):
    errors: list = []
    survivor = _consumer(server, "kill", errors)
    victim = subprocess.Popen(
        [sys.executable, MEMBER, server.bootstrap, "kill", "t"], stdout=subprocess.PIPE, text=True
    )
    try:
        survivor.subscribe(["t"])
        _poll_until([survivor], lambda: _partitions(survivor) == [0, 1, 2, 3], "the survivor to own all")
        line = ""
        deadline = time.monotonic() + WAIT_S
        while len(line.split(",")) != 2:  # the victim's "assigned x,y"
            assert time.monotonic() < deadline, line
            survivor.poll(0.02)
            line = victim.stdout.readline().strip() if _readable(victim) else line
        _poll_until([survivor], lambda: len(_partitions(survivor)) == 2, "the survivor to give two up")
        victim.kill()  # SIGKILL: no leave heartbeat is ever sent
        killed = time.monotonic()
        victim.wait(WAIT_S)
        _poll_until([survivor], lambda: _partitions(survivor) == [0, 1, 2, 3], "the take-over")
        took = time.monotonic() - killed
        # fenced SESSION_MS after its last heartbeat (at most HEARTBEAT_MS before the kill); the survivor
        # learns at its next heartbeat: allow session - heartbeat <= took <= session + 2 s
        assert (SESSION_MS - HEARTBEAT_MS) / 1000 <= took <= SESSION_MS / 1000 + 2.0, took
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(WAIT_S)
        survivor.close()
    assert errors == []


def _readable(process) -> bool:
    import select

    return bool(select.select([process.stdout], [], [], 0.05)[0])


def _produce_r(server, start: int, count: int, topic: str = "r") -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": server.bootstrap, "log_level": 0})
    for i in range(start, start + count):
        producer.produce(topic, value=f"v{i}".encode(), partition=i % 2)
    assert producer.flush(WAIT_S) == 0


def _committed(server, group: str) -> dict[int, int]:
    def read():
        coordinator = server.cluster.brokers[server.cluster.coordinator_for(group)].coordinator
        return {
            tp.partition: v.offset for tp, v in coordinator.offsets.get(group, {}).items() if tp.topic == "r"
        }

    return server.call(read)


def _consume(server, group: str, want: int) -> list[bytes]:
    return _confluent(server, group, want, "r", **CONSUMER_PROTOCOL)


def test_a_new_member_resumes_from_the_committed_offsets(server):
    _produce_r(server, 0, 6)
    first = _consume(server, "resume", 6)  # commits, then leaves with epoch -1 on close
    assert sorted(first) == sorted(f"v{i}".encode() for i in range(6))
    assert _committed(server, "resume") == {0: 3, 1: 3}
    _produce_r(server, 6, 6)
    second = _consume(server, "resume", 6)
    assert sorted(second) == sorted(f"v{i}".encode() for i in range(6, 12))
    assert _committed(server, "resume") == {0: 6, 1: 6}
    assert _group(server, "resume")[2] == []  # both left: the group is empty
    assert server.logs == []


def test_classic_groups_of_kafka_python_and_aiokafka_work_beside_a_consumer_group(server):
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from kafka import KafkaConsumer

    _produce_r(server, 0, 6, topic="c")
    errors: list = []
    modern = _consumer(server, "beside-new", errors)
    modern.subscribe(["c"])
    _poll_until([modern], lambda: _partitions(modern) == [0, 1], "the consumer group member")
    classic = KafkaConsumer(
        "c", bootstrap_servers=server.bootstrap, group_id="beside-kp", auto_offset_reset="earliest"
    )
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 2 * WAIT_S  # the classic group forms after the initial delay (3 s)
        while len(got) < 6 and time.monotonic() < deadline:
            modern.poll(0.01)
            for records in classic.poll(timeout_ms=100).values():
                got += [r.value for r in records]
    finally:
        classic.close()

    async def aio() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            "c", bootstrap_servers=server.bootstrap, group_id="beside-aio", auto_offset_reset="earliest"
        )
        await consumer.start()
        out: list[bytes] = []
        try:
            end = time.monotonic() + 2 * WAIT_S
            while len(out) < 6 and time.monotonic() < end:
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    out += [r.value for r in records]
        finally:
            await consumer.stop()
        return out

    try:
        from_aio = asyncio.run(aio())
        assert _partitions(modern) == [0, 1]
    finally:
        modern.close()
    expected = sorted(f"v{i}".encode() for i in range(6))
    assert (sorted(got), sorted(from_aio)) == (expected, expected)
    assert errors == []

    def kinds():  # the classic group, Empty once its member closed; no consumer group of that id
        coordinator = server.cluster.brokers[server.cluster.coordinator_for("beside-kp")].coordinator
        group = coordinator.groups["beside-kp"]
        return group.state, group.generation_id > 0, "beside-kp" in coordinator.consumer_group_manager.groups

    assert server.call(kinds) == ("Empty", True, False)


def test_describe_and_list_show_the_consumer_group_over_the_wire(server):
    from kafka.protocol.admin import (
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        ListGroupsRequest,
        ListGroupsResponse,
    )

    from minibroker.server.metadata import topic_id
    from minibroker.server.schemas import ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse
    from tests.server.conftest import RawClient

    errors: list = []
    member = _consumer(server, "described", errors, **{"client.id": "app"})
    member.subscribe(["r"])
    try:
        _poll_until([member], lambda: _partitions(member) == [0, 1], "the member's assignment")
        member_id = member.memberid()
        raw = RawClient(server.port(server.call(server.cluster.coordinator_for, "described")))
        try:
            request = ConsumerGroupDescribeRequest(
                group_ids=["described", "nope"], include_authorized_operations=False
            )
            groups = raw.request(request, ConsumerGroupDescribeResponse, 1).groups
            listed = raw.request(
                ListGroupsRequest(states_filter=[], types_filter=["consumer"]), ListGroupsResponse, 5
            )
            classic = raw.request(
                ListGroupsRequest(states_filter=[], types_filter=["classic"]), ListGroupsResponse, 5
            )
            (described,) = raw.request(
                DescribeGroupsRequest(groups=["described"]), DescribeGroupsResponse, 5
            ).groups
        finally:
            raw.close()
    finally:
        member.close()
    ok, missing = groups
    assert (ok.error_code, ok.group_state, ok.group_epoch, ok.assignment_epoch, ok.assignor_name) == (
        0,
        "Stable",
        1,
        1,
        "uniform",
    )
    (m,) = ok.members
    assert (m.member_id, m.member_epoch, m.client_id, m.subscribed_topic_names) == (
        member_id,
        1,
        "app",
        ["r"],
    )
    (tp,) = m.assignment.topic_partitions
    assert (tp.topic_id, tp.topic_name, sorted(tp.partitions)) == (topic_id("r"), "r", [0, 1])
    assert (missing.error_code, missing.error_message) == (69, "Group nope not found.")
    assert [
        (g.group_id, g.group_type, g.protocol_type) for g in listed.groups if g.group_id == "described"
    ] == [("described", "consumer", "consumer")]
    assert "described" not in [g.group_id for g in classic.groups]
    assert (described.group_state, described.protocol_type, described.protocol_data) == (
        "Stable",
        "consumer",
        "uniform",
    )
    assert errors == []


def test_heartbeat_v0_gets_its_member_id_from_the_coordinator_and_v1_must_bring_one(server):
    from minibroker.server.metadata import topic_id
    from minibroker.server.schemas import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
    from tests.server.conftest import RawClient

    raw = RawClient(server.port(server.call(server.cluster.coordinator_for, "raw-ids")))
    try:

        def join(version: int):
            request = ConsumerGroupHeartbeatRequest(
                group_id="raw-ids",
                member_id="",
                member_epoch=0,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=["r"],
                topic_partitions=[],
            )
            return raw.request(request, ConsumerGroupHeartbeatResponse, version)

        refused = join(1)
        joined = join(0)
        left = raw.request(
            ConsumerGroupHeartbeatRequest(group_id="raw-ids", member_id=joined.member_id, member_epoch=-1),
            ConsumerGroupHeartbeatResponse,
            0,
        )
    finally:
        raw.close()
    assert (refused.error_code, refused.error_message) == (42, "MemberId can't be empty.")
    assert (joined.error_code, joined.member_epoch, joined.heartbeat_interval_ms) == (0, 1, HEARTBEAT_MS)
    assert joined.member_id.startswith("raw-")  # the client id, then a uuid, as classic member ids
    (assigned,) = joined.assignment.topic_partitions
    assert (assigned.topic_id, sorted(assigned.partitions)) == (topic_id("r"), [0, 1])
    assert (left.error_code, left.member_epoch) == (0, -1)


def test_a_static_member_closes_and_its_instance_comes_back_to_the_same_partitions_by_regex(server):
    """librdkafka's close() of a static member sends epoch -2: its partitions wait for the instance id,
    which joins again with a new member id and gets them back without a new group epoch."""
    errors: list = []

    def group_state():
        coordinator = server.cluster.brokers[server.cluster.coordinator_for("static")].coordinator
        group = coordinator.consumer_group_manager.groups["static"]
        return group.group_epoch, [
            (m.member_id, m.instance_id, m.member_epoch) for m in group.members.values()
        ]

    first = _consumer(server, "static", errors, **{"group.instance.id": "i-1"})
    first.subscribe(["^[rc]$"])  # a regex subscription (r and c, 2 partitions each)
    try:
        _poll_until([first], lambda: len(first.assignment()) == 4, "the regex's four partitions")
        first_id = first.memberid()
        epoch, members = server.call(group_state)
    finally:
        first.close()
    assert members == [(first_id, "i-1", epoch)]
    assert server.call(group_state) == (epoch, [(first_id, "i-1", -2)])
    second = _consumer(server, "static", errors, **{"group.instance.id": "i-1"})
    second.subscribe(["^[rc]$"])
    try:
        _poll_until([second], lambda: len(second.assignment()) == 4, "the instance's partitions back")
        assert sorted((tp.topic, tp.partition) for tp in second.assignment()) == [
            ("c", 0),
            ("c", 1),
            ("r", 0),
            ("r", 1),
        ]
        assert server.call(group_state) == (epoch, [(second.memberid(), "i-1", epoch)])
    finally:
        second.close()
    assert errors == []


def test_members_keep_their_epochs_and_partitions_across_a_coordinator_failover(server):
    """The coordinator's broker crashes: the new leader of the group's __consumer_offsets partition
    replays the group's records, and the members heartbeat on at their epochs with their partitions."""
    errors: list = []

    def group_state():
        coordinator_id = server.cluster.coordinator_for("failover")
        group = server.cluster.brokers[coordinator_id].coordinator.consumer_group_manager.groups["failover"]
        members = sorted((m.member_id, m.member_epoch, m.state) for m in group.members.values())
        return coordinator_id, group.group_epoch, members

    a = _consumer(server, "failover", errors)
    b = _consumer(server, "failover", errors)
    a.subscribe(["t"])
    b.subscribe(["t"])
    try:
        _poll_until([a, b], lambda: len(_partitions(a)) == len(_partitions(b)) == 2, "two partitions each")
        before = (_partitions(a), _partitions(b))
        old, epoch, members = server.call(group_state)
        server.call(server.cluster.crash, old)
        try:
            deadline = time.monotonic() + 2.0  # a few heartbeats (300 ms) on the new coordinator
            while time.monotonic() < deadline:
                a.poll(0.02)
                b.poll(0.02)
            new, epoch_after, members_after = server.call(group_state)
            assert new != old and (epoch_after, members_after) == (epoch, members)
            assert (_partitions(a), _partitions(b)) == before
        finally:
            server.call_async(server.cluster.restart, old)
    finally:
        a.close()
        b.close()
    assert {e.code() for e in errors} <= {-195}  # only "connection refused" from the crashed broker


def test_offset_commit_and_fetch_v10_name_topics_by_id_and_check_the_member_epoch(server):
    import uuid

    from kafka.protocol.consumer import (
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
    )

    from minibroker.server.metadata import topic_id
    from minibroker.server.schemas import ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse
    from tests.server.conftest import RawClient

    nowhere = uuid.UUID(int=7)
    raw = RawClient(server.port(server.call(server.cluster.coordinator_for, "by-id")))
    try:
        joined = raw.request(
            ConsumerGroupHeartbeatRequest(
                group_id="by-id",
                member_id="m-1",
                member_epoch=0,
                rebalance_timeout_ms=30_000,
                subscribed_topic_names=["r"],
                topic_partitions=[],
            ),
            ConsumerGroupHeartbeatResponse,
            1,
        )
        Topic = OffsetCommitRequest.OffsetCommitRequestTopic
        Partition = Topic.OffsetCommitRequestPartition

        def commit(epoch: int):
            topics = [
                Topic(topic_id=topic_id("r"), partitions=[Partition(partition_index=1, committed_offset=4)]),
                Topic(topic_id=nowhere, partitions=[Partition(partition_index=0, committed_offset=1)]),
            ]
            request = OffsetCommitRequest(
                group_id="by-id", generation_id_or_member_epoch=epoch, member_id="m-1", topics=topics
            )
            answer = raw.request(request, OffsetCommitResponse, 10)
            return [
                (t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics
            ]

        stale = commit(joined.member_epoch + 1)
        accepted = commit(joined.member_epoch)
        Group = OffsetFetchRequest.OffsetFetchRequestGroup
        wanted = [
            Group.OffsetFetchRequestTopics(topic_id=topic_id("r"), partition_indexes=[1]),
            Group.OffsetFetchRequestTopics(topic_id=nowhere, partition_indexes=[0]),
        ]
        fetch = OffsetFetchRequest(
            groups=[
                Group(group_id="by-id", member_id="m-1", member_epoch=joined.member_epoch, topics=wanted)
            ],
            require_stable=False,
        )
        (fetched,) = raw.request(fetch, OffsetFetchResponse, 10).groups
    finally:
        raw.close()
    r = topic_id("r")
    assert stale == [(r, [(1, 113)]), (nowhere, [(0, 100)])]  # STALE_MEMBER_EPOCH, UNKNOWN_TOPIC_ID
    assert accepted == [(r, [(1, 0)]), (nowhere, [(0, 100)])]
    rows = [
        (t.topic_id, [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions])
        for t in fetched.topics
    ]
    assert (fetched.error_code, rows) == (0, [(r, [(1, 4, 0)]), (nowhere, [(0, -1, 100)])])


@pytest.fixture(scope="module")
def kafkajs(tmp_path_factory):
    """A directory with kafkajs installed by npm (a temporary directory, never the checkout)."""
    import shutil

    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed for the kafkajs test")
    where = tmp_path_factory.mktemp("kafkajs")
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", "kafkajs@2"],
        cwd=where,
        check=True,
        timeout=120,
        capture_output=True,
    )
    return where / "node_modules"


def test_a_kafkajs_classic_group_works_beside_a_consumer_group(server, kafkajs):
    _produce_r(server, 0, 4, topic="k")
    errors: list = []
    modern = _consumer(server, "kafkajs-new", errors)
    modern.subscribe(["k"])
    _poll_until([modern], lambda: _partitions(modern) == [0, 1], "the consumer group member")
    script = os.path.join(os.path.dirname(__file__), "kafkajs_member.js")
    node = subprocess.Popen(
        ["node", script, server.bootstrap, "kafkajs-classic", "k", "4"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NODE_PATH": str(kafkajs)},
    )
    try:
        deadline = time.monotonic() + 3 * WAIT_S  # the classic group forms after the initial delay (3 s)
        while node.poll() is None and time.monotonic() < deadline:
            modern.poll(0.05)
        assert node.poll() is not None, "the kafkajs member did not finish"
        out, err = node.communicate(timeout=WAIT_S)
        assert (node.returncode, err.strip(), out.strip()) == (0, "", '["v0","v1","v2","v3"]')
        assert _partitions(modern) == [0, 1]
    finally:
        if node.poll() is None:
            node.kill()
            node.wait(WAIT_S)
        modern.close()
    assert errors == []


def test_a_kafka_python_classic_member_and_a_consumer_protocol_member_share_one_group(server):
    """kafka-python (classic JoinGroup/SyncGroup/Heartbeat) joins confluent-kafka's consumer group: the
    coordinator's assignor splits ``k`` between them; the classic member's close hands its partition back."""
    from kafka import KafkaConsumer

    errors: list = []
    modern = _consumer(server, "mixed", errors)
    modern.subscribe(["k"])
    _poll_until([modern], lambda: _partitions(modern) == [0, 1], "the consumer protocol member")
    classic = KafkaConsumer(
        "k",
        bootstrap_servers=server.bootstrap,
        group_id="mixed",
        auto_offset_reset="earliest",
        heartbeat_interval_ms=300,
    )

    def classic_partitions() -> list[int]:
        return sorted(tp.partition for tp in classic.assignment())

    def members():
        coordinator = server.cluster.brokers[server.cluster.coordinator_for("mixed")].coordinator
        group = coordinator.consumer_group_manager.groups["mixed"]
        return group.state, sorted(m.uses_classic_protocol for m in group.members.values())

    try:
        deadline = time.monotonic() + 2 * WAIT_S
        while not (len(_partitions(modern)) == 1 and len(classic_partitions()) == 1):
            assert time.monotonic() < deadline, (_partitions(modern), classic_partitions())
            modern.poll(0.02)
            classic.poll(timeout_ms=20)
        assert sorted(_partitions(modern) + classic_partitions()) == [0, 1]
        assert server.call(members) == ("Stable", [False, True])
    finally:
        classic.close()  # LeaveGroup: the consumer group gets its partition back at once
    try:
        _poll_until([modern], lambda: _partitions(modern) == [0, 1], "the partition back after the leave")
        assert server.call(members) == ("Stable", [False])
    finally:
        modern.close()
    assert errors == []
