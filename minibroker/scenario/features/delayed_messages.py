"""Delayed messages in scenarios: the ``[delay_service]`` and ``[delay_wheel]`` sections, the ``delivered``,
``delay_held`` and ``wheel`` expectations, and the designs the scenario names, started in its run.

The file wheel's files go to the ``[delay_wheel]`` section's ``data_dir`` (kept), or to a fresh
temporary directory removed when the run ends.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections import Counter
from typing import TYPE_CHECKING

import attrs
import trio
import trio.testing

from minibroker.common.messages import TopicPartition
from minibroker.delayed_messages import MESSAGE_ID, DelayConfig, DelayServices, Delivery
from minibroker.delayed_messages.headers import records
from minibroker.delayed_messages.view import DelaysView, LevelPartitionView, WheelCopyView
from minibroker.delayed_messages.wheel_service import WheelConfig, WheelGroup
from minibroker.scenario.expect import ExpectationResult, _compare
from minibroker.scenario.feature import ExpectationKind, Feature, Section
from minibroker.scenario.loader.delay import (
    read_delay_held,
    read_delay_service,
    read_delay_wheel,
    read_delivered,
    read_wheel,
)
from minibroker.scenario.model import DelayHeld, Delivered, WheelFigures

if TYPE_CHECKING:
    from minibroker.scenario.model import Scenario
    from minibroker.sim.cluster import Cluster


@attrs.define
class DelayedMessageDesigns:
    """The scenario's delayed-message designs on its cluster: levels, file wheel (either may be absent)."""

    scenario: Scenario | None = None
    services: DelayServices | None = None
    wheel: WheelGroup | None = None
    temp_dir: str | None = None

    @classmethod
    def open(cls, scenario: Scenario, seed: int) -> DelayedMessageDesigns:
        return cls(scenario)

    def prepare(self) -> None:
        """Nothing to reach before the run."""

    async def start(self, cluster: Cluster) -> None:
        """Start the scenario's designs. In virtual time record timestamps are cluster ms; on a
        running clock (``serve``, ``--realtime``) they are epoch ms, as real clients write them."""
        scenario = self.scenario
        assert scenario is not None
        clock = trio.lowlevel.current_clock()
        virtual = isinstance(clock, trio.testing.MockClock) and clock.rate == 0
        origin = 0 if virtual else round(time.time() * 1000) - cluster.now()
        # every delivery is kept only when an expectation asks (a served cluster runs for days)
        keep = any(isinstance(e, Delivered) for e in scenario.expectations)
        if scenario.delay_service is not None:
            config = DelayConfig.from_kafka(scenario.delay_service)
            self.services = DelayServices(cluster, config, epoch_origin_ms=origin)
            self.services.stats.keep_deliveries = keep
            await self.services.start(cluster.nursery)
        if scenario.delay_wheel is not None:
            settings = dict(scenario.delay_wheel)
            data_dir = settings.pop("data_dir", None)
            if data_dir is None:
                data_dir = self.temp_dir = tempfile.mkdtemp(prefix="minibroker-wheel-")
            self.wheel = WheelGroup(
                cluster, data_dir, WheelConfig.from_kafka(settings), epoch_origin_ms=origin
            )
            self.wheel.stats.keep_deliveries = keep
            await self.wheel.start(cluster.nursery)

    def view(self) -> DelaysView | None:
        """The designs' state now, for the TUI; None without delayed messages."""
        if self.services is None and self.wheel is None:
            return None
        levels: tuple[LevelPartitionView, ...] = ()
        wheel: tuple[WheelCopyView, ...] = ()
        if self.services is not None:
            paused = set(self.services.paused())
            held = sorted(self.services.held().items())
            levels = tuple(LevelPartitionView(tp, count, tp in paused) for tp, count in held)
        if self.wheel is not None:
            group = self.wheel
            live = group.live_in_sync()
            wheel = tuple(
                WheelCopyView(
                    b,
                    "active" if live and b == live[0] else "standby" if b in live else "out of sync",
                    view,
                )
                for b, view in sorted(group.view().items())
            )
        return DelaysView(
            levels,
            self.services.stats.delivered_count if self.services else 0,
            wheel,
            self.wheel.stats.delivered_count if self.wheel else 0,
            self.wheel.config.tick_ms if self.wheel else 0,
        )

    def close(self) -> None:
        """Close the wheel's files and remove its temporary directory (idempotent)."""
        if self.wheel is not None:
            for copy in self.wheel.copies.values():
                copy.close()
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
            self.temp_dir = None

    @property
    def cluster(self) -> Cluster | None:
        design = self.services or self.wheel
        return design.cluster if design is not None else None

    def ids_in_logs(self) -> Counter[str]:
        """How many times each message id is in the real topics, below the HW of their fullest replica."""
        counts: Counter[str] = Counter()
        cluster = self.cluster
        if cluster is None:
            return counts
        for name, spec in cluster.topics.items():
            if spec.internal:
                continue
            for p in range(spec.partitions):
                tp = TopicPartition(name, p)
                logs = [b.logs[tp] for b in cluster.brokers if tp in b.logs]
                if not logs:
                    continue
                log = max(logs, key=lambda log: log.high_watermark)
                for batch in log.batches():
                    if batch.raw is None or batch.next_offset > log.high_watermark:
                        continue
                    for record in records(batch.raw):
                        found = dict(record.headers).get(MESSAGE_ID)
                        if found is not None:
                            counts[found.decode()] += 1
        return counts

    def deliveries(self, name: str) -> tuple[list[str], dict[str, list[Delivery]]]:
        """The message ids of the named send, and every delivery of each."""
        designs = []
        if self.services is not None:
            designs.append((self.services.cluster.delay_routers["levels"], self.services.stats))
        if self.wheel is not None:
            designs.append((self.wheel, self.wheel.stats))
        for router, stats in designs:
            if name in router.named_ids:
                return router.named_ids[name], stats.by_id()
        return [], {}


def check_delivered(expectation: Delivered, designs: DelayedMessageDesigns) -> ExpectationResult:
    """Missing and duplicates count the copies in the real partitions (in flight at a crash included);
    times and partitions are those of each message's first acknowledged forward."""
    ids, by_id = designs.deliveries(expectation.request)
    firsts = [by_id[i][0] for i in ids if by_id.get(i)]
    times = sorted({d.delivered_ms for d in firsts})
    partitions = sorted({d.partition for d in firsts})
    in_logs = designs.ids_in_logs()
    missing = sum(1 for i in ids if not in_logs[i])
    duplicates = sum(in_logs[i] - 1 for i in ids if in_logs[i])
    within = expectation.within
    expected, passed, seen = _compare(
        [
            ("missing", 0, missing),
            ("at", [expectation.delivered_at] if expectation.delivered_at is not None else None, times),
            ("partition", [expectation.partition] if expectation.partition else None, partitions),
            ("duplicates", expectation.duplicates, duplicates),
        ]
    )
    if within is not None:
        inside = all(within[0] <= t <= within[1] for t in times) and bool(times)
        expected += f", within {list(within)}"
        seen += f", at {times}"
        passed = passed and inside
    return ExpectationResult(expectation.where, f"{expectation.request} delivered: {expected}", passed, seen)


def check_held(expectation: DelayHeld, designs: DelayedMessageDesigns) -> ExpectationResult:
    assert designs.services is not None
    held = designs.services.held().get(expectation.partition)
    paused = expectation.partition in designs.services.paused() if held is not None else None
    expected, passed, seen = _compare(
        [("held", expectation.held, held), ("paused", expectation.paused, paused)]
    )
    return ExpectationResult(
        expectation.where, f"{expectation.partition} at {expectation.at} ms: {expected}", passed, seen
    )


def check_wheel(expectation: WheelFigures, designs: DelayedMessageDesigns) -> ExpectationResult:
    assert designs.wheel is not None
    view = designs.wheel.copies[expectation.broker].view()
    expected, passed, seen = _compare(
        [
            ("slots_with_messages", expectation.slots_with_messages, view.slots_with_messages),
            ("open_files", expectation.open_files, view.open_files),
            ("pointer", expectation.pointer, view.pointer),
            ("in_sync", expectation.in_sync, expectation.broker in designs.wheel.in_sync),
        ]
    )
    what = f"wheel of broker {expectation.broker} at {expectation.at} ms: {expected}"
    return ExpectationResult(expectation.where, what, passed, seen)


#: registered by ``minibroker.scenario.features``
FEATURE = Feature(
    "delayed_messages",
    (
        Section("delay_service", read_delay_service, ("cluster",), ("steps", "expect")),
        Section("delay_wheel", read_delay_wheel, ("cluster",), ("steps", "expect")),
    ),
    (
        ExpectationKind("delivered", read_delivered, Delivered, check_delivered, False, "event"),
        ExpectationKind("delay_held", read_delay_held, DelayHeld, check_held, True, "delivered"),
        ExpectationKind("wheel", read_wheel, WheelFigures, check_wheel, True, "delay_held"),
    ),
    DelayedMessageDesigns.open,
)
