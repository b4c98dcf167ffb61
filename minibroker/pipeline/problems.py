"""The problems a trace row can have, as Spark expressions (no Python over rows).

Rows: ``problem`` is null for a valid event, else the first of these that applies:

- JSONL only: ``not a JSON object``; ``COLUMN is not a whole number`` (or ``not a
  list of strings``, ``not a string``);
- ``seq missing or null``, ``time_ms missing or null``, ``kind missing or null``;
- ``KIND without FIELD`` for the fields the analysis needs of ``KIND`` (``NEEDS``):
  an ``op.create`` without ``delay_ms`` would otherwise be a false "completed 0
  times", an ``op.complete`` without ``op`` a phantom operation.

Blank JSONL lines are neither events nor problems. Events of kinds the analysis does
not use, known or not, are valid events: they count in ``events`` and nothing else.

``with_problem(frame, fields)`` parses the ``data`` fields the checks (and the
caller) read once per row, into ``field_column(name)`` as JSON text, and adds
``problem``, which reads them there.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from minibroker.pipeline.timelines import ISR_KINDS
from minibroker.trace import COLUMNS
from minibroker.trace.sinks import INT_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

_OP = ("broker", "purgatory", "op")
#: per kind, the columns and ``data`` fields (``data.NAME``; ``#`` = a whole number) the analysis needs
NEEDS: dict[str, tuple[str, ...]] = {
    "op.create": (*_OP, "data.delay_ms#"),
    "op.complete": _OP,
    "op.expire": _OP,
    "timer.fire": ("data.expiration#",),
    "purge": ("broker", "purgatory"),
    "hw": ("partition", "data.hw#"),
    **{kind: ("partition", "data.isr") for kind in ISR_KINDS},
}


def _needed_fields() -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for kind, needs in NEEDS.items():
        for need in needs:
            if need.startswith("data."):
                name = need[len("data.") :].rstrip("#")
                found[name] = (*found.get(name, ()), kind)
    return found


#: the ``data`` fields the checks read, by the kinds whose events carry them
NEEDED_FIELDS = _needed_fields()
CORRUPT = "_corrupt_record"
_WHOLE = r"^-?[0-9]{1,18}$"


def field_column(name: str) -> str:
    """The column holding ``data``'s field ``name`` as JSON text (``narrow``, ``rows``)."""
    return f"_f_{name}"


def _raw_fields(fields: dict[str, tuple[str, ...]]) -> list[Column]:
    """Each field's JSON text for the rows of its kinds (else null): one parse per row and field."""
    return [
        F.when(F.col("kind").isin(*kinds), F.get_json_object("data", f"$.{name}")).alias(field_column(name))
        for name, kinds in fields.items()
    ]


def merged_fields(fields: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    merged = dict(NEEDED_FIELDS)
    for name, kinds in fields.items():
        merged[name] = tuple(dict.fromkeys((*merged.get(name, ()), *kinds)))
    return merged


def _need(kind: str, need: str) -> tuple[Column, str]:
    """(a condition true when the row lacks ``need``, the problem's text)."""
    whole = need.endswith("#")
    name = need.rstrip("#")
    if name.startswith("data."):
        field = name[len("data.") :]
        value = F.col(field_column(field))
        missing = value.isNull() | (~value.rlike(_WHOLE) if whole else F.lit(False))
        return missing, f"{kind} without {field}" + (" (a whole number)" if whole else "")
    return F.col(name).isNull(), f"{kind} without {name}"


def problem_column() -> Column:
    """The row's problem (module docstring) over the trace columns, ``_corrupt_record`` and the
    ``NEEDED_FIELDS`` columns (``_raw_fields``)."""
    kind = F.col("kind")
    rules: list[tuple[Column, str]] = [
        (F.col(name).isNull(), f"{name} missing or null") for name in ("seq", "time_ms", "kind")
    ]
    for event_kind, needs in NEEDS.items():
        for need in needs:
            lacks, text = _need(event_kind, need)
            rules.append(((kind == event_kind) & lacks, text))
    problem = F.lit(None).cast("string")
    for condition, text in reversed(rules):
        problem = F.when(condition, F.lit(text)).otherwise(problem)
    return F.when(F.col(CORRUPT).isNotNull(), _corrupt_problem()).otherwise(problem)


def _corrupt_problem() -> Column:
    """Why Spark's JSON parser flagged the line: not an object, or the first column of another type."""
    line = F.col(CORRUPT)
    problem = F.lit("not a trace event")
    for name in reversed((*COLUMNS, "data")):
        expected = (
            "a whole number" if name in INT_COLUMNS else "a list of strings" if name == "keys" else "a string"
        )
        raw = F.get_json_object(line, f"$.{name}")
        problem = F.when(
            raw.isNotNull() & F.col(name).isNull(), F.lit(f"{name} is not {expected}")
        ).otherwise(problem)
    is_object = F.from_json(line, "map<string,string>").isNotNull() & F.trim(line).startswith("{")
    return F.when(is_object, problem).otherwise(F.lit("not a JSON object"))


def with_problem(frame: DataFrame, fields: dict[str, tuple[str, ...]]) -> DataFrame:
    """``frame`` with ``fields`` as JSON text and the row's ``problem`` (which reads them)."""
    return frame.select("*", *_raw_fields(fields)).select("*", problem_column().alias("problem"))
