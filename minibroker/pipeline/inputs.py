"""Which trace files an ``analyze`` run reads, and the trace schema in Spark's terms.

A TRACE argument is a file, a directory (every trace file below it, recursively) or
a glob (``runs/*.parquet``, ``runs/**/*.jsonl``). Trace files are JSONL
(``.jsonl``, ``.ndjson``, ``.json``, optionally ``.gz``) or Parquet (``.parquet``),
as written by ``minibroker run --trace`` (docs/trace.md). An argument with a URI
scheme (``hdfs://``, ``s3a://``, ``file://``) is handed to Spark as it is, its format
taken from its suffix, so a cluster can read traces from shared storage.

Invariant: ``resolve`` returns each file at most once, in sorted order, and raises
``NoTraces`` (one line) when an argument matches nothing.
"""

from __future__ import annotations

import contextlib
import glob
import re
from pathlib import Path

import attrs

from minibroker.trace import COLUMNS

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json", ".jsonl.gz", ".ndjson.gz", ".json.gz")
PARQUET_SUFFIXES = (".parquet",)
#: the columns of docs/trace.md, as a Spark DDL schema (``keys`` is a list of strings)
SCHEMA_DDL = ", ".join(
    f"`{name}` {'bigint' if name in ('seq', 'time_ms', 'broker', 'offset', 'count') else 'string'}"
    if name != "keys"
    else "`keys` array<string>"
    for name in (*COLUMNS, "data")
)
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


class NoTraces(Exception):
    """An argument matched no trace file; ``str()`` is the one-line message."""


@attrs.frozen
class TraceInputs:
    """Trace locations by format, as Spark paths (absolute local paths or URIs)."""

    jsonl: tuple[str, ...] = ()
    parquet: tuple[str, ...] = ()

    @property
    def count(self) -> int:
        return len(self.jsonl) + len(self.parquet)

    @property
    def local_bytes(self) -> int:
        """The size of the local files (URIs count 0: their size is not known here)."""
        total = 0
        for name in (*self.jsonl, *self.parquet):
            if not _URI.match(name):
                with contextlib.suppress(OSError):
                    total += Path(name).stat().st_size
        return total


def trace_format(name: str) -> str | None:
    """``"jsonl"``, ``"parquet"`` or None, by the file name's suffix."""
    lower = name.lower()
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(JSONL_SUFFIXES):
        return "jsonl"
    return None


def _files_of(argument: str) -> list[Path]:
    path = Path(argument)
    if path.is_dir():
        found = [p for p in path.rglob("*") if p.is_file() and trace_format(p.name)]
        # a Spark-written Parquet table is a directory of part files: keep them, skip _SUCCESS/.crc
        return [p for p in found if not p.name.startswith(("_", "."))]
    if path.is_file():
        return [path] if trace_format(path.name) else []
    if glob.has_magic(argument):
        matched: list[Path] = []
        for name in glob.glob(argument, recursive=True):
            matched.extend(_files_of(name))
        return matched
    return []


def resolve(arguments: list[str]) -> TraceInputs:
    """The trace files named by ``arguments``; NoTraces if one of them matches nothing."""
    jsonl: dict[str, None] = {}
    parquet: dict[str, None] = {}
    for argument in arguments:
        if _URI.match(argument) and not argument.startswith("file://"):
            kind = trace_format(argument.rstrip("/"))
            if kind is None:
                raise NoTraces(f"trace {argument!r}: expected a .jsonl or .parquet name for a URI")
            (jsonl if kind == "jsonl" else parquet)[argument] = None
            continue
        local = argument[len("file://") :] if argument.startswith("file://") else argument
        files = _files_of(local)
        if not files:
            problem = (
                f"{argument!r} holds no trace" if Path(local).exists() else f"no trace matched {argument!r}"
            )
            raise NoTraces(f"{problem}: expected .jsonl or .parquet files, directories of them, or a glob")
        for file in files:
            name = str(file.resolve())
            (jsonl if trace_format(file.name) == "jsonl" else parquet)[name] = None
    return TraceInputs(tuple(sorted(jsonl)), tuple(sorted(parquet)))


def display_name(spark_path: str) -> str:
    """A trace's path as Spark reports it (``file:/a/b.jsonl``), for people (``/a/b.jsonl``)."""
    from urllib.parse import unquote

    if spark_path.startswith("file://"):
        return unquote(spark_path[len("file://") :])
    if spark_path.startswith("file:"):
        return unquote(spark_path[len("file:") :])
    return spark_path
