"""Bad rows are skipped and counted by reason with their line or row; a file that is no trace is one line.

The planted traces are a clean bundled run with bad rows added at known places: the
tables must be those of the clean run (no false audit row, no cause turned "other"),
``events`` must count only valid events, and ``skipped`` must say why and where.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from minibroker.cli import main
from tests.analytics import reference
from tests.analytics.conftest import write_trace

#: tables without a per-trace column: a planted run must give the clean run's rows exactly
SHARED_TABLES = ("operations", "latency", "rate", "timer_precision")


def _dump(event: dict) -> str:
    return json.dumps(event, sort_keys=True, separators=(",", ":"))


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    return write_trace("follower_paused_timeout", tmp_path_factory.mktemp("clean") / "clean.jsonl")


def analyze(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["analyze", *args])
    return code, out.getvalue(), err.getvalue()


def one_line(code: int, err: str) -> str:
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.strip()


@pytest.fixture(scope="module")
def planted_jsonl(spark, clean, tmp_path_factory):
    """(out dir, JSON summary, the clean run's events) of a JSONL trace with eight planted lines."""
    events = [json.loads(line) for line in clean.read_text().splitlines()]
    create = next(e for e in events if e["kind"] == "op.create")
    complete = next(e for e in events if e["kind"] == "op.complete")
    end = max(e["time_ms"] for e in events)
    ghost = {**create, "op": "ghost", "seq": 10**6, "time_ms": end, "data": None}  # no delay_ms
    lines = [_dump(e) for e in events]
    planted = {
        3: _dump({**create, "time_ms": None}),
        5: _dump(create).replace(f'"time_ms":{create["time_ms"]}', f'"time_ms":"{create["time_ms"]}"'),
        8: _dump({k: v for k, v in complete.items() if k != "kind"}),
        9: _dump({**complete, "kind": "op.completed"}),  # an unknown kind: a valid event, not read
        12: _dump({k: v for k, v in complete.items() if k != "seq"}),
        15: _dump(ghost),
        17: "\x00\x01 not json",
        18: "",
    }
    for line in sorted(planted):  # line numbers of the planted file, 1-based
        lines.insert(line - 1, planted[line])
    path = tmp_path_factory.mktemp("planted-jsonl") / "planted.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = tmp_path_factory.mktemp("planted-jsonl-out")
    code, text, err = analyze(str(path), "--out", str(out), "--json")
    assert (code, err) == (0, "")
    return out, json.loads(text), events, path


def test_bad_jsonl_lines_are_skipped_by_reason_with_their_line(planted_jsonl):
    out, summary, events, path = planted_jsonl
    skipped = pq.read_table(out / "skipped.parquet").to_pylist()
    assert skipped == [
        {"trace": str(path), "problem": problem, "rows": 1, "first": f"line {line}"}
        for problem, line in sorted(
            [
                ("time_ms missing or null", 3),
                ("time_ms is not a whole number", 5),
                ("kind missing or null", 8),
                ("seq missing or null", 12),
                ("op.create without delay_ms (a whole number)", 15),
                ("not a JSON object", 17),
            ]
        )
    ]
    assert summary["skipped"] == skipped
    (trace,) = pq.read_table(out / "traces.parquet").to_pylist()
    # the unknown kind is an event; the blank line is nothing; the six bad lines are skipped
    assert (trace["events"], trace["skipped"]) == (len(events) + 1, 6)
    assert summary["events"] == len(events) + 1


def test_planted_jsonl_tables_are_the_clean_runs(planted_jsonl, clean):
    out, summary, _, _ = planted_jsonl
    expected = reference.analyze([clean], 1000)
    for name in SHARED_TABLES:
        assert pq.read_table(out / f"{name}.parquet").to_pylist() == expected[name], name
    assert summary["audit"] == {"problems": 0, "by_problem": {}}  # the ghost is no "completed 0 times"
    assert "| time_ms missing or null | 1 | line 3 |" in (out / "report.md").read_text()


def test_bad_parquet_rows_are_skipped_with_their_row_and_row_group(spark, clean, tmp_path):
    rows = _events(clean)
    rows[25] = {**rows[25], "time_ms": None}
    path = tmp_path / "planted.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=_schema(tmp_path)), path, row_group_size=10)
    code, text, err = analyze(str(path), "--out", str(tmp_path / "out"), "--json")
    assert (code, err) == (0, "")
    assert json.loads(text)["skipped"] == [
        {"trace": str(path), "problem": "time_ms missing or null", "rows": 1, "first": "row 25 (row group 2)"}
    ]


def test_a_bad_row_in_a_parquet_trace_its_footer_vouches_for_is_still_found(spark, clean, tmp_path):
    """No null seq, time_ms or kind (the footer alone would count every row): the row's data is bad."""
    rows = _events(clean)
    index = max(i for i, row in enumerate(rows) if row["kind"] == "op.create")
    rows[index] = {**rows[index], "data": None}
    path = tmp_path / "planted.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=_schema(tmp_path)), path, row_group_size=10)
    code, text, err = analyze(str(path), "--out", str(tmp_path / "out"), "--json")
    assert (code, err) == (0, "")
    summary = json.loads(text)
    assert summary["skipped"] == [
        {
            "trace": str(path),
            "problem": "op.create without delay_ms (a whole number)",
            "rows": 1,
            "first": f"row {index} (row group {index // 10})",
        }
    ]
    (trace,) = summary["traces"]
    assert (trace["events"], trace["skipped"]) == (len(rows) - 1, 1)


def test_footer_facts_only_when_the_statistics_prove_them(clean, tmp_path):
    from minibroker.analytics.inputs import Footer, footer_facts

    rows = _events(clean)
    path = tmp_path / "clean.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=_schema(tmp_path)), path, row_group_size=10)
    times = [row["time_ms"] for row in rows]
    assert footer_facts(str(path)) == Footer(len(rows), min(times), max(times))
    rows[45] = {**rows[45], "kind": None}
    pq.write_table(pa.Table.from_pylist(rows, schema=_schema(tmp_path)), path, row_group_size=10)
    assert footer_facts(str(path)) is None  # a null kind: only a pass over the rows counts right
    pq.write_table(
        pa.Table.from_pylist(_events(clean), schema=_schema(tmp_path)), path, write_statistics=False
    )
    assert footer_facts(str(path)) is None
    assert footer_facts("hdfs://namenode/trace.parquet") is None


def _events(trace: Path) -> list[dict]:
    return [json.loads(line) for line in trace.read_text().splitlines()]


def _schema(tmp_path: Path) -> pa.Schema:
    """The trace format's Parquet schema, as ParquetSink writes it."""
    from minibroker.trace import ParquetSink

    sink = ParquetSink(tmp_path / "schema.parquet")
    sink.close()
    return sink.schema


def _parquet(path: Path, columns: dict) -> Path:
    pq.write_table(pa.table(columns), path)
    return path


def test_a_parquet_trace_without_cause_is_one_line(spark, clean, tmp_path):
    table = pa.Table.from_pylist(_events(clean), schema=_schema(tmp_path))
    path = tmp_path / "no-cause.parquet"
    pq.write_table(table.drop_columns(["cause"]), path)
    code, _, err = analyze(str(path), "--out", str(tmp_path / "o"))
    assert one_line(code, err) == (
        f"minibroker: analyze: {path} is not a trace: no column cause (a trace has seq, time_ms, kind, "
        "broker, purgatory, op, keys, partition, offset, count, error, cause, data; see docs/trace.md)"
    )


@pytest.mark.parametrize(
    ("name", "make", "message"),
    [
        ("empty.jsonl", lambda p: p.write_bytes(b""), "{p} is empty: expected a trace"),
        ("blank.jsonl", lambda p: p.write_text("\n\n"), "{p} holds no event: expected a trace"),
        (
            "random.jsonl",
            lambda p: p.write_bytes(bytes(range(256)) * 4),
            # bytes 10 (\n) and 13 (\r) end lines, as in Hadoop's line reader: 9 lines
            "{p} has no valid trace event: 9 not a JSON object (first at line 1)",
        ),
        (
            "other.jsonl",
            lambda p: p.write_text('{"a": 1}\n{"a": 2}\n'),
            "{p} has no valid trace event: 2 seq missing or null (first at line 1)",
        ),
        (
            "random.parquet",
            lambda p: p.write_bytes(bytes(range(256)) * 4),
            "{p} is not a Parquet file, or is truncated (Parquet magic bytes not found",
        ),
        (
            "other.parquet",
            lambda p: _parquet(p, {"x": [1]}),
            "{p} is not a trace: no column seq, time_ms, kind, broker, purgatory, op, partition, count, "
            "cause, data",
        ),
        (
            "typed.parquet",
            lambda p: _parquet(
                p,
                {c: ["1"] for c in ("seq", "time_ms", "kind", "broker", "purgatory", "op")}
                | {c: ["x"] for c in ("partition", "count", "cause", "data")},
            ),
            "{p} is not a trace: column seq is string; expected int64",
        ),
    ],
)
def test_a_file_that_is_no_trace_is_one_line(spark, tmp_path, name, make, message):
    path = tmp_path / name
    make(path)
    code, _, err = analyze(str(path), "--out", str(tmp_path / "o"))
    assert one_line(code, err).startswith("minibroker: analyze: " + message.format(p=path))


def test_a_truncated_parquet_trace_is_one_line(spark, clean, tmp_path):
    whole = tmp_path / "whole.parquet"
    pq.write_table(pa.Table.from_pylist(_events(clean), schema=_schema(tmp_path)), whole)
    path = tmp_path / "cut.parquet"
    path.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    code, _, err = analyze(str(path), "--out", str(tmp_path / "o"))
    assert one_line(code, err).startswith(
        f"minibroker: analyze: {path} is not a Parquet file, or is truncated"
    )


def test_one_bad_file_among_good_ones_is_still_one_line(spark, clean, tmp_path):
    (tmp_path / "junk.jsonl").write_text("junk\n")
    (tmp_path / "good.jsonl").write_text(clean.read_text())
    code, _, err = analyze(str(tmp_path), "--out", str(tmp_path / "o"))
    assert one_line(code, err) == (
        f"minibroker: analyze: {tmp_path / 'junk.jsonl'} has no valid trace event: "
        "1 not a JSON object (first at line 1)"
    )


def test_a_parquet_trace_with_corrupt_pages_is_one_line(spark, clean, tmp_path):
    """The footer reads, so only Spark's read finds the damage: one line with the root cause and the file."""
    path = tmp_path / "corrupt.parquet"
    pq.write_table(pa.Table.from_pylist(_events(clean), schema=_schema(tmp_path)), path, compression="zstd")
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little") + 8
    for i in range(4, len(data) - footer, 7):  # every 7th byte of the column chunks, footer intact
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    code, _, err = analyze(str(path), "--out", str(tmp_path / "o"))
    line = one_line(code, err)
    assert line.startswith("minibroker: analyze: Spark failed: ")
    assert "o138" not in line and "collectToPython" not in line
    assert str(path) in line


#: ``data`` texts and whether the regular expressions take ``hw`` from them (the others are parsed)
FIELD_TEXTS = {
    '{"hw":1,"leo":2,"previous":0}': True,
    '{"hw":0}': True,
    '{"hw":-17,"leo":12345678901234567890}': True,
    '{"hw":123456789012345678901}': True,  # longer than a long: the parser's text is the same digits
    '{"hw":1,"hw":2}': True,  # a repeated key: the first one, as the parser says
    '{"leo":2,"hw":1}': False,
    '{"hw":-0}': False,  # the parser says 0
    '{"hw":007}': False,
    '{"hw":1e3}': False,
    '{"hw":1.0}': False,
    '{"hw":"6"}': False,
    '{"hw" : 5}': False,
    "{'hw':4}": False,
    '{"hw":1,}': False,
    '{"hw":1} x': False,
    '{"hw":1}\n': False,
    '{"hw":1,"leo":"x"}': False,
    '{"hw":1,"leo":[1]}': False,
    '{"hw":1,"Leo":2}': False,
    '{"hwm":1}': False,
    "": False,
    "[1]": False,
}


def test_a_whole_number_field_read_by_regular_expression_is_what_the_json_parser_reads(spark):
    from pyspark.sql import functions as F

    from minibroker.analytics.problems import field_text, first_whole_pattern, sql_text, whole_field_text

    frame = spark.createDataFrame([(text,) for text in [*FIELD_TEXTS, None]], "data string")
    rows = frame.select(
        "data",
        F.expr(whole_field_text("hw")).alias("fast"),
        F.expr(field_text("hw")).alias("parsed"),
        F.expr(f"data RLIKE {sql_text(first_whole_pattern('hw'))}").alias("taken"),
    ).collect()
    assert [(row["data"], row["fast"]) for row in rows] == [(row["data"], row["parsed"]) for row in rows]
    assert {row["data"]: row["taken"] for row in rows if row["data"] is not None} == FIELD_TEXTS
    assert [row["parsed"] for row in rows if row["data"] == '{"hw":1,"hw":2}'] == ["1"]
    with pytest.raises(ValueError, match="a data field's name is"):
        first_whole_pattern("h.w")


def test_a_skipped_op_create_never_changes_the_exit_status(spark, clean, tmp_path):
    """An op.create whose delay_ms is a valid int64 past what the deadline arithmetic takes is
    skipped; its operation, completed later, is not reported "no op.create"."""
    rows = _events(clean)
    completed = {(r["broker"], r["op"]) for r in rows if r["kind"] == "op.complete"}
    index = next(
        i for i, r in enumerate(rows) if r["kind"] == "op.create" and (r["broker"], r["op"]) in completed
    )
    data = rows[index]["data"]
    big = {**(json.loads(data) if isinstance(data, str) else data), "delay_ms": 2**63 - 1}
    rows[index] = {**rows[index], "data": _dump(big) if isinstance(data, str) else big}
    path = tmp_path / "huge-delay.jsonl"
    path.write_text("".join(_dump(r) + "\n" for r in rows))
    code, text, err = analyze(str(path), "--out", str(tmp_path / "out"), "--json")
    assert (code, err) == (0, "")
    summary = json.loads(text)
    assert summary["audit"] == {"problems": 0, "by_problem": {}}
    assert summary["skipped"] == [
        {
            "trace": str(path),
            "problem": "op.create without delay_ms (a whole number)",
            "rows": 1,
            "first": f"line {index + 1}",
        }
    ]


def test_a_parquet_trace_with_times_near_the_int64_maximum_is_one_line(spark, clean, tmp_path):
    """A deadline past 2^63 - 1 overflows Spark's arithmetic: one line, and no log line of Spark's."""
    rows = [{**r, "time_ms": 2**63 - 1} for r in _events(clean)]
    path = tmp_path / "far.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=_schema(tmp_path)), path)
    code, _, err = analyze(str(path), "--out", str(tmp_path / "o"))
    assert one_line(code, err).startswith(
        "minibroker: analyze: a time_ms or delay_ms in the traces overflows 64-bit arithmetic"
    )
