"""tools/duckdb_tables.py (the benchmark's DuckDB reference) computes the documented tables too.

``tools/pipeline_bench.py`` trusts it to check Spark's tables at 1M and 10M events, so it
is held to the plain-Python computation here, on the bundled scenarios' traces and on the
audit's planted problems (no Spark needed).
"""

from __future__ import annotations

import sys

import pytest

from tests.analytics import reference
from tests.analytics.conftest import ROOT
from tests.analytics.test_audit import planted  # noqa: F401  (the fixture)

pytest.importorskip("duckdb")
sys.path.insert(0, str(ROOT / "tools"))
import duckdb_tables


@pytest.mark.parametrize("bucket_ms", [100, 1000])
def test_duckdb_tables_equal_the_plain_python_computation(trace_dir, bucket_ms):
    paths = sorted(trace_dir.iterdir())
    tables = duckdb_tables.tables(paths, bucket_ms)
    expected = reference.analyze(paths, bucket_ms)
    # the documented tables but `skipped`, `transactions` and `lso_lag` (not in DuckDB's)
    assert set(expected) - set(tables) == {"skipped", "transactions", "lso_lag"}
    assert tables == {name: expected[name] for name in tables}


def test_duckdb_finds_the_planted_audit_problems(planted):  # noqa: F811
    paths = sorted(planted.glob("*.jsonl"))
    tables = duckdb_tables.tables(paths, 1000)
    expected = reference.analyze(paths, 1000)
    assert tables == {name: expected[name] for name in tables}
    assert len(tables["audit"]) == 7
