"""One chaos run: play a schedule through the scenario runner under the live checker, then check the end.

``run_schedule`` is a pure function of the schedule (and the planted bug, for
tests): the same schedule gives the same trace, the same violations and the same
row, except ``wall_ms`` and ``cpu_ms``.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import attrs
import trio
import trio.testing

from minibroker.chaos import planted
from minibroker.chaos.compaction_checks import CompactionChecks, check_compaction
from minibroker.chaos.generate import generate
from minibroker.chaos.invariants import Tally, check_end
from minibroker.chaos.observe import Observer, RunBudgetExceeded
from minibroker.chaos.profiles import profile as get_profile
from minibroker.chaos.schedule import FAULT_KINDS, Schedule, compile_schedule
from minibroker.chaos.share import ShareOutcome, run_share_index
from minibroker.chaos.transform_loop import TransformLoop
from minibroker.chaos.txn_checks import TxnChecks, check_transactions
from minibroker.chaos.violations import Violation
from minibroker.clients import Consumer
from minibroker.controller.quorum_controller import CONTROLLER
from minibroker.runtime import deterministic_scheduling, quiet_gc
from minibroker.scenario.model import Scenario
from minibroker.scenario.run import RunResult, ScenarioRunner


@attrs.define
class RunOutcome:
    schedule: Schedule
    violations: list[Violation]
    expected: list[Violation]  # violations the profile expects (unclean losses)
    tally: Tally
    row: dict[str, Any]

    @property
    def failed(self) -> bool:
        return bool(self.violations)


async def _play(
    runner: ScenarioRunner, observer: Observer, seed: int, schedule: Schedule, loop: list[TransformLoop]
) -> RunResult:
    box: list[RunResult] = []

    async def attach() -> None:
        await runner.ready.wait()
        for client_id, client in runner.clients.items():
            if isinstance(client, Consumer):
                client.on_batch = functools.partial(observer.on_batch, client_id)
                client.on_fetch = observer.on_fetch
        cluster = runner.cluster
        if schedule.transform is not None and cluster is not None:
            loop.append(TransformLoop(schedule.transform, cluster))
            nursery.start_soon(loop[0].run)

    async def bound() -> None:
        await runner.ready.wait()
        assert runner.cluster is not None and observer.transactions is not None
        await runner.cluster.clock.sleep_until(schedule.check_ms)
        observer.transactions.at_bound(schedule)

    async def play() -> None:
        box.append(await runner.run(seed))
        nursery.cancel_scope.cancel()  # the transform loop's last calls may still wait

    async with trio.open_nursery() as nursery:
        nursery.start_soon(attach)
        if schedule.transactional:
            nursery.start_soon(bound)
        nursery.start_soon(play)
    return box[0]


def _budget_error(error: BaseException) -> RunBudgetExceeded | None:
    if isinstance(error, RunBudgetExceeded):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = _budget_error(inner)
            if found is not None:
                return found
    return None


def run_checked(scenario: Scenario, schedule: Schedule, plant: str | None = None) -> RunOutcome:
    """Run ``scenario`` (compiled from ``schedule``) and check every invariant."""
    started_wall, started_cpu = time.perf_counter(), time.process_time()
    observer = Observer()
    runner = ScenarioRunner(scenario, [observer], None)
    observer.runner = runner
    violations: list[Violation] = []
    tally = Tally()
    result: RunResult | None = None
    loop: list[TransformLoop] = []
    if schedule.transactional:
        observer.transactions = TxnChecks(observer)
    if schedule.compacted is not None:
        retention = int(schedule.compacted.configs["delete.retention.ms"])
        observer.compaction = CompactionChecks(observer, schedule.compacted.name, retention)
    with planted.plant(plant), quiet_gc(), deterministic_scheduling(scenario.seed):
        try:
            result = trio.run(
                _play,
                runner,
                observer,
                scenario.seed,
                schedule,
                loop,
                clock=trio.testing.MockClock(autojump_threshold=0),
            )
        except Exception as error:  # the emulator itself broke (or never finished): a finding too
            now = runner.cluster.now() if runner.cluster else 0
            stuck = _budget_error(error)
            if stuck is not None:
                violations.append(Violation(6, None, "", now, str(stuck), {"kind": "none"}))
            else:
                message = f"the emulator raised {type(error).__name__}: {error}"
                violations.append(Violation(0, None, "", now, message))
    violations[:0] = observer.violations
    if result is not None and runner.cluster is not None:
        end_violations, tally = check_end(schedule, result, observer, runner.cluster)
        violations.extend(end_violations)
        if schedule.transactional:
            commits = len(loop[0].commits) if loop else None
            violations.extend(
                check_transactions(schedule, result, observer.received, runner.cluster, commits)
            )
        if observer.compaction is not None:
            violations.extend(check_compaction(schedule, result, observer.compaction, runner.cluster))
    chosen = get_profile(schedule.profile)
    expected = [v for v in violations if chosen.expects(v)]
    violations = [v for v in violations if not chosen.expects(v)]
    cluster = runner.cluster
    row: dict[str, Any] = {
        "run": schedule.name,
        "profile": schedule.profile,
        "scheduling_seed": schedule.seed,
        "brokers": schedule.brokers,
        "partitions": len(schedule.partitions()),
        "max_rf": max(t.replication_factor for t in schedule.topics),
        "min_isr": schedule.config["min.insync.replicas"],
        "producers": len(schedule.producers),
        "consumers": len(schedule.consumers),
        "members": len(schedule.members),
        "commits": observer.groups.commits,
        "txns": len([t for t in schedule.txns if t.ending != "init"]),
        "transform_commits": len(loop[0].commits) if loop else 0,
        "cleanings": observer.compaction.cleanings if observer.compaction else 0,
        "faults": len(schedule.faults),
        "controller_faults": sum(CONTROLLER in (f.between or ()) for f in schedule.faults),
        **{f"fault_{kind}": sum(f.kind == kind for f in schedule.faults) for kind in FAULT_KINDS},
        "requests": len(result.requests) if result else 0,
        "messages": cluster.network.sent if cluster else 0,
        **attrs.asdict(tally),
        "violations": len(violations),
        "expected_losses": len(expected),
        "invariants": ",".join(sorted({str(v.invariant) for v in violations})),
        "first_violation": violations[0].line() if violations else (expected[0].line() if expected else ""),
        "virtual_ms": result.end_ms if result else 0,
        "events": observer.events,
        "wall_ms": round((time.perf_counter() - started_wall) * 1000, 1),
        "cpu_ms": round((time.process_time() - started_cpu) * 1000, 1),
    }
    return RunOutcome(schedule, violations, expected, tally, row)


def run_schedule(schedule: Schedule, plant: str | None = None) -> RunOutcome:
    return run_checked(compile_schedule(schedule), schedule, plant)


def run_index(
    profile_name: str, seed: int, index: int, duration_ms: int, plant: str | None = None
) -> RunOutcome | ShareOutcome:
    """Run ``index`` of ``seed``: generate its schedule and run it (the share profile: its share run)."""
    chosen = get_profile(profile_name)
    if chosen.share:
        return run_share_index(seed, index)
    schedule = generate(chosen, seed, index, duration_ms)
    outcome = run_schedule(schedule, plant)
    outcome.row = {"index": index, "seed": seed, **outcome.row}
    return outcome
