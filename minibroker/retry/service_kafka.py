"""The retry service's kafka-python glue: a consumed record as held, which errors mean "Kafka failed", a
produce future's outcome in one line, and the rebalance listener."""

from __future__ import annotations

from typing import Any

from kafka.errors import KafkaError

from minibroker.retry import headers as h
from minibroker.retry.holding import Held
from minibroker.retry.outage import reason_of
from minibroker.retry.service_config import ServiceConfig

#: what a poll, send, flush or commit raises when the cluster cannot be reached (or rebalances)
KAFKA_ERRORS: tuple[type[BaseException], ...] = (KafkaError, OSError)


def held_of(config: ServiceConfig, sources: dict[str, tuple[str, int]], tp: Any, record: Any) -> Held:
    """A retry-topic record as held: its source topic from the topic's name (``sources``); a malformed
    one is due now with ``attempts`` set, so it goes to the DLT with the reason."""
    source, attempt = sources[tp.topic]
    policy = config.topics[source]
    headers = [(name, value or b"") for name, value in (record.headers or [])]
    try:
        parsed = h.parse(record.key, record.value, record.timestamp, headers)
    except ValueError as error:
        extra = tuple((n, v) for n, v in headers if not n.startswith("retry."))
        reason = f"malformed retry headers: {error}"
        fields = {h.ATTEMPT: policy.attempts, h.DUE: record.timestamp, h.ERROR: reason}
        parsed = h.RetryRecord(record.key, record.value, record.timestamp, fields, extra)
    fields = {**parsed.headers, h.ORIGINAL_TOPIC: source}
    fields.setdefault(h.ATTEMPT, attempt)
    fields.setdefault(h.DUE, record.timestamp + policy.delay_after(int(fields[h.ATTEMPT])))
    parsed = h.RetryRecord(parsed.key, parsed.value, parsed.timestamp, fields, parsed.extra)
    return Held(tp, record.offset, parsed, int(fields[h.DUE]))


def succeeded(future: Any) -> bool:
    return not isinstance(future, BaseException) and future.is_done and future.succeeded()


def failure(future: Any) -> str:
    """Why a produce failed, in one line."""
    if isinstance(future, BaseException):
        return reason_of(future)
    if future.is_done and future.exception is not None:
        return reason_of(future.exception)
    return "no acknowledgement within produce_timeout_ms"


def listener(service: Any) -> Any:
    """Rebalance callbacks: drop what is held of the revoked partitions; say what is assigned.

    They run on kafka-python's IO thread, where a blocking call (``commit``) raises; no commit here: the
    loop commits after every batch, and what a revoked partition did not commit its next owner reads
    again (redis: deduplicated; wheel: within the duplicate window).
    """
    from kafka import ConsumerRebalanceListener

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked: Any) -> None:
            service.holding.revoke(list(revoked))
            for tp in revoked:
                service._committed.pop(tp, None)

        def on_partitions_assigned(self, assigned: Any) -> None:
            """Reading starts from the group's committed offsets; say which partitions are ours."""
            with service._assignment_lock:
                service._unpositioned = set(assigned)
                service._assignment_epoch += 1
            names = sorted(f"{tp.topic}[{tp.partition}]" for tp in assigned)
            service.log(f"assigned {len(names)} partitions: {', '.join(names) or 'none'}")

    return Listener()
