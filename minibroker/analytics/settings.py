"""Spark settings from the command line, the way spark-submit takes them.

- ``--conf KEY=VALUE`` (repeatable): ``KEY`` is a Spark setting (``spark.*``), the
  value anything after the first ``=`` (may be empty, may hold ``=``).
- ``--spark-defaults FILE``: a spark-defaults.conf file, the Java properties subset
  Spark's own files use: one setting a line, ``KEY VALUE``, ``KEY=VALUE`` or
  ``KEY: VALUE``; blank lines and lines starting with ``#`` or ``!`` are ignored.

``--conf`` wins over the file, and both over the pipeline's own settings. Keys that
are not ``spark.*`` are refused (spark-submit ignores them with a warning: here a
typo should not pass silently). Every problem is one ``SettingsError`` line naming
the argument or the file and line, and the expected form.
"""

from __future__ import annotations

import re
from pathlib import Path

_KEY = re.compile(r"^spark\.[A-Za-z0-9_.\-]+$")
_LINE = re.compile(r"^(?P<key>[^\s=:]+)\s*(?:[=:]|\s)\s*(?P<value>.*)$")
#: a memory size as Spark spells it: ``2g``, ``512m``, ``512mb``, ``4096`` (MiB), ``1024b`` (bytes)
_MEMORY = re.compile(r"^\s*(\d+)\s*(?:([kmgt])b?|(b))?\s*$", re.IGNORECASE)


def off_heap_bytes(driver_memory: str) -> int | None:
    """Off-heap memory for a local run: a quarter of ``driver_memory``, at least 64 MiB; None if
    the size is not one Spark spells (or is 0)."""
    match = _MEMORY.match(driver_memory)
    if match is None:
        return None
    unit = (match.group(2) or "").lower()
    size = int(match.group(1)) * (1 if match.group(3) else 1024 ** "_kmgt".index(unit or "m"))
    return max(64 * 2**20, size // 4) if size else None


class SettingsError(Exception):
    """A malformed setting; ``str()`` is the one-line message."""


def _check_key(key: str, where: str) -> None:
    if not _KEY.match(key):
        raise SettingsError(
            f"{where}: {key!r} is not a Spark setting; expected a key starting with 'spark.' "
            "(e.g. spark.executor.memory)"
        )


def parse_conf(items: list[str] | None) -> dict[str, str]:
    """``--conf`` values as a dict (a later one for the same key wins)."""
    settings: dict[str, str] = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SettingsError(f"--conf {item!r}: expected KEY=VALUE, e.g. spark.executor.memory=2g")
        _check_key(key.strip(), f"--conf {item!r}")
        settings[key.strip()] = value.strip()
    return settings


def read_defaults(path: str) -> dict[str, str]:
    """The settings of a spark-defaults file."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise SettingsError(
            f"--spark-defaults {path!r}: {reason}; expected a spark-defaults.conf file"
        ) from None
    settings: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        match = _LINE.match(line)
        where = f"{path}:{number}"
        if match is None:
            raise SettingsError(f"{where}: {line!r}: expected 'KEY VALUE', e.g. spark.executor.memory 2g")
        _check_key(match["key"], where)
        settings[match["key"]] = match["value"].strip()
    return settings


def spark_settings(conf: list[str] | None, defaults: str | None) -> dict[str, str]:
    """The user's settings: the defaults file, then ``--conf`` over it."""
    settings = read_defaults(defaults) if defaults else {}
    settings.update(parse_conf(conf))
    return settings
