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
_KEYED = ("broker", "key", "deadline_ms")  # the group coordinator's keyed tasks
_GROUP = ("broker", "group")  # the group coordinator's events
_MEMBER = ("client", "group")  # the emulator's own group members

KINDS: dict[str, frozenset[str]] = {
    kind: frozenset(fields)
    for kind, fields in {
        "client.produce": (*_CLIENT, "acks", "records"),
        "client.fetch": (*_CLIENT, "offset"),
        "client.produce.done": _DONE,
        "client.fetch.done": _DONE,
        "client.delete_records": (*_CLIENT, "offsets", "timeout_ms"),
        "client.delete_records.done": _DONE,
        "delete_records.request": ("broker", "op", "keys", "offsets", "timeout_ms"),
        "delete_records.response": ("broker", "op", "partition", "error", "low_watermark", "cause"),
        "client.elect_leaders": (*_CLIENT, "election", "timeout_ms"),
        "client.elect_leaders.done": _DONE,
        "elect_leaders.request": ("broker", "op", "keys", "election", "timeout_ms"),
        "elect_leaders.response": ("broker", "op", "partition", "error", "cause"),
        "log_start": ("broker", "partition", "op", "offset", "previous"),
        "log.clean": (
            "broker",
            "partition",
            "first_dirty",
            "end",
            "dirty_bytes",
            "total_bytes",
            "removed",
            "tombstones",
            "segments",
        ),
        "produce.request": ("broker", "op", "keys", "acks", "timeout_ms"),
        "append": ("broker", "op", "partition", "offset", "count", "bytes", "leo", "hw"),
        "append.rejected": ("broker", "op", "partition", "error"),
        "append.duplicate": ("broker", "op", "partition", "offset"),
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
        "controller.broker": ("broker", "state", "reason"),
        "leader": ("broker", "partition", "leader", "epoch", "isr"),
        "leader.lost": ("broker", "partition", "leader", "epoch"),
        "replica.stopped": ("broker", "partition", "deleted"),
        "fault": ("fault", "broker", "src", "dst", "one_way", "latency_ms", "settings", "partition", "topic"),
        "net.lost": ("src", "dst", "message"),
        # delayed messages (minibroker.delayed_messages, docs/delay.md)
        "delay.assign": ("broker", "partition", "offset"),
        "delay.release": ("broker", "partition", "dropped"),
        "delay.held": ("broker", "partition", "offset", "id", "due_ms"),
        "delay.forward": ("broker", "id", "partition"),
        "delay.delivered": ("broker", "design", "id", "partition", "level_ms", "due_ms", "lateness_ms"),
        "delay.forward.failed": ("broker", "id", "error"),
        "delay.commit": ("broker", "partition", "offset"),
        "delay.pause": ("broker", "partition", "held"),
        "delay.resume": ("broker", "partition", "held"),
        "delay.invalid": ("broker", "partition", "reason"),
        "delay.wheel.append": ("id", "due_ms", "tick", "slot", "copies"),
        "delay.wheel.fire": ("broker", "tick", "slot", "forward", "roll"),
        "delay.wheel.active": ("broker",),
        "delay.wheel.out_of_sync": ("broker",),
        "delay.wheel.in_sync": ("broker", "copied_from"),
        "delay.wheel.damage": ("broker", "path", "offset", "reason"),
        "topic.create": ("topic", "partitions", "rf"),
        "topic.delete": ("topic", "partitions"),
        "topic.partitions": ("topic", "partitions"),
        # retry topics and the DLT (minibroker.retry, docs/retry.md); origin = "<topic>-<p>@<offset>"
        "retry.deliver": ("client", "origin", "partition", "offset", "attempt"),
        "retry.processed": ("client", "origin", "attempts"),
        "retry.handoff": ("client", "origin", "attempt", "topic", "partition", "due_ms", "error"),
        "retry.schedule": ("client", "origin", "attempt", "topic", "due_ms"),
        "retry.redeliver": ("client", "origin", "attempt", "due_ms", "lateness_ms"),
        "retry.dead": ("client", "origin", "attempts", "error", "partition"),
        "retry.pause": ("client", "origin", "partition", "attempt", "due_ms"),
        "retry.resume": ("client", "origin", "partition"),
        "retry.produce.failed": ("client", "topic", "partition", "error"),
        "timer.schedule": (*_KEYED, "delay_ms", "replaced"),
        "timer.cancel": _KEYED,
        "timer.expire": _KEYED,
        "group.join": (*_GROUP, "member", "instance", "session_timeout_ms", "rebalance_timeout_ms"),
        "group.sync": (*_GROUP, "member", "generation", "assignments"),
        "group.state": (*_GROUP, "state", "generation", "reason", "protocol", "leader", "members"),
        "group.member.add": (*_GROUP, "member", "instance"),
        "group.member.remove": (*_GROUP, "member", "reason"),
        "group.member.replace": (*_GROUP, "member", "instance", "previous"),
        "group.leave": (*_GROUP, "member", "reason"),
        "group.session.expire": (*_GROUP, "member", "generation", "pending"),
        "group.commit": (*_GROUP, "member", "generation", "group_generation", "offsets", "error"),
        "group.offsets.expire": (*_GROUP, "partitions"),
        "group.load.start": ("broker", "partition", "epoch", "records", "load_ms"),
        "group.load": ("broker", "partition", "epoch", "records", "groups"),
        "group.unload": ("broker", "partition"),
        "member.join": (*_MEMBER, "member"),
        "member.assigned": (*_MEMBER, "member", "generation", "leader", "partitions"),
        "member.commit": (*_MEMBER, "offsets"),
        "member.leave": (*_MEMBER, "member"),
        "member.error": (*_MEMBER, "api", "error"),
        "member.failed": (*_MEMBER, "error"),
        "member.stall": _MEMBER,
        "member.hang": _MEMBER,
        "member.resume": _MEMBER,
    }.items()
}
