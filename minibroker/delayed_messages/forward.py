"""Forwarding due messages to their real partitions: one produce per leader, acks=-1 (both designs).

And what both designs do with a message that cannot be forwarded because its real topic or partition
does not exist (``undeliverable``): park it (held again, due after a backoff, its failed attempts in
the header ``delay.forward.attempts``), and after its last attempt send it to a dead-letter topic
(with ``delay.real.topic`` and ``delay.error``) or drop it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs

from minibroker.common.messages import ProduceData, TopicPartition
from minibroker.delayed_messages.headers import REAL_TOPIC, DelayedMessage, encode_forward

if TYPE_CHECKING:
    from minibroker.clients import ClientRequest, Producer
    from minibroker.delayed_messages.stats import DelayStats
    from minibroker.sim.cluster import Cluster

UNKNOWN_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
#: a parked message's failed attempts (decimal text), delivered with it if its topic turns up
ATTEMPTS = "delay.forward.attempts"
#: why a dead-lettered message was not delivered
ERROR = "delay.error"


def undeliverable(outcome: tuple[str, str]) -> bool:
    """``forward``'s outcome for a message whose real topic or partition does not exist."""
    return outcome == ("", UNKNOWN_PARTITION)


def failed_attempts(message: DelayedMessage) -> int:
    """How many forwards of ``message`` failed before this one (its ``delay.forward.attempts``)."""
    counted = [value for name, value in message.headers if name == ATTEMPTS]
    try:
        return int(counted[-1]) if counted else 0
    except ValueError:
        return 0


def _with_attempts(message: DelayedMessage, attempts: int) -> tuple[tuple[str, bytes], ...]:
    return (*((n, v) for n, v in message.headers if n != ATTEMPTS), (ATTEMPTS, b"%d" % attempts))


def parked(message: DelayedMessage, due_ms: int) -> DelayedMessage:
    """``message`` held again, due at ``due_ms``, one more failed attempt counted."""
    return attrs.evolve(message, due_ms=due_ms, headers=_with_attempts(message, failed_attempts(message) + 1))


def settle(
    message: DelayedMessage,
    cluster: Cluster,
    limits: tuple[int, int, str],
    now_ms: int,
    epoch_origin_ms: int,
    stats: DelayStats,
    emit,
) -> tuple[str, DelayedMessage | None]:
    """What becomes of an undeliverable ``message``, counted and traced: ``("park", the message due
    again)``, ``("dead", the letter to forward)`` or ``("drop", None)``. ``limits``: the design's
    attempts, backoff (ms) and dead-letter topic; ``now_ms`` on the records' time scale."""
    attempts_limit, backoff_ms, topic = limits
    attempts = failed_attempts(message) + 1
    if attempts < attempts_limit:
        again = parked(message, now_ms + backoff_ms)
        stats.parked += 1
        due_ms = again.due_ms - epoch_origin_ms
        emit(
            "delay.parked", id=message.message_id, topic=message.real_topic, attempts=attempts, due_ms=due_ms
        )
        return "park", again
    letter = dead_letter(message, topic)
    if topic and real_partition(cluster, letter) is not None:
        return "dead", letter
    stats.dropped += 1
    emit("delay.dropped", id=message.message_id, topic=message.real_topic, attempts=attempts)
    return "drop", None


def dead_letter(message: DelayedMessage, topic: str) -> DelayedMessage:
    """``message`` bound for the dead-letter ``topic``, saying where it was meant to go and why."""
    headers = (
        *_with_attempts(message, failed_attempts(message) + 1),
        (REAL_TOPIC, message.real_topic.encode()),
        (ERROR, UNKNOWN_PARTITION.encode()),
    )
    return attrs.evolve(message, real_topic=topic, real_partition=None, headers=headers)


def real_partition(cluster: Cluster, message: DelayedMessage) -> TopicPartition | None:
    """Where ``message`` goes, or None when its topic or partition does not exist."""
    spec = cluster.topics.get(message.real_topic)
    if spec is None:
        return None
    partition = message.partition_in(spec.partitions)
    return TopicPartition(message.real_topic, partition) if partition < spec.partitions else None


@attrs.define(eq=False)
class PendingForward:
    """A forward sent and not yet answered: the produce requests and each message's real partition."""

    targets: list[TopicPartition | None]
    requests: list[ClientRequest]


def send_forward(
    producer: Producer, messages: Sequence[DelayedMessage], epoch_origin_ms: int, emit
) -> PendingForward:
    """Send ``messages`` (acks as the producer's), one produce per leader, without waiting for the answers:
    several forwards can be in flight at once (a real producer's ``max.in.flight.requests.per.connection``).

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
    requests: list[ClientRequest] = []
    if groups:
        data = {}
        for target, group in groups.items():
            raw = encode_forward(group, now)
            data[target] = ProduceData(len(group), len(raw), raw=raw)
        requests = producer.produce(data)
    return PendingForward(targets, requests)


async def forward_outcomes(pending: PendingForward) -> list[tuple[str, str]]:
    """Wait for ``pending``'s answers; per message, (real partition, Kafka error name)."""
    errors: dict[TopicPartition, str] = {}
    for request in pending.requests:
        await request.wait()
    for request in pending.requests:
        for tp in request.partitions:
            errors[tp] = request.errors.get(str(tp), "UNKNOWN")
    return [
        (str(target), errors[target]) if target is not None else ("", UNKNOWN_PARTITION)
        for target in pending.targets
    ]


async def forward(
    producer: Producer, messages: Sequence[DelayedMessage], epoch_origin_ms: int, emit
) -> list[tuple[str, str]]:
    """Send ``messages`` and wait for the answers: ``send_forward`` then ``forward_outcomes``."""
    return await forward_outcomes(send_forward(producer, messages, epoch_origin_ms, emit))
