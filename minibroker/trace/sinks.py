"""Trace sinks: JSONL (stdlib) and Parquet (pyarrow, the ``parquet`` extra).

Every event is first normalised to the fixed columns of docs/trace.md, so a
JSONL line and a Parquet row of the same event hold the same values:

    seq, time_ms, kind, broker, purgatory, op, keys, partition, offset, count,
    error, cause, data

``data`` holds the remaining, kind-specific fields as a JSON object with sorted
keys. JSONL lines are ``json.dumps`` with sorted keys and no spaces: the same
run writes the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from minibroker.extras import optional_import
from minibroker.trace.events import Event

COLUMNS = (
    "seq",
    "time_ms",
    "kind",
    "broker",
    "purgatory",
    "op",
    "keys",
    "partition",
    "offset",
    "count",
    "error",
    "cause",
)
INT_COLUMNS = ("seq", "time_ms", "broker", "offset", "count")


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def normalize(event: Event) -> dict[str, Any]:
    """The event as the fixed columns, plus ``data`` (JSON text of the other fields, or None)."""
    row: dict[str, Any] = {column: event.get(column) for column in COLUMNS}
    broker = row["broker"]
    if broker is not None and not isinstance(broker, int):
        row["broker"] = None
    keys = row["keys"]
    if keys is not None:
        row["keys"] = [str(key) for key in keys]
    for column in ("purgatory", "op", "partition", "error", "cause"):
        if row[column] is not None:
            row[column] = str(row[column])
    extra = {
        key: value
        for key, value in event.items()
        if key not in COLUMNS or (key == "broker" and row["broker"] is None)
    }
    row["data"] = _json(extra) if extra else None
    return row


class JsonlSink:
    """Writes one normalised event per line."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file = self.path.open("w", encoding="utf-8", newline="\n")
        self.events = 0

    def __call__(self, event: Event) -> None:
        self._file.write(_json(normalize(event)))
        self._file.write("\n")
        self.events += 1

    def close(self) -> None:
        self._file.close()


class ParquetSink:
    """Buffers normalised events and writes them as row groups of a Parquet file."""

    BATCH = 65_536

    def __init__(self, path: str | Path) -> None:
        pa = optional_import("pyarrow", "parquet", "a .parquet trace")
        import pyarrow.parquet as pq

        self._pa = pa
        self.path = Path(path)
        fields = []
        for column in (*COLUMNS, "data"):
            if column in INT_COLUMNS:
                fields.append(pa.field(column, pa.int64()))
            elif column == "keys":
                fields.append(pa.field(column, pa.list_(pa.string())))
            else:
                fields.append(pa.field(column, pa.string()))
        self.schema = pa.schema(fields)
        self._writer = pq.ParquetWriter(str(self.path), self.schema, compression="zstd")
        self._rows: list[dict[str, Any]] = []
        self.events = 0

    def __call__(self, event: Event) -> None:
        self._rows.append(normalize(event))
        self.events += 1
        if len(self._rows) >= self.BATCH:
            self._flush()

    def _flush(self) -> None:
        if self._rows:
            table = self._pa.Table.from_pylist(self._rows, schema=self.schema)
            self._writer.write_table(table)
            self._rows = []

    def close(self) -> None:
        self._flush()
        self._writer.close()


def open_sink(path: str | Path) -> JsonlSink | ParquetSink:
    """A sink chosen by the file's suffix: ``.jsonl`` / ``.json`` or ``.parquet``."""
    suffix = Path(path).suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        return JsonlSink(path)
    if suffix == ".parquet":
        return ParquetSink(path)
    raise ValueError(f"trace file {str(path)!r}: expected a .jsonl or .parquet file name")
