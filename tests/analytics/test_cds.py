"""Class-data sharing for local Spark: the first run makes the archive, the next one maps it."""

from __future__ import annotations

import json
import re

import pytest

from tests.analytics.conftest import require_java
from tests.analytics.test_session import minibroker

pytest.importorskip("pyspark")


def test_archive_made_once_then_used_and_off_when_asked(monkeypatch, tmp_path):
    from minibroker.analytics import cds

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(cds.ENV, "1")
    made = cds.archive_for("/usr/bin/java", "-XX:TieredStopAtLevel=1")
    assert made is not None and made.dumping
    assert made.path.parent == tmp_path / "minibroker" / "spark-cds"
    assert made.temporary is not None and made.temporary.parent == made.path.parent
    assert made.java_options == f"-XX:ArchiveClassesAtExit={made.temporary} -Xlog:cds*=error"
    made.path.write_bytes(b"archive")
    used = cds.archive_for("/usr/bin/java", "-XX:TieredStopAtLevel=1")
    assert used == cds.Archive(made.path, dumping=False)
    assert used.java_options == f"-XX:SharedArchiveFile={made.path}"
    other = cds.archive_for("/usr/bin/java", "-XX:TieredStopAtLevel=1 -Xss4m")  # other options: another
    assert other is not None and other.dumping and other.path != made.path
    for off in ("0", "off", "false"):
        monkeypatch.setenv(cds.ENV, off)
        assert cds.archive_for("/usr/bin/java", "-XX:TieredStopAtLevel=1") is None


def test_dumps_cut_short_over_an_hour_ago_are_removed(monkeypatch, tmp_path):
    import os
    import time

    from minibroker.analytics import cds

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv(cds.ENV, "1")
    directory = tmp_path / "minibroker" / "spark-cds"
    directory.mkdir(parents=True)
    old, recent = directory / "spark-aaaa.11.tmp", directory / "spark-aaaa.12.tmp"
    for path in (old, recent):
        path.write_bytes(b"part of an archive")
    an_hour_ago = time.time() - 3601
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert cds.archive_for("/usr/bin/java", "-XX:TieredStopAtLevel=1").dumping
    assert not old.exists() and recent.exists()  # a recent one may be another run's dump under way


def _analyze(trace, out, cache):
    return minibroker(
        "analyze",
        str(trace),
        "--out",
        str(out),
        "--master",
        "local[1]",
        "--json",
        env={"XDG_CACHE_HOME": str(cache), "MINIBROKER_SPARK_CDS": "1", "SPARK_PRINT_LAUNCH_COMMAND": "1"},
        timeout=600,  # two whole local runs and a dump on a busy machine
    )


def _summary(out) -> dict:
    summary = json.loads(out.stdout)
    for key in ("seconds", "report"):
        summary.pop(key)
    return summary


def test_first_local_run_makes_the_archive_and_the_second_maps_it(tmp_path):
    """Real runs (about 90 s): the first dumps at its JVM's exit, the second starts from the archive."""
    require_java()
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        '{"seq":0,"time_ms":0,"kind":"hw","broker":0,"partition":"t-0","data":"{\\"hw\\":1}"}\n'
        '{"seq":1,"time_ms":5,"kind":"hw","broker":0,"partition":"t-0","data":"{\\"hw\\":3}"}\n'
    )
    cache = tmp_path / "cache"
    first = _analyze(trace, tmp_path / "a", cache)
    assert first.returncode == 0, first.stderr
    archives = list((cache / "minibroker" / "spark-cds").iterdir())
    assert len(archives) == 1 and re.fullmatch(r"spark-[0-9a-f]{20}\.jsa", archives[0].name)  # no .tmp left
    assert archives[0].stat().st_size > 10 << 20
    log = (tmp_path / "a" / "spark.log").read_text(errors="replace")
    assert "-XX:ArchiveClassesAtExit=" in log and "[cds]" not in log  # the dump's warnings stay out
    notice = "this first local Spark run also writes Spark's class archive (once: ~25 s more, ~180 MB at"
    assert notice in first.stderr and f"{archives[0]};" in first.stderr  # said once, with where

    second = _analyze(trace, tmp_path / "b", cache)
    assert second.returncode == 0, second.stderr
    assert "class archive" not in second.stderr
    log = (tmp_path / "b" / "spark.log").read_text(errors="replace")
    assert f"-XX:SharedArchiveFile={archives[0]}" in log
    assert "[cds]" not in log  # the JVM refuses a mismatched archive with a [cds] warning
    assert _summary(second) == _summary(first)
