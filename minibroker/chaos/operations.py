"""Invariant 1, live: every delayed operation completes exactly once, in time, and not early.

Per delayed operation (broker, purgatory, op): at most one ``op.complete``; cause
``expiry`` exactly at creation + delay; any other cause no later than that;
``op.expire`` only after its expiry completion. A completion on its condition is
checked against the cluster at that instant, with code of its own (not the
emulator's ``try_complete``):

- a produce that completes while its broker still leads has its HW at or past every
  offset it waits for;
- a consumer's fetch (its ``FetchRequest`` is seen as the consumer sends it) has a
  reason: on some partition the broker no longer leads, the leader epoch moved on,
  or the HW is below the fetch offset (a truncation); or, summed over its
  partitions, the bytes of the batches between the fetch offset and the HW (each
  partition at most ``max.partition.fetch.bytes``) reach ``fetch.min.bytes``.
  A read that crosses a segment counts as enough, as Kafka's does.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from minibroker.chaos.records import OpState, parse_tp, pin
from minibroker.chaos.violations import Violation
from minibroker.common.messages import HIGH_WATERMARK

if TYPE_CHECKING:
    from minibroker.broker.partition import Partition
    from minibroker.chaos.live_run import LiveRun
    from minibroker.common.messages import FetchRequest


class OperationChecks:
    """The operation half of the live checker; ``live`` gives the cluster, appends and lives."""

    def __init__(self, live: LiveRun) -> None:
        self.live = live
        self.ops: dict[tuple[int, str, str], OpState] = {}
        #: consumer fetches sent and not yet answered, by request id (the broker's op id)
        self.fetches: dict[str, FetchRequest] = {}

    def on_fetch(self, request: FetchRequest) -> None:
        self.fetches[request.request_id] = request

    def fetch_answered(self, op: str, broker: int) -> None:
        """A fetch answered at once (no delayed operation) needs no check: forget it."""
        if (broker, "Fetch", op) not in self.ops:
            self.fetches.pop(op, None)

    def __call__(self, kind: str, event: dict[str, Any]) -> None:
        key = (event["broker"], event["purgatory"], event["op"])
        now = event["time_ms"]
        if kind == "op.create":
            self.ops[key] = OpState(now, event["delay_ms"], self.live.lives.get(key[0], 0))
            return
        state = self.ops.get(key)
        if state is None:
            return
        if kind == "op.complete":
            self._complete(key, state, now, event["cause"])
        elif kind == "op.expire":
            state.expired += 1
            if state.expired > 1 or not state.completed or state.completed[-1] != (now, "expiry"):
                self._violate(
                    "expire", key, now, "ran on_expiration without completing by expiry first", "op.expire"
                )

    def _violate(
        self,
        rule: str,
        key: tuple[int, str, str],
        now: int,
        what: str,
        kind: str = "op.complete",
        **more: Any,
    ) -> None:
        fields = {"kind": kind, "time_ms": now, "broker": key[0], "purgatory": key[1], "op": key[2]}
        self.live.violate(
            (rule, key),
            Violation(
                1,
                more.pop("partition", None),
                more.pop("offsets", ""),
                now,
                f"{key[1]} operation {key[2]} on broker {key[0]} {what}",
                pin(fields),
            ),
        )

    def _complete(self, key: tuple[int, str, str], state: OpState, now: int, cause: str) -> None:
        deadline = state.created_ms + state.delay_ms
        if state.completed:
            first = state.completed[0][0]
            self.live.violate(
                ("complete-twice", key),
                Violation(
                    1,
                    None,
                    "",
                    now,
                    f"{key[1]} operation {key[2]} on broker {key[0]} completed twice (first at {first} ms)",
                    pin({"kind": "op.complete", "broker": key[0], "purgatory": key[1], "op": key[2]}, 1),
                ),
            )
        elif cause == "expiry" and now != deadline:
            self._violate("expiry-time", key, now, f"expired at {now} ms, not at its deadline {deadline} ms")
        elif cause != "expiry" and now > deadline:
            self._violate("late", key, now, f"completed ({cause}) after its deadline {deadline} ms")
        elif cause == "condition" and key[1] == "Produce":
            self._produce_condition(key, now)
        elif cause == "condition" and key[1] == "Fetch":
            self._fetch_condition(key, now)
        if key[1] == "Fetch":
            self.fetches.pop(key[2], None)
        state.completed.append((now, cause))

    def _leading(self, broker: int, label: str) -> Partition | None:
        cluster = self.live.cluster
        manager = cluster.brokers[broker].replica_manager if cluster is not None else None
        partition = manager.partitions.get(parse_tp(label)) if manager is not None else None
        return partition if partition is not None and partition.is_leader else None

    def _produce_condition(self, key: tuple[int, str, str], now: int) -> None:
        for (op, label), appends in self.live.appends.items():
            if op != key[2]:
                continue
            append = next((a for a in appends if a.broker == key[0]), None)
            partition = self._leading(key[0], label)
            if append is None or partition is None:
                continue
            required = append.offset + append.count
            if partition.high_watermark < required:
                self._violate(
                    "early",
                    key,
                    now,
                    f"completed on its condition with the HW at {partition.high_watermark}, below {required}",
                    partition=label,
                    offsets=f"{append.offset}..{required - 1}",
                )

    def _fetch_condition(self, key: tuple[int, str, str], now: int) -> None:
        request = self.fetches.get(key[2])
        if request is None or request.isolation != HIGH_WATERMARK:
            return
        accumulated = 0
        shown = []
        for tp, wanted in request.partitions.items():
            partition = self._leading(key[0], str(tp))
            if partition is None:
                return  # no longer leads: a reason to answer
            if wanted.current_leader_epoch >= 0 and wanted.current_leader_epoch != partition.leader_epoch:
                return  # fenced or unknown epoch
            log = partition.log
            hw = partition.high_watermark
            if hw < wanted.fetch_offset:
                return  # truncated below the fetch offset
            first = bisect.bisect_right(log.segment_bases, wanted.fetch_offset)
            if bisect.bisect_right(log.segment_bases, hw) != first:
                return  # the HW is on a newer segment
            size = sum(b.size for b in log.batches() if wanted.fetch_offset < b.next_offset <= hw)
            accumulated += min(size, wanted.partition_max_bytes)
            shown.append(f"{tp} from {wanted.fetch_offset} to HW {hw}")
        if accumulated < request.min_bytes:
            self._violate(
                "early-fetch",
                key,
                now,
                f"completed on its condition with {accumulated} bytes below the HW "
                f"({'; '.join(shown)}), short of fetch.min.bytes {request.min_bytes}",
                partition=",".join(str(tp) for tp in request.partitions),
            )
