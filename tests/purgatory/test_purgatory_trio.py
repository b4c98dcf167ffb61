"""Purgatories on the trio reaper, in virtual time: expiry, purge, no lost wake-ups, 10,000 operations."""

import random

import trio

from minibroker.purgatory import DelayedOperationPurgatory
from minibroker.runtime import MsClock, Reaper
from minibroker.timer import SystemTimer
from tests.purgatory.conftest import MockOperation


async def start(nursery, purge_interval=1000, names=("mock",)):
    clock = MsClock()
    timer = SystemTimer()
    reaper = Reaper(timer, clock)
    purgatories = [DelayedOperationPurgatory(name, timer, purge_interval=purge_interval) for name in names]
    for purgatory in purgatories:
        reaper.add_hook(purgatory.maybe_purge)
    await nursery.start(reaper.run)
    return clock, reaper, purgatories


async def test_expiry_through_the_reaper(autojump_clock):
    async with trio.open_nursery() as nursery:
        clock, _, (purgatory,) = await start(nursery)
        r1, r2 = MockOperation(20, clock.now_ms), MockOperation(200_000, clock.now_ms)
        purgatory.try_complete_else_watch(r1, ["test1"])
        purgatory.try_complete_else_watch(r2, ["test2"])
        await trio.sleep(1)
        assert r1.log == [("complete", 20), ("expire", 20)]
        assert not r2.is_completed
        nursery.cancel_scope.cancel()


async def test_reaper_purges_stale_watchers_on_its_next_iteration(autojump_clock):
    async with trio.open_nursery() as nursery:
        clock, _, (purgatory,) = await start(nursery, purge_interval=0)
        op = MockOperation(10_000)
        purgatory.try_complete_else_watch(op, ["k1", "k2", "k3"])
        await clock.sleep_until(50)
        op.completable = True
        assert purgatory.check_and_complete("k1") == 1
        assert purgatory.watched() == 2
        await clock.sleep_until(199)
        assert purgatory.watched() == 2
        await clock.sleep_until(201)
        assert purgatory.watched() == 0
        assert purgatory.last_purge == (200, 2)
        nursery.cancel_scope.cancel()


async def test_no_lost_wake_ups(autojump_clock):
    rng = random.Random(22)
    async with trio.open_nursery() as nursery:
        clock, _, (purgatory,) = await start(nursery)
        ops = [MockOperation(10_000, clock.now_ms) for _ in range(100)]
        attempts = [20] * 100
        for i, op in enumerate(ops):
            purgatory.try_complete_else_watch(op, [f"key{i}"])

        async def job(i: int, delay_ms: int) -> None:
            await trio.sleep(delay_ms / 1000)
            attempts[i] -= 1
            if attempts[i] == 0:
                ops[i].completable = True
            purgatory.check_and_complete(f"key{i}")

        async with trio.open_nursery() as jobs:
            for _ in range(20):
                for i in range(100):
                    jobs.start_soon(job, i, rng.randint(0, 9))
        assert all(op.is_completed and not op.expired for op in ops)
        assert all(len(op.log) == 1 for op in ops)
        assert purgatory.num_delayed() == 0 and purgatory.watched() == 0
        nursery.cancel_scope.cancel()


async def test_ten_thousand_operations_end_exactly_once_at_the_exact_ms(autojump_clock):
    rng = random.Random(10_000)
    async with trio.open_nursery() as nursery:
        clock, reaper, (produce, fetch) = await start(nursery, names=("Produce", "Fetch"))
        plan = []
        async with trio.open_nursery() as events:
            for i in range(10_000):
                if i % 50 == 0:
                    await clock.sleep_until(clock.now_ms() + rng.randint(0, 20))
                now = clock.now_ms()
                timeout = rng.randint(1, 3000)
                complete_after = rng.randint(0, 4000)
                purgatory = produce if i % 2 else fetch
                op = MockOperation(timeout, clock.now_ms)
                keys = [f"p{rng.randrange(64)}" for _ in range(rng.randint(1, 3))]
                purgatory.try_complete_else_watch(op, keys)
                plan.append((op, now + timeout, now + complete_after))

                async def complete_later(op=op, at=now + complete_after, key=keys[0], purgatory=purgatory):
                    await clock.sleep_until(at)
                    op.completable = True
                    purgatory.check_and_complete(key)

                events.start_soon(complete_later)
        await clock.sleep_until(clock.now_ms() + 5000)
        for op, expires_at, completes_at in plan:
            if completes_at < expires_at:
                assert op.log == [("complete", completes_at)]
            else:
                assert op.log in (
                    [("complete", expires_at), ("expire", expires_at)],
                    [("complete", completes_at)],
                )
                if completes_at > expires_at:
                    assert op.log == [("complete", expires_at), ("expire", expires_at)]
        assert produce.num_delayed() == fetch.num_delayed() == 0
        assert reaper.timer.size == 0
        expired = sum(1 for op, e, c in plan if op.expired)
        assert produce.expirations + fetch.expirations == expired
        assert expired == sum(1 for op, e, c in plan if c > e) + sum(
            1 for op, e, c in plan if c == e and op.expired
        )
        nursery.cancel_scope.cancel()
