"""The public Python API is pinned: each public package's ``__all__`` against tests/public_api.json.

For every name a public package lists in ``__all__`` the snapshot keeps its kind (class, function or
constant) and, for classes and functions, its signature as text. A difference fails the test unless
CHANGELOG.md's "Unreleased" section names each added, removed or changed name in backquotes
(`` `Name` `` or `` `minibroker.package.Name` ``). At a release, refresh the snapshot with
``python tests/test_public_api.py --write``, which refuses while a difference is not in the changelog.
"""

from __future__ import annotations

import enum
import importlib
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "tests" / "public_api.json"
CHANGELOG = ROOT / "CHANGELOG.md"

#: the packages whose ``__all__`` is the public API (docs/library.md, "What is public")
PUBLIC_PACKAGES = (
    "minibroker.timer",
    "minibroker.purgatory",
    "minibroker.runtime",
    "minibroker.sim",
    "minibroker.scenario",
    "minibroker.testing",
)


def describe(value: Any) -> dict[str, str]:
    """A public name's kind, and its signature (text) for a class or function.

    An enum is pinned by its members and a protocol by its kind (their constructors are Python's);
    a default value's ``object at 0x...`` loses its address.
    """
    if isinstance(value, enum.EnumMeta):
        return {"kind": "enum", "members": " ".join(value.__members__)}
    if inspect.isclass(value) and getattr(value, "_is_protocol", False):
        return {"kind": "protocol"}
    if inspect.isclass(value):
        kind = "class"
    elif inspect.isroutine(value):
        kind = "function"
    else:
        return {"kind": "constant"}
    try:
        signature = str(inspect.signature(value))
    except (TypeError, ValueError):  # a class or builtin without an introspectable signature
        signature = "(...)"
    return {"kind": kind, "signature": re.sub(r" at 0x[0-9a-fA-F]+>", ">", signature)}


def current_api() -> dict[str, dict[str, dict[str, str]]]:
    """package -> public name -> its description, as the code is now."""
    api = {}
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        api[package] = {name: describe(getattr(module, name)) for name in sorted(module.__all__)}
    return api


def differences(
    old: dict[str, dict[str, dict[str, str]]], new: dict[str, dict[str, dict[str, str]]]
) -> list[tuple[str, str, str]]:
    """(package, name, "added" / "removed" / "changed") for every name that differs."""
    found = []
    for package in sorted(set(old) | set(new)):
        before, after = old.get(package, {}), new.get(package, {})
        for name in sorted(set(before) | set(after)):
            if name not in before:
                found.append((package, name, "added"))
            elif name not in after:
                found.append((package, name, "removed"))
            elif before[name] != after[name]:
                found.append((package, name, "changed"))
    return found


def unreleased(changelog: str) -> str:
    """The text of the changelog's "## Unreleased" section (empty if it has none)."""
    match = re.search(r"^## Unreleased[^\n]*\n(.*?)(?=^## |\Z)", changelog, re.MULTILINE | re.DOTALL)
    return match.group(1) if match else ""


def unmentioned(found: list[tuple[str, str, str]], section: str) -> list[tuple[str, str, str]]:
    """The differences the "Unreleased" section does not name in backquotes."""
    return [
        (package, name, what)
        for package, name, what in found
        if f"`{name}`" not in section and f"`{package}.{name}`" not in section
    ]


def _explain(missing: list[tuple[str, str, str]]) -> str:
    names = ", ".join(f"{package}.{name} ({what})" for package, name, what in missing)
    return (
        f"the public API changed and CHANGELOG.md's Unreleased section does not name it: {names}; "
        "name each in backquotes there, then refresh with `python tests/test_public_api.py --write`"
    )


def test_the_public_api_matches_its_snapshot_or_the_changelog_names_each_change():
    snapshot = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    missing = unmentioned(differences(snapshot, current_api()), unreleased(CHANGELOG.read_text("utf-8")))
    assert not missing, _explain(missing)


def test_every_public_package_lists_names_it_has_and_no_module_by_accident():
    for package in PUBLIC_PACKAGES:
        module = importlib.import_module(package)
        assert len(module.__all__) == len(set(module.__all__)), package
        for name in module.__all__:
            value = getattr(module, name)  # raises if __all__ names something the package lacks
            assert not inspect.ismodule(value), f"{package}.{name} is a module"


def test_the_docs_import_only_public_names():
    """Every ``from minibroker.X import ...`` in README.md and docs/ names a public package and its names."""
    pattern = re.compile(r"^\s*from (minibroker[\w.]*) import ([\w, ]+)$", re.MULTILINE)
    imports = [
        (page.relative_to(ROOT), package, name.strip())
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for package, names in pattern.findall(page.read_text(encoding="utf-8"))
        for name in names.split(",")
    ]
    assert len(imports) >= 6
    for page, package, name in imports:
        assert package in PUBLIC_PACKAGES, f"{page}: {package} is not a public package"
        assert name in importlib.import_module(package).__all__, f"{page}: {package}.{name} is not public"


def test_a_change_is_accepted_only_when_the_unreleased_section_names_it():
    old = {"minibroker.timer": {"A": {"kind": "constant"}, "B": {"kind": "function", "signature": "()"}}}
    new = {"minibroker.timer": {"B": {"kind": "function", "signature": "(x)"}, "C": {"kind": "class"}}}
    found = differences(old, new)
    assert found == [
        ("minibroker.timer", "A", "removed"),
        ("minibroker.timer", "B", "changed"),
        ("minibroker.timer", "C", "added"),
    ]
    changelog = "# Changelog\n\n## Unreleased\n- `A` goes; `minibroker.timer.B` takes x\n\n## 0.1.0\n- `C`\n"
    assert unmentioned(found, unreleased(changelog)) == [("minibroker.timer", "C", "added")]
    assert unreleased("# Changelog\n\n## 0.1.0\n- `C`\n") == ""


def main(argv: list[str]) -> int:
    """``--write``: refresh tests/public_api.json (only when the changelog names every difference)."""
    if argv != ["--write"]:
        print("usage: python tests/test_public_api.py --write", file=sys.stderr)
        return 2
    api = current_api()
    if SNAPSHOT.exists():
        found = differences(json.loads(SNAPSHOT.read_text(encoding="utf-8")), api)
        missing = unmentioned(found, unreleased(CHANGELOG.read_text(encoding="utf-8")))
        if missing:
            print(f"not written: {_explain(missing)}", file=sys.stderr)
            return 1
    SNAPSHOT.write_text(json.dumps(api, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {SNAPSHOT.relative_to(ROOT)}: {sum(len(names) for names in api.values())} names")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main(sys.argv[1:]))
