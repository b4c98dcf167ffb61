"""The control API over HTTP: every route in docs/control-openapi.json, requests and answers validated
against it, and ``serve --control`` from the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import jsonschema
import pytest

from minibroker.coordinator.transaction import partition_for
from minibroker.server.control_http import ACTIONS, READ_OUTS, ControlServer

SPEC = json.loads((Path(__file__).resolve().parents[2] / "docs" / "control-openapi.json").read_text())
VALIDATOR = jsonschema.Draft202012Validator


def _resolve(schema: dict) -> dict:
    """The schema with the description's components available to ``$ref``."""
    return (
        {**schema, "components": SPEC["components"]}
        if "$ref" not in schema
        else {
            "$ref": schema["$ref"],
            "components": SPEC["components"],
        }
    )


def request_schema(action: str) -> dict:
    return SPEC["paths"][f"/v1/{action}"]["post"]["requestBody"]["content"]["application/json"]["schema"]


def response_schema(path: str, method: str, status: int) -> dict:
    answer = SPEC["paths"][path][method]["responses"][str(status)]
    return _resolve(answer["content"]["application/json"]["schema"])


class Api:
    def __init__(self, base: str) -> None:
        self.base = base

    def call(
        self, method: str, route: str, body: object = None, raw: bytes | None = None
    ) -> tuple[int, object]:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(self.base + route, data=data, method=method)
        try:
            with urllib.request.urlopen(request, timeout=15) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def post(self, action: str, body: dict) -> tuple[int, object]:
        VALIDATOR(request_schema(action)).validate(body)  # the test only sends what the description allows
        status, answer = self.call("POST", f"/v1/{action}", body)
        VALIDATOR(response_schema(f"/v1/{action}", "post", status)).validate(answer)
        return status, answer

    def get(self, read_out: str, query: str = "") -> object:
        status, answer = self.call("GET", f"/v1/{read_out}" + (f"?{query}" if query else ""))
        VALIDATOR(response_schema(f"/v1/{read_out}", "get", status)).validate(answer)
        assert status == 200, answer
        return answer


@pytest.fixture
def api(minibroker_factory):
    cluster = minibroker_factory(3, topics=["t:1:3"], config={"replica.lag.time.max.ms": 400})
    server = ControlServer(log=cluster.logs.append).start(cluster)
    host, port = server.address
    yield Api(f"http://{host}:{port}")
    server.stop()


def test_the_description_lists_exactly_the_routes_the_server_answers():
    VALIDATOR.check_schema(SPEC["components"]["schemas"]["Partition"])
    posts = {path[4:] for path, item in SPEC["paths"].items() if "post" in item}
    gets = {path[4:] for path, item in SPEC["paths"].items() if "get" in item}
    assert (posts, gets) == (set(ACTIONS), {*READ_OUTS, "cluster"})
    for action in ACTIONS:
        VALIDATOR.check_schema(request_schema(action))


def test_every_action_over_http_takes_effect_and_answers_as_described(api):
    cluster = api.get("cluster")
    assert cluster["brokers"] == 3 and cluster["bootstrap_servers"].count(",") == 2
    assert api.get("partition", "topic=t&partition=0")["leader"] == 0
    ok = (200, {"ok": True})
    assert api.post("move_leader", {"topic": "t", "partition": 0, "broker": 1}) == ok
    assert api.get("partition", "topic=t&partition=0")["leader"] == 1
    assert api.post("push_errors", {"api": "fetch", "errors": ["NOT_LEADER_OR_FOLLOWER"], "broker": 1}) == ok
    assert api.post("push_errors", {"api": 0, "errors": 6, "broker": 1, "topic": "t", "partition": 0}) == ok
    assert api.post("push_errors", {"api": "ListOffsets", "errors": ["NOT_CONTROLLER"], "broker": 1}) == ok
    assert api.post("push_errors", {"api": 3, "errors": [5], "broker": 1, "topic": "t", "partition": 0}) == ok
    assert api.get("pending_errors", "broker=1") == {
        "fetch *": 1,
        "produce t-0": 1,
        "list_offsets *": 1,
        "metadata t-0": 1,
    }
    assert api.get("fetch_sessions", "broker=1") == {
        "sessions": 0,
        "partitions_cached": 0,
        "evictions": 0,
        "full_fetches": 0,
        "incremental_fetches": 0,
        "sessionless_fetches": 0,
        "error_fetches": 0,
    }
    for action in ("pause_fetcher", "resume_fetcher", "crash", "restart", "shutdown", "restart"):
        assert api.post(action, {"broker": 2}) == ok, action
    assert api.get("partition", "topic=t&partition=0")["replicas"][2]["alive"] is True
    assert api.post("set_client_latency", {"broker": 0, "latency_ms": 5}) == ok
    assert api.post("set_link_latency", {"a": 0, "b": "controller", "latency_ms": 5}) == ok
    assert api.post("drop_link", {"a": 0, "b": 1}) == ok
    assert api.post("heal_link", {"a": 0, "b": 1}) == ok
    assert api.post("drop_link", {"a": 2, "b": "controller", "one_way": True}) == ok
    assert api.post("heal_link", {"a": 2, "b": "controller", "one_way": True}) == ok
    assert api.post("drop_client_links", {"broker": 2}) == ok
    assert api.post("heal_client_links", {"broker": 2}) == ok
    assert api.post("set_config", {"settings": {"min.insync.replicas": 2}}) == ok
    assert api.post("set_config", {"settings": {"replica.fetch.wait.max.ms": 100}, "broker": 0}) == ok
    assert set(api.get("purgatories", "broker=0")) == {"Produce", "Fetch", "DeleteRecords", "ElectLeader"}
    assert api.get("requests") == {} and api.get("requests", "broker=0") == {}


def test_bad_requests_answer_one_line_and_the_description_rejects_them_too(api):
    bad = [
        ("crash", {"broker": 9}, "broker 9: expected a broker id 0..2"),
        ("crash", {}, "crash: missing a required argument: 'broker'"),
        ("crash", {"broker": 0, "force": True}, "crash: got an unexpected keyword argument 'force'"),
        ("push_errors", {"api": "fetch", "errors": ["BOGUS"], "broker": 0}, "error 'BOGUS': expected one of"),
        (
            "move_leader",
            {"topic": "t", "partition": 3, "broker": 0},
            "partition 't' 3: no such topic partition",
        ),
    ]
    for action, body, message in bad:
        status, answer = api.call("POST", f"/v1/{action}", body)
        assert status == 400 and answer["error"].startswith(message), (action, answer)
        VALIDATOR(response_schema(f"/v1/{action}", "post", 400)).validate(answer)
    # what the description's schemas refuse before any server sees it (unknown fields, wrong types)
    for action, body in [("crash", {"broker": 0, "force": True}), ("crash", {"broker": "0"}), ("crash", {})]:
        assert not VALIDATOR(request_schema(action)).is_valid(body)
    assert api.call("POST", "/v1/crash", raw=b"{not json") == (
        400,
        {
            "error": "crash: the body is not JSON (Expecting property name enclosed in double quotes: line 1 "
            "column 2 (char 1))"
        },
    )
    assert api.call("POST", "/v1/crash", [0]) == (
        400,
        {"error": "crash: expected a JSON object of arguments"},
    )
    assert api.call("GET", "/v1/nothing") == (404, {"error": "no route GET /v1/nothing"})
    assert api.call("POST", "/v1/partition", {}) == (
        405,
        {"error": "POST /v1/partition: only GET is answered here"},
    )
    assert api.call("GET", "/v1/purgatories") == (
        400,
        {"error": "purgatories: missing a required argument: 'broker'"},
    )
    assert api.get("partition", "topic=t&partition=0")["replicas"][0]["alive"] is True  # nothing happened


def test_serve_control_from_the_command_line(tmp_path):
    command = [
        sys.executable,
        "-m",
        "minibroker",
        "serve",
        "--port",
        "0",
        "--control",
        "0",
        "--duration",
        "20",
    ]
    process = subprocess.Popen(
        [*command, "--topic", "t:1:3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        lines = [process.stdout.readline() for _ in range(4)]
        assert [line.split(" listening")[0] for line in lines[:3]] == ["broker 0", "broker 1", "broker 2"]
        assert lines[3].startswith("control API on http://127.0.0.1:") and lines[3].endswith(
            "/v1/ (docs/testing.md)\n"
        )
        api = Api(lines[3].split()[3].removesuffix("/v1/"))
        assert api.post("crash", {"broker": 0}) == (200, {"ok": True})
        assert api.get("partition", "topic=t&partition=0")["replicas"][0]["alive"] is False
    finally:
        process.terminate()
        process.wait(15)
    taken = subprocess.run(
        [*command[:-2], "--tui", "--duration", "1"], capture_output=True, text=True, timeout=30
    )
    assert (taken.returncode, taken.stderr.strip()) == (
        2,
        "minibroker: serve: --control and --tui cannot be combined (the TUI owns the terminal's run)",
    )


def _until(condition, what: str, timeout: float = 15.0) -> float:
    """Poll ``condition`` until true; the seconds it took."""
    start = time.monotonic()
    while not condition():
        assert time.monotonic() - start < timeout, f"timed out waiting for {what}"
        time.sleep(0.02)
    return time.monotonic() - start


def test_transactions_over_http_read_hold_markers_abort_and_move_the_coordinator(api):
    from confluent_kafka import KafkaException, Producer

    bootstrap = api.get("cluster")["bootstrap_servers"]
    txn = "ops"
    home = partition_for(txn, 50) % 3  # __transaction_state-p is led by broker p % 3 at start
    assert api.call("POST", "/v1/crash_transaction_coordinator", {"transactional_id": txn}) == (
        400,
        {
            "error": "transactional id 'ops': __transaction_state does not exist yet "
            "(no transactional producer has looked for its coordinator)"
        },
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn, "linger.ms": 0})
    producer.init_transactions(15)
    producer.begin_transaction()
    for i in range(3):
        producer.produce("t", b"%d" % i, partition=0)
    assert producer.flush(15) == 0
    view = api.get("transaction", f"transactional_id={txn}")
    assert (view["coordinator"], view["state"], view["partitions"], view["producer_epoch"]) == (
        home,
        "Ongoing",
        ["t-0"],
        0,
    )
    assert view["timeout_ms"] == 60_000 and 50_000 < view["timeout_remaining_ms"] <= 60_000
    assert view["open_ms"] + view["timeout_remaining_ms"] == 60_000 and view["markers_pending"] == []
    assert [v["transactional_id"] for v in api.get("transactions", "state=Ongoing")] == [txn]
    assert api.get("transactions", "state=Empty") == []
    partition = api.get("partition", "topic=t&partition=0")
    assert (partition["high_watermark"], partition["last_stable_offset"]) == (3, 0)  # held by the open txn

    # the commit is answered once PrepareCommit is written; the held marker keeps the LSO at 0
    ok = (200, {"ok": True})
    assert api.post("delay_markers", {"delay_ms": 1500, "topic": "t", "partition": 0}) == ok
    held_at = time.monotonic()
    producer.commit_transaction(15)
    view = api.get("transaction", f"transactional_id={txn}")
    assert (view["state"], view["markers_pending"], view["timeout_remaining_ms"]) == (
        "PrepareCommit",
        ["t-0"],
        None,
    )
    assert api.get("partition", "topic=t&partition=0")["last_stable_offset"] == 0
    _until(lambda: api.get("transaction", f"transactional_id={txn}")["state"] == "CompleteCommit", "commit")
    assert time.monotonic() - held_at >= 1.4  # the marker went out at the end of the 1,500 ms hold
    assert api.get("partition", "topic=t&partition=0")["last_stable_offset"] == 4  # after the marker

    # an operator's abort: the epoch is bumped and the producer fenced
    assert api.post("delay_markers", {"delay_ms": 0}) == ok
    producer.begin_transaction()
    producer.produce("t", b"doomed", partition=0)
    assert producer.flush(15) == 0
    assert api.post("abort_transaction", {"transactional_id": txn}) == ok
    # as Admin.forceTerminateTransaction: the abort bumps the epoch, then the InitProducerId once more
    view = api.get("transaction", f"transactional_id={txn}")
    assert (view["state"], view["producer_epoch"], view["partitions"]) == ("Empty", 2, [])
    with pytest.raises(KafkaException) as fenced:
        producer.commit_transaction(15)
    assert fenced.value.args[0].fatal()
    partition = api.get("partition", "topic=t&partition=0")
    assert partition["last_stable_offset"] == partition["high_watermark"] == 6  # record + ABORT marker

    # the coordinator moves (the new leader reads the id back), then crashes
    other = (home + 1) % 3
    assert api.post("move_transaction_coordinator", {"transactional_id": txn, "broker": other}) == ok
    _until(lambda: api.call("GET", f"/v1/transaction?transactional_id={txn}")[0] == 200, "the reload")
    assert api.get("transaction", f"transactional_id={txn}")["coordinator"] == other
    assert api.post("crash_transaction_coordinator", {"transactional_id": txn}) == (
        200,
        {"ok": True, "broker": other},
    )
    _until(lambda: api.call("GET", f"/v1/transaction?transactional_id={txn}")[0] == 200, "the failover")
    moved = api.get("transaction", f"transactional_id={txn}")
    assert moved["coordinator"] != other and (moved["state"], moved["producer_epoch"]) == ("Empty", 2)
    assert api.post("restart", {"broker": other}) == ok

    bad = [
        (
            "abort_transaction",
            {"transactional_id": "nobody"},
            "transactional id 'nobody': no live coordinator holds it",
        ),
        ("abort_transaction", {"transactional_id": ""}, "transactional_id '': expected a non-empty string"),
        ("delay_markers", {"delay_ms": 5, "topic": "t"}, "topic and partition: give both"),
        ("delay_markers", {"delay_ms": 5, "topic": "t", "partition": 7}, "partition 't' 7: no such topic"),
        ("move_transaction_coordinator", {"transactional_id": txn, "broker": 5}, "broker 5: expected"),
    ]
    for action, body, message in bad:
        status, answer = api.call("POST", f"/v1/{action}", body)
        assert status == 400 and answer["error"].startswith(message), (action, answer)
    assert api.call("GET", "/v1/transaction?transactional_id=nobody") == (
        400,
        {"error": "transactional id 'nobody': no live coordinator holds it"},
    )
    assert api.call("GET", "/v1/transaction?transactional_id=007") == (
        400,
        {"error": "transactional id '007': no live coordinator holds it"},  # an id, not the number 7
    )
    status, answer = api.call("GET", "/v1/transactions?state=Bogus")
    assert status == 400 and answer["error"].startswith("state 'Bogus': expected one of CompleteAbort, ")
