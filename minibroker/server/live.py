"""``serve --tui``: the TUI's live frame while real Kafka clients use the cluster.

Draws ``minibroker.tui``'s frame (timing wheel, delay queue, purgatories, ISR,
latest events) of the served cluster about four times a second, in real time:
a client's acks=all produce shows up as an ``op.create`` in the Produce
purgatory of its leader until the ISR catches up. The wire server's log lines
join the event list (kind ``wire``) instead of going to stderr, which the
screen covers. Keys: ``b`` next broker, ``q`` quit (Ctrl-C works too).

Needs a terminal on stdout; it uses only the TUI's ``state`` and ``render``
modules, so it follows their frame format.
"""

from __future__ import annotations

import argparse
import sys

import attrs
import trio
from rich.console import Console

from minibroker.cliutil import UsageError
from minibroker.scenario import Scenario
from minibroker.server.serve import Served, open_served

#: real seconds between two frames
FRAME_S = 0.25


def run_live(scenario: Scenario, args: argparse.Namespace) -> int:
    try:
        from minibroker.tui.app import terminal_screen
        from minibroker.tui.render import render_frame
        from minibroker.tui.state import EventLog, Status, capture
    except ImportError as error:
        raise UsageError(f"serve: --tui is not available in this install ({error})") from None
    if not sys.stdout.isatty():
        raise UsageError("serve: --tui draws on a terminal, and stdout is not one")
    console = Console()
    events = EventLog()
    key_fd = 0 if sys.stdin.isatty() else None
    view = {"broker": 0, "quit": False}

    async def main() -> None:
        served_box: list[Served] = []

        def log(line: str) -> None:
            now = served_box[0].cluster.now() if served_box else 0
            events({"kind": "wire", "time_ms": now, "message": line})

        async with open_served(
            scenario, args.host, args.port, log=log, sinks=[events], storage=args.storage
        ) as served:
            served_box.append(served)
            first, last = served.listeners[0], served.listeners[max(served.listeners)]
            kept = f"state in {args.data_dir}" if args.storage is not None else "state in memory only"
            note = f"serving {first[0]}:{first[1]}..{last[1]}   {kept}   keys: b broker, q quit"
            async with trio.open_nursery() as nursery:
                if key_fd is not None:
                    nursery.start_soon(_keys, key_fd, view, nursery.cancel_scope)
                if args.duration is not None:
                    nursery.cancel_scope.deadline = trio.current_time() + args.duration
                with terminal_screen(console, key_fd) as live:
                    while not view["quit"]:
                        frame = capture(
                            served.runner, events, view["broker"], Status("running", 1.0, note=note)
                        )
                        frame = attrs.evolve(frame, span_ms=max(1, frame.time_ms))
                        live.update(render_frame(frame, console, height=console.size.height), refresh=True)
                        await trio.sleep(FRAME_S)
                nursery.cancel_scope.cancel()

    trio.run(main)
    return 0


async def _keys(fd: int, view: dict, scope: trio.CancelScope) -> None:
    from minibroker.tui.keys import read_keys

    async def handle(key: str) -> None:
        if key == "b":
            view["broker"] += 1
        elif key == "q":
            view["quit"] = True
            scope.cancel()

    await read_keys(fd, handle)
