"""Transactions survive a SIGKILL of ``serve --data-dir``.

A confluent-kafka transactional producer commits transaction A, aborts B and leaves C open on
topic ``v`` (one partition, three replicas); the serve process is SIGKILLed and started again on
the same data dir. Then, as against a Kafka cluster restarted from its disks:

- ListOffsets READ_COMMITTED answers C's first offset (the last stable offset), and the partition
  leader's DescribeProducers shows the producer with C open at that offset;
- a READ_COMMITTED consumer reads exactly A's records (B's were aborted before the kill), and the
  offset each transaction committed for group ``g`` (``send_offsets_to_transaction``) is A's;
- the reloaded transaction coordinator aborts C at most its transaction timeout after the restart,
  and READ_COMMITTED still reads exactly A's records up to the end of the log;
- a new transactional id gets a producer id never handed out before the kill, and its commit is
  read;
- InitProducerId for the same transactional id keeps the producer id with a higher epoch, and an
  InitProducerId without one gets a producer id never handed out before the kill.

Only the serve processes this test starts are killed (``Popen.kill`` on their own handle).
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from contextlib import closing

from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse

from minibroker.coordinator.transaction import partition_for
from tests.server.conftest import WAIT_S, RawClient
from tests.server.test_serve_kill import LISTENING, free_base_port
from tests.server.test_transactions import _consume, _init, _latest, _producers

TXN = "kept"
#: a transactional id of the same coordinator (broker 0: partition_for(id, 50) % 3 == 0)
LATER = "later-0"
#: C's transaction timeout: long enough to look at C open after the restart, short for the test
TXN_TIMEOUT_MS = 6000
#: how long after its timeout C's abort marker may take (the server's start, the check every 200 ms,
#: the marker's write)
ABORT_SLACK_S = 5.0


def start(data_dir, port: int) -> tuple[subprocess.Popen, list[int]]:
    process = subprocess.Popen(
        [
            sys.executable, "-m", "minibroker", "serve", "--data-dir", str(data_dir), "--brokers", "3",
            "--topic", "v:1:3", "--port", str(port), "--config", "min.insync.replicas=2",
            "--config", "transaction.abort.timed.out.transaction.cleanup.interval.ms=200",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    ports = []
    while True:
        line = process.stdout.readline()
        assert line, f"serve ended: {process.wait()} {process.stderr.read()}"
        found = LISTENING.fullmatch(line.strip())
        if found:
            ports.append(int(found.group(2)))
        if line.startswith("state:"):
            return process, ports


def coordinator_port(ports: list[int], txn_id: str) -> int:
    """The port of ``txn_id``'s coordinator (FindCoordinator key type 1), once it answers."""
    with closing(RawClient(ports[0])) as client:
        deadline = time.monotonic() + WAIT_S
        while True:
            found = client.request(FindCoordinatorRequest(key=txn_id, key_type=1), FindCoordinatorResponse, 3)
            if found.error_code == 0:
                return ports[found.node_id]
            assert found.error_code == 15 and time.monotonic() < deadline, found
            time.sleep(0.05)


def leader_port(ports: list[int]) -> int:
    """The port of ``v-0``'s leader: the one broker whose DescribeProducers answers for it."""
    deadline = time.monotonic() + WAIT_S
    while True:
        for port in ports:
            if _producers(port) != "NOT_LEADER":
                return port
        assert time.monotonic() < deadline, "no leader of v-0"
        time.sleep(0.05)


def init(ports: list[int], txn_id: str | None) -> tuple[int, int, int]:
    """InitProducerId (v4) at ``txn_id``'s coordinator, or at broker 0 without a transactional id."""
    port = coordinator_port(ports, txn_id) if txn_id else ports[0]
    deadline = time.monotonic() + WAIT_S
    with closing(RawClient(port)) as client:
        while True:
            answer = _init(client, txn_id, TXN_TIMEOUT_MS)
            # CONCURRENT_TRANSACTIONS (51) while a transaction completes, COORDINATOR_LOAD_IN_PROGRESS (14)
            if answer[0] not in (14, 51) or time.monotonic() > deadline:
                return answer
            time.sleep(0.05)


def test_committed_aborted_and_open_transactions_survive_a_kill(tmp_path):
    from confluent_kafka import Consumer, Producer, TopicPartition

    data_dir = tmp_path / "data"
    port = free_base_port(random.Random(33))
    process, ports = start(data_dir, port)
    try:
        producer = Producer(
            {"bootstrap.servers": f"127.0.0.1:{ports[0]}", "transactional.id": TXN,
             "transaction.timeout.ms": TXN_TIMEOUT_MS}
        )  # fmt: skip
        producer.init_transactions(WAIT_S)
        group = Consumer({"bootstrap.servers": f"127.0.0.1:{ports[0]}", "group.id": "g"})
        for name, end in (("a", producer.commit_transaction), ("b", producer.abort_transaction), ("c", None)):
            producer.begin_transaction()
            for i in range(3):
                producer.produce("v", value=b"%s%d" % (name.encode(), i), partition=0)
            # each transaction also commits group g's offset of v-0 (TxnOffsetCommit): 10, 20, 30
            offset = {"a": 10, "b": 20, "c": 30}[name]
            producer.send_offsets_to_transaction(
                [TopicPartition("v", 0, offset)], group.consumer_group_metadata(), WAIT_S
            )
            assert producer.flush(WAIT_S) == 0
            if end is not None:
                end(WAIT_S)
        group.close()
        idempotent = init(ports, None)
        assert idempotent[0] == 0
        leader = leader_port(ports)
        before = _producers(leader)
        ((pid, epoch, _, c_first),) = before
        # a0..a2, the commit marker, b0..b2, the abort marker, then C
        assert c_first == 8
        assert (_latest(leader, 0), _latest(leader, 1)) == (11, 8)
    finally:
        process.kill()  # SIGKILL
        process.communicate(timeout=WAIT_S)
    del producer  # its transaction C is left to the coordinator

    restarted = time.monotonic()
    process, ports = start(data_dir, port)
    try:
        leader = leader_port(ports)
        # C is open: its first offset bounds the last stable offset, as before the kill
        assert _producers(leader) == before
        assert (_latest(leader, 0), _latest(leader, 1)) == (11, 8)
        partitions = [("v", 0)]
        assert _consume(f"127.0.0.1:{ports[0]}", "read_committed", partitions) == [b"a0", b"a1", b"a2"]
        # the reloaded coordinator aborts C at its timeout: the abort marker at 11 ends it
        # C began before the new process's clock: it times out at most its timeout after the restart
        deadline = restarted + TXN_TIMEOUT_MS / 1000 + ABORT_SLACK_S
        while _latest(leader, 1) != 12:
            assert time.monotonic() < deadline, (_latest(leader, 0), _latest(leader, 1))
            time.sleep(0.1)
        assert _latest(leader, 0) == 12
        assert _consume(f"127.0.0.1:{ports[0]}", "read_committed", partitions) == [b"a0", b"a1", b"a2"]
        # a new transactional id of the same coordinator gets a producer id of its own: D commits on v-0
        assert partition_for(LATER, 50) % 3 == partition_for(TXN, 50) % 3
        other = init(ports, LATER)
        assert other[0] == 0 and other[1] not in (pid, idempotent[1])
        producer = Producer({"bootstrap.servers": f"127.0.0.1:{ports[0]}", "transactional.id": LATER})
        producer.init_transactions(WAIT_S)
        producer.begin_transaction()
        producer.produce("v", value=b"d0", partition=0)
        producer.commit_transaction(WAIT_S)
        del producer
        assert _consume(f"127.0.0.1:{ports[0]}", "read_committed", partitions) == [b"a0", b"a1", b"a2", b"d0"]
        # A's offset commit holds; B's and C's were aborted
        group = Consumer({"bootstrap.servers": f"127.0.0.1:{ports[0]}", "group.id": "g"})
        assert [tp.offset for tp in group.committed([TopicPartition("v", 0)], WAIT_S)] == [10]
        group.close()
        again = init(ports, TXN)
        assert again[:2] == (0, pid) and again[2] > epoch
        fresh = init(ports, None)
        assert fresh[0] == 0 and fresh[1] not in (pid, idempotent[1]) and fresh[1] > idempotent[1]
    finally:
        process.kill()
        process.communicate(timeout=WAIT_S)
