"""MsClock: trio's time in whole milliseconds, on the autojump clock and on a running MockClock."""

import math

import trio
import trio.testing

from minibroker.runtime import MsClock


async def test_autojump_time_in_exact_milliseconds(autojump_clock):
    clock = MsClock()
    assert clock.now_ms() == 0
    assert clock._mock is autojump_clock  # the rate-0 fast path is bound
    await trio.sleep(0.25)
    assert clock.now_ms() == 250
    await clock.sleep_until(1_001)
    assert clock.now_ms() == 1_001
    for ms in (1_002, 1_350, 60_000):
        await clock.sleep_until(ms)
        assert clock.now_ms() == ms
        # what trio itself says, floored to the ms
        assert clock.now_ms() == math.floor((trio.current_time() - clock.origin) * 1000 + 1e-6)


async def test_a_manual_jump_is_seen_at_once(autojump_clock):
    clock = MsClock()
    clock.now_ms()
    autojump_clock.jump(0.0125)
    assert clock.now_ms() == 12  # 12.5 ms: whole milliseconds, floored
    autojump_clock.jump(0.0005)
    assert clock.now_ms() == 13


def test_a_mock_clock_that_runs_is_read_as_it_runs():
    virtual = trio.testing.MockClock(rate=0)
    seen = []

    async def main():
        clock = MsClock(origin=0.0)
        seen.append(clock.now_ms())
        virtual.jump(2.0)
        seen.append(clock.now_ms())
        virtual.rate = 1_000_000.0  # a virtual second per real microsecond: it moves between two reads
        first = clock.now_ms()
        while clock.now_ms() == first:
            pass
        seen.append(clock.now_ms() > first >= 2_000)
        virtual.rate = 0
        paused = clock.now_ms()
        seen.append(clock.now_ms() == paused)

    trio.run(main, clock=virtual)
    assert seen == [0, 2_000, True, True]
