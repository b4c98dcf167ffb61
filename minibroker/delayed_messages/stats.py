"""What the delay services did, over every life of every broker's service (for tests, reports, TUI)."""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class Delivery:
    """A message acknowledged on its real partition at ``delivered_ms`` (cluster ms)."""

    message_id: str
    partition: str
    level_ms: int
    due_ms: int
    delivered_ms: int

    @property
    def lateness_ms(self) -> int:
        return self.delivered_ms - self.due_ms


@attrs.define
class DelayStats:
    """Counters, and every delivery when ``keep_deliveries`` (off for benchmarks)."""

    keep_deliveries: bool = True
    deliveries: list[Delivery] = attrs.Factory(list)
    delivered_count: int = 0
    held_total: int = 0
    invalid: int = 0
    forward_failures: int = 0
    #: messages whose real topic or partition did not exist when due: parked again, dead-lettered, dropped
    parked: int = 0
    dead_lettered: int = 0
    dropped: int = 0
    pauses: int = 0
    resumes: int = 0

    def delivered(self, message_id: str, partition: str, level_ms: int, due_ms: int, at_ms: int) -> None:
        self.delivered_count += 1
        if self.keep_deliveries:
            self.deliveries.append(Delivery(message_id, partition, level_ms, due_ms, at_ms))

    def by_id(self) -> dict[str, list[Delivery]]:
        """Every delivery of each message id (more than one: a duplicate)."""
        out: dict[str, list[Delivery]] = {}
        for delivery in self.deliveries:
            out.setdefault(delivery.message_id, []).append(delivery)
        return out
