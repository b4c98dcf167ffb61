"""The hostile-input corpus for the newer parts: groups, delayed messages, retries, chaos-written and
sweep files, and the flags of the commands that run them.

Each named case is refused by ``check`` and by ``run`` with the same one line (in-process: the loader
is what is tested); the seeded mutations of chaos-shrunk scenarios and of sweep files are checked or
refused in bounded lines. The cases whose old failure was a hang or a runaway go through the real
program once, under a memory limit, for the exit status end to end.
"""

from __future__ import annotations

import contextlib
import io
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker.cli import main
from minibroker.scenario import ScenarioError
from minibroker.scenario.loader.limits import MAX_PROBLEMS
from tests.scenario.corpus import corpus
from tests.scenario.test_load_errors import BASE

ROOT = Path(__file__).resolve().parents[2]
SEED = 20_261_128
GROUP = BASE.replace('assign = ["t-0"]', 'subscribe = ["t"]\nconfig = { "group.id" = "g" }')
WHEEL_END = BASE.replace("[cluster]", "[scenario]\nend_ms = 5000\n\n[cluster]")


def _cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's own errors
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


#: name -> (file text, the one line check and run print, after "minibroker: PATH")
SECTIONS = {
    "groups: an offsets topic of 2,000,000 partitions": (
        GROUP.replace("brokers = 3", 'brokers = 3\nconfig = { "offsets.topic.num.partitions" = 2000000 }'),
        ":3: cluster.config.offsets.topic.num.partitions: expected a number from 1 to 100000, got 2000000",
    ),
    "groups: an offsets topic replicated 5000 times": (
        GROUP.replace("brokers = 3", 'brokers = 3\nconfig = { "offsets.topic.replication.factor" = 5000 }'),
        ":3: cluster.config.offsets.topic.replication.factor: expected a number from 1 to 1000, got 5000",
    ),
    "delay levels: 100,000 partitions each": (
        BASE + '\n[delay_service]\n"delay.topic.partitions" = 100000\n',
        ": 3,600,009 partition replicas in all, internal topics included",
    ),
    "delay levels: a thousand levels of 100 partitions": (
        BASE
        + '\n[delay_service]\n"delay.topic.partitions" = 100\n"delay.levels" = ['
        + ", ".join(f'"{n}s"' for n in range(1, 1001))
        + "]\n",
        ": 300,009 partition replicas in all, internal topics included",
    ),
    "delay wheel: data_dir is a file": (
        WHEEL_END + f'\n[delay_wheel]\ndata_dir = "{Path(__file__)}"\n',
        f":30: delay_wheel.data_dir: '{Path(__file__)}' is a file; expected a directory",
    ),
    "retry: a million attempts": (
        WHEEL_END + '\n[retry]\ntopic = "t"\nattempts = 1000000\n',
        ":31: retry.attempts: expected a whole number from 1 to 100, got 1000000",
    ),
    "retry: topics past the replicas in all": (
        WHEEL_END.replace("partitions = 2", "partitions = 1000") + '\n[retry]\ntopic = "t"\nattempts = 100\n',
        ": 303,000 partition replicas in all, internal topics included (the largest: t 1,000 x 3",
    ),
}


@pytest.mark.parametrize("name", SECTIONS)
def test_check_and_run_refuse_each_section_case_in_the_same_line(tmp_path, name):
    text, line = SECTIONS[name]
    path = tmp_path / "x.toml"
    path.write_text(text, encoding="utf-8")
    outcomes = [_cli([*command, str(path)]) for command in (["check"], ["run", "--quiet"])]
    for code, _, err in outcomes:
        assert code == 2 and len(err.splitlines()) == 1, err
        assert err.startswith(f"minibroker: {path}{line}"), err
    assert outcomes[0][2] == outcomes[1][2]


FLAGS = {
    "chaos --seed past 64 bits": (
        ["chaos", "--seed", "1180591620717411303424", "--runs", "1"],
        "minibroker chaos: error: argument --seed: expected a seed 0..18446744073709551615, "
        "got 1180591620717411303424",
    ),
    "run --seed past 64 bits": (
        ["run", "acks_all", "--seed", str(2**64)],
        "minibroker run: error: argument --seed: expected a seed 0..18446744073709551615",
    ),
    "run --speed of nothing": (
        ["run", "acks_all", "--speed", "1e-300"],
        "minibroker run: error: argument --speed",
    ),
    "snapshot --width of a hundred million": (
        ["snapshot", "acks_all", "--at", "5", "--width", "100000000"],
        "minibroker snapshot: error: argument --width: expected a width in columns 0..1000",
    ),
    "snapshot --at past a day": (
        ["snapshot", "acks_all", "--at", str(10**20)],
        "minibroker snapshot: error: argument --at: expected a whole number of ms 0..86400000",
    ),
    "analyze --bucket-ms past a day": (
        ["analyze", "x.jsonl", "--out", "o", "--bucket-ms", str(10**30)],
        "minibroker analyze: error: argument --bucket-ms: expected a whole number of ms 1..86400000",
    ),
    "serve --brokers 100000": (
        ["serve", "--brokers", "100000", "--duration", "2"],
        "minibroker serve: error: argument --brokers: expected a number of brokers 1..1000, got 100000",
    ),
    "run --data-dir a file": (
        ["run", "delay_wheel_vs_levels", "--data-dir", __file__],
        f"minibroker: --data-dir: '{__file__}' is a file; expected a directory",
    ),
}


@pytest.mark.parametrize("name", FLAGS)
def test_numeric_and_path_flags_are_one_line(name):
    argv, line = FLAGS[name]
    code, _, err = _cli(argv)
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith(line), err


def test_a_sweep_variant_past_the_budget_is_refused_before_spark(tmp_path):
    base = tmp_path / "base.toml"
    base.write_text(GROUP, encoding="utf-8")
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        '[sweep]\nscenario = "base.toml"\n\n[[axes]]\nconfig = "offsets.topic.num.partitions"\n'
        "values = [1, 40000]\n",
        encoding="utf-8",
    )
    code, _, err = _cli(["sweep", str(sweep), "--out", str(tmp_path / "out")])
    assert (code, err) == (
        2,
        f"minibroker: sweep: {sweep}: 120,006 partition replicas in all, internal topics included (the "
        "largest: __consumer_offsets 40,000 x 3 (offsets.topic.num.partitions), t 2 x 3 (topics)); "
        "expected at most 100,000 (variant 1: offsets.topic.num.partitions = 40000)\n",
    )


CHAOS_WRITTEN = sorted((ROOT / "scenarios" / "regressions").glob("*.toml"))
SWEEPS = sorted((ROOT / "scenarios" / "sweeps").glob("*.toml"))


@pytest.mark.parametrize(("library", "count"), [(CHAOS_WRITTEN, 60), (SWEEPS, 40)], ids=["shrunk", "sweeps"])
def test_mutated_chaos_and_sweep_files_are_loaded_or_refused_in_bounded_lines(tmp_path, library, count):
    from minibroker.analytics.sweepfile import load_sweep
    from minibroker.scenario import load_scenario

    load = load_sweep if library is SWEEPS else load_scenario
    folder = tmp_path / "sweeps"  # a mutated sweep names its base scenario as ../NAME.toml
    folder.mkdir()
    for scenario in (ROOT / "scenarios").glob("*.toml"):
        (tmp_path / scenario.name).write_bytes(scenario.read_bytes())
    refused = 0
    for name, data in corpus(SEED, count, library):
        path = folder / f"{name}.toml"
        path.write_bytes(data)
        try:
            load(path)
        except ScenarioError as error:
            refused += 1
            lines = str(error).splitlines()
            assert 1 <= len(lines) <= MAX_PROBLEMS + 1, name
            assert all(line.startswith((str(path), "... and ")) for line in lines), lines
    assert refused > count // 3


def _limit_memory() -> None:  # 2 GiB of address space: enough for the program, not for a runaway
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["serve", "--topic", "t:1000000:3", "--port", "0"], "minibroker: serve: --topic 't:1000000:3'"),
        (
            ["serve", "--config", "offsets.topic.num.partitions=40000", "--port", "0", "--duration", "2"],
            "minibroker: serve: 120,000 partition replicas in all",
        ),
    ],
    ids=["a million partitions", "internal topics past the budget"],
)
def test_serve_past_the_budget_ends_at_once_through_the_real_program(argv, line):
    done = subprocess.run(
        [sys.executable, "-m", "minibroker", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_memory,
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(line), done.stderr
