"""Tasks that touch each other from ``run`` while both are due in one flush (inline executor).

Every timer hands the tasks of one flush to its executor as a batch, the way Kafka's
SystemTimer submits them to its executor thread: what an earlier task's run does to a
later task of the same batch (re-arm, cancel) cannot stop that later run, but the new
binding it makes must survive the flush.
"""

import pytest

from minibroker.timer import SystemTimer, TimerTask, make_timer

KINDS = ["kafka", "heap", "hashed"]


def two_due_at_10(kind, action):
    """A and B both due at 10; A's run applies ``action(timer, B)``; returns (timer, B, runs of B)."""
    timer = make_timer(kind)
    runs: list[int] = []
    b = TimerTask(10, lambda: runs.append(timer.now()))
    timer.add(TimerTask(10, lambda: action(timer, b)))
    timer.add(b)
    assert timer.advance_clock(10) is True
    return timer, b, runs


def rearm(timer, b):
    b.delay_ms = 50
    timer.add(b)


def cancel(timer, b):
    b.cancel()


def rearm_then_cancel(timer, b):
    rearm(timer, b)
    b.cancel()


@pytest.mark.parametrize("kind", KINDS)
def test_task_handed_over_then_rearmed_and_cancelled_does_not_run_again(kind):
    timer, b, runs = two_due_at_10(kind, rearm)
    assert runs == [10]  # B was already handed over when A re-armed it
    assert timer.size == 1  # ... and the re-arm holds: B is armed at 60
    assert timer.next_expiration() is not None
    b.cancel()
    assert timer.size == 0
    timer.advance_clock(60)
    assert runs == [10]


@pytest.mark.parametrize("kind", KINDS)
def test_rearmed_task_runs_again_at_its_new_expiration(kind):
    timer, _, runs = two_due_at_10(kind, rearm)
    timer.advance_clock(59)
    assert runs == [10]
    timer.advance_clock(60)
    assert runs == [10, 60]
    assert timer.size == 0


def test_rearmed_task_is_located_in_the_wheel_after_the_flush():
    timer, b, _ = two_due_at_10("kafka", rearm)
    assert timer.locate(b) == (2, 3, 60)  # level 2 (20 ms ticks): the bucket starting at 60
    assert timer.size == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("action", [cancel, rearm_then_cancel])
def test_cancel_from_the_same_flush_leaves_nothing_armed(kind, action):
    timer, b, runs = two_due_at_10(kind, action)
    assert runs == [10]
    assert b.is_cancelled
    assert timer.size == 0
    timer.advance_clock(100)
    assert runs == [10]


def test_advance_clock_leaves_no_due_bucket_behind_when_a_run_arms_a_due_task():
    timer = SystemTimer()
    runs: list[int] = []
    late = TimerTask(0, lambda: runs.append(timer.now()))
    early = TimerTask(5, lambda: None)
    # the last bucket of the flush is 8's, so the wheel's clock stops at 8, behind now = 10;
    # the task run at 8 arms `late` due at 10, which the lagging wheel puts in a bucket
    timer.add(early)
    timer.add(TimerTask(8, lambda: timer.add(late)))
    assert timer.advance_clock(10) is True
    assert runs == [10]
    assert timer.next_expiration() is None
    assert timer.size == 0


def test_on_return_no_queued_bucket_is_due():
    timer = SystemTimer(wheel_size=3)
    fired: list[int] = []

    def chain(n):
        def run():
            fired.append(timer.now())
            if n:
                nxt = TimerTask(0, chain(n - 1))
                timer.add(nxt)

        return run

    timer.add(TimerTask(1, chain(3)))
    timer.add(TimerTask(2, lambda: None))
    timer.advance_clock(50)
    assert fired == [50, 50, 50, 50]
    head = timer.next_expiration()
    assert head is None or head > 50
