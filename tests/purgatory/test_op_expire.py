"""The timeout path is traced as ``op.complete`` (cause expiry) then ``op.expire``; nothing else is."""

from minibroker.purgatory import DelayedOperation, DelayedOperationPurgatory
from minibroker.timer import SystemTimer
from minibroker.trace import ListSink, RecordingTracer


class Flag(DelayedOperation):
    ready = False

    def try_complete(self):
        return self.force_complete() if self.ready else False

    def on_complete(self):
        pass

    def on_expiration(self):
        pass


def test_expiry_then_expire_and_an_early_completion_has_no_expire():
    sink = ListSink()
    timer = SystemTimer()
    tracer = RecordingTracer(timer.now, [sink])
    purgatory = DelayedOperationPurgatory("Produce", timer, broker_id=3, tracer=tracer)
    late, early = Flag(100, "late"), Flag(100, "early")
    purgatory.try_complete_else_watch(late, ["k"])
    purgatory.try_complete_else_watch(early, ["k"])
    early.ready = True
    assert purgatory.check_and_complete("k") == 1
    timer.advance_clock(100)
    ends = [(e["kind"], e["op"], e.get("cause")) for e in sink.of_kind("op.complete", "op.expire")]
    assert ends == [
        ("op.complete", "early", "condition"),
        ("op.complete", "late", "expiry"),
        ("op.expire", "late", None),
    ]
    expire = sink.of_kind("op.expire")[0]
    assert (expire["broker"], expire["purgatory"], expire["time_ms"]) == (3, "Produce", 100)
