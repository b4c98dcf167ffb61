"""What a check finds: a ``Violation`` names the invariant, the partition, the offsets and the time."""

from __future__ import annotations

from typing import Any

import attrs

#: invariant number -> short name (docs/chaos.md states each in full)
INVARIANTS = {
    1: "delayed operations complete exactly once, in time",
    2: "acknowledged acks=-1 records are never lost",
    3: "consumers read only records that stay",
    4: "HW <= LEO of every ISR member; leader in ISR; epochs grow; logs contiguous",
    5: "no request appended twice",
    6: "liveness after healing",
    7: "consumer groups: Stable again, one owner per partition, commits fenced, within the HW, not backward",
    8: "transactions: READ_COMMITTED sees committed ones whole, LSO held, all end in time, "
    "fenced producers never append, exactly once",
    11: "log compaction: the latest value per key stays, superseded records go, tombstones outlive "
    "delete.retention.ms",
    12: "share groups: no record acknowledged twice within one delivery",
    13: "share groups: no acquisition lock (or DelayedShareFetch) outlives its duration by more than a tick",
    14: "share groups: every record eventually acknowledged or archived",
}

#: the cause of a violation that follows from an unclean election's truncation (see ``groups``)
UNCLEAN_TRUNCATION = "unclean-truncation"


@attrs.frozen
class Violation:
    """One broken guarantee. ``evidence`` says how the TOML writer makes ``minibroker run`` fail."""

    invariant: int
    partition: str | None
    offsets: str
    time_ms: int
    message: str
    #: {"kind": "read", ...} a record to read back; {"kind": "event", "fields": ..., "count": n};
    #: {"kind": "expect", "where": "expect[3]"} a scenario expectation that failed
    evidence: dict[str, Any] = attrs.field(factory=dict, eq=False)
    #: a consequence a profile may expect (``Profile.expected_causes``), e.g. ``"unclean-truncation"``
    cause: str = ""
    #: why it follows from that cause, for the report
    reason: str = ""

    def line(self) -> str:
        where = f" {self.partition}" if self.partition else ""
        offsets = f" offsets {self.offsets}" if self.offsets else ""
        because = f" (expected: {self.reason})" if self.reason else ""
        return f"invariant {self.invariant}{where}{offsets} at {self.time_ms} ms: {self.message}{because}"

    def as_row(self) -> dict[str, Any]:
        return {
            "invariant": self.invariant,
            "partition": self.partition,
            "offsets": self.offsets,
            "time_ms": self.time_ms,
            "message": self.message,
            "cause": self.cause,
        }
