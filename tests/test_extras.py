"""Optional packages: ``EXTRAS`` agrees with pyproject.toml, and a missing one is one line, exit status 2."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import pytest

from minibroker.cli import main
from minibroker.extras import EXTRAS, MissingExtra, optional_import, require

PYPROJECT = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {re.split(r"[=<>\[ ;]", requirement, maxsplit=1)[0].lower() for requirement in requirements}


def test_every_extra_brings_the_modules_it_is_imported_for():
    declared = PYPROJECT["project"]["optional-dependencies"]
    core = _names(PYPROJECT["project"]["dependencies"])
    for extra, modules in EXTRAS.items():
        assert set(modules) <= _names(declared[extra]), extra
        assert not set(modules) & core, extra


def test_serve_and_its_codecs_are_core():
    assert {"kafka-python", "crc32c", "python-snappy", "lz4", "zstandard", "trio"} <= _names(
        PYPROJECT["project"]["dependencies"]
    )


def test_a_missing_module_names_its_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(MissingExtra) as error:
        optional_import("pyarrow", "parquet", "a .parquet trace")
    assert str(error.value) == (
        "a .parquet trace needs the parquet extra (pyarrow is not installed): "
        "pip install 'minibroker[parquet]'"
    )
    assert isinstance(error.value, ImportError)


def test_require_checks_every_module_of_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingExtra, match=r"^needs the spark extra \(matplotlib is not installed\)"):
        require("spark")


def test_an_error_inside_an_installed_package_is_not_a_missing_extra():
    with pytest.raises(ModuleNotFoundError) as error:
        optional_import("json.no_such_submodule", "parquet")
    assert not isinstance(error.value, MissingExtra)


def test_the_cli_prints_one_line_after_the_command(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert main(["run", "acks_all", "--quiet", "--trace", str(tmp_path / "t.parquet")]) == 2
    assert capsys.readouterr().err == (
        "minibroker: run: a .parquet trace needs the parquet extra (pyarrow is not installed): "
        "pip install 'minibroker[parquet]'\n"
    )
