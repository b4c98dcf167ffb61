"""The ``serve`` command: Kafka clients against the emulated cluster, in real time.

Nothing here imports kafka-python until ``serve`` runs, so ``minibroker --help`` and the
other commands start without loading it.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import tomllib
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio

from minibroker.broker.config import ConfigError
from minibroker.cliutil import UsageError, add_data_dir_options, positive_number, whole_number, with_data_dir
from minibroker.common.topic_names import topic_error
from minibroker.scenario import ScenarioError, load_scenario
from minibroker.scenario.loader.budget import check_topics
from minibroker.scenario.loader.limits import MAX_BROKERS, MAX_PARTITION_REPLICAS
from minibroker.scenario.model import Scenario, TopicSpecModel


def add_parsers(commands: argparse._SubParsersAction) -> dict[str, Callable[[argparse.Namespace], int]]:
    parser = commands.add_parser(
        "serve",
        help="serve Kafka's wire protocol: real Kafka clients against the emulated cluster",
        description="Run a scenario's cluster (or an empty one) in real time; broker i listens for Kafka "
        "clients on PORT+i. The scenario's steps play at their ms after start; its expectations are not "
        "checked. Stop with Ctrl-C (exit 130) or --duration. Without --data-dir the cluster's state "
        "(topics, records, committed offsets) is in memory only and is lost when the process ends; with "
        "--data-dir DIR it is written to files as it changes and recovered on the next start, so a "
        "SIGKILL loses nothing acknowledged with acks=all (docs/serve.md#persistence).",
    )
    parser.add_argument("file", nargs="?", metavar="SCENARIO.toml", help="cluster, topics and steps to play")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on and advertise (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=9092,
        help="broker 0's port; broker i gets PORT+i; 0: any free ports (default 9092)",
    )
    parser.add_argument(
        "--brokers", type=_brokers, help=f"brokers without a scenario, 1..{MAX_BROKERS} (default 3)"
    )
    parser.add_argument("--duration", type=_seconds, help="stop after this many seconds (default: never)")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting by Kafka's name, e.g. min.insync.replicas=2 (repeatable)",
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS[:RF]]",
        help="create a topic at start (repeatable; default 1 partition, replication factor 1)",
    )
    add_data_dir_options(
        parser,
        "keep the cluster (logs, __consumer_offsets, metadata; a [delay_wheel]'s files) in DIR and "
        "recover it on start (default: in memory only, lost when the process ends)",
    )
    parser.add_argument(
        "--tui", action="store_true", help="watch the purgatories live while clients run (needs a terminal)"
    )
    parser.add_argument(
        "--control",
        type=_port,
        metavar="PORT",
        help="serve the fault-injection HTTP/JSON API on HOST:PORT (docs/testing.md; 0: a free port)",
    )
    return {"serve": serve}


_port = whole_number(0, 65535, "a port")
_brokers = whole_number(1, MAX_BROKERS, "a number of brokers")
_seconds = positive_number("a positive number of seconds")


def parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` with VALUE read as TOML (``2``, ``true``), else as a plain string."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise UsageError(f"serve: --config {text!r}: expected KEY=VALUE")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key.strip(), value


def parse_topic(text: str, brokers: int) -> TopicSpecModel:
    """``NAME[:PARTITIONS[:RF]]``."""
    name, *numbers = text.split(":")
    invalid = topic_error(name)
    if invalid is not None or len(numbers) > 2 or not all(n.isdigit() and int(n) >= 1 for n in numbers):
        raise UsageError(
            f"serve: --topic {text!r}: expected NAME[:PARTITIONS[:RF]] ({invalid or 'numbers >= 1'})"
        )
    partitions = int(numbers[0]) if numbers else 1
    rf = int(numbers[1]) if len(numbers) > 1 else 1
    if partitions > MAX_PARTITION_REPLICAS:
        raise UsageError(
            f"serve: --topic {text!r}: expected at most {MAX_PARTITION_REPLICAS:,} partitions, "
            f"got {partitions:,}"
        )
    if rf > brokers:
        raise UsageError(
            f"serve: --topic {text!r}: replication factor {rf} is more than the {brokers} brokers"
        )
    return TopicSpecModel(name, partitions, rf)


def _scenario(args: argparse.Namespace) -> Scenario:
    """What serve runs: SCENARIO.toml or ``--brokers``; plus ``--config``, ``--topic``, ``--data-dir``
    (ready to serve: ``serve.build_scenario`` applies ``for_serving``)."""
    from minibroker.server.serve import build_scenario

    loaded = None
    if args.file is not None:
        try:
            loaded = load_scenario(args.file)
        except ScenarioError as error:
            raise UsageError(str(error)) from None
        if args.brokers is not None and args.brokers != loaded.cluster.brokers:
            raise UsageError(
                f"serve: --brokers {args.brokers} contradicts {args.file} ({loaded.cluster.brokers} brokers)"
            )
    config = dict(parse_setting(text) for text in args.config)
    try:
        scenario = build_scenario(
            loaded,
            args.brokers or 3,
            config,
            lambda brokers: [parse_topic(text, brokers) for text in args.topic],
            name="serve",
            where="--config",
        )
    except ConfigError as error:  # a Kafka setting's type, or a bound of loader/limits.py
        message = str(error)
        raise UsageError(f"serve: {'--' if message.startswith('config.') else ''}{message}") from None
    except ValueError as error:  # a topic named twice
        raise UsageError(f"serve: {error}") from None
    if args.port and args.port + scenario.cluster.brokers - 1 > 65535:
        raise UsageError(
            f"serve: --port {args.port}: broker {scenario.cluster.brokers - 1} would need a port > 65535"
        )
    problem = check_topics(scenario, "serve", serving=True)
    if problem is not None:
        raise UsageError(problem)
    if scenario.delay_wheel is None and not args.keep_data:
        return scenario  # --data-dir keeps the cluster (open_data_dir); there are no wheel files
    try:
        return with_data_dir(scenario, args)
    except UsageError as error:
        raise UsageError(f"serve: {error}") from None


def open_data_dir(scenario: Scenario, args: argparse.Namespace) -> Any:
    """``--data-dir``'s ``DataDir``, checked against the scenario's brokers and topics; None without it."""
    if args.data_dir is None:
        return None
    from minibroker.sim.storage.data_dir import DataDir, StorageError

    try:
        storage = DataDir.open(args.data_dir)
        storage.check(
            scenario.cluster.brokers, [(t.name, t.partitions, t.replication_factor) for t in scenario.topics]
        )
    except StorageError as error:
        raise UsageError(f"serve: {error}") from None
    return storage


def serve(args: argparse.Namespace) -> int:
    scenario = _scenario(args)
    if args.control is not None and args.tui:
        raise UsageError("serve: --control and --tui cannot be combined (the TUI owns the terminal's run)")
    args.storage = open_data_dir(scenario, args)
    args.control_server = _bind_control(args) if args.control is not None else None
    try:
        if args.tui:
            from minibroker.server.live import run_live

            return run_live(scenario, args)
        if trio.run(_serve, scenario, args):
            print("minibroker: interrupted", file=sys.stderr)
            return 130
    except (OSError, ConfigError, BaseExceptionGroup) as error:
        failure = _only(error)
        if isinstance(failure, ConfigError):  # e.g. an internal topic whose stored layout differs
            raise UsageError(f"serve: {failure}") from None
        if not isinstance(failure, OSError):
            raise
        raise UsageError(f"serve: cannot listen on {args.host}:{args.port}: {failure}") from None
    return 0


def _bind_control(args: argparse.Namespace) -> Any:
    """The control API's listener, bound before the brokers start (a taken port is a usage error)."""
    from minibroker.server.control_http import ControlServer

    try:
        return ControlServer(args.host, args.control)
    except OSError as error:
        raise UsageError(f"serve: --control {args.control}: cannot listen on {args.host}: {error}") from None


def _only(error: BaseException) -> BaseException:
    """The one exception inside ``error`` (trio may wrap it in exception groups), or ``error`` itself."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def _serve(scenario: Scenario, args: argparse.Namespace) -> bool:
    """Serve until ``--duration`` or Ctrl-C; True if interrupted.

    Ctrl-C is taken as a signal and cancels the server cleanly, rather than as a
    KeyboardInterrupt thrown into whichever socket call happens to be running.
    """
    from minibroker.server.serve import freeze_startup_heap, open_served

    with trio.open_signal_receiver(signal.SIGINT) as signals:
        async with open_served(scenario, args.host, args.port, storage=args.storage) as served:
            freeze_startup_heap()
            for broker, (host, port) in served.listeners.items():
                print(f"broker {broker} listening on {host}:{port}", flush=True)
            async with _control_api(served, args):
                print(state_banner(args), flush=True)  # last: the line that says the server is ready
                interrupted = await _until_stopped(args, signals)
    if not interrupted:
        print(f"minibroker serve: stopped after {args.duration:g} s", file=sys.stderr, flush=True)
    return interrupted


def state_banner(args: argparse.Namespace) -> str:
    """Where the cluster's state lives, in words: memory (lost at exit) or the data dir."""
    if args.storage is None:
        return "state: in memory only; topics, records and committed offsets are lost when this process ends"
    return f"state: kept in {args.data_dir} and recovered on the next start (docs/serve.md#persistence)"


async def _until_stopped(args: argparse.Namespace, signals: Any) -> bool:
    """Wait for ``--duration`` or Ctrl-C; True if interrupted."""
    interrupted = False
    async with trio.open_nursery() as nursery:

        async def on_ctrl_c() -> None:
            nonlocal interrupted
            async for _ in signals:
                interrupted = True
                nursery.cancel_scope.cancel()

        nursery.start_soon(on_ctrl_c)
        if args.duration is not None:
            await trio.sleep(args.duration)
            nursery.cancel_scope.cancel()
    return interrupted


@contextlib.asynccontextmanager
async def _control_api(served: Any, args: argparse.Namespace) -> AsyncIterator[None]:
    """With ``--control PORT``: the HTTP/JSON fault-injection API (``control_http``), in this trio run."""
    if args.control is None:
        yield
        return
    from minibroker.server.control import Control

    api = args.control_server
    host, port = api.address
    print(f"control API on http://{host}:{port}/v1/ (docs/testing.md)", flush=True)
    async with trio.open_nursery() as nursery:
        await nursery.start(api.serve, Control(served, trio.lowlevel.current_trio_token()))
        yield
        nursery.cancel_scope.cancel()
