"""Class-data sharing for the local-mode JVM: Spark's classes loaded from an archive, not from 280 jars.

A local run spends seconds of its JVM's CPU loading, parsing and verifying Spark's
classes (start-up, then every first use of a planner rule, reader or operator).
Java's application class-data sharing keeps them, parsed and verified, in an archive
file mapped at start: on a 1M-event analyze the whole command ran 4 to 11 s faster with it,
in pairs of runs back to back (docs/pipeline.md).

Java 17 makes the archive only at the exit of a JVM started with
``-XX:ArchiveClassesAtExit``: the first local session without an archive
(``options``) asks for one, written to a temporary name; when the session ends
(``finish``) the JVM is told to exit (its stdin closed, as when Python exits), the
archive is dumped (tens of seconds, once) and renamed into place, atomically, so a
concurrent run never maps half a file. Later sessions start with
``-XX:SharedArchiveFile``. The archive's name is a hash of what it depends on (the
java binary and its version, Spark's jars, the JVM options), so a new Java or Spark
makes a new one; a stale or foreign archive is refused by the JVM itself, which then
starts without it (``-Xshare:auto``, its warning in Spark's log).

Where: ``$XDG_CACHE_HOME/minibroker/spark-cds`` (``~/.cache/...``), about 180 MB.
``MINIBROKER_SPARK_CDS=0`` turns it off, and so does giving the driver's JVM options
yourself (``--conf spark.driver.extraJavaOptions=...``). Only local mode uses it:
on a cluster the executors' JVMs are the workers'.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path
from typing import Any

import attrs

#: seconds the JVM has to write the archive and exit once told to
DUMP_TIMEOUT = 180.0
ENV = "MINIBROKER_SPARK_CDS"


@attrs.frozen
class Archive:
    """The archive a session uses (``dumping`` False) or is making (True, at ``temporary`` first)."""

    path: Path
    dumping: bool
    temporary: Path | None = None

    @property
    def java_options(self) -> str:
        if self.dumping:
            # the dump warns once per class it cannot keep (signed jars, generated classes): not for the log
            return f"-XX:ArchiveClassesAtExit={self.temporary} -Xlog:cds*=error"
        return f"-XX:SharedArchiveFile={self.path}"


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "minibroker" / "spark-cds"


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def _fingerprint(java: str, jvm_options: str) -> str:
    """A hash of what an archive depends on: java (path, release), Spark's jars (names, sizes, times)."""
    from pyspark.find_spark_home import _find_spark_home

    digest = hashlib.sha256()
    real_java = Path(java).resolve()
    digest.update(str(real_java).encode())
    with contextlib.suppress(OSError):
        digest.update((real_java.parent.parent / "release").read_bytes())
    jars = Path(_find_spark_home()) / "jars"
    with os.scandir(jars) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            stat = entry.stat()
            digest.update(f"{entry.name}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    digest.update(jvm_options.encode())
    return digest.hexdigest()[:20]


def archive_for(java: str, jvm_options: str) -> Archive | None:
    """The archive to use, or one to make; None when turned off or the cache is not writable."""
    if not enabled():
        return None
    try:
        directory = cache_dir()
        path = directory / f"spark-{_fingerprint(java, jvm_options)}.jsa"
        if path.is_file() and path.stat().st_size > 0:
            return Archive(path, dumping=False)
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK):
            return None
        _forget_stale(directory)
    except OSError:
        return None
    return Archive(path, dumping=True, temporary=path.with_name(f"{path.stem}.{os.getpid()}.tmp"))


def _forget_stale(directory: Path) -> None:
    """Remove temporary archives older than an hour: dumps cut short (a killed run)."""
    cutoff = time.time() - 3600
    for leftover in directory.glob("spark-*.tmp"):
        with contextlib.suppress(OSError):
            if leftover.stat().st_mtime < cutoff:
                leftover.unlink()


def finish(archive: Archive, timeout: float = DUMP_TIMEOUT) -> bool:
    """After the session's context stopped: let its JVM exit and dump, then move the archive into place.

    Forgets the JVM (pyspark starts a new one for a later session). True if the archive
    is in place; a dump that fails or takes longer than ``timeout`` leaves nothing behind.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    SparkContext._gateway = None
    SparkContext._jvm = None
    process: Any = getattr(gateway, "proc", None)
    with contextlib.suppress(Exception):
        gateway.shutdown()
    done = False
    if process is not None:
        with contextlib.suppress(OSError):
            process.stdin.close()  # the gateway exits on end of input: the archive is written at exit
        try:
            done = process.wait(timeout) == 0
        except Exception:  # the timeout: a dump this slow is not worth waiting for again
            process.kill()
            process.wait(10)
    temporary = archive.temporary
    if temporary is None:
        return False
    if done and temporary.is_file() and temporary.stat().st_size > 0:
        temporary.replace(archive.path)
        return True
    temporary.unlink(missing_ok=True)
    return False
