"""From failing runs to replayable files: pick, shrink, write ``<run>.toml``, replay it.

Runs are picked one per invariant first (the first failing run of each), then in
run order, up to ``limit``; with no violation at all, the first loss the profile
expects (``unclean``) is shrunk instead, to show the checker's finding replays.
Each file is replayed with the normal loader and runner; the report says whether
``minibroker run`` fails on it, as it must.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from minibroker.chaos.distribute import RunSummary
from minibroker.chaos.generate import generate
from minibroker.chaos.profiles import profile as get_profile
from minibroker.chaos.report import ChaosReport, Shrunk
from minibroker.chaos.shrink import shrink
from minibroker.chaos.toml_writer import replay_scenario, scenario_toml
from minibroker.chaos.violations import Violation
from minibroker.scenario import load_scenario, run_scenario


def pick(summaries: list[RunSummary], limit: int) -> list[tuple[RunSummary, Violation]]:
    chosen: list[tuple[RunSummary, Violation]] = []
    seen: set[int] = set()
    for summary in summaries:
        for violation in summary.violations:
            if violation.invariant not in seen and len(chosen) < limit:
                seen.add(violation.invariant)
                chosen.append((summary, violation))
    for summary in summaries:
        if len(chosen) >= limit:
            break
        if summary.violations and all(s is not summary for s, _ in chosen):
            chosen.append((summary, summary.violations[0]))
    if not chosen and limit:
        expected = next((s for s in summaries if s.expected), None)
        if expected is not None:
            chosen.append((expected, expected.expected[0]))
    return chosen


def write_shrunk(
    profile_name: str,
    seed: int,
    summary: RunSummary,
    violation: Violation,
    duration_ms: int,
    directory: Path,
    budget: int,
    plant: str | None = None,
) -> Shrunk:
    """Shrink one failing run, write its scenario file, replay it; return what happened."""
    schedule = generate(get_profile(profile_name), seed, summary.index, duration_ms)
    result = shrink(schedule, violation, plant, budget)
    scenario = replay_scenario(result.schedule, [result.violation])
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{schedule.name}.toml"
    comments = [
        f"Shrunk by `minibroker chaos` from run {summary.index} of seed {seed} (profile {profile_name}),",
        f"in {result.runs} candidate runs: {len(schedule.faults)} -> {len(result.schedule.faults)} faults, "
        f"{len(schedule.produces)} -> {len(result.schedule.produces)} produce requests.",
        f"Violation: {result.violation.line()}",
        "`minibroker run` on this file fails on the [[expect]] entries after the probes' and ISR checks.",
    ]
    path.write_text(scenario_toml(scenario, comments), encoding="utf-8")
    replay = replay_fails(path, plant)
    return Shrunk(
        schedule.name,
        result.violation.line(),
        str(path),
        len(result.schedule.faults),
        len(result.schedule.produces),
        result.runs,
        replay,
    )


def replay_fails(path: Path, plant: str | None = None) -> bool:
    from minibroker.chaos.planted import plant as planted

    with planted(plant):
        return not run_scenario(load_scenario(path)).passed


def shrink_failures(
    report: ChaosReport, directory: Path, limit: int, budget: int, console: Any
) -> list[Shrunk]:
    out: list[Shrunk] = []
    if get_profile(report.profile).share:  # a share run's scenario replays it as it is: nothing to shrink
        return out
    for summary, violation in pick(report.summaries, limit):
        console.print(f"shrinking {summary.row['run']}: {violation.line()}")
        out.append(
            write_shrunk(
                report.profile, report.seed, summary, violation, report.duration_ms, directory, budget
            )
        )
    return out
