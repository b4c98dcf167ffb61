"""The trace events a scenario may expect, by kind, with the fields each carries.

``event = { kind = ..., field = value }`` expectations and ``count = "events"`` filters
name fields of these; an unknown kind or field is a typo that would otherwise never
match. A new event kind is one line here (tests/scenario/test_limits.py checks this
table against the events the bundled scenarios emit). docs/trace.md describes them.
"""

from __future__ import annotations

#: every event has these
COMMON = frozenset(("kind", "seq", "time_ms"))
_OP = ("broker", "purgatory", "op")
_CLIENT = ("client", "op", "broker", "keys")
_DONE = (*_CLIENT, "error", "cause", "latency_ms")
_TIMER = ("broker", "op", "expiration", "level", "slot", "bucket", "left_ms")

KINDS: dict[str, frozenset[str]] = {
    kind: frozenset(fields)
    for kind, fields in {
        "client.produce": (*_CLIENT, "acks", "records"),
        "client.fetch": (*_CLIENT, "offset"),
        "client.produce.done": _DONE,
        "client.fetch.done": _DONE,
        "produce.request": ("broker", "op", "keys", "acks", "timeout_ms"),
        "append": ("broker", "op", "partition", "offset", "count", "bytes", "leo", "hw"),
        "append.rejected": ("broker", "op", "partition", "error"),
        "produce.response": ("broker", "op", "partition", "offset", "error", "cause"),
        "fetch.response": ("broker", "op", "partition", "offset", "error", "cause", "records", "bytes", "hw"),
        "op.create": (*_OP, "keys", "delay_ms"),
        "op.watch": _OP,
        "op.check": (*_OP, "keys", "result"),
        "op.complete": (*_OP, "cause"),
        "op.expire": _OP,
        "op.cancel": ("broker", "purgatory", "keys", "count", "ops"),
        "purge": ("broker", "purgatory", "count", "watched", "num_delayed"),
        "timer.add": _TIMER,
        "timer.reinsert": (*_TIMER, "from_bucket"),
        "timer.fire": ("broker", "op", "expiration"),
        "follower.fetch": ("broker", "partition", "replica", "offset"),
        "hw": ("broker", "partition", "hw", "previous", "leo"),
        "replicate": ("broker", "partition", "leader", "count", "leo", "hw"),
        "truncate": ("broker", "partition", "offset", "removed", "leo"),
        "isr.propose": ("broker", "partition", "change", "isr", "current"),
        "isr.commit": ("broker", "partition", "isr", "epoch"),
        "isr.rejected": ("broker", "partition", "error"),
        "controller.isr": ("partition", "isr", "leader", "epoch"),
        "controller.elect": ("partition", "isr", "leader", "epoch"),
        "controller.broker": ("broker", "state"),
        "topic.create": ("topic", "partitions", "rf"),
        # the group coordinator (docs/groups.md): its keyed timers, groups and members
        "timer.schedule": ("broker", "key", "delay_ms", "deadline_ms", "replaced"),
        "timer.cancel": ("broker", "key", "deadline_ms"),
        "timer.expire": ("broker", "key", "deadline_ms"),
        "group.load": ("broker", "partition", "epoch", "records", "groups"),
        "group.unload": ("broker", "partition"),
        "group.join": ("broker", "group", "member", "instance", "session_timeout_ms", "rebalance_timeout_ms"),
        "group.sync": ("broker", "group", "member", "generation", "assignments"),
        "group.state": ("broker", "group", "state", "generation", "leader", "members", "protocol", "reason"),
        "group.member.add": ("broker", "group", "member", "instance"),
        "group.member.replace": ("broker", "group", "member", "previous", "instance"),
        "group.member.remove": ("broker", "group", "member", "reason"),
        "group.session.expire": ("broker", "group", "member", "generation", "pending"),
        "group.leave": ("broker", "group", "member", "reason"),
        "group.commit": ("broker", "group", "member", "error", "offsets"),
        "group.offsets.expire": ("broker", "group", "partitions"),
        "member.join": ("client", "group", "member"),
        "member.assigned": ("client", "group", "member", "generation", "leader", "partitions"),
        "member.commit": ("client", "group", "offsets"),
        "member.error": ("client", "group", "api", "error"),
        "member.failed": ("client", "group", "error"),
        "member.leave": ("client", "group", "member"),
        "member.stall": ("client", "group"),
        "member.hang": ("client", "group"),
        "member.resume": ("client", "group"),
        "leader": ("broker", "partition", "leader", "epoch", "isr"),
        "leader.lost": ("broker", "partition", "leader", "epoch"),
        "replica.stopped": ("broker", "partition", "deleted"),
        "fault": ("fault", "broker", "src", "dst", "latency_ms", "settings"),
        "net.lost": ("src", "dst", "message"),
    }.items()
}
