"""Inputs that could hang a run, exhaust memory or print a traceback: each is refused before the run.

Every case names the exact message; ``check`` refuses what ``run`` would (both load the file the
same way, and both exit 2 with the message).
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from minibroker.cli import main
from minibroker.scenario import ScenarioError, parse_scenario
from minibroker.scenario.loader.limits import MAX_PROBLEMS
from tests.scenario.test_load_errors import BASE  # the producer says acks = "all" on line 12

CONFIG = 'brokers = 3\nconfig = { "%s" = %s }'
LOAD = '\n[[steps]]\nat = 0\naction = "load"\nclient = "p"\ntopic = "t"\nrate = %d\nduration_ms = %d\n'
TOO_BIG = (
    "x.toml: the run is too big: a projected {total} events, expected at most 1,000,000 ({background} "
    "background wake-ups over {span} ms of virtual time, {requests} for requests); shorten the run, lower "
    "load rates or raise minibroker.reaper.poll.ms / replica.fetch.wait.max.ms"
)

GROUP = BASE.replace('assign = ["t-0"]', 'subscribe = ["t"]\nconfig = { "group.id" = "g" }')
INTERNAL = (
    "x.toml: {total} partition replicas in all, internal topics included (the largest: {largest}); "
    "expected at most 100,000"
)

CASES = {
    "wheel of one bucket": (
        BASE.replace("brokers = 3", CONFIG % ("minibroker.timer.wheel.size", 1)),
        "x.toml:3: cluster.config.minibroker.timer.wheel.size: expected a number from 2 to 1024, got 1",
    ),
    "wheel too big": (
        BASE.replace("brokers = 3", CONFIG % ("minibroker.timer.wheel.size", 5000)),
        "x.toml:3: cluster.config.minibroker.timer.wheel.size: expected a number from 2 to 1024, got 5000",
    ),
    "tick of years": (
        BASE.replace("brokers = 3", CONFIG % ("minibroker.timer.tick.ms", 10**11)),
        "x.toml:3: cluster.config.minibroker.timer.tick.ms: expected a number at most 86400000, "
        "got 100000000000",
    ),
    "tiny segments": (
        BASE.replace("brokers = 3", CONFIG % ("log.segment.bytes", 1)),
        "x.toml:3: cluster.config.log.segment.bytes: expected a number >= 14, got 1",
    ),
    "a billion brokers": (
        BASE.replace("brokers = 3", "brokers = 1000000000"),
        "x.toml:2: cluster.brokers: expected a whole number from 1 to 1000, got 1000000000",
    ),
    "a million partitions": (
        BASE.replace("partitions = 2", "partitions = 1000000"),
        "x.toml:6: topics[0].partitions: expected a whole number from 1 to 100000, got 1000000",
    ),
    "too many replicas in all": (
        BASE.replace("partitions = 2", "partitions = 40000"),
        "x.toml: topics: 120,000 partition replicas in all (partitions times replication_factor); "
        "expected at most 100,000",
    ),
    "an offsets topic of 2,000,000 partitions": (
        BASE.replace("brokers = 3", CONFIG % ("offsets.topic.num.partitions", 2_000_000)),
        "x.toml:3: cluster.config.offsets.topic.num.partitions: expected a number from 1 to 100000, "
        "got 2000000",
    ),
    "an offsets topic past the replicas in all": (
        GROUP.replace("brokers = 3", CONFIG % ("offsets.topic.num.partitions", 40_000)),
        INTERNAL.format(
            total="120,006",
            largest="__consumer_offsets 40,000 x 3 (offsets.topic.num.partitions), t 2 x 3 (topics)",
        ),
    ),
    "delay levels of 100,000 partitions each": (
        BASE + '\n[delay_service]\n"delay.topic.partitions" = 100000\n',
        INTERNAL.format(
            total="3,600,009",
            largest="__delay_5s 100,000 x 3 (delay.topic.partitions), __delay_10s 100,000 x 3 "
            "(delay.topic.partitions), __delay_30s 100,000 x 3 (delay.topic.partitions)",
        ),
    ),
    "fewer partition replicas allowed than the topics hold": (
        BASE.replace("brokers = 3", CONFIG % ("minibroker.partition.replicas.max", 5)),
        INTERNAL.format(total="6", largest="t 2 x 3 (topics)").replace(
            "100,000", "5 (minibroker.partition.replicas.max)"
        ),
    ),
    "delay levels of 2,000,000 partitions": (
        BASE + '\n[delay_service]\n"delay.topic.partitions" = 2000000\n',
        "x.toml:26: delay_service.delay.topic.partitions: expected a number from 1 to 100000, got 2000000",
    ),
    "a wheel whose data_dir is a file": (
        BASE + f'\n[delay_wheel]\ndata_dir = "{Path(__file__)}"\n',
        f"x.toml:27: delay_wheel.data_dir: '{Path(__file__)}' is a file; expected a directory",
    ),
    "a wheel whose data_dir lies under a file": (
        BASE + f'\n[delay_wheel]\ndata_dir = "{Path(__file__)}/wheel"\n',
        f"x.toml:27: delay_wheel.data_dir: '{Path(__file__)}' is a file on the way to "
        f"'{Path(__file__)}/wheel'; expected a directory",
    ),
    "a billion requests per second": (
        BASE + LOAD % (10**9, 1000),
        TOO_BIG.format(total="3,000,000,739", background="736", span="32,000", requests="3,000,000,003"),
    ),
    "a day of virtual time": (
        "[scenario]\nend_ms = 80000000\n" + BASE,
        TOO_BIG.format(total="1,840,003", background="1,840,000", span="80,000,000", requests="3"),
    ),
    "end_ms of 10^9": (
        "[scenario]\nend_ms = 1000000000\n" + BASE,
        "x.toml:2: scenario.end_ms: expected a whole number of ms from 0 to 86400000, got 1000000000",
    ),
    "at of 2^64": (
        BASE.replace("at = 10", "at = 18446744073709551616"),
        "x.toml:20: steps[0].at: expected a whole number that fits in 64 bits, got 18446744073709551616",
    ),
    "bytes of 10^30": (
        BASE + "bytes = 1000000000000000000000000000000\n",
        "x.toml:25: steps[0].bytes: expected a whole number that fits in 64 bits, "
        "got 1000000000000000000000000000000",
    ),
    "a batch of 10^15 records": (
        BASE + "records = 1000000000000000\n",
        "x.toml:25: steps[0].records: expected a whole number from 1 to 2147483647, got 1000000000000000",
    ),
    "an integer of 5000 digits": (
        BASE + "bytes = " + "9" * 5000 + "\n",
        "x.toml:25: expected a whole number that fits in 64 bits, got one of thousands of digits",
    ),
    "fetch by a consumer with nothing assigned": (
        BASE.replace('assign = ["t-0"]', "assign = []")
        + '\n[[steps]]\nat = 20\naction = "fetch"\nclient = "c"\n',
        "x.toml:29: steps[1].client: consumer 'c' has no assigned partitions; "
        "expected assign = [...] or subscribe = [...] on it",
    ),
    "inline tables 1000 deep": (
        BASE + "x = " + "{a = " * 1000 + "1" + "}" * 1000 + "\n",
        "x.toml:25: tables and arrays nested more than 32 deep; expected a flatter document",
    ),
    "at_least above at_most": (
        BASE + '\n[[expect]]\ncount = "requests"\nat_least = 5\nat_most = 2\n',
        "x.toml:29: expect[0].at_most: expected at_most >= at_least (5), got 2",
    ),
    "unknown event kind": (
        BASE + '\n[[expect]]\nevent = { kind = "timer.fired" }\n',
        "x.toml:27: expect[0].event.kind: unknown event kind 'timer.fired'; expected one of: append, "
        "append.duplicate, append.rejected, client.delete_records,",
    ),
    "unknown event field": (
        BASE + '\n[[expect]]\nevent = { kind = "timer.fire", levle = 2 }\n',
        "x.toml:27: expect[0].event.levle: timer.fire events have no field 'levle'; "
        "expected one of: broker, expiration, kind, op, seq, time_ms",
    ),
    "unknown event kind in a count": (
        BASE + '\n[[expect]]\ncount = "events"\nevent = { kind = "nope" }\nequals = 1\n',
        "x.toml:28: expect[0].event.kind: unknown event kind 'nope'; expected one of: append,",
    ),
    "an empty scenario": (
        '[scenario]\nname = "nothing"\n',
        "x.toml: an empty scenario; expected [cluster], [[topics]], [[clients]] and [[steps]]",
    ),
    "an empty file": (
        "",
        "x.toml: an empty scenario; expected [cluster], [[topics]], [[clients]] and [[steps]]",
    ),
    "a 1 MB topic name, echoed": (
        BASE.replace('name = "t"', 'name = "' + "t" * 1_000_000 + '"')
        + '\n[[steps]]\nat = 1\naction = "produce"\nclient = "p"\ntopic = "u"\n',
        "x.toml:17: clients[1].assign[0]: unknown topic 't'; "
        "expected one of: 'tttttttttttttttttttttttttttttttttttt... (1,000,000 characters)",
    ),
    "a 10 MB document": (
        BASE.replace('name = "t"', 'name = "' + "t" * 10_000_000 + '"'),
        "x.toml: the document is larger than 2,097,152 characters; expected a scenario",
    ),
    "a 20,000-item list, echoed": (
        BASE
        + '\n[[steps]]\nat = 1\naction = "load"\nclient = "p"\ntopic = "t"\nrate = 1\nduration_ms = 1\n'
        + "partitions = ["
        + ", ".join(["7"] * 20000)
        + "]\n",
        "x.toml:33: steps[1].partitions: expected a list of partitions of 't' (0..1), "
        "got [7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, ... (20,000 items)",
    ),
    "a syntax error": (
        BASE + "\n[[steps]\n",
        "x.toml:26: malformed TOML: Expected ']]' at the end of an array declaration (column 8)",
    ),
}


def problems_of(text: str) -> list[str]:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(text, "x.toml")
    assert str(raised.value) == "\n".join(raised.value.problems)
    return raised.value.problems


@pytest.mark.parametrize(("text", "message"), CASES.values(), ids=CASES.keys())
def test_refused_before_the_run_in_one_line(text, message):
    problems = problems_of(text)
    assert problems[0].startswith(message)
    assert all(len(line) < 1100 for line in problems)


@pytest.mark.parametrize(
    "name",
    [
        "wheel of one bucket",
        "a billion brokers",
        "end_ms of 10^9",
        "inline tables 1000 deep",
        "an offsets topic past the replicas in all",
        "delay levels of 100,000 partitions each",
        "a wheel whose data_dir is a file",
    ],
)
def test_check_refuses_what_run_refuses(tmp_path, name):
    text, message = CASES[name]
    path = tmp_path / "x.toml"
    path.write_text(text, encoding="utf-8")
    for command in (["check", str(path)], ["run", "--quiet", str(path)]):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            assert main(command) == 2
        assert err.getvalue() == f"minibroker: {message.replace('x.toml', str(path))}\n"


def test_every_problem_is_reported_one_line_each():
    text = BASE + '\n[[steps]]\nat = -1\naction = "pause"\nbroker = 0\n'
    text += '\n[[steps]]\nat = 5\naction = "pause"\nbroker = 9\n'
    assert problems_of(text) == [
        "x.toml:27: steps[1].at: expected a whole number of ms >= 0, got -1",
        "x.toml:34: steps[2].broker: expected a broker id 0..2, got 9",
    ]


def test_problems_are_capped_and_counted():
    text = BASE + "".join(f'\n[[steps]]\nat = -{i}\naction = "pause"\nbroker = 0\n' for i in range(1, 26))
    problems = problems_of(text)
    assert len(problems) == MAX_PROBLEMS + 1
    assert problems[0] == "x.toml:27: steps[1].at: expected a whole number of ms >= 0, got -1"
    assert problems[-1] == "... and 5 more problems"


def test_a_section_referring_to_a_broken_one_is_not_checked():
    # the topic is broken, so clients and steps that name it would only echo it
    problems = problems_of(BASE.replace("replication_factor = 3", "replication_factor = 4"))
    assert problems == [
        "x.toml:7: topics[0].replication_factor: expected at most 3 (the number of brokers), got 4"
    ]


def test_a_byte_order_mark_is_accepted(tmp_path):
    from minibroker.scenario import load_scenario

    path = tmp_path / "bom.toml"
    path.write_bytes(b"\xef\xbb\xbf" + BASE.encode())
    assert [c.id for c in load_scenario(path).clients] == ["p", "c"]


def test_invalid_utf8_names_the_line_and_column(tmp_path):
    from minibroker.scenario import load_scenario

    path = tmp_path / "bad.toml"
    path.write_bytes(BASE.encode().replace(b'name = "t"', b'name = "t\xff"'))
    with pytest.raises(ScenarioError) as raised:
        load_scenario(path)
    assert str(raised.value) == (f"{path}:5: not UTF-8: byte 0xff at column 10; expected a UTF-8 text file")


def test_the_timer_refuses_a_wheel_of_one_bucket():
    from minibroker.timer import SystemTimer

    with pytest.raises(ValueError, match="wheel_size >= 2, got 1 and 1"):
        SystemTimer(tick_ms=1, wheel_size=1)


def test_the_model_keeps_settings_within_limits_however_it_is_made():
    import attrs

    from minibroker.broker.config import ConfigError
    from minibroker.scenario.model import ClusterSpec

    with pytest.raises(
        ConfigError, match=r"^config.minibroker.timer.wheel.size: expected a number from 2 to 1024"
    ):
        attrs.evolve(ClusterSpec(), config={"minibroker.timer.wheel.size": 1})
    with pytest.raises(
        ConfigError, match=r"^config.replica.lag.time.max.ms: expected a number at most 86400000"
    ):
        ClusterSpec(broker_overrides={1: {"replica.lag.time.max.ms": 10**12}})


def test_a_sweep_cannot_override_a_setting_past_its_limit(tmp_path):
    from minibroker.analytics.sweepfile import load_sweep

    path = tmp_path / "sweep.toml"
    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "acks_all.toml"
    path.write_text(
        f'[sweep]\nscenario = "{scenario}"\n\n'
        '[[axes]]\nconfig = "minibroker.timer.wheel.size"\nvalues = [20, 1]\n'
    )
    with pytest.raises(ScenarioError) as raised:
        load_sweep(path)
    assert str(raised.value) == (
        f"{path}:6: axes[0].values[1]: expected a number from 2 to 1024, got 1 (minibroker.timer.wheel.size)"
    )


def test_thousands_of_problems_are_counted_in_linear_time():
    import time

    text = BASE + "".join(f'\n[[steps]]\nat = -{i}\naction = "pause"\nbroker = 0\n' for i in range(1, 5001))
    started = time.monotonic()
    problems = problems_of(text)
    # a hang guard, not a speed figure: finding each step's line by rescanning the file took minutes
    assert time.monotonic() - started < 30
    assert problems[-1] == "... and 4,980 more problems"


def test_internal_topics_count_only_when_the_run_creates_them():
    from minibroker.scenario.loader.budget import planned_topics

    bare = parse_scenario(BASE, "x.toml")
    assert [t.name for t in planned_topics(bare)] == ["t"]
    assert [t.name for t in planned_topics(bare, serving=True)] == ["t", "__consumer_offsets"]
    grouped = parse_scenario(GROUP, "x.toml")
    assert [(t.name, t.replicas) for t in planned_topics(grouped)] == [("t", 6), ("__consumer_offsets", 150)]
    wheel = parse_scenario(BASE + '\n[delay_wheel]\n"delay.wheel.replicas" = 2\n', "x.toml")
    assert [(t.name, t.replicas) for t in planned_topics(wheel)] == [
        ("t", 6),
        ("__delay_wheel", 2),
        ("__delay_offsets", 2),
    ]


def test_run_data_dir_naming_a_file_is_one_line(tmp_path):
    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "delay_wheel_vs_levels.toml"
    afile = tmp_path / "afile"
    afile.write_text("")
    for data_dir, message in (
        (afile, f"'{afile}' is a file; expected a directory"),
        (afile / "wheel", f"'{afile}' is a file on the way to '{afile / 'wheel'}'; expected a directory"),
    ):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            assert main(["run", "--quiet", "--data-dir", str(data_dir), str(scenario)]) == 2
        assert err.getvalue() == f"minibroker: --data-dir: {message}\n"
    made = tmp_path / "new" / "wheel"
    from minibroker.scenario.loader.limits import directory_problem

    assert directory_problem(str(made)) is None
    assert not (tmp_path / "new").exists()  # the trial leaves nothing behind
