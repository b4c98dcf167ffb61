"""Seeded, reproducible task scheduling for trio (virtual-time runs only).

trio deliberately randomises the order in which tasks that become runnable in
the same scheduler pass are run. For byte-identical traces we switch on the
deterministic mode trio itself uses under Hypothesis (sort the batch by task
creation order, then shuffle it with trio's own ``random.Random``) and seed
that generator. Different seeds explore different same-instant interleavings;
the same seed reproduces one exactly.

This touches trio internals (``trio._core._run``); trio is pinned exactly in
pyproject.toml for that reason, and ``deterministic_scheduling`` fails loudly if
the internals it needs are missing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import trio


@contextlib.contextmanager
def deterministic_scheduling(seed: int) -> Iterator[None]:
    """Within the block, trio.run schedules same-instant tasks in an order fixed by ``seed``."""
    run_module = trio._core._run
    if not hasattr(run_module, "_ALLOW_DETERMINISTIC_SCHEDULING") or not hasattr(run_module, "_r"):
        raise RuntimeError(f"trio {trio.__version__} lacks the scheduler hooks minibroker needs")
    saved_flag = run_module._ALLOW_DETERMINISTIC_SCHEDULING
    saved_state = run_module._r.getstate()
    run_module._ALLOW_DETERMINISTIC_SCHEDULING = True
    run_module._r.seed(seed)
    try:
        yield
    finally:
        run_module._ALLOW_DETERMINISTIC_SCHEDULING = saved_flag
        run_module._r.setstate(saved_state)
