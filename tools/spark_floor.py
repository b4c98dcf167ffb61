"""What Spark alone costs on the bench's traces: start-up, then one read of what ``analyze`` reads.

    .venv/bin/python tools/spark_floor.py                      # the 10M-event bench traces
    .venv/bin/python tools/spark_floor.py --events 1000000 --reads 3

No analysis: the floor under any ``analyze`` on this Spark and machine. In one
fresh session with the pipeline's own settings (``spark_session`` and
``size_shuffle``, the class archive included), it times

- ``session``: Python importing pyspark, the JVM launch, SparkContext and SparkSession;
- ``read #i``: every row of every trace file, the columns ``analyze`` reads from
  every row (``REQUIRED``), decoded and handed to Spark's engine, then dropped
  (the ``noop`` sink), ``--reads`` times in a row (the first pays class loading and
  code generation; the later ones are warm);
- ``kind only``: the same rows with the ``kind`` column alone, once, warm.

The traces are those ``tools/pipeline_bench.py --events N`` made (run it first).
``--json`` prints the same figures as one JSON document (``seconds`` per step).
``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per step (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from bench_baseline import Figure, add_arguments, check, compare_tool, nproc  # noqa: E402

from minibroker.analytics.inputs import REQUIRED, resolve  # noqa: E402
from minibroker.analytics.session import spark_session  # noqa: E402
from minibroker.analytics.sizing import size_shuffle  # noqa: E402
from minibroker.analytics.spark_checks import SparkUnavailable  # noqa: E402

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [Figure("seconds.*", "lower")]


def _noop(frame: Any) -> float:
    started = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000, help="the bench traces to read")
    parser.add_argument("--dir", type=Path, help="the bench's directory (default: $TMPDIR/minibroker-bench)")
    parser.add_argument("--reads", type=int, default=2, help="reads in a row (default 2)")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--java-options",
        help="the driver JVM's options instead of the pipeline's (this also turns the class archive off)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.reads < 1:
        parser.error("--reads must be >= 1")
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    traces = (args.dir or Path(tempfile.gettempdir()) / "minibroker-bench") / f"traces-{args.events}"
    manifest = traces / "manifest.json"
    if not manifest.exists():
        parser.error(f"{traces} has no traces: run tools/pipeline_bench.py --events {args.events} first")
    events = json.loads(manifest.read_text())["events"]
    inputs = resolve([str(traces / "*.parquet")])
    for path in traces.glob("*.parquet"):  # start with the files in the page cache, as the bench does
        path.read_bytes()
    load_before = os.getloadavg()
    started = time.perf_counter()
    figures: dict[str, float] = {}
    conf = {"spark.driver.extraJavaOptions": args.java_options} if args.java_options is not None else None
    try:
        with spark_session(args.master, app_name="minibroker spark_floor", conf=conf) as spark:
            size_shuffle(spark, inputs.local_bytes)
            figures["session"] = time.perf_counter() - started
            rows = spark.read.parquet(*inputs.parquet)
            for number in range(1, args.reads + 1):
                figures[f"read #{number}"] = _noop(rows.select(*REQUIRED))
            figures["kind only"] = _noop(rows.select("kind"))
    except SparkUnavailable as error:
        parser.error(str(error))
    if args.json:
        document = {
            "events": events,
            "files": inputs.count,
            "master": args.master,
            "java_options": args.java_options,
            "seconds": {name: round(seconds, 3) for name, seconds in figures.items()},
            "cpus": nproc(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        }
        print(json.dumps(document, indent=2))
        return 0
    how = f" with JVM options {args.java_options!r}" if args.java_options is not None else ""
    files = f"{inputs.count} file{'s' if inputs.count != 1 else ''}"
    print(f"{events:,} events in {files} on {args.master}{how}:")
    for name, seconds in figures.items():
        per_event = f"  ({seconds * 1e6 / events:.2f} µs per event)" if name != "session" else ""
        print(f"  {name:<10} {seconds:6.1f} s{per_event}")
    print(
        f"load average before {[round(x, 2) for x in load_before]}, after "
        f"{[round(x, 2) for x in os.getloadavg()]} on {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
