"""Forwarding due messages to their real partitions: one produce per leader, acks=-1 (both designs)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.delayed_messages.headers import DelayedMessage, encode_forward

if TYPE_CHECKING:
    from minibroker.clients import Producer
    from minibroker.sim.cluster import Cluster

UNKNOWN_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"


def real_partition(cluster: Cluster, message: DelayedMessage) -> TopicPartition | None:
    """Where ``message`` goes, or None when its topic or partition does not exist."""
    spec = cluster.topics.get(message.real_topic)
    if spec is None:
        return None
    partition = message.partition_in(spec.partitions)
    return TopicPartition(message.real_topic, partition) if partition < spec.partitions else None


async def forward(
    producer: Producer, messages: Sequence[DelayedMessage], epoch_origin_ms: int, emit
) -> list[tuple[str, str]]:
    """Send ``messages`` (acks as the producer's); per message, (real partition, Kafka error name).

    ``emit(kind, **fields)`` traces each ``delay.forward``.
    """
    cluster = producer.cluster
    now = cluster.now() + epoch_origin_ms
    targets = [real_partition(cluster, m) for m in messages]
    groups: dict[TopicPartition, list[DelayedMessage]] = {}
    for message, target in zip(messages, targets, strict=True):
        if target is not None:
            groups.setdefault(target, []).append(message)
            emit("delay.forward", id=message.message_id, partition=str(target))
    errors: dict[TopicPartition, str] = {}
    if groups:
        data = {}
        for target, group in groups.items():
            raw = encode_forward(group, now)
            data[target] = ProduceData(len(group), len(raw), raw=raw)
        requests = producer.produce(data)
        for request in requests:
            await request.wait()
        for request in requests:
            for tp in request.partitions:
                errors[tp] = request.errors.get(str(tp), "UNKNOWN")
    return [
        (str(target), errors[target]) if target is not None else ("", UNKNOWN_PARTITION) for target in targets
    ]
