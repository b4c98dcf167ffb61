"""Spreading runs over processes (``--workers``) or Spark tasks (``--master``).

Either way a task gets (profile, seed, a slice of run indices, duration) and
returns one ``RunSummary`` per run: its row and its violations. Nothing else
crosses a process boundary (schedules are regenerated from (seed, index) where
needed), and every run is a pure function of its inputs, so the split changes
nothing but the wall time. Results are yielded as tasks finish; the caller sorts
them by run index.

The Spark path is ``sweep``'s: the session comes from ``analytics.session``
(local mode embedded, any master), run indices are the RDD's elements and each
partition runs its indices in the executor's Python worker.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

import attrs

from minibroker.chaos.run import run_index
from minibroker.chaos.violations import Violation


@attrs.frozen
class RunSummary:
    index: int
    row: dict[str, Any]
    violations: tuple[Violation, ...]
    expected: tuple[Violation, ...]


@attrs.frozen
class Job:
    profile: str
    seed: int
    duration_ms: int
    plant: str | None = None


def run_slice(job: Job, indices: list[int]) -> list[RunSummary]:
    """The task: run each index of the slice (in whatever process calls this)."""
    out = []
    for index in indices:
        outcome = run_index(job.profile, job.seed, index, job.duration_ms, job.plant)
        out.append(RunSummary(index, outcome.row, tuple(outcome.violations), tuple(outcome.expected)))
    return out


def slices(runs: int, size: int) -> list[list[int]]:
    return [list(range(start, min(runs, start + size))) for start in range(0, runs, size)]


def _exit_with_parent(parent: int) -> None:
    """Worker initializer: exit within a second once ``parent`` is gone (killed, SIGTERM), so no worker
    outlives the command; a signal to the parent alone reaches no worker otherwise."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def run_local(job: Job, runs: int, workers: int) -> Iterator[RunSummary]:
    """In this process (``workers`` 1) or in a pool of ``workers`` spawned processes."""
    if workers <= 1:
        for part in slices(runs, 1):
            yield from run_slice(job, part)
        return
    context = multiprocessing.get_context("spawn")  # no fork of a process with threads (the progress bar)
    size = max(1, min(10, runs // (workers * 8) or 1))
    pool = concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=context, initializer=_exit_with_parent, initargs=(os.getpid(),)
    )
    futures = [pool.submit(run_slice, job, part) for part in slices(runs, size)]
    try:
        for future in concurrent.futures.as_completed(futures):
            yield from future.result()
    except BaseException:  # an error, Ctrl-C or an abandoned iterator: don't wait for running slices
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def run_spark(job: Job, runs: int, master: str) -> Iterator[RunSummary]:
    """One Spark task per slice of run indices; summaries come back as partitions finish."""
    from minibroker.analytics.session import spark_session
    from minibroker.analytics.spark_checks import local_cores

    with spark_session(master, app_name="minibroker-chaos") as spark:
        cores = local_cores(master) or spark.sparkContext.defaultParallelism
        size = max(1, min(25, runs // (max(1, cores) * 4) or 1))
        parts = slices(runs, size)
        rdd = spark.sparkContext.parallelize(parts, numSlices=len(parts))
        yield from rdd.flatMap(lambda part: run_slice(job, part)).toLocalIterator()
