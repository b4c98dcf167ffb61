"""What a broker reports of itself at one instant: its timer, purgatories and group coordinator.

Plain, immutable values filled by ``Broker.snapshot`` (the group coordinator fills its
``CoordinatorView``); ``minibroker.sim.snapshot`` puts them together with the partitions into a
``ClusterView`` for the TUI, summaries and tests. The purgatory figures are Kafka's metrics of a
``DelayedOperationPurgatory`` (PurgatorySize, NumDelayedOperations) and of its expirations.
"""

from __future__ import annotations

import attrs

from minibroker.timer import TimerView


@attrs.frozen
class PurgatoryView:
    name: str
    watched: int  # PurgatorySize
    num_delayed: int  # NumDelayedOperations
    watched_keys: int
    completions: int
    expirations: int
    estimated_total: int
    purges: int
    purged: int
    last_purge: tuple[int, int] | None


@attrs.frozen
class MemberView:
    member_id: str
    client_id: str
    session_deadline_ms: int  # -1 when not armed
    awaiting: str  # "join", "sync" or ""


@attrs.frozen
class GroupView:
    group_id: str
    state: str
    generation: int
    protocol: str | None
    leader: str | None  # the leader's client id
    members: tuple[MemberView, ...]
    pending: int  # member ids handed out (MEMBER_ID_REQUIRED) and not joined yet


@attrs.frozen
class CoordinatorView:
    """A broker's group coordinator: the partitions it loaded, its groups, its keyed timer tasks,
    and the partitions whose log it is still reading (COORDINATOR_LOAD_IN_PROGRESS)."""

    partitions: tuple[int, ...]
    groups: tuple[GroupView, ...]
    timers: tuple[tuple[str, int], ...]  # (key, deadline), soonest first
    loading: tuple[int, ...] = ()


@attrs.frozen
class BrokerView:
    broker: int
    alive: bool
    timer: TimerView | None
    purgatories: tuple[PurgatoryView, ...]
    fetchers_paused: bool
    coordinator: CoordinatorView | None = None
