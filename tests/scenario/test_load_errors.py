"""Bad scenarios: one clear line naming the file, the line or key path and the expected form."""

import re
from pathlib import Path

import pytest

from minibroker.scenario import ScenarioError, parse_scenario
from minibroker.scenario.model import Count, Event

BASE = """\
[cluster]
brokers = 3

[[topics]]
name = "t"
partitions = 2
replication_factor = 3

[[clients]]
id = "p"
type = "producer"
config = { acks = "all" }

[[clients]]
id = "c"
type = "consumer"
assign = ["t-0"]

[[steps]]
at = 10
action = "produce"
client = "p"
topic = "t"
id = "first"
"""


def error_of(text: str) -> str:
    with pytest.raises(ScenarioError) as raised:
        parse_scenario(text, "x.toml")
    message = str(raised.value)
    assert "\n" not in message
    return message


def test_base_is_valid():
    scenario = parse_scenario(BASE, "x.toml")
    assert [c.id for c in scenario.clients] == ["p", "c"]
    assert scenario.clients[0].config["acks"] == -1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            '[[steps]]\nat = -5\naction = "pause"\nbroker = 1\n',
            "x.toml:27: steps[1].at: expected a whole number of ms >= 0, got -5",
        ),
        (
            '[[steps]]\nat = 1.5\naction = "pause"\nbroker = 1\n',
            "x.toml:27: steps[1].at: expected a whole number of ms >= 0, got 1.5",
        ),
        (
            '[[steps]]\nat = 5\naction = "explode"\n',
            "x.toml:28: steps[1].action: expected one of produce, fetch, poll, load, pause, resume, crash, "
            "restart, shutdown, latency, drop, heal, config, join, leave, stall, hang, commit, "
            "delete_records, init, begin, send, send_offsets, abort, elect_leaders, acknowledge, "
            "list_offsets, got 'explode'",
        ),
        (
            '[[steps]]\nat = 5\naction = "delete_records"\ntopic = "t"\noffset = -2\n',
            "x.toml:30: steps[1].offset: expected an offset (-1: the high watermark) >= -1, got -2",
        ),
        (
            '[[steps]]\nat = 5\naction = "delete_records"\nclient = "p"\ntopic = "t"\noffset = 1\n',
            "x.toml:29: steps[1].client: 'p' is a producer; expected the name of an admin client "
            "(not declared under [[clients]])",
        ),
        (
            '[[steps]]\nat = 5\naction = "list_offsets"\ntopic = "t"\ntimestamp = "newest"\n',
            "x.toml:30: steps[1].timestamp: expected a time in ms >= 0 or one of earliest, latest, "
            "earliest_local, latest_tiered, got 'newest'",
        ),
        (
            '[[steps]]\nat = 5\naction = "list_offsets"\ntopic = "t"\ntimestamp = -1\n',
            "x.toml:30: steps[1].timestamp: expected a time in ms >= 0 or one of earliest, latest, "
            "earliest_local, latest_tiered, got -1",
        ),
        (
            '[[steps]]\nat = 5\naction = "list_offsets"\nclient = "p"\ntopic = "t"\ntimestamp = 0\n',
            "x.toml:29: steps[1].client: 'p' is a producer; expected the name of an admin client "
            "(not declared under [[clients]]) or of a consumer",
        ),
        (
            '[[steps]]\nat = 5\naction = "list_offsets"\ntopic = "t"\n',
            "x.toml:26: steps[1]: missing key 'timestamp'",
        ),
        (
            '[[steps]]\nat = 5\naction = "pause"\nbroker = 7\n',
            "x.toml:29: steps[1].broker: expected a broker id 0..2, got 7",
        ),
        (
            '[[steps]]\nat = 5\naction = "produce"\nclient = "p"\ntopic = "nope"\n',
            "x.toml:30: steps[1].topic: unknown topic 'nope'; expected one of: t",
        ),
        (
            '[[steps]]\nat = 5\naction = "produce"\nclient = "p"\ntopic = "t"\npartition = 2\n',
            "x.toml:30: steps[1].topic: topic 't' has partitions 0..1, not 2",
        ),
        (
            '[[steps]]\nat = 5\naction = "fetch"\nclient = "p"\n',
            "x.toml:29: steps[1].client: expected a consumer client: c; got 'p'",
        ),
        (
            '[[steps]]\nat = 5\naction = "pause"\nbroker = 1\ncolour = "red"\n',
            "x.toml:30: steps[1].colour: unknown key 'colour'; expected one of: action, at, broker",
        ),
        (
            '[[steps]]\nat = 5\naction = "produce"\nclient = "p"\ntopic = "t"\nid = "first"\n',
            "x.toml:31: steps[1].id: request name 'first' is used twice; expected a new name",
        ),
        (
            '[[expect]]\nrequest = "later"\nerror = "NONE"\n',
            "x.toml:27: expect[0].request: no step makes a request named 'later'; expected one of: first",
        ),
        (
            '[[expect]]\nrequest = "first"\ncompleted_at = 3\n',
            "x.toml:28: expect[0].completed_at: request 'first' is made at 10 ms; "
            "expected a time after that, got 3",
        ),
        (
            '[[expect]]\nrequest = "first"\nerror = "OOPS"\n',
            "x.toml:28: expect[0].error: expected a Kafka error name (NONE, OFFSET_OUT_OF_RANGE, ",
        ),
        (
            '[[expect]]\npartition = "t-0"\nat = 5\nhw = "three"\n',
            "x.toml:29: expect[0].hw: expected a whole number >= 0, got 'three'",
        ),
        (
            "[[expect]]\nat = 5\n",
            "x.toml:26: expect[0]: expected exactly one of the keys request, partition, purgatory, "
            "count, event, delivered, delay_held, wheel, group, member, retry, share_partition or "
            "transaction",
        ),
        (
            '[[steps]]\nat = 5\naction = "config"\nsettings = { "min.insync.replica" = 2 }\n',
            "x.toml:29: steps[1].settings: unknown setting 'min.insync.replica'; did you mean "
            "'min.insync.replicas'? expected one of the ",
        ),
        (
            '[[steps]]\nat = 5\naction = "latency"\nbetween = [0, "ghost"]\nlatency_ms = 3\n',
            "x.toml:29: steps[1].between: expected a broker id 0..2, a client id or "
            "\"controller\", got 'ghost'",
        ),
        (
            '[[expect]]\nevent = { kind = "purge" }\ncount = "requests"\nequals = 1\n',
            "x.toml:28: expect[0].count: an event filters count = \"events\" only; got count = 'requests'",
        ),
        (
            '[[expect]]\ncount = "events"\nequals = 1\n',
            'x.toml:27: expect[0].count: count = "events" needs event = { kind = ..., ... } '
            "to say which events",
        ),
        (
            '[[expect]]\nevent = { kind = "purge" }\ncount = 2.5\n',
            "x.toml:28: expect[0].count: expected a whole number >= 0, got 2.5",
        ),
        (
            '[[steps]]\nat = 5\naction = "produce"\nclient = "p"\ntopic = "t"\nkeys = []\n',
            "x.toml:31: steps[1].keys: expected a non-empty list of record keys (strings), got []",
        ),
        (
            '[[steps]]\nat = 5\naction = "produce"\nclient = "p"\ntopic = "t"\ntombstone = true\n',
            "x.toml:31: steps[1].tombstone: expected true or false, beside keys",
        ),
        (
            '[[steps]]\nat = 5\naction = "elect_leaders"\ntopic = "t"\nelection = "weird"\n',
            "x.toml:30: steps[1].election: expected one of preferred, unclean, got 'weird'",
        ),
        (
            "[surprise]\nx = 1\n",
            "x.toml:26: surprise: unknown key 'surprise'; expected one of: clients, cluster, delay_service, "
            "delay_wheel, expect, links, retry, scenario, steps, topics",
        ),
    ],
)
def test_bad_steps_and_expectations(extra, message):
    assert error_of(BASE + "\n" + extra).startswith(message)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "[cluster\nbrokers = 3\n",
            "x.toml:1: malformed TOML: Expected ']' at the end of a table declaration (column 9)",
        ),
        ("[cluster]\nbrokers = 0\n", "x.toml:2: cluster.brokers: expected a whole number >= 1, got 0"),
        ("[cluster]\nbrokers = true\n", "x.toml:2: cluster.brokers: expected a whole number >= 1, got True"),
        (
            '[cluster]\nconfig = { "min.insync.replicas" = "two" }\n',
            "x.toml:2: cluster.config.min.insync.replicas: expected a whole number, got 'two'",
        ),
        (
            '[[topics]]\nname = "t"\nreplication_factor = 4\n',
            "x.toml:3: topics[0].replication_factor: expected at most 3 (the number of brokers), got 4",
        ),
        (
            '[[topics]]\nname = "t"\n[[topics]]\nname = "t"\n',
            "x.toml:4: topics[1].name: 't' is defined twice; expected a unique name",
        ),
        (
            '[[topics]]\nname = "t"\nconfigs = { "min.cleanable.dirty.ratio" = 2 }\n',
            "x.toml:3: topics[0].configs.min.cleanable.dirty.ratio: expected a number in 0..1, got '2'",
        ),
        (
            '[[clients]]\nid = "p"\ntype = "producer"\nconfig = { acks = 2 }\n',
            "x.toml:4: clients[0].config.acks: expected all, -1, 0 or 1, got 2",
        ),
        (
            '[[clients]]\nid = "c"\ntype = "consumer"\nassign = ["nope-0"]\n',
            "x.toml:4: clients[0].assign[0]: unknown topic 'nope'; expected one of: ",
        ),
        (
            '[[clients]]\nid = "c"\ntype = "robot"\n',
            "x.toml:3: clients[0].type: expected one of producer, consumer, share_consumer, got 'robot'",
        ),
        ("steps = 3\n", "x.toml:1: steps: expected an array, got 3"),
        ('[[steps]]\naction = "pause"\nbroker = 0\n', "x.toml:1: steps[0]: missing key 'at'"),
    ],
)
def test_bad_documents(text, message):
    assert error_of(text).startswith(message)


def test_missing_file(tmp_path):
    from minibroker.scenario import load_scenario

    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario(tmp_path / "absent.toml")


def test_event_with_a_number_count_is_an_event_expectation():
    """``event`` + ``count = N`` means exactly N such events (docs/scenarios.md), not a count kind."""
    text = BASE + '\n[[expect]]\nevent = { kind = "purge", broker = 0 }\ncount = 2\n'
    scenario = parse_scenario(text, "x.toml")
    (expectation,) = scenario.expectations
    assert isinstance(expectation, Event)
    assert (expectation.fields, expectation.count) == ({"kind": "purge", "broker": 0}, 2)


def test_event_with_count_events_is_a_filtered_count():
    text = BASE + '\n[[expect]]\nevent = { kind = "purge" }\ncount = "events"\nat_least = 1\n'
    (expectation,) = parse_scenario(text, "x.toml").expectations
    assert isinstance(expectation, Count)
    assert (expectation.count, expectation.at_least) == ("events", 1)
    assert expectation.filters == {"event": {"kind": "purge"}}


def test_an_assignment_of_nested_lists_is_one_line():
    text = BASE.replace("replication_factor = 3\n", "replication_factor = 1\nassignment = [[[0]], [[1]]]\n")
    message = error_of(text)
    assert message.startswith("x.toml:")
    assert "topics[0].assignment: expected 2 lists of 1 distinct broker ids 0..2" in message


def test_every_event_kind_the_trace_page_lists_may_be_expected():
    """docs/trace.md's kinds are the ones an ``event`` expectation accepts (append.duplicate included)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "trace.md").read_text(encoding="utf-8")
    table = page[page.index("## Kinds") :]
    kinds = set(re.findall(r"^\| `([a-z_.]+)` \|", table, flags=re.M))
    assert "append.duplicate" in kinds
    refused = []
    for kind in sorted(kinds):
        try:
            parse_scenario(BASE + f'\n[[expect]]\nevent = {{ kind = "{kind}" }}\ncount = 1\n', "x.toml")
        except ScenarioError as error:
            refused.append(f"{kind}: {error}")
    assert not refused
