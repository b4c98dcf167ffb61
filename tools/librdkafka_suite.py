"""Run librdkafka's integration tests against `minibroker serve` and report the pass rate.

Usage::

    python tools/librdkafka_suite.py [--source DIR] [--tests 0001,0002] [--timeout S] [--jobs N] [--json]

librdkafka's tests (https://github.com/confluentinc/librdkafka/tree/master/tests) are what its
maintainers run against a real cluster. This tool takes librdkafka's public source at the tag of the
librdkafka that the installed confluent-kafka links (``git clone --depth 1 --branch vX.Y.Z``; or
``--source``, a checkout already there), builds it without SSL/SASL (``./configure && make`` and the
tests' ``test-runner``), starts ``minibroker serve`` (3 brokers, any free ports, configured as
librdkafka's default test scenario: auto-created topics of 4 partitions, replication factor 3) and
runs, one test at a time with a wall-clock bound each, the tests a single Kafka 4 cluster without
SASL/SSL runs:

- not local (``TEST_F_LOCAL``: no broker needed), not a known issue, manual or socket-emulation test,
  not one of librdkafka's mock-cluster tests (``*_mock*``: they never reach a broker);
- with ``TEST_KAFKA_VERSION`` (default 4.0.0) and a ``test.conf`` naming the bootstrap servers; with
  ``--quick`` in librdkafka's quick mode (``-Q``: fewer messages, and only the sub-tests marked quick).
  A test that needs Kafka's shell tools, SASL or SSL skips itself.

Each test ends PASSED, FAILED, SKIPPED (by itself), EMPTY (passed without running anything: every
sub-test is a slow one that quick mode leaves out), NEEDS_TOOLS or NEEDS_SSL (failed because it runs
Kafka's shell tools, which it finds through ``KAFKA_PATH``, or sets up SSL, left out of the build) or
TIMEOUT (over ``--timeout``; counted as failed).
The pass rate is passed ÷ (passed + failed + timed out). librdkafka's runner picks tests by number, so
the tests sharing a number run together, bounded together. ``--json`` prints one JSON document. It is
not part of CI: a full run takes tens of minutes. Exit status: 0 when it ran (whatever the rate), 2 for
bad arguments or a build that failed.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPOSITORY = "https://github.com/confluentinc/librdkafka"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "minibroker"
#: flags that keep a test out: local (no broker), known issue, manual, socket emulation
EXCLUDED_FLAGS = ("TEST_F_LOCAL", "TEST_F_KNOWN_ISSUE", "TEST_F_MANUAL", "TEST_F_SOCKEM")
#: the cluster of librdkafka's default test scenario (tests/scenarios/default.json): auto-created topics
#: of 4 partitions, replicated 3 times
CLUSTER_CONFIG = ("auto.create.topics.enable=true", "num.partitions=4", "default.replication.factor=3")
#: a test's outcomes; only PASSED, FAILED and TIMEOUT count in the pass rate
STATES = ("PASSED", "FAILED", "TIMEOUT", "SKIPPED", "EMPTY", "NEEDS_TOOLS", "NEEDS_SSL")
ENTRY = re.compile(r"_TEST\((\d{4}_\w+),\s*([^,)]*)")


def fail(message: str) -> None:
    print(f"librdkafka_suite: {message}", file=sys.stderr)
    raise SystemExit(2)


def installed_tag() -> str:
    """``v`` + the librdkafka version confluent-kafka links, patch level 0 (librdkafka's release tags)."""
    try:
        import confluent_kafka
    except ImportError:
        fail("--tag: confluent-kafka is not installed, give the tag (e.g. v2.16.0) or --source")
    major, minor, *_ = confluent_kafka.libversion()[0].split(".")
    return f"v{major}.{minor}.0"


def checkout(source: str | None, tag: str) -> Path:
    if source is not None:
        path = Path(source)
        if not (path / "tests" / "test.c").is_file():
            fail(f"--source: {source} is not a librdkafka checkout (no tests/test.c)")
        return path
    path = CACHE / f"librdkafka-{tag}"
    if not (path / "tests" / "test.c").is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        cloned = subprocess.run(
            ["git", "clone", "-q", "--depth", "1", "--branch", tag, REPOSITORY, str(path)],
            capture_output=True,
            text=True,
        )
        if cloned.returncode != 0:
            fail(f"git clone of {REPOSITORY} at {tag} failed ({cloned.stderr.strip()}); give --source DIR")
    return path


def build(path: Path) -> Path:
    """``test-runner``, built once (configure without SSL/SASL/zstd/curl, the library, the tests)."""
    runner = path / "tests" / "test-runner"
    if runner.is_file():
        return runner
    steps = [
        ["./configure", "--disable-ssl", "--disable-gssapi", "--disable-zstd", "--disable-curl"],
        ["make", "-j2", "libs"],
        ["make", "-j2", "-C", "tests", "build"],
    ]
    for step in steps:
        done = subprocess.run(step, cwd=path, capture_output=True, text=True)
        if done.returncode != 0:
            fail(f"building librdkafka: {' '.join(step)} failed: {done.stderr.strip()[-300:]}")
    return runner


def selected(path: Path, only: list[str] | None) -> list[str]:
    """The tests a Kafka cluster without SASL/SSL runs (see the module docstring), in librdkafka's order."""
    text = (path / "tests" / "test.c").read_text()
    table = text[text.index("struct test tests[]") :]
    names = []
    for name, flags in ENTRY.findall(table):
        if any(flag in flags for flag in EXCLUDED_FLAGS) or "mock" in name:
            continue
        if only is None or name[:4] in only or name in only:
            names.append(name)
    return names


class Served:
    """``minibroker serve`` in a child process on free ports; its bootstrap servers from its first lines."""

    def __init__(self, brokers: int) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        command = [sys.executable, "-m", "minibroker", "serve", "--port", "0", "--brokers", str(brokers)]
        for setting in CLUSTER_CONFIG:
            command += ["--config", setting]
        self.log = tempfile.NamedTemporaryFile("w+", prefix="minibroker-serve-", suffix=".log")  # noqa: SIM115
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        deadline = time.monotonic() + 60
        addresses: list[str] = []
        while len(addresses) < brokers:
            if self.process.poll() is not None or time.monotonic() > deadline:
                fail("minibroker serve did not start listening within 60 s")
            time.sleep(0.2)
            addresses = re.findall(r"listening on (\S+)", Path(self.log.name).read_text())
        self.bootstrap = ",".join(addresses)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def run_number(
    runner: Path, names: list[str], conf: str, version: str, timeout: float, quick: bool
) -> list[dict]:
    """The tests of one number (``TESTS`` picks tests by number): each one's state, the run's seconds and,
    failed, the first failure line."""
    tests = runner.parent
    env = dict(
        os.environ,
        TESTS=names[0][:4],
        RDKAFKA_TEST_CONF=conf,
        TEST_KAFKA_VERSION=version,
        LD_LIBRARY_PATH=f"{tests.parent / 'src'}:{tests.parent / 'src-cpp'}",
    )
    start = time.monotonic()
    try:
        done = subprocess.run(
            [str(runner), "-L", "-K", "-E", *(["-Q"] if quick else [])],
            cwd=tests,
            env=env,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as expired:
        output = _plain(str(expired.stdout or ""))
        seconds = round(time.monotonic() - start, 1)
        return [
            {
                "test": name,
                "state": "PASSED" if f"Test {name} PASSED" in output else "TIMEOUT",
                "seconds": seconds,
            }
            for name in names
        ]
    seconds = round(time.monotonic() - start, 1)
    output = _plain(done.stdout + done.stderr)
    results = []
    for name in names:
        state = "FAILED"
        if f"Test {name} PASSED" in output:
            ran = re.search(rf"\] {name}: duration ([0-9.]+)ms", output)
            state = "EMPTY" if ran is not None and float(ran.group(1)) < 1.0 else "PASSED"
        elif re.search(rf"\|\s*{name}\s*\|\s*SKIPPED", output):
            state = "SKIPPED"
        result = {"test": name, "state": state, "seconds": seconds}
        if state == "FAILED":
            # librdkafka's failure report: ### Test "NAME (SUB-TEST)" failed at FILE:LINE:FUNC() at DATE: ###
            # then the message
            failed = re.search(rf'### Test "{name}[^"]*" failed at (\S+?)\(\) at [^#]*###\n([^\n]*)', output)
            why = (
                f"{failed.group(1)}: {failed.group(2).strip()}"
                if failed
                else f"exit status {done.returncode}"
            )
            if "KAFKA_PATH" in why:
                result["state"] = "NEEDS_TOOLS"  # Kafka's shell tools (kafka-topics.sh, kafka-acls.sh, ...)
            elif "OpenSSL not available" in why:
                result["state"] = "NEEDS_SSL"
            result["why"] = why
        results.append(result)
    return results


def _version(path: Path) -> str:
    """The checkout's ``git describe`` (its tag, or the nearest one and the commits since), else its name."""
    described = subprocess.run(["git", "-C", str(path), "describe", "--tags"], capture_output=True, text=True)
    return described.stdout.strip() or path.name


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--source", help="a librdkafka checkout (default: clone the installed version's tag)")
    parser.add_argument("--tag", help="the librdkafka tag to clone (default: the one confluent-kafka links)")
    parser.add_argument("--tests", help="only these tests, by number or full name, comma-separated")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per test (default 120)")
    parser.add_argument("--jobs", type=int, default=1, help="tests run at once (default 1)")
    parser.add_argument("--brokers", type=int, default=3, help="brokers of the served cluster (default 3)")
    parser.add_argument("--kafka-version", default="4.0.0", help="TEST_KAFKA_VERSION (default 4.0.0)")
    parser.add_argument(
        "--quick", action="store_true", help="librdkafka's quick mode (-Q): only the sub-tests marked quick"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        fail(f"--timeout: expected seconds > 0, got {args.timeout:g}")
    if not 1 <= args.jobs <= 16:
        fail(f"--jobs: expected 1..16, got {args.jobs}")
    if not 1 <= args.brokers <= 10:
        fail(f"--brokers: expected 1..10, got {args.brokers}")
    if shutil.which("make") is None or shutil.which("cc") is None:
        fail("building librdkafka needs make and a C compiler")
    only = [t.strip() for t in args.tests.split(",") if t.strip()] if args.tests else None
    path = checkout(args.source, args.tag or installed_tag())
    runner = build(path)
    names = selected(path, only)
    if not names:
        fail(f"--tests: no selected test matches {args.tests}")
    # a SIGTERM unwinds like an error, so the served cluster stops with the tool
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    served = Served(args.brokers)
    results: list[dict] = []
    pool = concurrent.futures.ThreadPoolExecutor(args.jobs)
    try:
        with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as conf:
            conf.write(f"bootstrap.servers={served.bootstrap}\n")
        numbers: dict[str, list[str]] = {}
        for name in names:
            numbers.setdefault(name[:4], []).append(name)
        futures = [
            pool.submit(run_number, runner, group, conf.name, args.kafka_version, args.timeout, args.quick)
            for group in numbers.values()
        ]
        for future in futures:
            for result in future.result():
                results.append(result)
                if not args.json:
                    line = f"{result['test']:<45} {result['state']:<8} {result['seconds']:>6}s"
                    print(line, result.get("why", ""))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)  # stopped early: no test starts after this
        served.stop()
        os.unlink(conf.name)
    counts = {state: sum(r["state"] == state for r in results) for state in STATES}
    ran = counts["PASSED"] + counts["FAILED"] + counts["TIMEOUT"]
    rate = round(counts["PASSED"] / ran, 3) if ran else 0.0
    summary = {
        "librdkafka": _version(path),
        "kafka_version": args.kafka_version,
        "quick": args.quick,
        "timeout_s": args.timeout,
        "selected": len(names),
        **{state.lower(): n for state, n in counts.items()},
        "pass_rate": rate,
        "not_passed": [r for r in results if r["state"] in ("FAILED", "TIMEOUT")],
        "tests": results,
    }
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(
            f"pass rate {counts['PASSED']}/{ran} = {rate:.1%} ({counts['SKIPPED']} skipped themselves, "
            f"{counts['EMPTY']} ran no sub-test, {counts['NEEDS_TOOLS'] + counts['NEEDS_SSL']} need Kafka's "
            "shell tools or SSL)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
