"""A process that writes to or fires a FileWheel, for the SIGKILL tests (run as a script).

``write DIR N``: start the wheel at 0 and append messages m0..m(N-1), one per append, due over
the ticks 1..50 (tick 100 ms); print ``ack <id>`` after each append returns.
``run DIR OUT``: recover the wheel and fire every tick up to 5 s; forwarding a message appends
its id to OUT (flushed: the "real topic"), prints ``fwd <id>``, then checkpoints. Damage
reports are printed as ``damage <text>``.
"""

from __future__ import annotations

import sys

from minibroker.delayed_messages.file_wheel import FileWheel
from minibroker.delayed_messages.headers import DelayedMessage


def main(argv: list[str]) -> None:
    mode, directory = argv[0], argv[1]
    wheel = FileWheel(
        directory,
        slots=20,
        tick_ms=100,
        open_window=4,
        on_damage=lambda d: print(f"damage {d}", flush=True),
        batch=1,
    )
    wheel.start(0)
    if mode == "write":
        for i in range(int(argv[2])):
            due = 100 + (i * 37) % 4900  # ticks 1..50
            wheel.append([DelayedMessage(f"m{i}", "orders", 0, due, 0, None, b"x" * 200)])
            print(f"ack m{i}", flush=True)
        return
    with open(argv[2], "a") as out:
        for tick in wheel.due_ticks(5_000):
            firing = wheel.fire(tick)
            while batch := firing.next_batch():  # one message a batch
                for message in batch:
                    out.write(message.message_id + "\n")
                    out.flush()
                    print(f"fwd {message.message_id}", flush=True)
                firing.checkpoint()
            firing.complete()
    print("finished", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
