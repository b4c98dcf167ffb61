"""tools/spark_floor.py: the floor under analyze (session start, one read), or one line for bad input."""

import importlib.util
import re
import subprocess
from pathlib import Path

from tests.tools.spark_tools import run_tool

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("pipeline_bench", ROOT / "tools" / "pipeline_bench.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def floor(*args: str) -> subprocess.CompletedProcess:
    return run_tool("spark_floor.py", *args)


def test_without_the_bench_traces_it_says_how_to_make_them(tmp_path):
    out = floor("--dir", str(tmp_path), "--events", "123")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == (
        f"spark_floor.py: error: {tmp_path}/traces-123 has no traces: "
        "run tools/pipeline_bench.py --events 123 first"
    )


def test_reads_must_be_positive(tmp_path):
    out = floor("--dir", str(tmp_path), "--reads", "0")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1] == "spark_floor.py: error: --reads must be >= 1"


def test_a_master_spark_cannot_use_is_one_line(tmp_path):
    bench.generate(tmp_path / "traces-20000", 20_000, processes=1)
    out = floor("--dir", str(tmp_path), "--events", "20000", "--master", "yarn")
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()[-1:]
    assert line.startswith("spark_floor.py: error: ") and "yarn" in line
    assert "Traceback" not in out.stderr


def test_a_real_floor_on_the_bench_traces(tmp_path):
    manifest = bench.generate(tmp_path / "traces-20000", 20_000, processes=1)
    out = floor("--dir", str(tmp_path), "--events", "20000", "--reads", "2", "--master", "local[1]")
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0] == f"{manifest['events']:,} events in 1 file on local[1]:"
    names = [re.match(r"\s+(\S+(?: #\d| only)?)\s+[0-9.]+ s", line).group(1) for line in lines[1:5]]
    assert names == ["session", "read #1", "read #2", "kind only"]
