"""Smoke test of tools/wire_bench.py: a small run, its JSON, and the counts that must be exact."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[2] / "tools" / "wire_bench.py"


def test_a_small_run_reports_both_producers_and_the_mock_reference():
    args = ["--records", "2000", "--rate", "200", "--seconds", "0.5", "--json"]
    out = subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert [r["client"] for r in report["results"]] == [
        "kafka-python",
        "confluent-kafka",
        "confluent-kafka-mock",
    ]
    for result in report["results"]:
        throughput, latency = result["throughput"], result["latency"]
        assert (throughput["records"], throughput["record_bytes"]) == (2000, 100)
        assert throughput["records_per_s"] > 0 and throughput["produce_requests"] >= 1
        assert latency["records"] == 100
        assert 0 < latency["p50_ms"] <= latency["p90_ms"] <= latency["p99_ms"] <= latency["max_ms"]
        assert 0 < latency["ack_p50_ms"] <= latency["ack_p99_ms"]
        if result["client"] == "confluent-kafka-mock":
            continue  # librdkafka's own mock cluster: no minibroker server to read figures from
        # every acks=all produce went through broker 0's Produce purgatory and none timed out
        assert result["produce_purgatory"]["expirations"] == 0
        assert result["server_requests"]["Produce"] >= throughput["produce_requests"] + 1
    assert report["versions"]["kafka-python"] == "3.0.12"
    ours, mock = report["results"][1]["throughput"], report["results"][2]["throughput"]
    assert report["minibroker_over_mock"]["records_per_s"] == round(
        ours["records_per_s"] / mock["records_per_s"], 2
    )
    assert len(report["load_average"]) == 3
