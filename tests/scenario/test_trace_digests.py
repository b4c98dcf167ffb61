"""Same scenario + same seed => the same trace bytes, and the bytes the committed table records.

Every bundled scenario (``regressions/`` included) runs in process with its own seed; the sha256 of its
JSONL trace must equal the one in ``trace_digests.json``, which ``tools/trace_digests.py --write``
computes with this same function. The table changes only with a change that is meant to alter traces
(a new event field, a fixed timing); moving, renaming or refactoring code keeps every byte.
"""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPEC = importlib.util.spec_from_file_location("trace_digests", ROOT / "tools" / "trace_digests.py")
assert SPEC is not None and SPEC.loader is not None
trace_digests = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(trace_digests)

TABLE = trace_digests.read_table()
BUNDLED = trace_digests.scenario_files()


def test_the_table_names_every_bundled_scenario():
    assert sorted(TABLE) == sorted(BUNDLED)


@pytest.mark.parametrize("name", sorted(BUNDLED))
def test_the_trace_is_byte_identical_to_the_table(name, tmp_path):
    assert trace_digests.trace_digest(BUNDLED[name], tmp_path) == TABLE[name]


def test_a_changed_digest_is_named():
    assert trace_digests.differences({"a.toml": "1", "b.toml": "2"}, {"a.toml": "1", "b.toml": "3"}) == [
        "b.toml: trace sha256 3, table says 2"
    ]
