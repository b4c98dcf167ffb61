"""Non-nullable fields sent as null: what Kafka's generated request parsers refuse.

Kafka's request classes are generated from the protocol's JSON schemas; reading
an array, string or bytes field that the schema does not declare nullable for
the request's version, with a null length (-1, or 0 in the compact encoding),
throws "non-nullable field X was serialized as null". The request then fails to
parse, and Kafka closes the connection. kafka-python decodes such a length as
``None`` without complaint, so this walk over the same schema finds it.
"""

from __future__ import annotations

from typing import Any

#: simple types with a null encoding (a uuid has none: kafka-python reads the all-zero uuid as None)
_NULLABLE_KINDS = frozenset({"string", "bytes", "records"})


def non_nullable_null(struct: Any, body: Any, version: int, path: str = "") -> str | None:
    """The dotted path of the first non-nullable field of ``body`` that is null, or None.

    ``struct`` is kafka-python's schema (``StructField``) of ``body``; only fields of
    ``version`` that are not tagged are looked at (tagged fields are optional by design).
    """
    found = _walk(_plan(struct, version), body)
    return None if found is None else f"{path}{found}"


#: what the walk looks at in one struct at one version: (field name, null is refused, the plan of its
#: struct or of its array's structs or None, whether it is an array of structs)
_Plan = tuple[tuple[str, bool, Any, bool], ...]

#: (id of the schema, version) -> (the schema, its plan); the schema is kept so its id stays its own
_PLANS: dict[tuple[int, int], tuple[Any, _Plan]] = {}


def _plan(struct: Any, version: int) -> _Plan:
    """The fields of ``struct`` at ``version`` the walk reads: fixed per schema, so worked out once."""
    known = _PLANS.get((id(struct), version))
    if known is not None and known[0] is struct:
        return known[1]
    steps = []
    for field in struct.untagged_fields(version):
        has_null = field.is_array() or field.is_struct() or field.type_str in _NULLABLE_KINDS
        refused = has_null and not field.nullable_for_version_q(version)
        if field.is_struct_array():
            steps.append((field.name, refused, _plan(field.array_of, version), True))
        elif field.is_struct():
            steps.append((field.name, refused, _plan(field, version), False))
        elif refused:
            steps.append((field.name, refused, None, False))
    plan = tuple(steps)
    _PLANS[id(struct), version] = (struct, plan)
    return plan


def _walk(plan: _Plan, body: Any) -> str | None:
    """The path below ``body`` of its first refused null (built only when one is found), or None."""
    for name, refused, inner, is_array in plan:
        value = getattr(body, name, None)
        if value is None:
            if refused:
                return name
            continue
        if not inner:
            continue
        if is_array:
            for i, item in enumerate(value):
                found = _walk(inner, item)
                if found is not None:
                    return f"{name}[{i}].{found}"
        else:
            found = _walk(inner, value)
            if found is not None:
                return f"{name}.{found}"
    return None
