"""Delayed messages in a scenario: the ``[delay_service]`` and ``[delay_wheel]`` sections,
``delay_ms``/``delay_via`` on produce and load steps, and the ``delivered``, ``delay_held`` and
``wheel`` expectations (docs/delay.md, docs/scenarios.md)."""

from __future__ import annotations

from typing import Any

from minibroker.broker.config import ConfigError
from minibroker.delayed_messages.config import DelayConfig
from minibroker.delayed_messages.levels import DelayError
from minibroker.delayed_messages.wheel_service import WheelConfig
from minibroker.scenario.loader.document import Table, describe
from minibroker.scenario.loader.limits import directory_problem
from minibroker.scenario.loader.scope import Scope, broker, check_partition, kafka
from minibroker.scenario.model import DelayHeld, Delivered, Expectation, Produce, WheelFigures

DESIGNS = ("levels", "wheel")


def _checked(table: Table, check: Any) -> Any:
    """``check()``; a ConfigError becomes a scenario error at ``table``'s key it names."""
    try:
        return check()
    except ConfigError as error:
        where, _, problem = str(error).partition(": ")
        raise table.ctx.error(where if where.startswith(table.path) else table.sub(where), problem) from None


def read_delay_service(root: Table, scope: Scope) -> None:
    """``[delay_service]``: the delay levels' settings (``delay.levels``, ``delay.service.*``)."""
    if not root.has("delay_service"):
        root.raw("delay_service", None)
        return
    settings = kafka(root, "delay_service", DelayConfig.from_kafka)
    config = DelayConfig.from_kafka(settings)
    _checked(root.table("delay_service"), lambda: config.replication_factor(scope.cluster.brokers))
    scope.delay_service = settings


def read_delay_wheel(root: Table, scope: Scope) -> None:
    """``[delay_wheel]``: the file wheel's settings (``delay.wheel.*``) and an optional ``data_dir``."""
    if not root.has("delay_wheel"):
        root.raw("delay_wheel", None)
        return
    table = root.table("delay_wheel")
    data_dir = table.str("data_dir", None)
    problem = directory_problem(data_dir) if data_dir else None
    if problem is not None:
        raise table.error("data_dir", problem)
    settings = {k: v for k, v in table.data.items() if k != "data_dir"}
    table.used.update(table.data)
    config = _checked(table, lambda: WheelConfig.from_kafka(settings, table.path))
    _checked(table, lambda: config.copies(scope.cluster.brokers))
    scope.delay_wheel = {**settings, **({"data_dir": data_dir} if data_dir else {})}


def delay_of(table: Table, scope: Scope) -> tuple[int | None, str | None]:
    """A step's ``delay_ms`` and ``delay_via``, checked against the scenario's designs."""
    if not table.has("delay_ms"):
        if table.has("delay_via"):
            raise table.error("delay_via", "expected delay_ms with it")
        return None, None
    delay = table.int("delay_ms", minimum=1, what="a whole number of ms")
    specs = (scope.delay_service, scope.delay_wheel)
    designs = [d for d, spec in zip(DESIGNS, specs, strict=True) if spec is not None]
    if not designs:
        raise table.error("delay_ms", "a delayed send needs a [delay_service] or [delay_wheel] section")
    if scope.end_ms is None:
        raise table.error(
            "delay_ms", "a delayed send needs scenario.end_ms past its due time (delivery follows the steps)"
        )
    via = table.str("delay_via", None, tuple(designs))
    if via is None and len(designs) > 1:
        raise table.error("delay_via", "expected levels or wheel (the scenario has both designs)")
    if (via or designs[0]) == "levels":
        try:
            DelayConfig.from_kafka(scope.delay_service).levels.level_for(delay)
        except DelayError as error:
            raise table.error("delay_ms", str(error).partition(": ")[2]) from None
    return delay, via


def _window(table: Table, key: str) -> tuple[int, int] | None:
    if not table.has(key):
        return None
    raw = table.raw(key)
    if not (
        isinstance(raw, list)
        and len(raw) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in raw)
        and raw[0] <= raw[1]
    ):
        raise table.error(key, f"expected [earliest, latest] in ms, got {describe(raw)}")
    return raw[0], raw[1]


def read_delivered(table: Table, scope: Scope, index: int) -> Expectation:
    """``{ delivered = "<step id>", at = 30000 }``, or ``within``; ``real_partition``, ``duplicates``."""
    name = table.str("delivered")
    delayed = {s.id: s for s in scope.steps if isinstance(s, Produce) and s.delay_ms is not None and s.id}
    if name not in delayed:
        known = ", ".join(delayed) or "(no produce step with delay_ms has an id)"
        expected = f"expected the id of a produce step with delay_ms: {known}; got {name!r}"
        raise table.error("delivered", expected)
    partition = table.str("real_partition", None)
    if partition is not None:
        topic, _, number = partition.rpartition("-")
        if not number.isdigit():
            raise table.error("real_partition", f"expected 'topic-partition' like 't-0', got {partition!r}")
        check_partition(table, "real_partition", topic, int(number), scope.topics)
    return Delivered(
        index,
        table.path,
        name,
        table.ms("at", None),
        _window(table, "within"),
        partition,
        table.int("duplicates", None),
    )


def read_delay_held(table: Table, scope: Scope, index: int) -> Expectation:
    """``{ delay_held = "__delay_5s-0", at = 4999, held = 3, paused = true }``."""
    label = table.str("delay_held")
    if scope.delay_service is None:
        raise table.error("delay_held", "expected a [delay_service] section for it")
    config = DelayConfig.from_kafka(scope.delay_service)
    labels = [f"{t}-{p}" for t in config.levels.topics() for p in range(config.topic_partitions)]
    if label not in labels:
        raise table.error("delay_held", f"expected a level partition ({labels[0]}, ...), got {label!r}")
    paused = table.raw("paused", None)
    if paused is not None and not isinstance(paused, bool):
        raise table.error("paused", f"expected true or false, got {describe(paused)}")
    return DelayHeld(index, table.path, table.ms("at"), label, table.int("held", None), paused)


def read_wheel(table: Table, scope: Scope, index: int) -> Expectation:
    """``{ wheel = 0, at = 1500, slots_with_messages = 1, open_files = 1, pointer = 1, in_sync = true }``."""
    if scope.delay_wheel is None:
        raise table.error("wheel", "expected a [delay_wheel] section for it")
    copies = WheelConfig.from_kafka({k: v for k, v in scope.delay_wheel.items() if k != "data_dir"}).copies(
        scope.cluster.brokers
    )
    who = broker(table, scope.cluster, "wheel")
    if who >= copies:
        raise table.error("wheel", f"expected a broker with a wheel copy (0..{copies - 1}), got {who}")
    in_sync = table.raw("in_sync", None)
    if in_sync is not None and not isinstance(in_sync, bool):
        raise table.error("in_sync", f"expected true or false, got {describe(in_sync)}")
    return WheelFigures(
        index,
        table.path,
        table.ms("at"),
        who,
        table.int("slots_with_messages", None),
        table.int("open_files", None),
        table.int("pointer", None),
        in_sync,
    )
