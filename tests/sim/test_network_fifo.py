"""The network's FIFO links: a message never overtakes an earlier one on its link, even when both are due
at the same ms from timer tasks that the timing wheel fires in another order (the scenario
scenarios/regressions/controller_link_fifo_same_ms.toml shows what an overtaking message breaks)."""

from __future__ import annotations

import trio

from minibroker.runtime import MsClock
from minibroker.runtime.scheduler import Scheduler
from minibroker.sim.network import Network


class Recorder:
    def __init__(self, clock: MsClock) -> None:
        self.clock = clock
        self.got: list[tuple[int, str]] = []

    def deliver(self, src, message, respond) -> None:
        self.got.append((self.clock.now_ms(), message))


async def test_messages_due_at_one_ms_arrive_in_sending_order(autojump_clock):
    clock = MsClock()
    scheduler = Scheduler(clock)
    network = Network(scheduler, default_latency_ms=2)
    broker = Recorder(clock)
    network.register("controller", Recorder(clock))
    network.register(0, broker)

    def tick() -> None:  # other work keeps the wheel advancing, as a running cluster does
        scheduler.call_later(10, tick)

    async with trio.open_nursery() as nursery:
        await nursery.start(scheduler.run)
        tick()
        network.set_latency(0, "controller", 400)
        await trio.sleep(0.148)
        network.send("controller", 0, "fenced")  # due at 548: a 400 ms bucket, moved down at 400
        await trio.sleep(0.020)
        network.set_latency(0, "controller", 2)
        await trio.sleep(0.097)
        # due at 267 but held behind "fenced": 548 too, in the 20 ms bucket that "fenced" joins only at 400
        network.send("controller", 0, "unfenced")
        await trio.sleep(0.400)
        nursery.cancel_scope.cancel()
    assert broker.got == [(548, "fenced"), (548, "unfenced")]


async def test_a_send_while_delivering_is_not_delivered_inside_that_call(autojump_clock):
    clock = MsClock()
    scheduler = Scheduler(clock)
    network = Network(scheduler, default_latency_ms=0)
    order: list[str] = []

    class Echo:
        def deliver(self, src, message, respond) -> None:
            order.append(f"got {message}")
            if message == "ping":
                network.send(1, 0, "pong")  # same instant on another link, then back
                network.send(0, 1, "again")
                order.append("sent")

    network.register(0, Echo())
    network.register(1, Echo())
    async with trio.open_nursery() as nursery:
        await nursery.start(scheduler.run)
        network.send(0, 1, "ping")
        await trio.sleep(0.010)
        nursery.cancel_scope.cancel()
    # nothing arrived inside the sender's call, though both were due at once (latency 0)
    assert order[:2] == ["got ping", "sent"] and sorted(order[2:]) == ["got again", "got pong"]
