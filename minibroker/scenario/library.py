"""Where scenarios are found: a file as given, else a scenario of the library by its name.

The library is ``./scenarios`` when the current directory has one, then the bundled
scenarios shipped inside the package (``minibroker/scenarios``, package data; in a
checkout it links to the top-level ``scenarios/``), each with its ``regressions/``
sub-folder. ``resolve`` turns ``acks_all`` or ``acks_all.toml`` into the first library
file of that name; anything that names an
existing file, or looks like a path (it has a directory part), is taken as it is.
"""

from __future__ import annotations

from pathlib import Path

#: the scenarios shipped with the package
BUNDLED = Path(__file__).resolve().parent.parent / "scenarios"
#: sub-folders of a scenario directory that hold bundled scenarios too (sweeps/ holds sweep files)
SCENARIO_SUBDIRS = ("regressions",)


def bundled_scenarios(directory: Path) -> list[Path]:
    """The scenario files of ``directory``: its own ``*.toml``, then those of ``regressions/``."""
    found = sorted(directory.glob("*.toml"))
    for sub in SCENARIO_SUBDIRS:
        found += sorted((directory / sub).glob("*.toml"))
    return found


def library_dirs(explicit: str | None = None) -> list[Path]:
    """The directories searched, first match first: ``explicit`` alone, else ./scenarios and the bundled."""
    if explicit:
        return [Path(explicit)]
    dirs = [Path.cwd() / "scenarios", BUNDLED]
    return [d for d in dict.fromkeys(d.resolve() for d in dirs) if d.is_dir()]


def resolve(name: str) -> Path:
    """The file ``name`` means: itself if it exists or has a directory part, else a library scenario.

    A name that matches nothing comes back unchanged, for the loader to report as missing.
    """
    path = Path(name)
    if path.exists() or path.parent != Path("."):
        return path
    stem = name.removesuffix(".toml")
    for directory in library_dirs():
        for candidate in bundled_scenarios(directory):
            if candidate.stem == stem:
                return candidate
    return path
