"""`minibroker chaos --master`: runs as Spark tasks give exactly the rows the local path gives."""

from __future__ import annotations

from minibroker.chaos.distribute import Job, run_local, run_spark
from minibroker.cli import main

CLOCKS = {"wall_ms", "cpu_ms"}


def rows(summaries):
    return sorted(
        ({k: v for k, v in s.row.items() if k not in CLOCKS} for s in summaries), key=lambda r: r["index"]
    )


def test_spark_tasks_give_the_local_rows(spark):
    job = Job("default", 21, 400)
    on_spark = rows(run_spark(job, 6, "local[2]"))
    assert [r["index"] for r in on_spark] == list(range(6))
    assert on_spark == rows(run_local(job, 6, 1))


def test_chaos_command_on_spark(spark, tmp_path, capsys):
    out = tmp_path / "out"
    assert (
        main(["chaos", "--runs", "4", "--duration-ms", "400", "--master", "local[2]", "--out", str(out)]) == 0
    )
    assert "| ran on | Spark local[2] |" in (out / "chaos.md").read_text()
    assert len((out / "runs.jsonl").read_text().splitlines()) == 4
    capsys.readouterr()
