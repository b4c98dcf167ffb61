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

import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from minibroker.analytics.timelines import ISR_KINDS
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


def _data_field(need: str) -> tuple[str | None, bool]:
    """A ``NEEDS`` entry's ``data`` field (None for a column), and whether it must be a whole number."""
    name = need.rstrip("#")
    return (name[len("data.") :] if name.startswith("data.") else None), need.endswith("#")


def _needed_fields() -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    for kind, needs in NEEDS.items():
        for need in needs:
            field, _ = _data_field(need)
            if field is not None:
                found[field] = (*found.get(field, ()), kind)
    return found


#: the ``data`` fields the checks read, by the kinds whose events carry them
NEEDED_FIELDS = _needed_fields()
#: the ``data`` fields the checks want whole numbers
_WHOLE_FIELDS = frozenset(
    field for needs in NEEDS.values() for field, whole in map(_data_field, needs) if field and whole
)
CORRUPT = "_corrupt_record"
_WHOLE = r"^-?[0-9]{1,18}$"


def field_column(name: str) -> str:
    """The column holding ``data``'s field ``name`` as JSON text (``narrow``, ``rows``)."""
    return f"_f_{name}"


def sql_text(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def of_kinds(kinds: tuple[str, ...], value: str) -> str:
    """SQL: ``value`` on rows of ``kinds``, else null.

    The pipeline's expressions are SQL text (``F.expr``): one call into the JVM each, where
    building them from Column objects took thousands (about 3 s of a 1M-event run's planning).
    """
    return f"CASE WHEN kind IN ({', '.join(map(sql_text, kinds))}) THEN {value} END"


#: a JSON whole number as a JSON writer spells it: no sign on 0, no leading zero
_JSON_WHOLE = "(?:0|-?[1-9][0-9]*)"
_FIELD_NAME = re.compile(r"[a-z_]+")


def first_whole_pattern(name: str) -> str:
    """A regular expression matching a whole ``data`` text that is an object of whole numbers only,
    compact, keys of ``[a-z_]``, whose first member is ``name``."""
    if not _FIELD_NAME.fullmatch(name):
        raise ValueError(f"a data field's name is [a-z_]+, got {name!r}")
    return rf'^\{{"{name}":{_JSON_WHOLE}(?:,"[a-z_]+":{_JSON_WHOLE})*\}}\z'


def field_text(name: str) -> str:
    """SQL: ``data``'s field ``name`` as JSON text, as ``get_json_object(data, '$.name')`` gives it."""
    return f"get_json_object(data, {sql_text('$.' + name)})"


def whole_field_text(name: str) -> str:
    """SQL: ``field_text(name)`` for a field the checks want a whole number, read without a JSON
    parse where the text allows it.

    The trace sink writes ``data`` compact with sorted keys, so the bulk kinds' objects
    (``{"delay_ms":500}``, ``{"hw":1,"leo":2,"previous":0}``) are whole numbers led by the
    field the checks read. A text that is exactly such an object (``first_whole_pattern``)
    is valid JSON, and the parser gives a repeated key's first value: the number after
    ``{"name":``, which a second regular expression takes, character for character. Both
    cost less than a parse (docs/pipeline.md); any other text is parsed.
    """
    first = '^\\{"' + name + '":(-?[0-9]+)'
    return (
        f"CASE WHEN data RLIKE {sql_text(first_whole_pattern(name))} "
        f"THEN regexp_extract(data, {sql_text(first)}, 1) ELSE {field_text(name)} END"
    )


def _raw_fields(fields: dict[str, tuple[str, ...]]) -> list[Column]:
    """Each field's JSON text for the rows of its kinds (else null): one parse per row and field at most."""
    return [
        F.expr(of_kinds(kinds, whole_field_text(name) if name in _WHOLE_FIELDS else field_text(name))).alias(
            field_column(name)
        )
        for name, kinds in fields.items()
    ]


def merged_fields(fields: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    merged = dict(NEEDED_FIELDS)
    for name, kinds in fields.items():
        merged[name] = tuple(dict.fromkeys((*merged.get(name, ()), *kinds)))
    return merged


def _need(kind: str, need: str) -> tuple[str, str]:
    """(SQL: a condition true when the row lacks ``need``, the problem's text)."""
    field, whole = _data_field(need)
    if field is not None:
        value = f"`{field_column(field)}`"
        missing = f"{value} IS NULL" + (f" OR NOT ({value} RLIKE {sql_text(_WHOLE)})" if whole else "")
        return missing, f"{kind} without {field}" + (" (a whole number)" if whole else "")
    return f"`{need}` IS NULL", f"{kind} without {need}"


def problem_column() -> Column:
    """The row's problem (module docstring) over the trace columns, ``_corrupt_record`` and the
    ``NEEDED_FIELDS`` columns (``_raw_fields``)."""
    rules = [(f"`{name}` IS NULL", f"{name} missing or null") for name in ("seq", "time_ms", "kind")]
    for event_kind, needs in NEEDS.items():
        for need in needs:
            lacks, text = _need(event_kind, need)
            rules.append((f"kind = {sql_text(event_kind)} AND ({lacks})", text))
    problem = F.expr("CASE " + " ".join(f"WHEN {c} THEN {sql_text(t)}" for c, t in rules) + " END")
    return F.when(F.col(CORRUPT).isNotNull(), _corrupt_problem()).otherwise(problem)


def _corrupt_problem() -> Column:
    """Why Spark's JSON parser flagged the line: not an object, or the first column of another type."""
    line = f"`{CORRUPT}`"
    whens = []
    for name in (*COLUMNS, "data"):
        expected = (
            "a whole number" if name in INT_COLUMNS else "a list of strings" if name == "keys" else "a string"
        )
        raw = f"get_json_object({line}, {sql_text('$.' + name)})"
        whens.append(
            f"WHEN {raw} IS NOT NULL AND `{name}` IS NULL THEN {sql_text(f'{name} is not {expected}')}"
        )
    problem = f"CASE {' '.join(whens)} ELSE 'not a trace event' END"
    is_object = f"from_json({line}, 'map<string,string>') IS NOT NULL AND startswith(trim({line}), '{{')"
    return F.expr(f"CASE WHEN {is_object} THEN {problem} ELSE 'not a JSON object' END")


def with_problem(frame: DataFrame, fields: dict[str, tuple[str, ...]]) -> DataFrame:
    """``frame`` with ``fields`` as JSON text and the row's ``problem`` (which reads them)."""
    return frame.select("*", *_raw_fields(fields)).select("*", problem_column().alias("problem"))
