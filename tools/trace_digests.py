"""The sha256 of every bundled scenario's JSONL trace, against a committed table.

Same scenario + same seed => byte-identical trace: this tool runs every bundled scenario
(``minibroker.scenario.library.bundled_scenarios``, ``regressions/`` included) with the seed its
file names, writes its trace as JSONL, and hashes the bytes. The table
``tests/scenario/trace_digests.json`` maps each scenario (by its path under ``scenarios/``) to that
digest; tests/scenario/test_trace_digests.py compares a fresh run with it.

Usage::

    python tools/trace_digests.py --check    # exit 1 and name every scenario whose trace changed
    python tools/trace_digests.py --write    # regenerate the table (only for a change meant to alter traces)

The table changes only with a change that is meant to alter traces: a restructuring, a rename or
a refactoring keeps every byte.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

#: the committed table, beside the test that reads it
TABLE = Path(__file__).resolve().parents[1] / "tests" / "scenario" / "trace_digests.json"


def scenario_files() -> dict[str, Path]:
    """Every bundled scenario, keyed by its path relative to the bundled directory."""
    from minibroker.scenario.library import BUNDLED, bundled_scenarios

    return {path.relative_to(BUNDLED).as_posix(): path for path in bundled_scenarios(BUNDLED)}


def trace_digest(path: Path, directory: Path) -> str:
    """Run the scenario at ``path`` with its own seed in virtual time; the sha256 of its JSONL trace."""
    from minibroker.scenario import load_scenario, run_scenario
    from minibroker.trace import open_sink

    trace = directory / f"{path.stem}.jsonl"
    sink = open_sink(trace)
    try:
        run_scenario(load_scenario(path), sinks=[sink])
    finally:
        sink.close()
    return hashlib.sha256(trace.read_bytes()).hexdigest()


def compute(names: list[str] | None = None) -> dict[str, str]:
    """The digest of each bundled scenario (of ``names`` only, when given), by name."""
    files = scenario_files()
    chosen = files if names is None else {name: files[name] for name in names}
    with tempfile.TemporaryDirectory(prefix="trace-digests-") as tmp:
        return {name: trace_digest(path, Path(tmp)) for name, path in sorted(chosen.items())}


def read_table(table: Path = TABLE) -> dict[str, str]:
    """The committed digests, by scenario name."""
    return json.loads(table.read_text(encoding="utf-8"))


def differences(expected: dict[str, str], seen: dict[str, str]) -> list[str]:
    """One line per scenario whose digest differs, is new, or is missing; empty when all agree."""
    lines = []
    for name in sorted(expected.keys() | seen.keys()):
        if name not in seen:
            lines.append(f"{name}: in the table but not bundled")
        elif name not in expected:
            lines.append(f"{name}: bundled but not in the table")
        elif expected[name] != seen[name]:
            lines.append(f"{name}: trace sha256 {seen[name]}, table says {expected[name]}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help=f"regenerate {TABLE.name}")
    mode.add_argument("--check", action="store_true", help=f"compare fresh traces with {TABLE.name}")
    parser.add_argument("--table", type=Path, default=TABLE, help="the table's path (default: %(default)s)")
    args = parser.parse_args(argv)
    seen = compute()
    if args.write:
        args.table.write_text(json.dumps(seen, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"{len(seen)} trace digests written to {args.table}")
        return 0
    try:
        expected = read_table(args.table)
    except (OSError, ValueError) as error:
        print(f"trace_digests: {args.table}: cannot read the table ({error})", file=sys.stderr)
        return 2
    problems = differences(expected, seen)
    for line in problems:
        print(f"trace_digests: {line}", file=sys.stderr)
    if not problems:
        print(f"{len(seen)} traces match {args.table}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
