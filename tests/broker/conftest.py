"""A ReplicaManager on a manual clock: no trio, the timer advanced by hand (like Kafka's MockTimer tests)."""

from __future__ import annotations

import pytest

from minibroker.broker.config import BrokerConfig
from minibroker.broker.replica_manager import ReplicaManager
from minibroker.common.messages import (
    CONSUMER_REPLICA_ID,
    HIGH_WATERMARK,
    LOG_END,
    FetchPartition,
    FetchRequest,
    LeaderAndIsr,
    ProduceData,
    ProduceRequest,
    TopicPartition,
)
from minibroker.trace import ListSink, RecordingTracer

TP = TopicPartition("t", 0)


class ManualClock:
    def __init__(self) -> None:
        self.now = 0

    def now_ms(self) -> int:
        return self.now

    def to_seconds(self, ms: int) -> float:
        return ms / 1000


class StubNetwork:
    """Records controller requests instead of sending them."""

    def __init__(self) -> None:
        self.requests: list = []

    def request(self, src, dst, message, timeout_ms, on_response) -> int:
        self.requests.append((dst, message, on_response))
        return len(self.requests)

    def send(self, *args) -> bool:
        return True


class Harness:
    def __init__(self, **settings) -> None:
        self.clock = ManualClock()
        self.network = StubNetwork()
        self.events = ListSink()
        tracer = RecordingTracer(self.clock.now_ms, [self.events])
        config = BrokerConfig.from_kafka(settings)
        self.rm = ReplicaManager(0, config, self.clock, self.network, {}, lambda tp: tp.topic == "t", tracer)
        self.rm.timer.executor = lambda task: task.run()  # run expired operations inline
        self.responses: list = []

    def lead(self, replicas=(0, 1, 2), isr=None, epoch=0, tp=TP) -> None:
        isr = tuple(replicas if isr is None else isr)
        self.rm.apply_leader_and_isr(LeaderAndIsr(tp, 0, epoch, isr, 0, tuple(replicas)))

    def follow(self, leader=1, epoch=1, replicas=(0, 1, 2), tp=TP) -> None:
        self.rm.apply_leader_and_isr(LeaderAndIsr(tp, leader, epoch, tuple(replicas), 1, tuple(replicas)))

    def advance(self, to_ms: int) -> None:
        self.clock.now = to_ms
        self.rm.timer.advance_clock(to_ms)

    def produce(self, count=1, acks=-1, timeout_ms=10, tp=TP):
        request = ProduceRequest(
            acks, timeout_ms, {tp: ProduceData(count, count * 10)}, f"p{len(self.responses)}"
        )
        box: list = []
        self.rm.append_records(request, box.append)
        self.responses.append(box)
        return box

    def fetch(
        self,
        offset,
        replica=CONSUMER_REPLICA_ID,
        max_wait=500,
        min_bytes=1,
        isolation=None,
        epoch=-1,
        last_fetched_epoch=-1,
        tp=TP,
    ):
        isolation = isolation or (LOG_END if replica >= 0 else HIGH_WATERMARK)
        request = FetchRequest(
            replica,
            max_wait,
            min_bytes,
            1 << 20,
            {tp: FetchPartition(offset, 1 << 20, epoch, last_fetched_epoch)},
            isolation,
            f"f{len(self.responses)}",
        )
        box: list = []
        self.rm.fetch_messages(request, box.append)
        self.responses.append(box)
        return box


@pytest.fixture
def harness():
    return Harness()
