"""Chaos with share consumers (KIP-932): seeded runs of a share group through faults, and its invariants.

A run (``share_chaos_scenario(seed)``) has three brokers, a topic of one or two partitions replicated on
all three, three share consumers of one group joining at 0, and a producer's load from 500 ms; the seed
picks the topic's partitions, the load, records the consumers RELEASE or REJECT, a consumer that stalls
past the lock duration, one that crashes (its session, 3000 ms, expires and the simple assignor gives its
partitions to the others), and a broker that crashes and restarts. Faults end by 6000 ms;
the run lasts until ``END_MS`` so that every lock can expire and every record be handed out again.

``minibroker chaos --profile share`` runs them: run ``i`` of seed ``S`` is
``share_chaos_scenario(S * 10000000 + i)`` (modulo 2**63; seed 0's run ``i`` is scenario ``i``), its
timeline fixed (``--duration-ms`` does not apply), its failures not shrunk (the run's scenario replays it:
``share_chaos_scenario`` and ``run_share_chaos``).

``ShareChecks`` reads the trace as it is emitted and checks, per share partition:

- **never acknowledged twice within one delivery**: each ``share.ack`` of an offset names the delivery
  (``share.acquire``) it settles on that broker, at most once;
- **no lock outlives its duration by more than the timer's tick**: a ``share.lock.expire`` comes at its
  deadline, never earlier, at most ``tick_ms`` later; and at the end no lock on a live broker is overdue;
  likewise a DelayedShareFetch that expires (``op.complete`` of the ``ShareFetch`` purgatory, cause
  ``expiry``) does so at its ``max_wait_ms``, at most ``tick_ms`` late;
- **every record eventually acknowledged or archived** (``check_end``, at ``END_MS``): on each
  partition's leader the share partition's SPSO has reached the log end and nothing is in flight.
"""

from __future__ import annotations

import random
import time
from typing import Any

import attrs
import trio
import trio.testing

from minibroker.chaos.schedule import FAULT_KINDS
from minibroker.chaos.violations import Violation
from minibroker.common.messages import TopicPartition
from minibroker.runtime import deterministic_scheduling, quiet_gc
from minibroker.scenario import ScenarioRunner, parse_scenario

#: the share invariants' numbers in violations and the report (``violations.INVARIANTS``)
NO_DOUBLE_ACK, LOCK_ON_TIME, ALL_SETTLED = 12, 13, 14
#: when the checks at the end look (faults end by 6000 ms; locks last 1000 ms)
END_MS = 15_000
LOCK_MS = 1000
#: a crashed consumer leaves the group after SESSION_MS, so the partitions only it was assigned go to the
#: others well before the checks (Kafka's 45 s default would outlast the run)
SESSION_MS, HEARTBEAT_MS = 3000, 1000
GROUP = "sg"


@attrs.define
class ShareTally:
    """What a run did (none of it is a violation)."""

    acquired: int = 0
    redelivered: int = 0
    acknowledged: int = 0
    archived: int = 0
    lock_expiries: int = 0
    fetch_expiries: int = 0  # DelayedShareFetches that waited their whole max_wait_ms
    records: int = 0  # below the partitions' high watermarks at the end


class ShareChecks:
    """A trace sink checking the share-group invariants live; ``check_end`` at the end of the run."""

    def __init__(self, tick_ms: int = 1) -> None:
        self.tick_ms = tick_ms
        #: (broker, group, partition, offset) -> the trace seq of the acquisition holding it
        self.current: dict[tuple[Any, ...], int] = {}
        self.settled: set[tuple[tuple[Any, ...], int]] = set()
        #: (broker, op) -> when the DelayedShareFetch is due
        self.fetch_due: dict[tuple[Any, str], int] = {}
        self.violations: list[Violation] = []
        self.tally = ShareTally()
        self.events = 0

    def __call__(self, event: dict[str, Any]) -> None:
        self.events += 1
        kind = event["kind"]
        if kind.startswith("op.") and event.get("purgatory") == "ShareFetch":
            self._share_fetch(event)
            return
        if not kind.startswith("share."):
            return
        if kind == "share.acquire":
            for offset in range(event["offset"], event["last_offset"] + 1):
                self.current[(event["broker"], event["group"], event["partition"], offset)] = event["seq"]
                self.tally.acquired += 1
                self.tally.redelivered += event["delivery_count"] > 1
        elif kind == "share.ack":
            size = event["last_offset"] - event["offset"] + 1
            types = event["types"] if len(event["types"]) > 1 else event["types"] * size
            for i, ack_type in enumerate(types):
                if ack_type == "GAP":
                    continue
                key = (event["broker"], event["group"], event["partition"], event["offset"] + i)
                delivery = self.current.get(key)
                if delivery is None or (key, delivery) in self.settled:
                    what = (
                        "never acquired there" if delivery is None else "acknowledged twice in one delivery"
                    )
                    self._violate(NO_DOUBLE_ACK, event, f"offset {key[3]} {what}")
                self.settled.add((key, delivery if delivery is not None else -1))
                self.tally.acknowledged += 1
        elif kind == "share.lock.expire":
            self.tally.lock_expiries += 1
            late = event["time_ms"] - event["deadline_ms"]
            if not 0 <= late <= self.tick_ms:
                self._violate(
                    LOCK_ON_TIME,
                    event,
                    f"lock due {event['deadline_ms']} expired at {event['time_ms']} ({late:+d} ms)",
                )
        elif kind == "share.archive":
            self.tally.archived += 1

    def _share_fetch(self, event: dict[str, Any]) -> None:
        """A DelayedShareFetch's creation (its due time) and an expiry's lateness against it."""
        key = (event["broker"], event["op"])
        if event["kind"] == "op.create":
            self.fetch_due[key] = event["time_ms"] + event["delay_ms"]
        elif event["kind"] == "op.complete":
            due = self.fetch_due.pop(key, None)
            if event.get("cause") == "expiry" and due is not None:
                self.tally.fetch_expiries += 1
                late = event["time_ms"] - due
                if not 0 <= late <= self.tick_ms:
                    message = f"{event['op']} due {due} expired at {event['time_ms']} ({late:+d} ms)"
                    self._violate(LOCK_ON_TIME, event, message)

    def _violate(self, invariant: int, event: dict[str, Any], message: str) -> None:
        self.violations.append(
            Violation(invariant, event.get("partition"), "", event["time_ms"], message, dict(event))
        )

    def check_end(self, cluster: Any, topic: str, partitions: int) -> None:
        """Every partition's share partition settled up to its log end; no lock overdue on a live broker."""
        now = cluster.now()
        for partition in range(partitions):
            tp = TopicPartition(topic, partition)
            label = str(tp)
            leader = cluster.leader_of(tp)
            manager = cluster.brokers[leader].share_partition_manager if leader >= 0 else None
            sp = manager.share_partitions.get((GROUP, tp)) if manager is not None else None
            end = cluster.brokers[leader].logs[tp].high_watermark if leader >= 0 else -1
            self.tally.records += max(0, end)
            if sp is None or not sp.initialized:
                self.violations.append(
                    Violation(ALL_SETTLED, label, "", now, "no share partition on its leader")
                )
                continue
            if sp.start_offset != end or sp.records:
                states = sorted({r.state.name for r in sp.records.values()})
                message = f"SPSO {sp.start_offset}, log end {end}, in flight {len(sp.records)} {states}"
                self.violations.append(Violation(ALL_SETTLED, label, "", now, message))
        for broker in cluster.brokers:
            manager = broker.share_partition_manager
            for sp in manager.share_partitions.values() if manager is not None else ():
                for lock in sp.locks:
                    if lock.deadline_ms + self.tick_ms < now:
                        message = f"lock due {lock.deadline_ms} still held at {now}"
                        self.violations.append(Violation(LOCK_ON_TIME, str(sp.tp), "", now, message))


def share_chaos_scenario(seed: int) -> tuple[str, int]:
    """The scenario of run ``seed`` (TOML) and its topic's partition count."""
    rng = random.Random(seed)
    partitions = rng.choice((1, 2))
    rate = rng.choice((10, 20, 40))
    records = rng.randint(1, 3)
    stall_at, stall_ms = rng.randint(500, 3000), rng.randint(LOCK_MS + 200, 3 * LOCK_MS)
    crash_at = rng.randint(500, 4000)
    broker, broker_at = rng.randrange(3), rng.randint(1000, 4000)
    release, reject = rng.randrange(20), rng.randrange(20)
    steps = [
        *(f'[[steps]]\nat = 0\naction = "join"\nclient = "c{i}"\n' for i in (1, 2, 3)),
        *(
            f'[[steps]]\nat = 0\naction = "acknowledge"\nclient = "{client}"\ntype = "{kind}"\n'
            f"offsets = [{offset}]\n"
            for client, kind, offset in (("c2", "RELEASE", release), ("c3", "REJECT", reject))
        ),
        f'[[steps]]\nat = 500\naction = "load"\nclient = "p"\ntopic = "t"\nrate = {rate}\n'
        f"duration_ms = 2000\nrecords = {records}\n",
        f'[[steps]]\nat = {stall_at}\naction = "stall"\nclient = "c1"\nduration_ms = {stall_ms}\n',
        f'[[steps]]\nat = {crash_at}\naction = "crash"\nclient = "c2"\n',
        f'[[steps]]\nat = {broker_at}\naction = "crash"\nbroker = {broker}\n',
        f'[[steps]]\nat = {broker_at + 2000}\naction = "restart"\nbroker = {broker}\n',
    ]
    clients = "".join(
        f'[[clients]]\nid = "c{i}"\ntype = "share_consumer"\nconfig = {{ "group.id" = "{GROUP}" }}\n'
        'subscribe = ["t"]\n\n'
        for i in (1, 2, 3)
    )
    text = f"""\
[scenario]
name = "share_chaos_{seed}"
seed = {seed}
end_ms = {END_MS}

[cluster]
brokers = 3
config = {{ "offsets.topic.num.partitions" = 1, "share.coordinator.state.topic.num.partitions" = 1, \
"group.share.record.lock.duration.ms" = {LOCK_MS}, "group.share.delivery.count.limit" = 3, \
"group.share.session.timeout.ms" = {SESSION_MS}, "group.share.heartbeat.interval.ms" = {HEARTBEAT_MS} }}

[[topics]]
name = "t"
partitions = {partitions}
replication_factor = 3

[[clients]]
id = "p"
type = "producer"

{clients}{chr(10).join(steps)}"""
    return text, partitions


def run_share_chaos(seed: int) -> tuple[list[Violation], ShareTally]:
    """Run share chaos ``seed`` in virtual time; its violations and tally."""
    checks, _, _ = _play(seed)
    return checks.violations, checks.tally


def _play(seed: int) -> tuple[ShareChecks, ScenarioRunner, Any]:
    """Run share chaos ``seed``: the checks, the runner and its result (None if the emulator raised)."""
    text, partitions = share_chaos_scenario(seed)
    scenario = parse_scenario(text, f"share_chaos_{seed}.toml")
    checks = ShareChecks()
    runner = ScenarioRunner(scenario, [checks], None)
    box: list[Any] = []

    async def play() -> None:
        async def at_end() -> None:
            await runner.ready.wait()
            assert runner.cluster is not None
            await runner.cluster.clock.sleep_until(END_MS - 1)
            await trio.testing.wait_all_tasks_blocked()
            checks.check_end(runner.cluster, "t", partitions)

        async def run() -> None:
            box.append(await runner.run(scenario.seed))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(at_end)
            nursery.start_soon(run)

    with quiet_gc(), deterministic_scheduling(seed):
        try:
            trio.run(play, clock=trio.testing.MockClock(autojump_threshold=0))
        except Exception as error:  # the emulator itself broke: a finding too
            now = runner.cluster.now() if runner.cluster else 0
            message = f"the emulator raised {type(error).__name__}: {error}"
            checks.violations.append(Violation(0, None, "", now, message))
    return checks, runner, box[0] if box else None


def share_run_seed(seed: int, index: int) -> int:
    """The share chaos scenario of run ``index`` of ``seed`` (a TOML integer: below 2**63)."""
    return (seed * 10_000_000 + index) % 2**63


@attrs.define
class ShareOutcome:
    """One share chaos run as ``minibroker chaos`` reports it (``RunOutcome``'s ``row``, ``violations``
    and ``expected``; the share profile expects no violation)."""

    violations: list[Violation]
    expected: list[Violation]
    tally: ShareTally
    row: dict[str, Any]

    @property
    def failed(self) -> bool:
        return bool(self.violations)


def run_share_index(seed: int, index: int) -> ShareOutcome:
    """Run ``index`` of ``seed`` on the share profile, with the row ``minibroker chaos`` reports."""
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    run_seed = share_run_seed(seed, index)
    checks, runner, result = _play(run_seed)
    violations = checks.violations
    cluster = runner.cluster
    row: dict[str, Any] = {
        "index": index,
        "seed": seed,
        "run": f"share_chaos_{run_seed}",
        "profile": "share",
        "scheduling_seed": run_seed,
        "brokers": 3,
        "members": 3,
        "commits": 0,
        "faults": 3,  # a consumer's stall, a consumer's crash, a broker's crash (and restart)
        "controller_faults": 0,
        **{f"fault_{kind}": int(kind == "crash") for kind in FAULT_KINDS},
        "produces": 0,
        "acked": 0,
        "protected": 0,
        "read_back": 0,
        "failed": 0,
        "in_doubt": 0,
        "acks1_lost": 0,
        "unprotected_lost": 0,
        **{f"share_{key}": value for key, value in attrs.asdict(checks.tally).items()},
        "requests": len(result.requests) if result is not None else 0,
        "messages": cluster.network.sent if cluster is not None else 0,
        "violations": len(violations),
        "expected_losses": 0,
        "invariants": ",".join(sorted({str(v.invariant) for v in violations})),
        "first_violation": violations[0].line() if violations else "",
        "virtual_ms": result.end_ms if result is not None else 0,
        "events": checks.events,
        "wall_ms": round((time.perf_counter() - started_wall) * 1000, 1),
        "cpu_ms": round((time.process_time() - started_cpu) * 1000, 1),
    }
    return ShareOutcome(violations, [], checks.tally, row)
