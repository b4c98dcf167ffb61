"""``python -m minibroker``: the same as the ``minibroker`` command.

Ctrl-C is taken over before anything else is imported, so an interrupt during start-up
ends in one line and exit status 130 (``cli.entry_point`` keeps the same handler).
"""

import os
import signal

if signal.getsignal(signal.SIGINT) is signal.default_int_handler:  # not when a host set its own

    def _interrupted(signum: int, frame: object) -> None:
        os.write(2, b"minibroker: interrupted\n")
        os._exit(130)

    _interrupted.minibroker_start_up = True  # main() puts Python's handler back once started
    signal.signal(signal.SIGINT, _interrupted)

from minibroker.cli import entry_point

entry_point()
