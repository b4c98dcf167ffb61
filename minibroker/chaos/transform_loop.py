"""The consume-transform-produce loop of a chaos run: an exactly-once application, as KIP-447 writes one.

At each cycle of its ``TransformSpec`` the loop

1. makes sure it has a producer: a new ``TransactionalProducer`` (``ctp-N``, transactional id
   ``ctp-txn``) whose ``init_transactions`` fences the one before and completes or aborts its
   transaction; then it asks the group coordinator for ``ctp``'s committed offset of ``ctp-in-0``
   (OffsetFetch with ``require_stable``, again until no transactional offset is pending) and starts
   reading there;
2. fetches (READ_COMMITTED) what ``ctp-in-0`` has past its position;
3. begins a transaction, sends one record per input record to ``ctp-out`` (input offset ``o`` to
   partition ``o % 2``, ``OUTPUT_BYTES + o`` bytes), sends the next input offset with the
   transaction (``send_offsets_to_transaction``), and commits, aborts or crashes as the cycle says.

A commit answered NONE moves the loop's committed offset on; anything else (an abort, an error, a
crash) sends it back to its last committed offset, and an error or a crash makes it start over with
a new producer at the next cycle (the application restarts: it cannot know whether a commit that
failed took effect, so it reads the committed offset again). No cycle starts after the heal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minibroker.chaos.txn_schedule import (
    INPUT_TOPIC,
    OUTPUT_BYTES,
    OUTPUT_TOPIC,
    TRANSFORM_GROUP,
    TransformSpec,
)
from minibroker.clients.transactional_producer import READY, TransactionalProducer
from minibroker.common.errors import Errors
from minibroker.common.messages import TopicPartition
from minibroker.coordinator.group.messages import OffsetFetchGroup, OffsetFetchRequest, OffsetFetchResponse

if TYPE_CHECKING:
    from minibroker.clients.consumer import Consumer
    from minibroker.sim.cluster import Cluster

INPUT = TopicPartition(INPUT_TOPIC, 0)
CONSUMER = "ctp-reader"
#: how often the loop asks again for a committed offset that is pending or unavailable
OFFSET_RETRY_MS = 20


class TransformLoop:
    def __init__(self, spec: TransformSpec, cluster: Cluster) -> None:
        self.spec = spec
        self.cluster = cluster
        self.producer: TransactionalProducer | None = None
        self.generation = 0
        self.consumer: Consumer = cluster.consumer(CONSUMER, spec.consumer)
        self.committed = -1  # the committed input offset the loop knows, -1 until it read it
        #: input offsets each committed transaction processed, as the loop saw them answered
        self.commits: list[tuple[int, int]] = []

    async def run(self) -> None:
        for at, ending in self.spec.cycles:
            if self.cluster.now() < at:
                await self.cluster.clock.sleep_until(at)
            if self.producer is None and not await self._start():
                continue
            await self._cycle(ending)

    async def _start(self) -> bool:
        self.generation += 1
        producer = self.cluster.producer(f"ctp-{self.generation}", self.spec.producer)
        assert isinstance(producer, TransactionalProducer)
        request = producer.init_transactions(f"ctp-{self.generation}-i")
        await request.wait()
        if producer.state != READY:
            producer.crash()
            return False
        committed = await self._committed(self.cluster.now() + self.spec.producer["max.block.ms"])
        if committed is None:
            producer.crash()
            return False
        self.producer = producer
        self.committed = committed
        self.consumer.assign([INPUT], committed)
        return True

    async def _committed(self, deadline: int) -> int | None:
        """The group's committed offset of ``ctp-in-0`` (0 when none), or None by ``deadline``."""
        request = OffsetFetchRequest((OffsetFetchGroup(TRANSFORM_GROUP, ((INPUT_TOPIC, (0,)),)),), True)
        while self.cluster.now() < deadline:
            broker = self.cluster.coordinator_for(TRANSFORM_GROUP)
            if broker >= 0:
                answer = await self.cluster.network.call(CONSUMER, broker, request, 500)
                if isinstance(answer, OffsetFetchResponse) and answer.groups[0].error is Errors.NONE:
                    fetched = answer.groups[0].offsets[0]
                    if fetched.error is Errors.NONE:
                        return max(fetched.offset, 0)
            await self.cluster.clock.sleep_until(self.cluster.now() + OFFSET_RETRY_MS)
        return None

    async def _cycle(self, ending: str) -> None:
        producer = self.producer
        assert producer is not None
        position = self.consumer.positions.get(INPUT, self.committed)
        self.consumer.received[INPUT] = []
        for request in self.consumer.fetch():
            await request.wait()
        inputs = []
        for base, records in self.consumer.received[INPUT]:
            inputs += [o for o in range(base, base + records) if o >= position]
        end = self.consumer.positions[INPUT]
        if not inputs:
            return
        producer.begin_transaction()
        for offset in inputs:
            producer.send(OUTPUT_TOPIC, offset % 2, 1, OUTPUT_BYTES + offset)
        producer.send_offsets_to_transaction({INPUT: end}, TRANSFORM_GROUP)
        if ending == "crash":
            producer.crash()
            return self._restart()
        request = producer.abort_transaction() if ending == "abort" else producer.commit_transaction()
        await request.wait()
        ok = all(error == Errors.NONE.name for error in request.errors.values())
        if ok and ending == "commit":
            self.commits.append((self.committed, end))
            self.committed = end
            return
        if not ok:
            producer.crash()  # the application gives up on this producer and starts over
            return self._restart()
        self.consumer.seek(INPUT, self.committed)

    def _restart(self) -> None:
        self.producer = None
        self.consumer.unassign([INPUT])
        self.consumer.received[INPUT] = []
