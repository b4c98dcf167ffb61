"""A process that writes to or fires a FileWheel, for the SIGKILL tests (run as a script).

``write DIR N``: start the wheel at 0 and append messages m0..m(N-1), one per append, due over
the ticks 1..50 (tick 100 ms); print ``ack <id>`` after each append returns.
``run DIR OUT``: recover the wheel and fire every tick up to 5 s; forwarding a message appends
its id to OUT (flushed: the "real topic"), prints ``fwd <id>``, then checkpoints. Damage
reports are printed as ``damage <text>``.
``traffic DIR OUT FIRST N``: delayed traffic on a virtual clock: message ``m<i>`` (i from FIRST to
FIRST+N-1) is appended at ``sent_ms(i)``, due at ``due_ms(i)`` (up to 3.5 s: longer than the wheel's
2 s, so some roll), ``ack m<i>`` printed once the append returned; after each append every tick
due by then is fired, each forwarded message written to OUT as ``<id> <tick>`` before ``fwd <id>``.
FIRST = N = 0 and a last argument END_MS: fire every tick up to END_MS (the drain after the kills).
Every mode prints ``open`` once the wheel has opened (a start that fails prints a traceback instead).
"""

from __future__ import annotations

import sys

from minibroker.delayed_messages.file_wheel import FileWheel
from minibroker.delayed_messages.headers import DelayedMessage

TICK_MS = 100


def sent_ms(i: int) -> int:
    return 7 * i


def due_ms(i: int) -> int:
    return sent_ms(i) + 1 + (i * 7919) % 3500


def _fire(wheel: FileWheel, now: int, out) -> None:
    for tick in wheel.due_ticks(now):
        firing = wheel.fire(tick)
        while batch := firing.next_batch():  # one message a batch
            for message in batch:
                out.write(f"{message.message_id} {tick}\n")
                out.flush()
                print(f"fwd {message.message_id}", flush=True)
            firing.checkpoint()
        firing.complete()


def main(argv: list[str]) -> None:
    mode, directory = argv[0], argv[1]
    slots, window = (20, 4)
    wheel = FileWheel(
        directory,
        slots=slots,
        tick_ms=TICK_MS,
        open_window=window,
        on_damage=lambda d: print(f"damage {d}", flush=True),
        on_repair=lambda line: print(f"repair {line}", flush=True),
        batch=1,
    )
    print("open", flush=True)
    if mode == "traffic":
        first, count = int(argv[3]), int(argv[4])
        wheel.start(sent_ms(first))
        with open(argv[2], "a") as out:
            for i in range(first, first + count):
                wheel.append([DelayedMessage(f"m{i}", "orders", 0, due_ms(i), sent_ms(i), None, b"x" * 100)])
                print(f"ack m{i}", flush=True)
                _fire(wheel, sent_ms(i), out)
            if len(argv) > 5:
                _fire(wheel, int(argv[5]), out)
        print("finished", flush=True)
        return
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
