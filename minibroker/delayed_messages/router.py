"""The producer side of delay levels: ``Producer.send(..., delay_ms=...)`` lands here.

A delayed send becomes level records (``headers.py``'s contract) on the level's
topic: due at the send time plus the *level's* delay (see ``levels.py`` for why
it rounds up), each record with a message id ``<client>-<n>``. The level
partition is picked by murmur2 of the real partition's name, so the messages
of one real partition and level stay in one level partition, in send order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.delayed_messages.config import DelayConfig
from minibroker.delayed_messages.headers import DelayedMessage, encode_delayed, murmur2
from minibroker.delayed_messages.levels import DelayError

if TYPE_CHECKING:
    from minibroker.clients import ClientRequest, Producer
    from minibroker.sim.cluster import Cluster


def check_real(cluster: Cluster, real: TopicPartition) -> None:
    spec = cluster.topics.get(real.topic)
    if spec is None or not 0 <= real.partition < spec.partitions:
        raise DelayError(f"delay_ms: the real topic partition {real} does not exist")


def shared_numbers(cluster: Cluster) -> dict[str, int]:
    """The per-client message numbering, shared by every design on ``cluster`` so ids stay unique."""
    for router in cluster.delay_routers.values():
        return router.numbers
    return {}


def new_messages(
    numbers: dict[str, int], client_id: str, real: TopicPartition, count: int, size: int, now: int, due: int
) -> list[DelayedMessage]:
    """``count`` messages of ``size`` bytes in all, ids ``<client>-<n>`` numbered on in ``numbers``."""
    first = numbers.get(client_id, 0)
    numbers[client_id] = first + count
    value = bytes(size // max(1, count))
    return [
        DelayedMessage(f"{client_id}-{n}", real.topic, real.partition, due, now, None, value)
        for n in range(first, first + count)
    ]


class DelayRouter:
    """Turns a delayed send into level records; ``epoch_origin_ms`` maps cluster ms to record timestamps."""

    def __init__(self, cluster: Cluster, config: DelayConfig, epoch_origin_ms: int = 0) -> None:
        self.cluster = cluster
        self.config = config
        self.epoch_origin_ms = epoch_origin_ms
        self.numbers = shared_numbers(cluster)
        #: the message ids of each named delayed send (for scenario expectations)
        self.named_ids: dict[str, list[str]] = {}

    def level_partition(self, level_ms: int, real: TopicPartition) -> TopicPartition:
        partitions = self.config.topic_partitions
        index = (murmur2(str(real).encode()) & 0x7FFFFFFF) % partitions
        return TopicPartition(self.config.levels.topic(level_ms), index)

    def route(
        self, client_id: str, real: TopicPartition, count: int, size: int, delay_ms: int
    ) -> tuple[TopicPartition, ProduceData]:
        """The level partition and records for ``count`` records (``size`` bytes of values in all)."""
        level = self.config.levels.level_for(delay_ms)
        check_real(self.cluster, real)
        now = self.cluster.now() + self.epoch_origin_ms
        messages = new_messages(self.numbers, client_id, real, count, size, now, now + level)
        raw = encode_delayed(messages)
        return self.level_partition(level, real), ProduceData(count, len(raw), raw=raw)

    def send(
        self, producer: Producer, real: TopicPartition, count: int, size: int, delay_ms: int, name: str | None
    ) -> ClientRequest:
        """``Producer.send(..., delay_ms=...)``: produce the level records."""
        first = self.numbers.get(producer.client_id, 0)
        tp, data = self.route(producer.client_id, real, count, size, delay_ms)
        if name is not None:
            self.named_ids[name] = [f"{producer.client_id}-{n}" for n in range(first, first + count)]
        (request,) = producer.produce({tp: data}, name)
        return request
