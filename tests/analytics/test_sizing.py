"""Sizing a run from its input: the rows counted cheaply, and small local inputs run interpreted."""

from __future__ import annotations

import gzip
import os
from types import SimpleNamespace

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from minibroker.analytics import sizing
from minibroker.analytics.inputs import TraceInputs, count_rows


def parquet(path, rows):
    pq.write_table(pa.table({"seq": list(range(rows))}), path)
    return str(path)


def test_parquet_rows_come_from_footers_and_jsonl_rows_are_lines(tmp_path):
    plain = tmp_path / "a.jsonl"
    plain.write_bytes(b'{"seq":0}\n\n{"seq":1}')  # a blank line counts; so does a last line without \n
    packed = tmp_path / "b.jsonl.gz"
    packed.write_bytes(gzip.compress(b'{"seq":0}\n{"seq":1}\n'))
    inputs = TraceInputs((str(plain), str(packed)), (parquet(tmp_path / "c.parquet", 5),))
    assert count_rows(inputs, 10) == 3 + 2 + 5
    assert count_rows(inputs, 9) is None
    assert count_rows(TraceInputs((str(plain),)), 3) == 3
    assert count_rows(TraceInputs((str(plain),)), 2) is None


def test_rows_not_known_cheaply_are_not_counted(tmp_path):
    long_line = tmp_path / "long.jsonl"
    long_line.write_bytes(b"x" * (2 * 1024 + 1) + b"\n")  # one row, but more text than 2 rows may have
    assert count_rows(TraceInputs((str(long_line),)), 2) is None
    assert count_rows(TraceInputs((str(long_line),)), 3) == 1
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not a footer")
    bad_gzip = tmp_path / "bad.jsonl.gz"
    whole = gzip.compress(b"".join(b'{"seq":%d}\n' % n for n in range(1000)))
    bad_gzip.write_bytes(whole[: len(whole) // 2])  # cut short
    assert count_rows(TraceInputs((), (str(broken),)), 10) is None
    assert count_rows(TraceInputs((str(bad_gzip),)), 1000) is None
    assert count_rows(TraceInputs((), ("hdfs://nn/traces/a.parquet",)), 10) is None
    assert count_rows(TraceInputs((str(tmp_path / "gone.jsonl"),)), 10) is None
    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)  # opening it would wait for a writer
    assert count_rows(TraceInputs((str(pipe),)), 10) is None


class Conf(dict):
    def set(self, key, value):
        self[key] = value

    def unset(self, key):
        del self[key]


def session(master):
    return SimpleNamespace(sparkContext=SimpleNamespace(master=master), conf=Conf())


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]"])
def test_a_small_local_input_runs_interpreted(tmp_path, master):
    spark = session(master)
    inputs = TraceInputs((), (parquet(tmp_path / "t.parquet", sizing.INTERPRETED_ROWS),))
    spark.conf.set("spark.sql.codegen.wholeStage", "true")  # a session's own value, put back after
    replaced = sizing.size_codegen(spark, inputs)
    assert spark.conf == {
        "spark.sql.codegen.wholeStage": "false",
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    }
    assert replaced == {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": None}
    sizing.restore(spark, replaced)
    assert spark.conf == {"spark.sql.codegen.wholeStage": "true"}


@pytest.mark.parametrize(
    ("master", "rows", "conf"),
    [
        ("local[2]", sizing.INTERPRETED_ROWS + 1, None),  # large enough for compiled code to pay
        ("local-cluster[2,1,1024]", 10, None),  # executors of their own: not measured
        ("spark://127.0.0.1:7077", 10, None),
        ("local[2]", 10, {"spark.sql.codegen.wholeStage": "true"}),  # the user's choice stands
        ("local[2]", 10, {"spark.sql.codegen.factoryMode": "CODEGEN_ONLY"}),
    ],
)
def test_other_inputs_keep_sparks_code_generation(tmp_path, master, rows, conf):
    spark = session(master)
    inputs = TraceInputs((), (parquet(tmp_path / "t.parquet", rows),))
    assert sizing.size_codegen(spark, inputs, conf) == {}
    assert spark.conf == {}
