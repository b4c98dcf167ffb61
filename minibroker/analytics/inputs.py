"""Which trace files an ``analyze`` run reads, and the trace schema in Spark's terms.

A TRACE argument is a file, a directory (every trace file below it, recursively) or
a glob (``runs/*.parquet``, ``runs/**/*.jsonl``). Trace files are JSONL
(``.jsonl``, ``.ndjson``, ``.json``, optionally ``.gz``) or Parquet (``.parquet``),
as written by ``minibroker run --trace`` (docs/trace.md). An argument with a URI
scheme (``hdfs://``, ``s3a://``, ``file://``) is handed to Spark as it is, its format
taken from its suffix, so a cluster can read traces from shared storage.

Invariant: ``resolve`` returns each file at most once, in sorted order, and raises
``NoTraces`` (one line) when an argument matches nothing.

``check_files`` refuses, before Spark reads anything, a file that cannot be a trace
(``BadTrace``, one line naming it): an empty file; a Parquet file whose footer does
not read (random bytes, truncated), that lacks a ``REQUIRED`` column, or whose
column has another type than the trace format's. A local file's footer is read
with pyarrow, a URI's through Spark.
"""

from __future__ import annotations

import contextlib
import glob
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from minibroker.trace import COLUMNS
from minibroker.trace.sinks import INT_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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
#: columns a Parquet trace must have (``keys``, ``offset`` and ``error`` may be absent: nothing reads them)
REQUIRED = ("seq", "time_ms", "kind", "broker", "purgatory", "op", "partition", "count", "cause", "data")


class NoTraces(Exception):
    """An argument matched no trace file; ``str()`` is the one-line message."""


class BadTrace(Exception):
    """A file that is not a trace; ``str()`` is the one-line message."""


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


# --- checking files -------------------------------------------------------------------------------------
def local_path(path: str) -> Path | None:
    if path.startswith("file:"):
        return Path(display_name(path))
    return None if "://" in path else Path(path)


def _type_problem(name: str, kind: Any) -> str | None:
    import pyarrow as pa

    if name in INT_COLUMNS:
        ok = pa.types.is_integer(kind) and kind != pa.uint64()
        expected = "int64"
    elif name == "keys":
        ok = (pa.types.is_list(kind) or pa.types.is_large_list(kind)) and (
            pa.types.is_string(kind.value_type) or pa.types.is_large_string(kind.value_type)
        )
        expected = "list<string>"
    else:
        ok = pa.types.is_string(kind) or pa.types.is_large_string(kind)
        expected = "string"
    return None if ok or pa.types.is_null(kind) else f"column {name} is {kind}; expected {expected}"


def check_parquet(path: str, spark: SparkSession | None = None) -> None:
    """BadTrace unless ``path`` is a Parquet file with the trace's columns and types.

    A local file's footer is read with pyarrow; a URI's through Spark (its schema).
    """
    import pyarrow as pa

    local = local_path(path)
    if local is not None:
        import pyarrow.parquet as pq

        try:
            schema = pq.read_schema(local)
        except (OSError, pa.ArrowException) as error:
            raise BadTrace(
                f"{local} is not a Parquet file, or is truncated ({str(error).splitlines()[0][:200]})"
            ) from None
        fields = {field.name: field.type for field in schema}
    else:
        assert spark is not None
        try:
            fields = {field.name: _arrow_type(field.dataType) for field in spark.read.parquet(path).schema}
        except Exception as error:  # AnalysisException, SparkException: not readable as Parquet
            first = str(error).strip().splitlines()
            raise BadTrace(f"{path} is not a readable Parquet file ({(first or ['?'])[0][:200]})") from None
    name = display_name(path)
    missing = [column for column in REQUIRED if column not in fields]
    if missing:
        raise BadTrace(
            f"{name} is not a trace: no column {', '.join(missing)} "
            f"(a trace has {', '.join((*COLUMNS, 'data'))}; see docs/trace.md)"
        )
    for column in (*COLUMNS, "data"):
        if column in fields:
            problem = _type_problem(column, fields[column])
            if problem:
                raise BadTrace(f"{name} is not a trace: {problem} (see docs/trace.md)")


def _arrow_type(spark_type: Any) -> Any:
    """A Spark column type as the pyarrow type ``_type_problem`` judges."""
    import pyarrow as pa
    from pyspark.sql import types as T

    if isinstance(spark_type, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return pa.int64()
    if isinstance(spark_type, T.StringType):
        return pa.string()
    if isinstance(spark_type, T.ArrayType) and isinstance(spark_type.elementType, T.StringType):
        return pa.list_(pa.string())
    if isinstance(spark_type, T.NullType):
        return pa.null()
    return pa.binary() if isinstance(spark_type, T.BinaryType) else pa.float64()


def check_files(spark: SparkSession, inputs: TraceInputs) -> None:
    """BadTrace for the first file that cannot be a trace (empty, or a Parquet file that is not one)."""
    for path in (*inputs.jsonl, *inputs.parquet):
        local = local_path(path)
        if local is not None and local.is_file() and local.stat().st_size == 0:
            raise BadTrace(f"{local} is empty: expected a trace (JSONL or Parquet, see docs/trace.md)")
    for path in inputs.parquet:
        check_parquet(path, spark)


@attrs.frozen
class Footer:
    """What a Parquet trace's footer proves: its rows (none lacks seq, time_ms or kind), their times."""

    rows: int
    start_ms: int
    end_ms: int


def footer_facts(path: str) -> Footer | None:
    """``path``'s Footer, or None unless its statistics prove it.

    They do for a local file with rows whose every non-empty row group has null
    counts of 0 for ``seq``, ``time_ms`` and ``kind`` and a minimum and maximum for
    ``time_ms`` (exact for whole numbers): pyarrow and Spark write such statistics.
    """
    local = local_path(path)
    if local is None:
        return None
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        metadata = pq.ParquetFile(local).metadata
    except (OSError, pa.ArrowException):
        return None
    rows, low, high = 0, None, None
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        if group.num_rows == 0:
            continue
        stats = {}
        for column in range(group.num_columns):
            chunk = group.column(column)
            if chunk.path_in_schema in ("seq", "time_ms", "kind"):
                stats[chunk.path_in_schema] = chunk.statistics
        for name in ("seq", "time_ms", "kind"):
            found = stats.get(name)
            if found is None or not found.has_null_count or found.null_count != 0:
                return None
        times = stats["time_ms"]
        if not times.has_min_max or not isinstance(times.min, int) or not isinstance(times.max, int):
            return None
        rows += group.num_rows
        low = times.min if low is None else min(low, times.min)
        high = times.max if high is None else max(high, times.max)
    if low is None or high is None:
        return None
    return Footer(rows, low, high)


def row_group(spark_path: str, row: int) -> int | None:
    """The row group holding ``row`` of a local Parquet file (None for a URI)."""
    local = local_path(spark_path)
    if local is None:
        return None
    import pyarrow.parquet as pq

    metadata = pq.ParquetFile(local).metadata
    end = 0
    for group in range(metadata.num_row_groups):
        end += metadata.row_group(group).num_rows
        if row < end:
            return group
    return None


#: bytes of JSONL text ``count_rows`` reads per row it may count (trace lines are about 200)
_LINE_BUDGET = 1024


def count_rows(inputs: TraceInputs, limit: int) -> int | None:
    """The rows of ``inputs`` if they are at most ``limit``, else None (more, or not known here).

    A Parquet file's rows are its footer's; a JSONL file's are its lines (blank ones included),
    counted in chunks, reading at most ``limit`` KiB of text in all (gzip'd files decompressed),
    so a large input costs little to turn down. A URI, or a path that is no regular file or does not
    read, is not known.
    """
    import gzip
    import zlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, budget = 0, limit * _LINE_BUDGET
    try:
        for path in inputs.parquet:  # footers first: they may settle it with no text read
            local = _regular_file(path)
            if local is None:
                return None
            rows += pq.ParquetFile(local).metadata.num_rows
            if rows > limit:
                return None
        for path in inputs.jsonl:
            local = _regular_file(path)
            if local is None:
                return None
            opener = gzip.open if local.name.endswith(".gz") else open
            with opener(local, "rb") as text:
                last = b"\n"
                while rows <= limit and (chunk := text.read(min(1 << 20, budget + 1))):
                    budget -= len(chunk)
                    if budget < 0:
                        return None
                    rows += chunk.count(b"\n")
                    last = chunk[-1:]
                rows += last != b"\n"
            if rows > limit:
                return None
    except (OSError, EOFError, zlib.error, pa.ArrowException):
        return None
    return rows


def _regular_file(path: str) -> Path | None:
    """``path`` as a local regular file, or None (a URI; anything else, such as a pipe, would block)."""
    local = local_path(path)
    return local if local is not None and local.is_file() else None
