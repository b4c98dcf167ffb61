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
    for field in struct.untagged_fields(version):
        value = getattr(body, field.name, None)
        where = f"{path}{field.name}"
        if value is None:
            has_null = field.is_array() or field.is_struct() or field.type_str in _NULLABLE_KINDS
            if has_null and not field.nullable_for_version_q(version):
                return where
            continue
        if field.is_struct_array():
            for i, item in enumerate(value):
                found = non_nullable_null(field.array_of, item, version, f"{where}[{i}].")
                if found is not None:
                    return found
        elif field.is_struct():
            found = non_nullable_null(field, value, version, f"{where}.")
            if found is not None:
                return found
    return None
