"""tools/benchmarks_page.py: docs/benchmarks.md is exactly what the saved tool results render to."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tool():
    spec = importlib.util.spec_from_file_location("benchmarks_page", ROOT / "tools" / "benchmarks_page.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_page_is_what_the_saved_results_render_to():
    assert (ROOT / "docs" / "benchmarks.md").read_text() == _tool().render()


def test_every_saved_result_records_its_command_cores_and_load_averages():
    saved = sorted((ROOT / "docs" / "benchmarks").glob("*.json"))
    assert saved
    for path in saved:
        record = json.loads(path.read_text())
        assert record["command"].startswith("python tools/"), path.name
        assert "--json" in record["command"].split(), path.name
        assert record["cores"] >= 1 and len(record["load_before"]) == len(record["load_after"]) == 3


def test_run_saves_a_tool_output_with_the_machine_facts(tmp_path, monkeypatch):
    tool = _tool()
    monkeypatch.setattr(tool, "RESULTS", tmp_path)
    path = tool.run("echo", ["python", "-c", "print('{\"ratio\": 0.5}')"])
    record = json.loads(path.read_text())
    assert path == tmp_path / "echo.json"
    assert record["result"] == {"ratio": 0.5}
    assert record["command"] == "python -c 'print('\"'\"'{\"ratio\": 0.5}'\"'\"')'"
    assert record["cores"] >= 1 and len(record["load_before"]) == 3


def test_run_refuses_a_command_that_prints_no_json(tmp_path, monkeypatch):
    tool = _tool()
    monkeypatch.setattr(tool, "RESULTS", tmp_path)
    try:
        tool.run("bad", ["python", "-c", "print('no')"])
    except SystemExit as exit_:
        assert "printed no JSON document" in str(exit_.code)
    else:
        raise AssertionError("run accepted a command without JSON")
    assert not list(tmp_path.iterdir())


def test_the_readme_headline_ratios_are_figures_of_the_page():
    readme = (ROOT / "README.md").read_text()
    table = readme.split("## Headline figures", 1)[1].split("\n## ", 1)[0]
    ratios = [
        line.rsplit("|", 2)[1].strip()
        for line in table.splitlines()
        if line.startswith("| ") and "ratio" not in line
    ]
    page = (
        (ROOT / "docs" / "benchmarks.md").read_text().split("## Headline figures", 1)[1].split("\n## ", 1)[0]
    )
    page_ratios = {line.split("|")[2].strip() for line in page.splitlines() if line.startswith("| ")}
    assert ratios and set(ratios) <= page_ratios
