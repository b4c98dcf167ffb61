"""Every misconfiguration of ``minibroker retry-service`` is one line on stderr and exit status 2."""

from __future__ import annotations

import socket

import pytest

from minibroker.cli import main
from minibroker.retry.service_config import BackendConfig, parse_config
from minibroker.testing import MiniCluster

GOOD = "[topics.orders]\nattempts = 3\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp_path, capsys, text: str, bootstrap: str = "127.0.0.1:9092") -> str:
    path = tmp_path / "retry.toml"
    path.write_text(text)
    code = main(["retry-service", "--bootstrap", bootstrap, "--config", str(path)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    return err.strip().replace(str(path), "FILE")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[topics.orders\n", "FILE: not valid TOML: "),
        (f"pol_ms = 5\n{GOOD}", "FILE: unknown key 'pol_ms' (expected one of: group_id, client_id,"),
        (f"[backend]\nclaim_bach = 5\n{GOOD}", "FILE: [backend] unknown key 'claim_bach'"),
        ("[topics.orders]\nattempt = 3\n", "FILE: [topics.orders] unknown key 'attempt'"),
        (
            '[topics.orders]\nattempts = "3"\n',
            "FILE: [topics.orders] attempts: expected an integer >= 2, got '3'",
        ),
        (
            "[topics.orders]\nattempts = 1\n",
            "FILE: [topics.orders] attempts: expected an integer >= 2, got 1",
        ),
        (f"poll_ms = 1.5\n{GOOD}", "FILE: poll_ms: expected an integer >= 1, got 1.5"),
        (f"poll_ms = true\n{GOOD}", "FILE: poll_ms: expected an integer >= 1, got True"),
        (f'group_id = ""\n{GOOD}', "FILE: group_id: expected a non-empty string, got ''"),
        (
            f'[backend]\nkind = "disk"\n{GOOD}',
            'FILE: [backend] kind: expected "wheel" or "redis", got \'disk\'',
        ),
        (f'[backend]\nurl = "redis://h:1/0"\n{GOOD}', 'FILE: [backend] url: only for kind = "redis"'),
        (
            f'[backend]\nkind = "redis"\nurl = "h:1"\n{GOOD}',
            "FILE: [backend] url: expected redis://HOST:PORT/DB",
        ),
        ('[topics.orders]\nbackoff = "linear"\n', "FILE: [topics.orders] retry.backoff: expected fixed or"),
        ("[topics.orders]\nmultiplier = 0.5\n", "FILE: [topics.orders] multiplier: expected a number >= 1"),
        ('[topics."bad name"]\n', "FILE: [topics.bad name]: expected a topic name of 1..200 characters"),
        ("group_id = 'g'\n", "FILE: expected at least one [topics.<name>] table (the source topics)"),
        ("backend = 3\n" + GOOD, "FILE: backend: expected a table [backend], got 3"),
        (f"retry_backoff_ms = 0\n{GOOD}", "FILE: retry_backoff_ms: expected an integer >= 1, got 0"),
        (
            f"retry_backoff_max_ms = 50\n{GOOD}",
            "FILE: retry_backoff_max_ms: expected an integer >= retry_backoff_ms (100), got 50",
        ),
        (
            f"retry_backoff_ms = 2000\nretry_backoff_max_ms = 1000\n{GOOD}",
            "FILE: retry_backoff_max_ms: expected an integer >= retry_backoff_ms (2000), got 1000",
        ),
        (f"outage_limit_ms = -1\n{GOOD}", "FILE: outage_limit_ms: expected an integer >= 0, got -1"),
        (f'outage_limit_ms = "60s"\n{GOOD}', "FILE: outage_limit_ms: expected an integer >= 0, got '60s'"),
        (f"outage_limit_ms = 1e3\n{GOOD}", "FILE: outage_limit_ms: expected an integer >= 0, got 1000.0"),
    ],
)
def test_a_bad_config_is_one_line_and_exit_2(tmp_path, capsys, text, error):
    assert _run(tmp_path, capsys, text).startswith(f"minibroker: retry-service: {error}")


def test_a_missing_file_and_a_bad_bootstrap(tmp_path, capsys):
    code = main(["retry-service", "--bootstrap", "127.0.0.1:9092", "--config", str(tmp_path / "none.toml")])
    err = capsys.readouterr().err
    missing = tmp_path / "none.toml"
    assert code == 2 and err == f"minibroker: retry-service: --config {missing}: No such file or directory\n"
    err = _run(tmp_path, capsys, GOOD, bootstrap="localhost")
    assert err == "minibroker: --bootstrap 'localhost': expected HOST:PORT[,HOST:PORT...]"


def test_an_unreachable_cluster_or_redis_is_exit_2_within_the_timeout(tmp_path, capsys):
    port = _free_port()  # nothing listens there
    err = _run(tmp_path, capsys, f"bootstrap_timeout_ms = 500\n{GOOD}", bootstrap=f"127.0.0.1:{port}")
    assert err == (
        f"minibroker: retry-service: --bootstrap 127.0.0.1:{port}: no broker answered within 500 ms "
        "(KafkaTimeoutError)"
    )
    backend = f'[backend]\nkind = "redis"\nurl = "redis://127.0.0.1:{port}/0"\nconnect_timeout_ms = 500\n'
    err = _run(tmp_path, capsys, backend + GOOD)
    url = f"redis://127.0.0.1:{port}/0"
    assert err.startswith(f"minibroker: retry-service: [backend] url {url}: Redis unreachable (")


def test_missing_topics_are_exit_2(tmp_path, capsys):
    with MiniCluster(1, ["orders:1:1", "orders-retry-1:1:1"]) as cluster:
        err = _run(tmp_path, capsys, GOOD, bootstrap=cluster.bootstrap_servers)
    assert err == (
        f"minibroker: retry-service: topic orders-retry-2 does not exist on {cluster.bootstrap_servers} "
        "(2 missing; the service needs <topic>, <topic>-retry-1..<attempts-1> and <topic>-dlt "
        "and creates none)"
    )


def test_defaults_and_retry_topics():
    config = parse_config({"topics": {"a": {"attempts": 3}, "b.c": {"attempts": 2, "multiplier": 3}}}, "f")
    assert config.backend == BackendConfig() and config.group_id == "minibroker-retry-service"
    assert config.retry_topics() == {"a-retry-1": ("a", 1), "a-retry-2": ("a", 2), "b.c-retry-1": ("b.c", 1)}
    assert config.topics["b.c"].multiplier == 3.0
    # outages: 100 ms doubling up to 5 s, retried for ever
    assert (config.retry_backoff_ms, config.retry_backoff_max_ms, config.outage_limit_ms) == (100, 5_000, 0)
    # kind = "redis" without a url takes the default one (it crashed with an AttributeError once)
    redis = parse_config({"backend": {"kind": "redis"}, "topics": {"a": {}}}, "f")
    assert redis.backend.url == "redis://127.0.0.1:6379/0"
