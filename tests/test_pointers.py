"""The repository is self-contained: no pointer to a document outside it, and docs describe the product.

A reader of the repository can follow every reference in it: Kafka classes on GitHub, KIPs, Kafka's config
names, docs/ pages. Private notes cannot be followed, so the text names what they stood for instead. Two
rule sets:

- POINTERS, everywhere a reader looks (README.md, CHANGELOG.md, docs/, minibroker/, tests/, scenarios/,
  tools/, .ci/run, pyproject.toml): numbered private articles ("seed 002"), "the seed article", section
  signs ("§4", which no Markdown heading can be linked by), issue numbers, paths outside the tree.
- HISTORY, in README.md and docs/: sentences that narrate how the product was developed (numbered or dated
  rounds and sessions, "this session", "before this change", commit hashes, "as of <date>") and load
  averages, which belong only to docs/benchmarks.md, whose figures carry the machine facts of their run.

"--seed 2" and "seed 0" (a run's random seed) are product vocabulary and pass; so do "round trip",
"rounding", "session.timeout.ms" and "a fetch session".
"""

from __future__ import annotations

import bisect
import re
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: this file, which spells out every forbidden phrase, relative to the tree it checks
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

#: where the pointer rules look: files, or directories searched in full
AREAS = (
    "README.md",
    "CHANGELOG.md",
    "docs",
    "minibroker",
    "tests",
    "scenarios",
    "tools",
    ".ci/run",
    "pyproject.toml",
)
#: the areas that describe the product in prose, where the history rules apply too
PROSE_AREAS = ("README.md", "docs")
#: text files only; pictures and other binaries are skipped
TEXT_SUFFIXES = frozenset(
    {".py", ".toml", ".md", ".txt", ".json", ".cfg", ".ini", ".sh", ".yml", ".yaml", ""}
)
#: the one page whose figures carry the load average of the machine they were measured on, on the line
#: that states the machine facts of a run (its cores, as in "on 2 cores, Python 3.11.7; load average ...")
BENCHMARKS_PAGE = "docs/benchmarks.md"
MACHINE_FACTS = re.compile(r"\b\d+ (?:cores?|CPUs?)\b", re.IGNORECASE)

#: a month by name, capitalised ("May", never "may")
_MONTH = (
    r"(?-i:(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\b\.?)"
)
_DATE = rf"\b(?:\d{{4}}-\d{{2}}-\d{{2}}|{_MONTH} \d{{1,2}}\b|\d{{1,2}} {_MONTH})"
#: the start of a word, also inside a snake_case name (``test_issue_12``)
_START = r"(?<![a-z0-9])"
#: a duration after "session 10" or "session 3.3" makes it a time, not a numbered session
_NOT_A_DURATION = r"(?!\s*(?:ms|s|sec|seconds?|min|minutes?|h|hours?)\b)"


class Rule(NamedTuple):
    """One kind of forbidden text: its pattern (case-insensitive) and what to write instead."""

    pattern: re.Pattern[str]
    instead: str


def _rule(pattern: str, instead: str) -> Rule:
    return Rule(re.compile(pattern, re.IGNORECASE), instead)


_ARTICLE = "a private article: name the design, Kafka class or KIP"
_REFERENCE = "a private reference: name the Kafka class or test, say what the example shows"
_ISSUE = "an issue: say what the behaviour or target is"
_ROUND = "a round or session of development: describe the product as it is"
_BEFORE = "history: describe the product as it is"
_OUTSIDE = "a path outside the repository"
_HASH = "a commit hash: git log keeps it"

#: (where, pattern, what to write instead): "any" file in scope, or "prose" (README.md and docs/)
_TABLE = (
    ("any", rf"{_START}seeds?[ _-]?#?0\d\d(?!\d)", _ARTICLE),
    ("any", rf"{_START}seed[ _-](?:articles?|examples?)(?![a-z0-9])", _ARTICLE),
    ("any", r"\bthe seed(?:'s|s')", _ARTICLE),
    ("any", r"\bseed(?:'s)? (?:design|text|paper|post|document)s?\b", _ARTICLE),
    ("any", r"\bas (?:in )?the seed\b", _ARTICLE),
    ("any", r"§", "a section sign: link a heading of a page in docs/ instead"),
    ("any", r"\breference (?:section|item|part)s? \d", _REFERENCE),
    ("any", rf"{_START}reference[ _](?:worked[ _])?examples?(?![a-z0-9])", _REFERENCE),
    ("any", rf"{_START}issues? ?#\d+|{_START}issue[ _-]?\d+", _ISSUE),
    ("any", rf"{_START}(?:the|this|that)[ _]issue(?:'s)?(?![a-z0-9])", _ISSUE),
    ("any", r"\.\./shared\b|/work/(?:shared|main|wt)\b", _OUTSIDE),
    ("any", r"\bDESIGN\.md\b|\bkafka-purgatory\.md\b|\bseeds/0\d\d", _OUTSIDE),
    ("prose", rf"\b(?:round|session)[ _-]?\d+(?:[.,]\d+)*(?![.,]?\d){_NOT_A_DURATION}", _ROUND),
    ("prose", rf"\b(?:round|session)s?\b[^.\n]{{0,40}}?{_DATE}", _ROUND),
    ("prose", rf"{_DATE}[^.\n]{{0,40}}?\b(?:round|session)s?\b", _ROUND),
    ("prose", r"\b(?:this|next|last|previous|earlier) (?:round|session)\b", _ROUND),
    ("prose", r"\b(?:before|after|until|since) this (?:change|round|session|commit|patch|fix)\b", _BEFORE),
    ("prose", r"\bthe code before\b", _BEFORE),
    ("prose", rf"\bas of (?:{_DATE}|\d{{4}}\b|today\b|now\b|this writing\b)", "a dated statement"),
    ("prose", r"\bcommits? `?(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b", _HASH),
)
POINTERS = tuple(_rule(pattern, instead) for where, pattern, instead in _TABLE if where == "any")
HISTORY = tuple(_rule(pattern, instead) for where, pattern, instead in _TABLE if where == "prose")
LOAD_AVERAGE = _rule(
    r"\bload averages?\b|\bloadavg\b", f"a load average: only on a machine-facts line of {BENCHMARKS_PAGE}"
)


#: indentation and comment marks at the start of a line: a phrase broken over two lines still reads whole
_LEADER = re.compile(r"^\s*(?:#+:?|//|>)?\s*")


def offences(text: str, rules: tuple[Rule, ...]) -> list[tuple[int, str, Rule]]:
    """(line number, offending text, the first rule it breaks) for every offence, in text order.

    Lines are joined with one space (their indentation and comment marks dropped), so "the seed" at the
    end of one comment line and "article" at the start of the next are found, on the first line.
    Overlapping matches ("as in the seed's design") are one offence."""
    starts, bodies, offset = [], [], 0
    for line in text.splitlines():
        body = _LEADER.sub("", line, count=1)
        starts.append(offset)
        bodies.append(body)
        offset += len(body) + 1
    joined = " ".join(bodies)
    spans = sorted(
        (match.start(), match.end(), index)
        for index, rule in enumerate(rules)
        for match in rule.pattern.finditer(joined)
    )
    merged: list[list[int]] = []
    for start, end, index in spans:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end, index])
    return [
        (bisect.bisect_right(starts, start), " ".join(joined[start:end].split()), rules[index])
        for start, end, index in merged
    ]


def files_of(area: str, root: Path = ROOT) -> list[Path]:
    """The text files of one area (a file, or a directory in full), this test itself left out."""
    top = root / area
    if top.is_file():
        candidates = [top]
    elif top.is_dir():
        # a symlinked directory (minibroker/scenarios -> ../scenarios) is searched as its own area
        inside = top.resolve()
        candidates = sorted(
            p
            for p in top.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.resolve().is_relative_to(inside)
        )
    else:
        candidates = []
    return [p for p in candidates if p.suffix in TEXT_SUFFIXES and p.relative_to(root).as_posix() != SELF]


def rules_for(relative: str) -> tuple[Rule, ...]:
    """Pointer rules everywhere; history rules and load averages too in README.md and docs/."""
    if not any(relative == area or relative.startswith(area + "/") for area in PROSE_AREAS):
        return POINTERS
    return POINTERS + HISTORY + (LOAD_AVERAGE,)


def excused(relative: str, line: str, rule: Rule) -> bool:
    """A load average on a machine-facts line of the benchmarks page is what that page is for."""
    return rule is LOAD_AVERAGE and relative == BENCHMARKS_PAGE and MACHINE_FACTS.search(line) is not None


def report(area: str, root: Path = ROOT) -> list[str]:
    """One line per offence in the area: ``path:line: 'text' (what to write instead): the line``."""
    lines = []
    for path in files_of(area, root):
        relative = path.relative_to(root).as_posix()
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        source = text.splitlines()
        for number, found, rule in offences(text, rules_for(relative)):
            line = source[number - 1]
            if not excused(relative, line, rule):
                lines.append(f"{relative}:{number}: {found!r} ({rule.instead}): {line.strip()[:160]}")
    return lines


@pytest.mark.parametrize("area", AREAS)
def test_the_area_points_at_nothing_outside_the_repository(area):
    found = report(area)
    assert not found, f"{len(found)} pointer(s) or history line(s) in {area}:\n" + "\n".join(found)


# --- the rules themselves ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "Delayed messages on the emulated cluster (seed 002): delay levels.",
        "a task delay in ms (default: the seed articles' 350 and 450)",
        "FileWheel: the file-backed timing wheel (seed-004's third design).",
        "Two designs, both from the seed article, run side by side.",
        "for the level (the seed's coercion)",
        "as in the seed's design (Spring instead consumes the retry topic)",
        "Three parts, as the seed has them.",
        "DelayedFetch waits for min_bytes (reference §3.3-3.4).",
        "Leader bookkeeping: Reference §6 items 27-34.",
        "see reference section 4 for the trigger table",
        "a follower in controlled shutdown no longer holds the HW (issue 19).",
        "def test_issue_12_rearmed_then_cancelled_task_does_not_run_again(kind):",
        "Fixed in issue #7.",
        "TARGET = 20_000  # from the issue",
        "the issue's workload (10,000 virtual ms)",
        "def test_generated_schedules_stay_in_the_issue_ranges(profile):",
        "def test_seed_example_350_and_450_cascade_down():",
        "def test_reference_worked_example_wheel_of_three(delay, level, bucket_expiration):",
        "comparisons against the\n# issue's targets",
        "the seed\n    article's two tasks",
        "See ../shared/reference/kafka-purgatory.md.",
        "read /work/shared/seeds/002_x.txt",
    ],
)
def test_a_planted_pointer_is_caught(text):
    assert offences(text, POINTERS)


@pytest.mark.parametrize(
    "text",
    [
        "The code before this round measured 902 messages per second.",
        "The next session kept the job's rows as one shuffle.",
        "In round 3 the figure dropped to 38 s.",
        "measured again in session 12.",
        "the session of 2026-11-27 measured it again",
        "measured on Nov 27 in the evening round",
        "at the end of this session, right after a full test run",
        "slower before this change",
        "At commit e678a19, on the same machine.",
        "As of 2026-11, the wheel is the default.",
    ],
)
def test_planted_development_history_is_caught_in_docs(text):
    assert offences(text, HISTORY)


def test_a_load_average_is_caught_but_on_the_benchmarks_pages_machine_facts(tmp_path):
    (tmp_path / "docs").mkdir()
    facts = "`python tools/timer_bench.py --json` on 2 cores; load average 0.98 before, 1.13 after."
    diary = "The figure was lower on a busy afternoon (load average 18.1)."
    (tmp_path / "docs" / "benchmarks.md").write_text(f"# Benchmarks\n\n{facts}\n{diary}\n")
    (tmp_path / "docs" / "pipeline.md").write_text(f"{facts}\n")
    assert report("docs", tmp_path) == [
        f"docs/benchmarks.md:4: 'load average' ({LOAD_AVERAGE.instead}): {diary}",
        f"docs/pipeline.md:1: 'load average' ({LOAD_AVERAGE.instead}): {facts}",
    ]


def test_code_may_speak_of_sessions_and_load_while_docs_may_not():
    assert rules_for("minibroker/broker/fetch_session.py") == POINTERS
    assert rules_for("tools/pipeline_bench.py") == POINTERS
    assert rules_for("docs/kafka-model.md") == POINTERS + HISTORY + (LOAD_AVERAGE,)


@pytest.mark.parametrize(
    "text",
    [
        "minibroker run acks_all --seed 2",
        "the seed for same-instant scheduling (default: the file's)",
        "run 9 of seed 0 holds a loss; seed 2026 run 1343",
        "chaos seed 14's runs 150 and 230",
        "seeds = [0, 1]",
        "the scenario and the seed alone decide the trace",
        "a replication round trip, rounding up to the level, one forwarding round",
        "session.timeout.ms = 10000; a member's session 10 s, heartbeat 1 s",
        "starting the Spark session 3.3 s, one read 1.2 s",
        "which newcomers may evict this fetch session; the Spark session",
        "the producer issues 20,000 requests; issued 1,000",
        "docs/kafka-model.md, section 4. Replication: high watermark and ISR",
        "KAFKA-15583 and KIP-848; PR #1738",
        'scenario = "../lagging_link.toml"',
        "everything before this offset is delivered",
    ],
)
def test_product_vocabulary_passes(text):
    assert offences(text, POINTERS + HISTORY) == []


def test_overlapping_matches_are_one_offence():
    found = offences("header\nthe redeliveries, as in the seed's design (Spring", POINTERS)
    assert [(number, text) for number, text, _ in found] == [(2, "as in the seed's design")]


def test_a_failure_names_file_line_and_text(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "delay.md").write_text("# Delay\n\nTwo designs from seed 002.\nLevels (§2).\n")
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "bench.py").write_text('print("load average")  # fine in a tool\n')
    assert report("docs", tmp_path) == [
        f"docs/delay.md:3: 'seed 002' ({_ARTICLE}): Two designs from seed 002.",
        "docs/delay.md:4: '§' (a section sign: link a heading of a page in docs/ instead): Levels (§2).",
    ]
    assert report("tools", tmp_path) == []
    assert report("CHANGELOG.md", tmp_path) == []
