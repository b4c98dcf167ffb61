"""Delayed messages in scenarios: loading errors name the place; the bundled ones hold exactly."""

from __future__ import annotations

import pytest

from minibroker.scenario import parse_scenario
from minibroker.scenario.loader import ScenarioError

HEAD = """
[scenario]
end_ms = 10000
[[topics]]
name = "orders"
[[clients]]
id = "shop"
type = "producer"
"""
STEP = """
[[steps]]
at = 0
action = "produce"
client = "shop"
topic = "orders"
"""


def load(text):
    return parse_scenario(text, "x.toml")


def test_a_delayed_produce_step_is_read_with_its_design():
    scenario = load(
        HEAD
        + '[delay_service]\n"delay.levels" = ["5s"]\n'
        + STEP
        + "delay_ms = 4000\nid = 'a'\n"
        + '[[expect]]\ndelivered = "a"\nat = 5000\n'
    )
    (step,) = scenario.steps
    assert (step.delay_ms, step.delay_via) == (4000, None)
    assert scenario.delay_service == {"delay.levels": ["5s"]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            HEAD + STEP + "delay_ms = 5000\n",
            "x.toml:15: steps[0].delay_ms: a delayed send needs a [delay_service] or [delay_wheel] section",
        ),
        (
            HEAD.replace("end_ms = 10000", "") + "[delay_wheel]\n" + STEP + "delay_ms = 5000\n",
            "steps[0].delay_ms: a delayed send needs scenario.end_ms past its due time",
        ),
        (
            HEAD + '[delay_service]\n"delay.levels" = ["5s"]\n' + STEP + "delay_ms = 6000\n",
            "steps[0].delay_ms: 6000 is longer than the largest level (5s)",
        ),
        (
            HEAD + "[delay_service]\n[delay_wheel]\n" + STEP + "delay_ms = 6000\n",
            "steps[0].delay_via: expected levels or wheel (the scenario has both designs)",
        ),
        (
            HEAD + "[delay_wheel]\n" + STEP + 'delay_ms = 6000\ndelay_via = "levels"\n',
            "steps[0].delay_via: expected one of wheel, got 'levels'",
        ),
        (
            HEAD + '[delay_service]\n"delay.levels" = ["1m", "5s"]\n',
            "delay_service.delay.levels[1]: levels must increase, '5s' follows '1m'",
        ),
        (HEAD + '[delay_wheel]\n"delay.wheel.tick" = 5\n', "delay_wheel: unknown setting 'delay.wheel.tick'"),
        (
            HEAD + '[delay_wheel]\n"delay.wheel.replicas" = 5\n',
            "delay_wheel.delay.wheel.replicas: 5 is more than the cluster's 3 brokers",
        ),
        (
            HEAD + "[delay_service]\n" + STEP + "delay_ms = 6000\n" + '[[expect]]\ndelivered = "b"\n',
            "expect[0].delivered: expected the id of a produce step with delay_ms: (no produce step with",
        ),
        (
            HEAD + '[delay_service]\n[[expect]]\ndelay_held = "__delay_7s-0"\nat = 5\n',
            "expect[0].delay_held: expected a level partition (__delay_5s-0, ...), got '__delay_7s-0'",
        ),
        (
            HEAD + "[delay_wheel]\n[[expect]]\nwheel = 1\nat = 5\nin_sync = 1\n",
            "expect[0].in_sync: expected true or false, got 1",
        ),
        (
            HEAD + "[[expect]]\nwheel = 1\nat = 5\n",
            "expect[0].wheel: expected a [delay_wheel] section for it",
        ),
    ],
)
def test_bad_delayed_scenarios_fail_with_one_line_naming_the_place(text, message):
    with pytest.raises(ScenarioError) as error:
        load(text)
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_data_dir_keeps_the_wheel_files_and_is_refused_without_a_wheel(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]

    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "minibroker", "run", *args, "--quiet"],
            capture_output=True,
            text=True,
            cwd=root,
            timeout=300,
        )

    kept = tmp_path / "wheel"
    done = cli("scenarios/delay_wheel_vs_levels.toml", "--data-dir", str(kept))
    assert done.returncode == 0, done.stderr
    # every copy's directory is there; the fired slots are gone, the pointer at the end (98 s)
    assert sorted(p.name for p in kept.iterdir()) == ["broker-0", "broker-1", "broker-2"]
    assert sorted(p.name for p in (kept / "broker-1" / "wheel").iterdir()) == ["pointer"]
    assert (kept / "broker-1" / "wheel" / "pointer").read_text() == "98"
    refused = cli("scenarios/delay_levels_rounding.toml", "--data-dir", str(kept))
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "minibroker: --data-dir: the scenario has no [delay_wheel] section (no files to keep)"
    )


def test_a_delayed_scenario_traces_the_same_events_twice():
    from pathlib import Path

    from minibroker.scenario import load_scenario, run_scenario
    from minibroker.trace import ListSink

    path = Path(__file__).resolve().parents[2] / "scenarios" / "delay_wheel_vs_levels.toml"
    traces = []
    for _ in range(2):
        sink = ListSink()
        run_scenario(load_scenario(path), sinks=[sink])
        traces.append([dict(event) for event in sink])
    assert traces[0] == traces[1]
    kinds = {event["kind"] for event in traces[0]}
    assert {"delay.wheel.fire", "delay.delivered", "delay.commit", "delay.held"} <= kinds


def test_a_run_with_delayed_messages_and_retries_starts_the_delay_service_before_the_retrying_consumer():
    """The features start in registration order: the delay service's first request (reading its
    committed offsets) is traced before the retrying consumer's first fetch, at the same ms."""
    from minibroker.scenario import parse_scenario, run_scenario
    from minibroker.trace import ListSink

    text = """
[scenario]
end_ms = 100

[cluster]
brokers = 1

[[topics]]
name = "orders"

[retry]
topic = "orders"
attempts = 2
delay_ms = 50

[delay_service]
"delay.levels" = ["5s"]
"""
    sink = ListSink()
    run_scenario(parse_scenario(text), sinks=[sink])
    fetches = [(e["time_ms"], e["op"]) for e in sink.of_kind("client.fetch")]
    first_delay = next(i for i, (_, op) in enumerate(fetches) if op.startswith("delay-service-0-"))
    first_retry = next(i for i, (_, op) in enumerate(fetches) if op.startswith("retry-"))
    assert fetches[first_delay] == (0, "delay-service-0-offsets#1")
    assert fetches[first_retry][0] == 0
    assert first_delay < first_retry
