"""Public import paths that moved keep working for one release: each warns once, gives the same names."""

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: old package -> its new home
MOVED = {"minibroker.cluster": "minibroker.sim", "minibroker.delay": "minibroker.delayed_messages"}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_warns_once_naming_its_new_home_and_still_works(old, monkeypatch):
    new = MOVED[old]
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"^{old} is deprecated.* from {new}$") as caught:
        shim = importlib.import_module(old)
    assert len([w for w in caught if old in str(w.message)]) == 1
    home = importlib.import_module(new)
    assert shim.__all__ == home.__all__ and len(shim.__all__) >= 13
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(f"from {old} import *", namespace)
        assert importlib.import_module(old) is shim
    assert all(namespace[name] is getattr(home, name) for name in home.__all__)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = shim.nothing


@pytest.mark.parametrize("old", sorted(MOVED))
def test_python_shows_the_warning_once_at_the_importing_line(old):
    code = f"import {old}\nimport {old}\nfrom {old} import *\n"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"<string>:1: DeprecationWarning: {old} is deprecated")
