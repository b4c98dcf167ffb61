"""The command line: help, the timer demo, and one-line errors."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from minibroker import cli
from minibroker.cli import WHEEL_SIZES, main
from minibroker.demo import run_demo


def test_demo_fires_350_and_450_at_exact_virtual_times():
    console = Console(record=True, width=120)
    assert run_demo([350, 450], console=console) == [(350, 350), (450, 450)]
    text = console.export_text()
    assert "task 350 ms: level 2 slot 17, bucket expires at 340 ms (350 ms left)" in text
    assert "task 450 ms: level 3 slot 1, bucket expires at 400 ms (450 ms left)" in text
    assert "task 450 ms: level 2 slot 2, bucket expires at 440 ms (50 ms left)" in text
    assert "task 450 ms: level 1 slot 10, bucket expires at 450 ms (10 ms left)" in text
    assert "t=450 ms  task 450 ms fired" in text


def test_main_runs_the_demo(capsys):
    assert main(["demo-timer", "--task", "25"]) == 0
    assert "t=25 ms  task 25 ms fired" in capsys.readouterr().out


def test_help_via_python_dash_m():
    out = subprocess.run([sys.executable, "-m", "minibroker", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    assert "demo-timer" in out.stdout


def test_bad_argument_is_one_line_and_exit_2():
    out = subprocess.run(
        [sys.executable, "-m", "minibroker", "demo-timer", "--task", "soon"], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "minibroker demo-timer: error: argument --task: expected a whole number of ms, got 'soon' "
        "(see minibroker demo-timer --help)"
    ]
    assert "Traceback" not in out.stderr


def test_zero_tick_is_refused(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["demo-timer", "--tick", "0"])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "minibroker demo-timer: error: argument --tick: expected a whole number of ms 1..3600000, got 0 "
        "(see minibroker demo-timer --help)\n"
    )


@pytest.mark.parametrize("size", ["1", "0", "1025"])
def test_a_wheel_of_one_bucket_is_refused(capsys, size):
    # a one-bucket level never widens: every overflow level as fine as the last, endlessly (1.6 GB in 20 s)
    with pytest.raises(SystemExit) as exited:
        main(["demo-timer", "--wheel-size", size])
    assert exited.value.code == 2
    assert capsys.readouterr().err == (
        "minibroker demo-timer: error: argument --wheel-size: "
        f"expected a number of buckets 2..1024, got {size} (see minibroker demo-timer --help)\n"
    )


def test_the_demo_bounds_are_the_loaders():
    from minibroker.scenario.loader.limits import SETTING_LIMITS

    assert SETTING_LIMITS["minibroker.timer.wheel.size"] == WHEEL_SIZES


def test_ctrl_c_while_the_commands_are_imported_is_one_line(monkeypatch, capsys):
    import importlib

    real = importlib.import_module

    def interrupted(name, *args):
        if name == "minibroker.commands":  # the module of `check`
            raise KeyboardInterrupt
        return real(name, *args)

    monkeypatch.setattr(cli.importlib, "import_module", interrupted)
    assert main(["check", "scenarios/acks_all.toml"]) == 130
    assert capsys.readouterr().err == "minibroker: interrupted\n"


def test_a_real_ctrl_c_during_start_up_is_one_line_and_130():
    # the signal arrives while the command modules are imported (made deterministic: the parser's
    # construction sends it, inside code that swallows KeyboardInterrupt as some imports do);
    # entry_point's handler ends the program at once, in one line
    script = (
        "import os, signal, sys, time\n"
        "import minibroker.cli as cli\n"
        "real = cli.build_parser\n"
        "def imports(*args):\n"
        "    try:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        time.sleep(5)\n"
        "    except KeyboardInterrupt:\n"
        "        pass\n"
        "    return real(*args)\n"
        "cli.build_parser = imports\n"
        "sys.argv = ['minibroker', 'check', 'scenarios/acks_all.toml']\n"
        "cli.entry_point()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "minibroker: interrupted\n")


def test_scenario_text_is_printed_as_it_is_without_markup_or_highlighting(monkeypatch):
    import attrs
    from rich.highlighter import ReprHighlighter

    from minibroker.report import render
    from minibroker.scenario import load_scenario, run_scenario

    path = Path(__file__).resolve().parents[1] / "scenarios" / "timing_wheel_cascade.toml"
    result = run_scenario(load_scenario(path))
    scenario = attrs.evolve(result.scenario, name="[/oops]", description="[bold]x[/bold] " + "y" * 100_000)
    result = attrs.evolve(result, scenario=scenario)

    highlight = ReprHighlighter.highlight

    def quadratic(self, text):  # rich's repr highlighter: its regexes take seconds on a long word
        assert "yyyy" not in text.plain, "scenario text went through the repr highlighter"
        highlight(self, text)

    monkeypatch.setattr(ReprHighlighter, "highlight", quadratic)
    console = Console(record=True, width=120)
    render(result, console)  # a '[/oops]' parsed as markup was a MarkupError
    text = console.export_text()
    assert text.startswith("[/oops] — [bold]x[/bold]")
    assert "y" * 100 in text


def test_a_command_line_naming_a_command_imports_only_its_module():
    full = cli.build_parser()
    handlers = full.get_default("handlers")
    assert set(handlers) == {"demo-timer", *cli.COMMAND_HOMES}
    for command, home in cli.COMMAND_HOMES.items():
        assert handlers[command].__module__ == home, command
        assert set(cli.build_parser([command, "x"]).get_default("handlers")) == {
            "demo-timer",
            *(name for name, module in cli.COMMAND_HOMES.items() if module == home),
        }
    script = (
        "import sys; from minibroker.cli import build_parser; build_parser(['analyze', 'x']);"
        "print(sorted(m for m in ('minibroker.scenario', 'trio') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout == "[]\n"


def test_output_into_a_closed_pipe_ends_without_a_traceback():
    # the demo prints from the reaper's task, inside a trio nursery; `minibroker demo-timer | head -1`
    reader, writer = os.pipe()
    os.close(reader)  # the reader has gone before the first line
    done = subprocess.run(
        [sys.executable, "-m", "minibroker", "demo-timer"], stdout=writer, stderr=subprocess.PIPE, text=True
    )
    os.close(writer)
    assert done.returncode == 1
    assert done.stderr == ""


def test_a_whole_ms_argument_is_bounded_like_a_scenario_time():
    """``cliutil`` keeps its own copy of the loader's one-day bound (importing the scenario package
    would slow every command's start); the two stay equal, and the bound is refused in one line."""
    import argparse

    from minibroker import cliutil
    from minibroker.scenario.loader import limits

    assert cliutil.MAX_MS == limits.MAX_MS == 86_400_000
    assert cliutil.whole_ms(str(limits.MAX_MS)) == limits.MAX_MS
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        cliutil.whole_ms(str(limits.MAX_MS + 1))
    assert str(refused.value) == "expected a whole number of ms 0..86400000, got 86400001"
