"""The control API against hostile clients: raw sockets sending what no well-behaved HTTP client sends.

Every case gets its exact status code and a JSON ``{"error": ...}`` (or, for a silent idle
connection, a close), the server logs exactly one line for it, and no traceback reaches stderr
or the log. The server under test has a short read timeout (``TIMEOUT_S``) so the timeouts are
seen in well under a second.
"""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from minibroker.server.control_http import MAX_BODY, MAX_DEPTH, ControlServer

#: the read timeout of the server under test, in seconds
TIMEOUT_S = 0.5
#: how long a test waits for any answer
WAIT_S = 10.0


class Answer:
    def __init__(self, status: int | None, headers: dict[str, str], body: object, closed: bool) -> None:
        self.status, self.headers, self.body, self.closed = status, headers, body, closed

    def __repr__(self) -> str:
        return f"Answer({self.status}, {self.body!r}, closed={self.closed})"


def read_answer(sock: socket.socket) -> Answer:
    """One response from ``sock`` (None status: closed without a word), and whether the server closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65_536)
        if not chunk:
            assert data == b"", data
            return Answer(None, {}, None, True)
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    status = int(status_line.split()[1])
    if status == 100:
        return read_answer_after(sock, rest)
    length = int(headers["content-length"])
    while len(rest) < length:
        chunk = sock.recv(65_536)
        assert chunk, "closed in the middle of an answer"
        rest += chunk
    body = json.loads(rest[:length]) if length else None
    closed = False
    if headers.get("connection") == "close":
        closed = sock.recv(1) == b""
    return Answer(status, headers, body, closed)


def read_answer_after(sock: socket.socket, rest: bytes) -> Answer:
    class Prefixed:
        def __init__(self) -> None:
            self.pending = rest

        def recv(self, n: int) -> bytes:
            if self.pending:
                data, self.pending = self.pending[:n], self.pending[n:]
                return data
            return sock.recv(n)

    return read_answer(Prefixed())  # type: ignore[arg-type]


def request(path: str, body: bytes = b"", method: str = "POST", headers: str | None = None) -> bytes:
    head = headers if headers is not None else f"Content-Length: {len(body)}\r\n"
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode() + body


@pytest.fixture
def api(minibroker_factory):
    cluster = minibroker_factory(3, topics=["t:1:3"])
    logs: list[str] = []
    server = ControlServer(read_timeout_s=TIMEOUT_S, max_connections=8, log=logs.append).start(cluster)
    server.cluster, server.logs = cluster, logs
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def no_traceback(capfd):
    yield
    assert "Traceback" not in capfd.readouterr().err


def send(api, data: bytes, *, shut: bool = False) -> tuple[Answer, list[str], float]:
    """Send ``data`` on a new connection; the answer, the log lines it caused, and the seconds it took."""
    before = len(api.logs)
    start = time.monotonic()
    with socket.create_connection(api.address, timeout=WAIT_S) as sock:
        sock.sendall(data)
        if shut:
            sock.shutdown(socket.SHUT_WR)
        answer = read_answer(sock)
    elapsed = time.monotonic() - start
    time.sleep(0.05)  # the server logs after it answered
    new = api.logs[before:]
    assert not any("Traceback" in line for line in new), new
    return answer, new, elapsed


def refused(api, data: bytes, status: int, error: str, *, shut: bool = False, closed: bool = False) -> float:
    answer, logs, elapsed = send(api, data, shut=shut)
    assert (answer.status, answer.body) == (status, {"error": error}), answer
    assert answer.closed is closed
    assert len(logs) == 1 and logs[0].startswith(f"control API: {status} ") and logs[0].endswith(error), logs
    return elapsed


def test_partial_head_then_silence_is_answered_408_and_closed_after_the_read_timeout(api):
    error = f"the request did not arrive within {TIMEOUT_S:g} s"
    elapsed = refused(api, b"POST /v1/crash HTTP/1.1\r\nHost: x\r\nContent-Le", 408, error, closed=True)
    assert TIMEOUT_S * 0.9 <= elapsed < TIMEOUT_S + 2


def test_a_connection_that_sends_nothing_is_closed_silently_after_the_read_timeout(api):
    answer, logs, elapsed = send(api, b"")
    assert (answer.status, answer.closed, logs) == (None, True, [])
    assert TIMEOUT_S * 0.9 <= elapsed < TIMEOUT_S + 2


def test_a_short_body_is_answered_408_after_the_timeout_or_400_when_the_client_ends_its_side(api):
    short = request("/v1/crash", b'{"brok', headers="Content-Length: 20\r\n")
    refused(api, short, 408, f"the request did not arrive within {TIMEOUT_S:g} s", closed=True)
    refused(
        api,
        short,
        400,
        "malformed HTTP request: peer closed connection without sending complete message body "
        "(received 6 bytes, expected 20)",
        shut=True,
        closed=True,
    )
    assert api.cluster.partition("t", 0)["replicas"][0]["alive"] is True


def test_content_length_over_the_limit_negative_or_garbage(api):
    huge = request("/v1/crash", headers="Content-Length: 1000000000000\r\n")
    refused(api, huge, 413, f"a body of 1000000000000 bytes; at most {MAX_BODY}", closed=True)
    assert api.logs[-1].startswith("control API: 413 POST /v1/crash from 127.0.0.1:")
    for value in ("-1", "abc", "1e3", "0x10"):
        bad = request("/v1/crash", headers=f"Content-Length: {value}\r\n")
        refused(api, bad, 400, "malformed HTTP request: bad Content-Length", closed=True)


def _chunked(body: bytes, size: int) -> bytes:
    chunks = [body[i : i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"


def test_chunked_bodies_are_read_and_bounded(api):
    ok, logs, _ = send(
        api,
        request("/v1/pause_fetcher", _chunked(b'{"broker": 2}', 4), headers="Transfer-Encoding: chunked\r\n"),
    )
    assert (ok.status, ok.body, ok.closed, logs) == (200, {"ok": True}, False, [])
    big = _chunked(b'{"x": "' + b"a" * MAX_BODY + b'"}', 8192)
    refused(
        api,
        request("/v1/crash", big, headers="Transfer-Encoding: chunked\r\n"),
        413,
        f"a body of more than {MAX_BODY} bytes",
        closed=True,
    )
    refused(
        api,
        request("/v1/crash", b"x", headers="Transfer-Encoding: gzip\r\n"),
        501,
        "malformed HTTP request: Only Transfer-Encoding: chunked is supported",
        closed=True,
    )


def test_bodies_that_are_not_utf8_not_json_too_deep_or_not_an_object(api):
    for body, offset in [(b'{"broker": "\xff"}', 12), (b"\xff\xfe{\x00}\x00", 0)]:  # Latin-1, UTF-16
        refused(
            api,
            request("/v1/crash", body),
            400,
            f"crash: the body is not UTF-8 (byte 0xff at offset {offset})",
        )
    deep = "crash: the body is nested deeper than 32 arrays and objects"
    refused(api, request("/v1/crash", b"[" * 30_000 + b"]" * 30_000), 400, deep)
    nested = b'{"broker": ' + b"[" * MAX_DEPTH + b"]" * MAX_DEPTH + b"}"
    refused(api, request("/v1/crash", nested), 400, deep)
    brackets_in_strings = b'{"broker": "' + b"[" * 1000 + b'", "x": 1}'
    refused(
        api, request("/v1/crash", brackets_in_strings), 400, "crash: got an unexpected keyword argument 'x'"
    )
    refused(
        api,
        request("/v1/crash", b"{not json"),
        400,
        "crash: the body is not JSON (Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1))",
    )
    refused(
        api,
        request("/v1/crash", b'{"broker": ' + b"9" * 5000 + b"}"),
        400,
        "crash: the body is not JSON a server can read (Exceeds the limit (4300 digits) for integer string "
        "conversion: value has 5000 digits; use sys.set_int_max_str_digits() to increase the limit)",
    )
    refused(api, request("/v1/crash", b"[0]"), 400, "crash: expected a JSON object of arguments")
    assert api.cluster.partition("t", 0)["replicas"][0]["alive"] is True


def test_wrong_types_and_unknown_ids_in_fields(api):
    cases = [
        ("crash", {"broker": "0"}, "broker '0': expected a broker id 0..2"),
        ("crash", {"broker": 9}, "broker 9: expected a broker id 0..2"),
        ("crash", {"broker": -1}, "broker -1: expected a broker id 0..2"),
        ("crash", {"broker": True}, "broker True: expected a broker id 0..2"),
        ("crash", {"broker": 0.0}, "broker 0.0: expected a broker id 0..2"),
        ("crash", {"broker": None}, "broker None: expected a broker id 0..2"),
        ("set_client_latency", {"broker": 0, "latency_ms": -5}, "latency -5: expected whole milliseconds"),
        ("set_link_latency", {"a": 0, "b": [1], "latency_ms": 1}, "broker [1]: expected a broker id 0..2"),
        ("set_config", {"settings": "x"}, "settings 'x': expected a non-empty mapping of Kafka config names"),
        (
            "move_leader",
            {"topic": {"t": 1}, "partition": 0, "broker": 0},
            "partition {'t': 1} 0: no such topic",
        ),
        ("push_errors", {"api": [1], "errors": [6], "broker": 0}, "api [1]: errors can be pushed for"),
        ("push_errors", {"api": "fetch", "errors": [[6]], "broker": 0}, "error [6]: expected one of"),
    ]
    for action, body, error in cases:
        answer, logs, _ = send(api, request(f"/v1/{action}", json.dumps(body).encode()))
        assert answer.status == 400 and answer.body["error"].startswith(error), (action, answer)
        assert len(logs) == 1 and logs[0].startswith(f"control API: 400 POST /v1/{action} "), logs
    answer, logs, _ = send(api, request("/v1/purgatories?broker=9", method="GET", headers=""))
    assert (answer.status, answer.body) == (400, {"error": "broker 9: expected a broker id 0..2"})
    answer, logs, _ = send(api, request("/v1/partition?topic=%ff&partition=0", method="GET", headers=""))
    assert (answer.status, answer.body) == (
        400,
        {"error": "partition: the query is not UTF-8 once percent-decoded"},
    )
    assert [r["alive"] for r in api.cluster.partition("t", 0)["replicas"]] == [True, True, True]


def test_a_link_from_a_node_to_itself_is_refused(api):
    for action, body, error in [
        ("drop_link", b'{"a": 1, "b": 1}', "link 1-1: broker 1 has no link to itself"),
        (
            "heal_link",
            b'{"a": "controller", "b": "controller"}',
            "link 'controller'-'controller': the controller has no link to itself",
        ),
    ]:
        refused(api, request(f"/v1/{action}", body), 400, f"{error}; name two different nodes")
    with pytest.raises(ValueError, match="broker 0 has no link to itself"):
        api.cluster.set_link_latency(0, 0, 5)


def test_one_way_and_client_links_refuse_what_they_cannot_take(api):
    refused(
        api,
        request("/v1/drop_link", b'{"a": 0, "b": 1, "one_way": 1}'),
        400,
        "one_way 1: expected true or false",
    )
    refused(
        api, request("/v1/drop_client_links", b'{"broker": -1}'), 400, "broker -1: expected a broker id 0..2"
    )
    refused(
        api,
        request("/v1/heal_client_links", b"{}"),
        400,
        "heal_client_links: missing a required argument: 'broker'",
    )


def test_routes_methods_heads_and_request_lines(api):
    refused(api, request("/v1/nothing", method="GET", headers=""), 404, "no route GET /v1/nothing")
    refused(api, request("/", method="GET", headers=""), 404, "no route GET /")
    answer, _, _ = send(api, request("/v1/crash", method="GET", headers=""))
    assert (answer.status, answer.headers["allow"]) == (405, "POST")
    answer, _, _ = send(api, request("/v1/cluster", b"{}", method="DELETE"))
    assert (answer.status, answer.headers["allow"], answer.body) == (
        405,
        "GET",
        {"error": "DELETE /v1/cluster: only GET is answered here"},
    )
    refused(
        api,
        b"GARBAGE\r\n\r\n",
        400,
        "malformed HTTP request: illegal request line: bytearray(b'GARBAGE')",
        closed=True,
    )
    answer, _, _ = send(api, b"\x01" * 5000 + b"\r\n\r\n")  # quoted in the answer: cut to one short line
    assert answer.status == 400 and len(answer.body["error"]) == len("malformed HTTP request: ") + 203
    refused(
        api,
        b"GET /v1/cluster HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 40_000 + b"\r\n\r\n",
        431,
        "malformed HTTP request: Receive buffer too long",
        closed=True,
    )


def test_keep_alive_and_expect_100_continue(api):
    with socket.create_connection(api.address, timeout=WAIT_S) as sock:
        for _ in range(3):
            sock.sendall(request("/v1/cluster", method="GET", headers=""))
            answer = read_answer(sock)
            assert (answer.status, answer.body["brokers"], answer.closed) == (200, 3, False)
        sock.sendall(request("/v1/resume_fetcher", headers="Content-Length: 13\r\nExpect: 100-continue\r\n"))
        assert sock.recv(1024).startswith(b"HTTP/1.1 100 ")
        sock.sendall(b'{"broker": 2}')
        assert read_answer(sock).body == {"ok": True}


def test_connections_beyond_the_cap_are_answered_503_and_closed(api):
    held = [socket.create_connection(api.address, timeout=WAIT_S) for _ in range(8)]
    try:
        for sock in held:
            sock.sendall(b"GET /v1/cluster HTTP/1.1\r\n")  # a head begun, not finished
        time.sleep(0.1)
        error = "8 connections are open, the most the control API serves at once"
        refused(api, request("/v1/cluster", method="GET", headers=""), 503, error, closed=True)
    finally:
        for sock in held:
            sock.close()
    time.sleep(0.2)
    answer, _, _ = send(api, request("/v1/cluster", method="GET", headers=""))
    assert answer.status == 200


def test_a_restart_racing_a_crash_of_the_same_broker_is_applied_in_order_and_every_request_answered(api):
    """50 rounds: a crash and a restart of broker 2 sent at the same moment, with a crash to start
    each round from a crashed broker; every one of the 150 requests is answered 200."""
    answers: list[int | None] = []
    barrier = threading.Barrier(2)

    def post(action: str) -> None:
        with socket.create_connection(api.address, timeout=WAIT_S) as sock:
            barrier.wait(WAIT_S)
            sock.sendall(request(f"/v1/{action}", b'{"broker": 2}'))
            answers.append(read_answer(sock).status)

    for _ in range(50):
        post_crash = threading.Thread(target=post, args=("crash",))
        post_crash.start()
        barrier.wait(WAIT_S)  # the first crash of the round, alone
        post_crash.join(WAIT_S)
        pair = [threading.Thread(target=post, args=(action,)) for action in ("restart", "crash")]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join(WAIT_S)
        barrier.reset()
    assert answers == [200] * 150
    api.cluster.restart(2)
    assert api.cluster.partition("t", 0)["replicas"][2]["alive"] is True
    assert not [line for line in api.cluster.logs if "internal error" in line or "Traceback" in line]
    assert not [line for line in api.logs if "Traceback" in line or " 500 " in line]
