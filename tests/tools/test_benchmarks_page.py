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


BASELINE = {
    "rev": "HEAD~3",
    "commit": "0123456789abcdef0123456789abcdef01234567",
    "command": "python tools/chaos_bench.py --runs 2 --json",
    "pairs": 3,
    "order": [["baseline", "current"], ["current", "baseline"], ["baseline", "current"]],
    "cpus": 2,
    "load_average_before": [1.5, 1.25, 1.0],
    "load_average_after": [2.0, 1.5, 1.125],
    "figures": {
        "runs_per_cpu_minute": {
            "better": "higher",
            "baseline_total": 600.0,
            "current_total": 750.0,
            "ratio": 1.25,
            "ratio_min": 1.1,
            "ratio_max": 1.4,
            "pairs": [[200.0, 220.0], [200.0, 280.0], [200.0, 250.0]],
        }
    },
    "missing": ["baseline 0123456789ab: cpu_s not compared (not in its --json output)"],
}


def test_run_keeps_a_baseline_section_beside_the_result(tmp_path, monkeypatch):
    tool = _tool()
    monkeypatch.setattr(tool, "RESULTS", tmp_path)
    document = json.dumps({"rows": [{"design": "wheel", "p99": 1}], "baseline": BASELINE})
    record = json.loads(tool.run("rows", ["python", "-c", f"print({document!r})"]).read_text())
    assert record["result"] == [{"design": "wheel", "p99": 1}]  # a list document, unwrapped
    assert record["baseline"] == BASELINE


def test_a_saved_baseline_renders_its_ratios_pair_range_revision_and_load(tmp_path, monkeypatch):
    tool = _tool()
    saved = json.loads((ROOT / "docs" / "benchmarks" / "chaos_bench.json").read_text())
    saved["baseline"] = BASELINE
    (tmp_path / "chaos_bench.json").write_text(json.dumps(saved))
    monkeypatch.setattr(tool, "RESULTS", tmp_path)
    page = tool.render()
    section = page.split("## chaos_bench", 1)[1].split("\n## ", 1)[0]
    assert (
        "This tree ÷ `HEAD~3` (`0123456789ab`), 3 alternating pairs of "
        "`python tools/chaos_bench.py --runs 2 --json`:"
    ) in section
    assert "On 2 CPUs; load average 1.50 / 1.25 / 1.00 before the pairs, 2.00 / 1.50 / 1.12 after." in section
    assert "| `runs_per_cpu_minute` | higher | 1.250 | 1.100 to 1.400 |" in section
    assert "- baseline 0123456789ab: cpu_s not compared (not in its --json output)" in section


def test_spark_floor_renders_its_steps_per_event(tmp_path, monkeypatch):
    tool = _tool()
    result = {
        "events": 20000,
        "files": 1,
        "master": "local[1]",
        "java_options": None,
        "seconds": {"session": 16.0, "read #1": 4.0, "kind only": 0.5},
        "cpus": 2,
        "load_average_before": [1.0, 1.0, 1.0],
        "load_average_after": [1.0, 1.0, 1.0],
    }
    heads, header, rows = tool._spark_floor(result)
    assert heads == [("Spark on local[1]: first read ÷ session start (20,000 events)", "0.25")]
    assert header == ["step", "seconds", "µs per event"]
    assert rows == [["session", "16.0", ""], ["read #1", "4.0", "200.00"], ["kind only", "0.5", "25.00"]]
