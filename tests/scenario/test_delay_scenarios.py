"""Delayed messages in scenarios: loading errors name the place; the bundled ones hold exactly."""

from __future__ import annotations

import pytest

from minibroker.scenario import parse_scenario
from minibroker.scenario.load import ScenarioError

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
    scenario = load(HEAD + '[delay_service]\n"delay.levels" = ["5s"]\n' + STEP + "delay_ms = 4000\nid = 'a'\n"
                    + '[[expect]]\ndelivered = "a"\nat = 5000\n')
    (step,) = scenario.steps
    assert (step.delay_ms, step.delay_via) == (4000, None)
    assert scenario.delay_service == {"delay.levels": ["5s"]}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEAD + STEP + "delay_ms = 5000\n",
         "x.toml:15: steps[0].delay_ms: a delayed send needs a [delay_service] or [delay_wheel] section"),
        (HEAD.replace("end_ms = 10000", "") + '[delay_wheel]\n' + STEP + "delay_ms = 5000\n",
         "steps[0].delay_ms: a delayed send needs scenario.end_ms past its due time"),
        (HEAD + '[delay_service]\n"delay.levels" = ["5s"]\n' + STEP + "delay_ms = 6000\n",
         "steps[0].delay_ms: 6000 is longer than the largest level (5s)"),
        (HEAD + '[delay_service]\n[delay_wheel]\n' + STEP + "delay_ms = 6000\n",
         "steps[0].delay_via: expected levels or wheel (the scenario has both designs)"),
        (HEAD + '[delay_wheel]\n' + STEP + 'delay_ms = 6000\ndelay_via = "levels"\n',
         "steps[0].delay_via: expected one of wheel, got 'levels'"),
        (HEAD + '[delay_service]\n"delay.levels" = ["1m", "5s"]\n',
         "delay_service.delay.levels[1]: levels must increase, '5s' follows '1m'"),
        (HEAD + '[delay_wheel]\n"delay.wheel.tick" = 5\n',
         "delay_wheel: unknown setting 'delay.wheel.tick'"),
        (HEAD + '[delay_wheel]\n"delay.wheel.replicas" = 5\n',
         "delay_wheel.delay.wheel.replicas: 5 is more than the cluster's 3 brokers"),
        (HEAD + '[delay_service]\n' + STEP + "delay_ms = 6000\n" + '[[expect]]\ndelivered = "b"\n',
         "expect[0].delivered: expected the id of a delayed produce step: (no delayed produce step has an"),
        (HEAD + '[delay_service]\n[[expect]]\ndelay_held = "__delay_7s-0"\nat = 5\n',
         "expect[0].delay_held: expected a level partition (__delay_5s-0, ...), got '__delay_7s-0'"),
        (HEAD + '[delay_wheel]\n[[expect]]\nwheel = 1\nat = 5\nin_sync = 1\n',
         "expect[0].in_sync: expected true or false, got 1"),
        (HEAD + '[[expect]]\nwheel = 1\nat = 5\n',
         "expect[0].wheel: expected a [delay_wheel] section for it"),
    ],
)
def test_bad_delayed_scenarios_fail_with_one_line_naming_the_place(text, message):
    with pytest.raises(ScenarioError) as error:
        load(text)
    assert message in str(error.value)
    assert "\n" not in str(error.value)
