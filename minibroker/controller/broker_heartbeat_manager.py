"""BrokerHeartbeatManager: when the controller stops hearing a broker, and when it fences it.

Kafka's KRaft brokers send a BrokerHeartbeatRequest every ``broker.heartbeat.interval.ms``
(2000) and the controller fences a broker it has not heard from for ``broker.session.timeout.ms``
(9000): Kafka's ``BrokerHeartbeatManager``
(https://github.com/apache/kafka/blob/trunk/metadata/src/main/java/org/apache/kafka/controller/BrokerHeartbeatManager.java).

The emulator's brokers send no heartbeat messages (they would add an event to every trace for
nothing while every link is up). The heartbeats are modelled, event-driven, from a cadence:

- broker ``b`` registered (started) at ``s`` sends its heartbeats at ``s + k * I`` (k = 1, 2, ...;
  ``I`` its ``broker.heartbeat.interval.ms``); each arrives ``L`` later (the link's latency from
  ``b`` to the controller);
- while the direction ``b`` -> controller is dropped, heartbeats are lost. When it drops at ``d``,
  the last contact ``c`` is the last arrival at or before ``d`` (``s`` itself if none: the
  registration), and a fencing deadline is armed at ``c + T`` (``T``: ``broker.session.timeout.ms``);
- when that direction heals at ``h``, the next heartbeat is sent at the first cadence instant at or
  after ``h`` and arrives ``L`` later: if that is at or before the deadline, the deadline is
  disarmed (nothing happens); otherwise the broker is fenced at the deadline all the same;
- a broker fenced this way is unfenced when that first heartbeat after the heal arrives (a crash
  and restart unfences it too, as before).

Only that deadline is a timer task; nothing runs while no link to the controller is dropped.
Invariant: at most one deadline and one unfencing per broker are armed at a time.
"""

from __future__ import annotations

from collections.abc import Callable

from minibroker.runtime import Scheduler
from minibroker.timer import TimerTask


class BrokerHeartbeatManager:
    """Per broker: the cadence origin, the armed fencing deadline, the armed unfencing."""

    def __init__(
        self,
        scheduler: Scheduler,
        session_timeout_ms: Callable[[], int],
        interval_ms: Callable[[int], int],
        latency_ms: Callable[[int], int],
        on_expired: Callable[[int], None],
        on_resumed: Callable[[int], None],
    ) -> None:
        self.scheduler = scheduler
        self.session_timeout_ms = session_timeout_ms
        self.interval_ms = interval_ms
        self.latency_ms = latency_ms
        self.on_expired = on_expired
        self.on_resumed = on_resumed
        #: broker -> the ms it registered (its heartbeats' cadence starts there)
        self.registered_at: dict[int, int] = {}
        #: broker -> (deadline ms, its task): the session runs out then unless a heartbeat arrives
        self.deadlines: dict[int, tuple[int, TimerTask]] = {}
        self._resuming: dict[int, TimerTask] = {}

    def registered(self, broker: int) -> None:
        """``broker`` (re)started now: its cadence restarts; a deadline of its last life is void."""
        self.registered_at[broker] = self.scheduler.now()
        self._disarm(broker)

    def last_contact(self, broker: int) -> int:
        """The arrival of the last heartbeat at or before now (the registration if none yet)."""
        start = self.registered_at.get(broker, 0)
        interval, latency = self.interval_ms(broker), self.latency_ms(broker)
        sent = self.scheduler.now() - latency
        if sent < start + interval:
            return start
        return start + (sent - start) // interval * interval + latency

    def next_arrival(self, broker: int) -> int:
        """The arrival of the first heartbeat sent at or after now."""
        start = self.registered_at.get(broker, 0)
        interval = self.interval_ms(broker)
        now = self.scheduler.now()
        beats = max(1, -(-(now - start) // interval))
        return start + beats * interval + self.latency_ms(broker)

    def heartbeats_lost(self, broker: int) -> None:
        """Heartbeats from ``broker`` stop reaching the controller now: arm the fencing deadline."""
        if broker in self.deadlines:
            return
        resuming = self._resuming.pop(broker, None)
        if resuming is not None:
            resuming.cancel()
        deadline = self.last_contact(broker) + self.session_timeout_ms()
        task = self.scheduler.call_at(deadline, self._expire, broker)
        self.deadlines[broker] = (deadline, task)

    def heartbeats_resumed(self, broker: int, fenced: bool) -> None:
        """Heartbeats from ``broker`` reach the controller again from the next cadence instant."""
        arrival = self.next_arrival(broker)
        armed = self.deadlines.get(broker)
        if armed is not None and arrival <= armed[0]:
            self._disarm(broker)
        elif (fenced or armed is not None) and broker not in self._resuming:
            self._resuming[broker] = self.scheduler.call_at(arrival, self._resume, broker)

    def _expire(self, broker: int) -> None:
        self.deadlines.pop(broker, None)
        self.on_expired(broker)

    def _resume(self, broker: int) -> None:
        self._resuming.pop(broker, None)
        self.on_resumed(broker)

    def _disarm(self, broker: int) -> None:
        armed = self.deadlines.pop(broker, None)
        if armed is not None:
            armed[1].cancel()
        resuming = self._resuming.pop(broker, None)
        if resuming is not None:
            resuming.cancel()
