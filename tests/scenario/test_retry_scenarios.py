"""Retries in scenarios: loading errors name the place in one line; runs are exact and deterministic."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from minibroker.scenario import load_scenario, parse_scenario, run_scenario
from minibroker.scenario.loader import ScenarioError

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
HEAD = """[scenario]
end_ms = 1000
[[topics]]
name = "orders"
partitions = 2
"""
RETRY = '[retry]\ntopic = "orders"\n'


def load(text):
    return parse_scenario(HEAD + text, "x.toml")


def test_the_retry_section_adds_its_topics_with_the_source_partitions():
    scenario = load(RETRY + "attempts = 3\n")
    assert [(t.name, t.partitions) for t in scenario.topics] == [
        ("orders", 2),
        ("orders-retry-1", 2),
        ("orders-retry-2", 2),
        ("orders-dlt", 2),
    ]
    blocking = load(RETRY + "blocking = true\n")
    assert [t.name for t in blocking.topics] == ["orders", "orders-dlt"]  # no retry topic in place


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[retry]\ntopic = "order"\n',
            "x.toml:7: retry.topic: unknown topic 'order'; expected one of: orders",
        ),
        ("[retry]\n", "x.toml:6: retry: missing key 'topic'"),
        (RETRY + "attempts = 0\n", "x.toml:8: retry.attempts: expected a whole number >= 1, got 0"),
        (RETRY + "attempts = 101\n", "retry.attempts: expected a whole number from 1 to 100, got 101"),
        (RETRY + 'backoff = "linear"\n', "retry.backoff: expected one of fixed, exponential, got 'linear'"),
        (RETRY + "multiplier = 0.5\n", "retry.multiplier: expected a number from 1 to 1000, got 0.5"),
        (RETRY + "delay_ms = -1\n", "retry.delay_ms: expected a whole number of ms >= 0, got -1"),
        (
            RETRY + "delay_ms = 500\nmax_delay_ms = 100\n",
            "x.toml:9: retry.max_delay_ms: expected at least delay_ms (500), got 100",
        ),
        (RETRY + 'retryable = "TimeoutError"\n', "retry.retryable: expected a list of error names"),
        (
            RETRY + 'retryable = ["Timeout Error"]\n',
            "retry.retryable[0]: expected an error name like TimeoutError, got 'Timeout Error'",
        ),
        (RETRY + 'backend = "kafka"\n', "retry.backend: expected one of wheel, redis, got 'kafka'"),
        (RETRY + 'redis_url = "redis://x:1"\n', 'retry.redis_url: expected it only with backend = "redis"'),
        (
            RETRY + 'backend = "redis"\nredis_url = "http://x"\n',
            "retry.redis_url: expected redis://host:port/db, got 'http://x'",
        ),
        (RETRY + 'blocking = "yes"\n', "retry.blocking: expected true or false, got 'yes'"),
        (
            RETRY + 'blocking = true\nbackend = "wheel"\n',
            "retry.backend: blocking retries wait in place and use no scheduler; expected no backend",
        ),
        (RETRY + "attempt = 3\n", "retry.attempt: unknown key 'attempt'; expected one of: attempts, backend"),
        (
            RETRY + "[retry.handler]\nfail = [{ partition = 2, offset = 0 }]\n",
            "retry.handler.fail[0].partition: topic 'orders' has partitions 0..1, not 2",
        ),
        (
            RETRY + "[retry.handler]\nfail = [{ offset = 1, times = 0 }]\n",
            "retry.handler.fail[0].times: expected a whole number >= 1, got 0",
        ),
        (
            RETRY + "[retry.handler]\nfail = [{ offset = 1 }, { offset = 1 }]\n",
            "retry.handler.fail[1]: partition 0 offset 1 has two rules; expected one",
        ),
        (RETRY + "[retry.handler]\nfail = [3]\n", "retry.handler.fail[0]: expected a table, got 3"),
        (
            RETRY + "[retry.handler]\nfail_rate = 1.5\n",
            "retry.handler.fail_rate: expected a number from 0 to 1, got 1.5",
        ),
        (
            RETRY + '[retry.handler]\nerror = "1x"\n',
            "retry.handler.error: expected an error name like TimeoutError, got '1x'",
        ),
        (
            RETRY + '[[topics]]\nname = "orders-dlt"\n',
            "retry.topic: topic 'orders-dlt' has 1 partition(s); expected 2 as 'orders'",
        ),
        (
            RETRY + '[[expect]]\nretry = "x"\nat = 1\n',
            "expect[0].retry: expected the retry section's topic 'orders', got 'x'",
        ),
        (
            RETRY + '[[expect]]\nretry = "orders"\nat = 1\nrecords = { "nope" = 1 }\n',
            "expect[0].records.nope: unknown topic; expected one of: orders, orders-retry-1, orders-retry-2,",
        ),
        (
            RETRY + '[[expect]]\nretry = "orders"\nat = 1\nprocessd = 1\n',
            "expect[0].processd: unknown key 'processd'",
        ),
        ('[[expect]]\nretry = "orders"\nat = 1\n', "expect[0].retry: expected a [retry] section for it"),
    ],
)
def test_a_bad_retry_value_is_one_line_naming_its_place(text, message):
    with pytest.raises(ScenarioError) as caught:
        load(text)
    (problem,) = caught.value.problems
    assert message in problem and problem.startswith("x.toml:")


def test_retries_need_an_end():
    with pytest.raises(ScenarioError, match=r"retry\.topic: retries need scenario\.end_ms"):
        parse_scenario(HEAD.replace("end_ms = 1000\n", "") + RETRY, "x.toml")


def test_a_retry_section_that_is_not_a_table():
    with pytest.raises(ScenarioError, match=r"x\.toml:1: retry: expected a table, got 3"):
        parse_scenario("retry = 3\n" + HEAD, "x.toml")


def traced(scenario, seed=None):
    events = []
    result = run_scenario(scenario, seed=seed, sinks=[events.append])
    return result, [dict(e) for e in events]


def test_same_scenario_and_seed_give_the_same_trace():
    scenario = load_scenario(SCENARIOS / "retry_poison_dlt.toml")
    first, events = traced(scenario)
    _, again = traced(scenario)
    assert first.passed and events == again
    kinds = {e["kind"] for e in events if e["kind"].startswith("retry.")}
    assert kinds == {
        "retry.deliver",
        "retry.processed",
        "retry.handoff",
        "retry.schedule",
        "retry.redeliver",
        "retry.dead",
    }


RATE = (
    HEAD
    + """
[retry]
topic = "orders"
attempts = 3
delay_ms = 100
[retry.handler]
fail_rate = 0.5
error = "TimeoutError"
[[clients]]
id = "shop"
type = "producer"
[[steps]]
at = 0
action = "load"
client = "shop"
topic = "orders"
rate = 100
duration_ms = 200
records = 2
"""
)


def test_a_seeded_failure_rate_ends_every_record_once_and_is_reproducible():
    scenario = parse_scenario(RATE, "rate.toml")
    _, events = traced(scenario, seed=7)
    ends = [
        e["data"]["origin"] if "data" in e else e["origin"]
        for e in events
        if e["kind"] in ("retry.processed", "retry.dead")
    ]
    assert len(ends) == len(set(ends)) == 40  # 20 produces of 2 records over both partitions
    dead = [e for e in events if e["kind"] == "retry.dead"]
    # rate 0.5, 3 attempts: about 1 in 8 dead-lettered; seed 7 draws exactly 4 (each after 3 deliveries)
    assert [e["attempts"] for e in dead] == [3, 3, 3, 3]
    assert sum(e["kind"] == "retry.deliver" for e in events) == 68
    _, again = traced(scenario, seed=7)
    assert again == events
    _, other = traced(scenario, seed=8)
    assert [e for e in other if e["kind"] == "retry.dead"] != dead


def test_the_redis_backend_gives_the_wheel_results():
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (the README's test command installs it)")
    pytest.importorskip("redis", reason="redis-py is not installed (the test extra has it)")
    scenario = load_scenario(SCENARIOS / "retry_poison_dlt.toml")
    redis = attrs.evolve(scenario, retry=attrs.evolve(scenario.retry, backend="redis"))
    _, wheel = traced(scenario)
    redis_result, on_redis = traced(redis)
    failed = [f"{r.where}: {r.seen}" for r in redis_result.results if not r.passed]
    assert not failed, failed
    assert [e for e in on_redis if e["kind"].startswith("retry.")] == [
        e for e in wheel if e["kind"].startswith("retry.")
    ]


def test_a_missing_redis_server_is_one_line(monkeypatch):
    scenario = load_scenario(SCENARIOS / "retry_transient.toml")
    redis = attrs.evolve(scenario, retry=attrs.evolve(scenario.retry, backend="redis"))
    monkeypatch.setattr(shutil, "which", lambda name: None)
    missing = r"retry_transient\.toml: retry\.backend: redis-server is not installed"
    with pytest.raises(ScenarioError, match=missing):
        run_scenario(redis)


def test_the_cli_says_in_one_line_that_redis_server_is_missing(tmp_path):
    text = (SCENARIOS / "retry_transient.toml").read_text().replace('backend = "wheel"', 'backend = "redis"')
    path = tmp_path / "redis.toml"
    path.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "minibroker", "run", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": str(tmp_path), "PYTHONPATH": str(SCENARIOS.parent)},
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    missing = "redis-server is not installed (Debian: apt-get install redis-server)"
    assert done.stderr == f"minibroker: {path}: retry.backend: {missing}\n"
