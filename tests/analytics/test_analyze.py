"""Every table of ``minibroker analyze`` equals the plain-Python computation over the same events."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from minibroker.analytics.analyze import KEYS
from tests.analytics import reference
from tests.analytics.conftest import TRACED

BUCKET_MS = 100
TXN_COLUMNS = ("transaction", "begin_ms", "end_ms", "complete_ms", "outcome", "latency_ms", "marker_ms")


@pytest.fixture(scope="module")
def expected(trace_dir):
    return reference.analyze(sorted(trace_dir.iterdir()), BUCKET_MS)


def table(out, name):
    return pq.read_table(out / f"{name}.parquet").to_pylist()


@pytest.mark.parametrize("name", list(KEYS))
def test_table_equals_the_plain_python_computation(analyzed, expected, name):
    code, out, _ = analyzed
    assert code == 0
    rows = table(out, name)
    assert rows == expected[name]
    assert rows == sorted(
        rows, key=lambda row: tuple((v is not None, v) for v in (row[k] for k in KEYS[name]))
    )


def test_the_traces_cover_what_the_tables_measure(expected):
    assert len(expected["traces"]) == len(TRACED)
    causes = {row["cause"] for row in expected["latency"]}
    assert causes == {"all", "condition", "expiry", "leadership"}
    assert {row["op_kind"] for row in expected["operations"]} == {
        "produce",
        "follower-fetch",
        "consumer-fetch",
        "sharefetch",
        "deleterecords",
    }
    assert expected["audit"] == []  # the bundled scenarios keep exactly-once
    # a shrink and an expand (2, 3), and the one-broker group scenario's ISR as its leader starts (1)
    assert {row["isr_size"] for row in expected["isr"]} == {1, 2, 3}
    assert any(row["purges"] for row in expected["purgatory_size"])
    assert sum(row["fires"] for row in expected["timer_precision"]) > 0
    # group_consumer_join: group epoch 1 at 0, Stable at 0; epoch 2 (c2 joins) at 1000, Stable at 4000
    # (c2 owns t-2 and t-3): 0 and 3000 ms. t-2 and t-3 stop from c1's release at 3000 to c2's 4000.
    # group_consumer_session_timeout: epoch 1 at 0 (0 ms); epoch 2 at 100, Stable at 3100 (3000 ms);
    # c2 fenced at its session deadline 13100 (epoch 3), c1 at epoch 3 at 15000 (1900 ms). t-1 stops
    # twice: c1's release at 3000 to c2's 3100, c2's fencing at 13100 to c1's 15000 (1900 ms).
    # group_session_timeout (classic): generations at 0 (0 ms), 100 -> 3000 and 13000 -> 15000; one
    # eviction; no per-partition stops on the classic protocol
    columns = ("group", "protocol", "rebalances", "min_ms", "mean_ms", "max_ms", "session_expiries")
    assert [
        (Path(r["trace"]).stem, *(r[k] for k in (*columns, "partition_stops", "max_stop_ms")))
        for r in expected["rebalances"]
    ] == [
        ("group_consumer_join", "g", "consumer", 2, 0, 1500.0, 3000, 0, 2, 1000),
        ("group_consumer_session_timeout", "g", "consumer", 3, 0, 1633.3, 3000, 1, 2, 1900),
        ("group_session_timeout", "g", "classic", 3, 0, 1633.3, 2900, 1, None, None),
    ]
    # txn_read_committed_stalled: "tx" Ongoing at 1000 (start 1000 + timeout 15000 = 16000), aborted by the
    # timeout check at 20000 (PrepareAbort, the marker, CompleteAbort in that ms). txn_zombie_fenced: the
    # zombie's transaction Ongoing at 200, aborted by the successor's fencing InitProducerId at 1005; the
    # successor's Ongoing at 2005, EndTxn at 2105, committed in that ms (one broker, no link delays there)
    assert [(*(r[k] for k in TXN_COLUMNS), Path(r["trace"]).stem) for r in expected["transactions"]] == [
        (1, 1000, 20000, 20000, "timeout-abort", 0, 0, "txn_read_committed_stalled"),
        (1, 200, 1005, 1005, "abort", 0, 0, "txn_zombie_fenced"),
        (2, 2005, 2105, 2105, "commit", 0, 0, "txn_zombie_fenced"),
    ]
    # the stalled reader's t-0: the LSO at 0 from the transaction's records at 1000 (HW 2) to the ABORT
    # marker at 20000: 19000 ms, while the plain producer's records took the HW to 4. The zombie's t-0:
    # 200 -> 1005 (805 ms, HW 2) and the successor's 2015 -> 2105 (90 ms, 3 records held)
    assert [
        (
            Path(r["trace"]).stem,
            r["partition"],
            r["lags"],
            r["total_ms"],
            r["max_ms"],
            r["max_held"],
            r["open"],
        )
        for r in expected["lso_lag"]
    ] == [
        ("txn_read_committed_stalled", "t-0", 1, 19000, 19000, 4, False),
        ("txn_zombie_fenced", "t-0", 2, 895, 805, 3, False),
    ]
    # retry_poison_dlt: two records processed at once, one dead-lettered at once (non-retryable), one
    # after its 4 deliveries and 100 + 300 + 900 ms of backoff
    (dlt,) = expected["retry_dlt"]
    assert {k: dlt[k] for k in ("client", "records", "processed", "dead", "pending")} == {
        "client": "retry",
        "records": 4,
        "processed": 2,
        "dead": 2,
        "pending": 0,
    }
    assert (dlt["p50_ms"], dlt["p99_ms"], dlt["max_ms"]) == (0, 1300, 1300)
    assert [(r["outcome"], r["attempts"], r["records"]) for r in expected["retry_attempts"]] == [
        ("dead", 1, 1),
        ("dead", 4, 1),
        ("processed", 1, 2),
    ]
    # delay_wheel_vs_levels: one message through the levels (on its level's due time), two through the
    # wheel (0.5 s and 0.8 s after due: within its 1 s tick)
    assert [(r["design"], r["delivered"], r["p50_ms"], r["max_ms"]) for r in expected["delay_lateness"]] == [
        ("levels", 1, 0, 0),
        ("wheel", 2, 500, 800),
    ]
    # share_lock_expiry: c1 acquires 0..2 at 1200 (produced then), its lock expires at 3200 and c2 acquires
    # them with delivery count 2 and accepts them at once: 2000 ms from produce to accept. share_poison_
    # archived: 0..4 acquired at 100, offset 1 twice more (counts 2 and 3) and archived at the limit (3),
    # offset 3 rejected; 0, 2 and 4 accepted in the ms they were produced
    share_columns = ("group", "partition", "acquired", "redelivered", "lock_expiries", "accepted")
    share_columns += ("rejected", "at_limit", "p50_ms", "p99_ms")
    assert [(Path(r["trace"]).stem, *(r[k] for k in share_columns)) for r in expected["share_groups"]] == [
        ("share_lock_expiry", "sg", "t-0", 6, 3, 1, 3, 0, 0, 2000, 2000),
        ("share_poison_archived", "sg", "t-0", 7, 2, 0, 3, 1, 1, 0, 0),
    ]


def test_json_summary_and_report(analyzed, expected):
    _, out, summary = analyzed
    assert summary["events"] == sum(row["events"] for row in expected["traces"])
    assert summary["latency"] == expected["latency"]
    assert summary["operations"] == expected["operations"]
    assert summary["audit"] == {"problems": 0, "by_problem": {}}
    fires = [(row["delta_ms"], row["fires"]) for row in expected["timer_precision"]]
    assert summary["timer_precision"]["fires"] == sum(n for _, n in fires)
    assert summary["timer_precision"]["max"] == max(d for d, _ in fires)
    report = (out / "report.md").read_text()
    for chart in ("latency", "rate", "purgatory_size", "hw", "isr"):
        assert f"({chart}.png)" in report
        assert (out / f"{chart}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # in virtual time every task fires on time: a sentence, not a one-bar chart
    assert fires == [(0, summary["timer_precision"]["fires"])]
    assert f"All {fires[0][1]:,} tasks fired exactly at their expiration" in report
    assert not (out / "timer_precision.png").exists()
    assert "No problem" in report
    # retry_poison_dlt's consumer: 4 records, 2 processed, 2 dead, time to the DLT p50 0, p99 and max 1300
    assert "## Retries" in report and "| retry | 4 | 2 | 2 | 0 | 0 | 1300 | 1300 |" in report
    (retried,) = summary["retries"]
    assert (retried["dead"], retried["max_ms"]) == (2, 1300)
    assert "## Delayed messages: delivery lateness" in report
    assert "## Transactions" in report
    assert "## Share groups" in report
    assert "| t-0 | 1 | 19000 | 19000 | 4 | False |" in report  # the stalled reader's partition


def shuffle_files(spark, ids):
    """The files of shuffles ``ids`` in the session's block manager directories."""
    root = Path(spark.sparkContext.getConf().get("spark.local.dir", tempfile.gettempdir()))
    return [path for number in ids for path in root.glob(f"blockmgr-*/*/shuffle_{number}_*")]


def test_the_kept_rows_are_one_shuffle_that_every_table_reads_and_that_is_removed_after(
    spark, trace_dir, monkeypatch
):
    """The kept rows, and the rare kinds' copy, are each one shuffle: keeping runs nothing, no table
    reads the trace files, the operations' aggregation adds no shuffle of its own, and both shuffles
    are gone afterwards; the tables are those of a run that keeps nothing (each table reads the files)."""
    from minibroker.analytics import analyze as job
    from minibroker.analytics import kept as shared
    from minibroker.analytics import operations
    from minibroker.analytics.inputs import resolve

    tracker = spark.sparkContext.statusTracker()
    kept, frames, jobs_while_keeping = [], {}, []

    def keep(frame, keys):
        before = len(tracker.getJobIdsForGroup(None))
        kept.append(shared.keep(frame, keys))
        jobs_while_keeping.append(len(tracker.getJobIdsForGroup(None)) - before)
        return kept[-1]

    def collect_all(tables):
        frames.update(tables)
        return original_collect(tables)

    original_collect = job.collect_all
    monkeypatch.setattr(job, "keep", keep)
    monkeypatch.setattr(job, "collect_all", collect_all)
    inputs = resolve([str(trace_dir)])
    analysis = job.analyze(spark, inputs, bucket_ms=BUCKET_MS)

    assert jobs_while_keeping == [0, 0]
    scans = {name: frame._jdf.queryExecution().executedPlan().toString() for name, frame in frames.items()}
    assert len(scans) == 13 and not [name for name, plan in scans.items() if "FileScan" in plan]
    ids = [shared.shuffle_id(frame) for frame in kept]
    assert len(set(ids)) == 2 and None not in ids
    assert not shuffle_files(spark, ids)

    # an operation's events are in one partition of the kept rows: no exchange on the operation's key
    def op_key_shuffles(events):
        traces = spark.sql("SELECT 0L AS tid, 0L AS end_ms, false AS has_expire")
        plan = operations.operations(events, traces)._jdf.queryExecution().executedPlan().toString()
        return len(
            re.findall(r"Exchange hashpartitioning\(tid#\d+L, broker#\d+L, purgatory#\d+, op#\d+,", plan)
        )

    read = job.read_traces(spark, inputs)
    unkept = job.relevant(read.narrow(job.RELEVANT, job.FIELDS))
    reshuffled = shared.keep(unkept, operations.KEY)
    try:
        assert reshuffled.count() == unkept.count() and shuffle_files(spark, [shared.shuffle_id(reshuffled)])
        assert (op_key_shuffles(job.named(unkept)), op_key_shuffles(job.named(reshuffled))) == (1, 0)
        assert not [
            line
            for line in reshuffled._jdf.queryExecution().executedPlan().toString().splitlines()
            if "Exchange" in line
        ]
    finally:
        shared.release(reshuffled)
    assert not shuffle_files(spark, [shared.shuffle_id(reshuffled)])

    monkeypatch.setattr(job, "keep", lambda frame, _keys: frame)
    again = job.analyze(spark, inputs, bucket_ms=BUCKET_MS)
    assert {name: t.rows for name, t in analysis.tables.items()} == {
        name: t.rows for name, t in again.tables.items()
    }


def test_the_tally_of_the_kept_rows_takes_their_tid_instead_of_hashing_each_path_again(spark, trace_dir):
    from pyspark.sql import functions as F

    from minibroker.analytics import analyze as job
    from minibroker.analytics import operations
    from minibroker.analytics.inputs import resolve
    from minibroker.analytics.kept import keep, release
    from minibroker.analytics.reader import read_traces

    read = read_traces(spark, resolve([str(trace_dir)]))
    kept = keep(job.relevant(read.narrow(job.RELEVANT, job.FIELDS)), operations.KEY)
    try:
        tally = read.tally(kept)
        # the kept rows are a scan of the shuffle's files: their tid is a column there, not an expression
        assert "xxhash64(" not in tally._jdf.queryExecution().optimizedPlan().toString()
        tids = {row["trace"]: row["tid"] for row in tally.collect()}
        hashed = kept.select("trace", F.xxhash64("trace").alias("tid")).distinct().collect()
    finally:
        release(kept)
    assert len(tids) == len(list(trace_dir.iterdir()))
    assert tids == {row["trace"]: row["tid"] for row in hashed}


@pytest.mark.parametrize("adaptive", [None, "true", "false"])
def test_keeping_leaves_the_sessions_adaptive_setting_as_it_was(spark, adaptive):
    """``keep`` plans its shuffle with adaptive execution off and puts back the session's own value
    (or none), so a later query is planned as the user asked."""
    from minibroker.analytics import kept as shared

    key = "spark.sql.adaptive.enabled"
    conf = spark._jsparkSession.sessionState().conf()
    before = conf.getConfString(key) if conf.contains(key) else None
    try:
        if adaptive is None:
            conf.unsetConf(key)
        else:
            conf.setConfString(key, adaptive)
        frame = shared.keep(spark.range(10).withColumnRenamed("id", "k"), ("k",))
        try:
            assert (conf.getConfString(key) if conf.contains(key) else None) == adaptive
            assert sorted(row.k for row in frame.collect()) == list(range(10))
        finally:
            shared.release(frame)
    finally:
        if before is None:
            conf.unsetConf(key)
        else:
            conf.setConfString(key, before)


def test_each_kept_column_holds_fields_of_different_kinds():
    """A kept row holds its data fields in four shared columns: no kind may carry two fields of one."""
    from minibroker.analytics.analyze import FIELDS, SLOTS
    from minibroker.analytics.problems import merged_fields

    assert sorted(name for names in SLOTS.values() for name in names) == sorted(FIELDS)
    # the checks read no field on more kinds than the tables: each field column is null elsewhere
    assert {name: set(kinds) for name, kinds in merged_fields(FIELDS).items()} == {
        name: set(kinds) for name, kinds in FIELDS.items()
    }
    for names in SLOTS.values():
        kinds = [kind for name in names for kind in FIELDS[name]]
        assert len(kinds) == len(set(kinds)), names


def test_a_small_input_runs_interpreted_and_gives_the_tables_code_generation_gives(
    analyzed, spark, trace_dir, tmp_path, monkeypatch
):
    """The bundled scenarios' traces are small: analyze compiles (almost) no code for them, and
    afterwards the session (shared in-process) is as it was."""
    import contextlib
    import io
    import json

    from minibroker.analytics import analyze as job
    from minibroker.cli import main

    assert analyzed[2]["spark"]["codegen"] is False
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics
    seen = []
    original = job.analyze

    def watched(session, inputs, **options):
        before = metrics.METRIC_COMPILATION_TIME().getCount()
        settings = (
            session.conf.get("spark.sql.codegen.wholeStage"),
            session.conf.get("spark.sql.codegen.factoryMode"),
        )
        result = original(session, inputs, **options)
        seen.append((settings, metrics.METRIC_COMPILATION_TIME().getCount() - before))
        return result

    monkeypatch.setattr(job, "analyze", watched)
    runs = {}
    for name, extra in (("interpreted", []), ("compiled", ["--conf", "spark.sql.codegen.wholeStage=true"])):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            # a bucket no other test uses: its stages' code is not in Spark's cache yet
            args = ["analyze", str(trace_dir), "--out", str(tmp_path / name), "--bucket-ms", "77", "--json"]
            assert main([*args, *extra]) == 0
        runs[name] = json.loads(buffer.getvalue())
    (interpreted, compiles), (compiled, _) = seen
    assert interpreted == ("false", "NO_CODEGEN") and compiled == ("true", "FALLBACK")
    assert compiles < 20  # about 120 classes with code generation on a cold JVM
    assert [runs[name]["spark"]["codegen"] for name in ("interpreted", "compiled")] == [False, True]
    for name in KEYS:
        assert table(tmp_path / "interpreted", name) == table(tmp_path / "compiled", name), name
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
