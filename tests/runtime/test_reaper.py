"""The trio side on the autojump clock: exact virtual times, wake-ups, FIFO executor, shutdown."""

from __future__ import annotations

import random

import pytest
import trio

from minibroker.runtime import MsClock, Reaper
from minibroker.timer import SystemTimer, TimerTask, make_timer


class Stamp(TimerTask):
    """Records the virtual ms at which it ran."""

    __slots__ = ("clock", "ran_at", "log", "id", "expiration")

    def __init__(self, delay_ms: int, clock: MsClock, log: list | None = None, id: object = None) -> None:
        super().__init__(delay_ms)
        self.clock = clock
        self.ran_at: list[int] = []
        self.log = log
        self.id = id

    def run(self) -> None:
        self.ran_at.append(self.clock.now_ms())
        if self.log is not None:
            self.log.append(self)


async def start_reaper(nursery, timer=None, **kwargs) -> Reaper:
    clock = MsClock()
    reaper = Reaper(timer or SystemTimer(), clock, **kwargs)
    await nursery.start(reaper.run)
    return reaper


async def test_ms_clock_is_exact_on_the_autojump_clock(autojump_clock):
    clock = MsClock()
    assert clock.now_ms() == 0
    for target in (1, 7, 350, 1001, 123_457):
        await clock.sleep_until(target)
        assert clock.now_ms() == target


async def test_task_added_at_t_with_delay_d_runs_at_t_plus_d(autojump_clock):
    async with trio.open_nursery() as nursery:
        reaper = await start_reaper(nursery)
        clock = reaper.clock
        await clock.sleep_until(1234)
        task = Stamp(450, clock)
        reaper.timer.add(task)
        await clock.sleep_until(5000)
        assert task.ran_at == [1684]
        nursery.cancel_scope.cancel()


async def test_reaper_threefold_timeouts_without_manual_advance(autojump_clock):
    # as Kafka's SystemTimerReaperTest: delays 100, 200 and 300 ms all run, nobody calls advance_clock.
    async with trio.open_nursery() as nursery:
        reaper = await start_reaper(nursery)
        tasks = [Stamp(d, reaper.clock) for d in (100, 200, 300)]
        for task in tasks:
            reaper.timer.add(task)
        await trio.sleep(1)
        assert [t.ran_at for t in tasks] == [[100], [200], [300]]
        nursery.cancel_scope.cancel()


async def test_earlier_task_added_while_sleeping_for_a_later_one(autojump_clock):
    async with trio.open_nursery() as nursery:
        reaper = await start_reaper(nursery, poll_interval_ms=10_000)
        clock = reaper.clock
        late = Stamp(5000, clock)
        reaper.timer.add(late)
        await clock.sleep_until(100)  # the reaper now sleeps towards 5000
        early = Stamp(50, clock)
        reaper.timer.add(early)
        await clock.sleep_until(6000)
        assert early.ran_at == [150]
        assert late.ran_at == [5000]
        nursery.cancel_scope.cancel()


async def test_reaper_sleeps_until_the_head_bucket_not_every_ms(autojump_clock):
    async with trio.open_nursery() as nursery:
        reaper = await start_reaper(nursery)
        task = Stamp(1000, reaper.clock)
        reaper.timer.add(task)
        await reaper.clock.sleep_until(1000)
        await trio.testing.wait_all_tasks_blocked()
        assert task.ran_at == [1000]
        # wakes at 200, 400, 600 (polls), 800 (poll and the level-3 bucket [800, 1200)),
        # then 1000 (the level-2 bucket the task fell into)
        assert reaper.wakeups == 5
        assert reaper.advances == 2
        nursery.cancel_scope.cancel()


async def test_hooks_run_after_each_advance(autojump_clock):
    async with trio.open_nursery() as nursery:
        reaper = await start_reaper(nursery)
        seen = []
        reaper.add_hook(seen.append)
        reaper.timer.add(Stamp(30, reaper.clock))
        await reaper.clock.sleep_until(450)
        assert seen == [20, 30, 230, 430]  # level-2 bucket [20, 40), level-1 bucket 30, then polls
        nursery.cancel_scope.cancel()


async def test_due_tasks_run_fifo_on_one_executor_task(autojump_clock):
    async with trio.open_nursery() as nursery:
        reaper = await start_reaper(nursery)
        clock, log = reaper.clock, []
        running = []

        class Slow(Stamp):
            __slots__ = ()

            async def _body(self):
                running.append(self.id)
                assert len(running) == 1  # never two at once
                await trio.sleep(0.001)
                running.remove(self.id)
                log.append(self.id)

            def run(self):
                return self._body()

        for i, delay in enumerate([20, 10, 20, 10, 15]):
            reaper.timer.add(Slow(delay, clock, id=i))
        await clock.sleep_until(100)
        assert log == [1, 3, 4, 0, 2]
        assert reaper.executor.pending == 0 and reaper.executor.completed == 5
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("kind", ["kafka", "heap", "hashed"])
async def test_ten_thousand_random_tasks_fire_exactly_in_order(autojump_clock, kind):
    rng = random.Random(2026)
    async with trio.open_nursery() as nursery:
        reaper = await start_reaper(nursery, timer=make_timer(kind))
        clock, log = reaper.clock, []
        tasks = []
        for i in range(10_000):
            if i % 100 == 0:
                await clock.sleep_until(clock.now_ms() + rng.randint(0, 30))
            task = Stamp(rng.randint(0, 60_000), clock, log, id=i)
            task.expiration = clock.now_ms() + task.delay_ms
            reaper.timer.add(task)
            tasks.append(task)
        await clock.sleep_until(200_000)
        assert all(t.ran_at == [t.expiration] for t in tasks)
        assert len(log) == 10_000
        assert [t.expiration for t in log] == sorted(t.expiration for t in tasks)
        assert reaper.timer.size == 0
        nursery.cancel_scope.cancel()


class CloseCounter(SystemTimer):
    closes = 0

    def close(self) -> None:
        self.closes += 1


async def test_cancelling_the_nursery_stops_both_tasks_and_closes_the_timer_once(autojump_clock):
    timer = CloseCounter()
    async with trio.open_nursery() as nursery:
        reaper = await start_reaper(nursery, timer=timer)
        reaper.timer.add(Stamp(10_000, reaper.clock))
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert timer.closes == 1 and reaper.closed


def test_poll_interval_must_be_positive():
    with pytest.raises(ValueError):
        Reaper(SystemTimer(), MsClock(origin=0.0), poll_interval_ms=0)
