"""What the live checker remembers of a run: appends, delayed operations, received batches.

Plain value types shared by the live checks (``observe``, ``operations``,
``replication``) and the end-of-run checks (``invariants``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from minibroker.common.messages import TopicPartition

if TYPE_CHECKING:
    from minibroker.common.record_batch import RecordBatch


@attrs.define(slots=True)
class Append:
    """A leader's append of one request's batch, as the ``append`` event saw it."""

    op: str
    broker: int
    partition: str
    offset: int
    count: int
    bytes: int
    epoch: int
    min_isr: int  # effective min ISR on the leader when it appended
    time_ms: int


@attrs.define(slots=True)
class OpState:
    """One delayed operation: created, delay, the broker's life then, its completions and expiries."""

    created_ms: int
    delay_ms: int
    life: int
    completed: list[tuple[int, str]] = attrs.Factory(list)
    expired: int = 0


class RunBudgetExceeded(Exception):
    """Raised from the sink when a run spends more CPU than its budget (a livelock in virtual time)."""


def parse_tp(label: str) -> TopicPartition:
    topic, _, number = label.rpartition("-")
    return TopicPartition(topic, int(number))


def pin(fields: dict[str, Any], count: int = 0) -> dict[str, Any]:
    """Evidence for the TOML writer: the trace event ``fields`` expected ``count`` times."""
    return {"kind": "event", "fields": fields, "count": count}


@attrs.define(slots=True)
class Received:
    """A batch a consumer received past its position, with the HW of that answer."""

    client: str
    partition: str
    batch: RecordBatch
    high_watermark: int
    time_ms: int
