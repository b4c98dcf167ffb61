"""schemathesis against docs/control-openapi.json: generated requests, valid and invalid, to every route.

For each operation, a bounded number of requests (``EXAMPLES`` valid ones, as many invalid ones:
wrong types, missing or extra fields, out-of-range numbers) go to a control API on a
three-broker cluster. Every answer must be one the description lists for the operation, in its
schema and content type; no answer may be a 500; an invalid request must be refused with a
4xx; and no traceback reaches stderr or the log. A valid request may still be refused (400):
the description cannot know how many brokers, which topics or which config names the cluster
has, so a schema-valid broker 983152062341 is a broker that does not exist; schemathesis's
"valid data accepted" check is left out for that reason. Actions really run (brokers crash and restart,
links drop), so the cluster is in some state each time, as a test's would be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from minibroker.server.control_http import ControlServer

SPEC = json.loads((Path(__file__).resolve().parents[2] / "docs" / "control-openapi.json").read_text())
SCHEMA = schemathesis.openapi.from_dict(SPEC)
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]
#: generated requests per operation and mode (valid, invalid): the whole run stays under ~30 s
EXAMPLES = 6


@pytest.fixture(scope="module")
def control():
    from minibroker.testing.cluster import MiniCluster

    cluster = MiniCluster(3, topics=["t:2:3"]).start()
    logs: list[str] = []
    server = ControlServer(log=logs.append).start(cluster)
    host, port = server.address
    yield f"http://{host}:{port}", logs, cluster
    server.stop()
    cluster.stop()


@pytest.fixture(autouse=True)
def no_traceback(capfd):
    yield
    assert "Traceback" not in capfd.readouterr().err


def _takes_input(operation) -> bool:
    item = SPEC["paths"][operation.path][operation.method.lower()]
    return bool(item.get("parameters") or item.get("requestBody"))


CASES = [(op, GenerationMode.POSITIVE) for op in OPERATIONS] + [
    (op, GenerationMode.NEGATIVE)
    for op in OPERATIONS
    if _takes_input(op)  # /v1/cluster takes nothing
]


@pytest.mark.parametrize(("operation", "mode"), CASES, ids=[f"{op.label} {mode.value}" for op, mode in CASES])
def test_generated_requests_are_answered_as_described(control, operation, mode):
    base_url, logs, cluster = control
    statuses: list[int] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(mode))
    def check(case):
        response = case.call(base_url=base_url, timeout=15)
        statuses.append(response.status_code)
        case.validate_response(response, excluded_checks=[positive_data_acceptance])
        assert response.status_code != 500, response.text
        # a parameter named "" with no values is sent as nothing: the request is a valid one then
        sent_as_valid = any(key == "" and value in ([], None) for key, value in (case.query or {}).items())
        negative = case.meta is not None and case.meta.generation.mode == mode and not sent_as_valid
        if mode is GenerationMode.NEGATIVE and negative:
            assert 400 <= response.status_code < 500, (case.body, response.text)

    check()
    assert statuses and all(code in {200, 400, 404, 405, 413} for code in statuses), statuses
    assert not [line for line in logs + cluster.logs if "Traceback" in line or "internal error" in line]
