"""Consumer group figures: rebalances of the emulator's own consumers, and a real client's failover.

Usage::

    python tools/group_bench.py              # N = 1, 10, 100, 1000 members, then the kafka-python kill test
    python tools/group_bench.py --members 1,10 --no-wire --json

Virtual time (the emulator's own consumers, ``session.timeout.ms`` 10000, ``heartbeat.interval.ms``
3000, the default ``group.initial.rebalance.delay.ms`` 3000, one broker, topic ``t`` with N
partitions): all N members join at 0 ms. Reported per N:

- ``stable_ms``: the virtual ms at which the group is first Stable with all N members (the initial
  delay is re-armed once when members arrive after the first one: 6000 ms);
- ``rebalance_ms``: after one member leaves (LeaveGroup), the virtual ms until the group is Stable
  again with N - 1 members (the others hear REBALANCE_IN_PROGRESS at their next heartbeat);
- ``cpu_ms_to_stable`` and ``cpu_ms_per_rebalance``: the process CPU time (``time.process_time``) the
  emulator spent on each of those two phases (everything: network, wheel, coordinator, fetches), after
  a warm-up run of one member that is not reported.

The same for KIP-848's consumer protocol (``group.protocol`` consumer; the coordinator's
``group.consumer.heartbeat.interval.ms`` 5000, no initial delay: the group is Stable once every member
owns its target; the member leaves 1000 ms after that, between heartbeats), side by side with the
classic figures, and ``consumer_over_classic``: per N, the
consumer protocol's CPU ÷ the classic one's, to stable and per rebalance, measured in this one run.

Real time (``--no-wire`` skips it): ``minibroker serve`` with one broker and topic ``t`` of 2
partitions; a kafka-python member in a subprocess and one in this process share group ``bench``
(``session.timeout.ms`` 6000, ``heartbeat.interval.ms`` 1000). The subprocess is killed with SIGKILL;
reported is the wall time from the kill to the survivor's first poll that owns both partitions,
against ``session.timeout.ms``.

``--baseline REV --pairs N`` runs this command from commit REV and from this tree in N
alternating pairs and reports this tree ÷ REV per figure (``tools/bench_baseline.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_baseline import Figure, add_arguments, check, compare_tool  # noqa: E402

#: compared with ``--baseline REV``: this tree ÷ REV, total against total over the pairs
FIGURES = [
    Figure("virtual.[members].cpu_ms_to_stable", "lower"),
    Figure("virtual.[members].cpu_ms_per_rebalance", "lower"),
    Figure("consumer.[members].cpu_ms_to_stable", "lower"),
    Figure("consumer.[members].cpu_ms_per_rebalance", "lower"),
    Figure("wire.kill_to_takeover_ms", "lower"),
]

MEMBER = """
import sys, warnings
warnings.simplefilter("ignore")
from kafka import KafkaConsumer
c = KafkaConsumer("t", bootstrap_servers=sys.argv[1], group_id="bench", session_timeout_ms=6000,
                  heartbeat_interval_ms=1000)
seen = None
while True:
    c.poll(timeout_ms=100)
    now = sorted(tp.partition for tp in c.assignment())
    if now != seen:
        seen = now
        print("assigned", now, flush=True)
"""


def _group_run(members: int, settings: dict, seen: Any, pause_ms: int) -> dict:
    """All ``members`` join at 0; then the last one leaves ``pause_ms`` after the group is first Stable.

    ``seen(cluster, event)``: (members, epoch) when the event shows the group Stable, else None; the
    rebalance ends at a Stable group of one member fewer at a later epoch than at the leave.
    """
    import trio
    import trio.testing

    from minibroker.sim import TopicSpec, open_cluster
    from minibroker.trace import RecordingTracer

    out: dict = {"members": members}
    stable: list[tuple[int, int, int]] = []  # (time, members, epoch) of each moment seen Stable
    wake: list[trio.Event] = []
    box: list = []

    def sink(event: dict) -> None:
        found = seen(box[0], event) if box else None
        if found is not None:
            stable.append((event["time_ms"], *found))
            if wake:
                wake[-1].set()

    async def until_stable(size: int, after_epoch: int) -> int:
        while not stable or stable[-1][1] != size or stable[-1][2] <= after_epoch:
            wake.append(trio.Event())
            await wake[-1].wait()
        return stable[-1][0]

    async def main() -> None:
        tracer = RecordingTracer(lambda: 0, [sink])
        config = {"offsets.topic.num.partitions": 1}
        async with open_cluster(1, [TopicSpec("t", members, 1)], config, tracer=tracer) as cluster:
            box.append(cluster)
            tracer.clock = cluster.now
            cluster.ensure_offsets_topic()
            memberships = []
            cpu = time.process_time()
            for i in range(members):
                membership = cluster.consumer(f"c{i}", settings).subscribe(["t"])
                cluster._nursery.start_soon(membership.run)
                memberships.append(membership)
            out["stable_ms"] = await until_stable(members, -1)
            out["cpu_ms_to_stable"] = round((time.process_time() - cpu) * 1000, 1)
            if pause_ms:
                await cluster.clock.sleep_until(cluster.now() + pause_ms)
            start, cpu, epoch = cluster.now(), time.process_time(), stable[-1][2]
            await memberships[-1].leave()
            left = await until_stable(members - 1, epoch) if members > 1 else start
            out["rebalance_ms"] = left - start
            out["cpu_ms_per_rebalance"] = round((time.process_time() - cpu) * 1000, 1)

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return out


def virtual_run(members: int) -> dict:
    """Classic members: Stable as the coordinator's ``group.state`` events say, at a generation."""

    def seen(cluster: Any, event: dict) -> tuple[int, int] | None:
        if event["kind"] == "group.state" and event.get("state") == "Stable":
            group = cluster.brokers[0].coordinator.groups["g"]
            return len(group.members), group.generation_id
        return None

    settings = {"group.id": "g", "session.timeout.ms": 10_000, "heartbeat.interval.ms": 3000}
    return _group_run(members, settings, seen, 0)


def consumer_run(members: int) -> dict:
    """KIP-848 members (``group.protocol`` consumer, the coordinator's default
    ``group.consumer.heartbeat.interval.ms`` 5000): Stable means every member at the assignment epoch
    and owning its whole target. The member leaves 1000 ms after that, between heartbeats (every
    member heartbeats at the same instants from 0 on)."""

    def seen(cluster: Any, event: dict) -> tuple[int, int] | None:
        if event["kind"] not in ("group.consumer.member", "group.consumer.heartbeat"):
            return None
        group = cluster.brokers[0].coordinator.consumer_group_manager.groups.get("g")
        if group is None or group.state != "Stable":
            return None
        return len(group.members), group.group_epoch

    return _group_run(members, {"group.id": "g", "group.protocol": "consumer"}, seen, 1000)


def ratios(classic: list[dict], consumer: list[dict]) -> list[dict]:
    """Per group size: the consumer protocol's CPU ÷ the classic protocol's, in this one run."""

    def ratio(new: float, old: float) -> float | None:
        return round(new / old, 3) if old else None

    return [
        {
            "members": old["members"],
            "cpu_to_stable": ratio(new["cpu_ms_to_stable"], old["cpu_ms_to_stable"]),
            "cpu_per_rebalance": ratio(new["cpu_ms_per_rebalance"], old["cpu_ms_per_rebalance"]),
        }
        for old, new in zip(classic, consumer, strict=True)
    ]


def wire_run() -> dict:
    from tests.server.conftest import ServedThread, scenario

    config = '"group.initial.rebalance.delay.ms" = 0, "offsets.topic.num.partitions" = 1'
    server = ServedThread(
        scenario(brokers=1, config=config, topics='name = "t"\npartitions = 2\nreplication_factor = 1')
    ).start()
    victim = None
    try:
        import warnings

        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer

        survivor = KafkaConsumer(
            "t",
            bootstrap_servers=server.bootstrap,
            group_id="bench",
            session_timeout_ms=6000,
            heartbeat_interval_ms=1000,
        )
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        victim = subprocess.Popen(
            [sys.executable, "-c", MEMBER, server.bootstrap], stdout=subprocess.PIPE, text=True, env=env
        )
        deadline = time.monotonic() + 60
        while len(survivor.assignment()) != 1:
            if time.monotonic() > deadline:
                raise RuntimeError("the two members never split the partitions")
            survivor.poll(timeout_ms=50)
        victim.kill()
        killed = time.monotonic()
        victim.wait(10)
        while len(survivor.assignment()) != 2:
            if time.monotonic() - killed > 60:
                raise RuntimeError("the survivor never got the victim's partition")
            survivor.poll(timeout_ms=20)
        took = time.monotonic() - killed
        survivor.close()
        return {
            "client": "kafka-python",
            "session_timeout_ms": 6000,
            "kill_to_takeover_ms": round(took * 1000),
        }
    finally:
        if victim is not None and victim.poll() is None:
            victim.kill()
            victim.wait(10)
        server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--members", default="1,10,100,1000", help="comma-separated group sizes (default 1,10,100,1000)"
    )
    parser.add_argument("--no-wire", action="store_true", help="skip the real-client kill measurement")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    add_arguments(parser)
    args = parser.parse_args(argv)
    commit = check(parser, args)
    if commit is not None:
        return compare_tool(__file__, argv, FIGURES, commit, args.pairs, args.json, rev=args.baseline)
    try:
        sizes = [int(n) for n in args.members.split(",")]
        if any(n < 1 for n in sizes):
            raise ValueError
    except ValueError:
        print(
            f"group_bench: --members: expected whole numbers >= 1 like 1,10,100, got {args.members!r}",
            file=sys.stderr,
        )
        return 2
    virtual_run(1)  # warm-up (first imports and code paths), not reported
    consumer_run(1)
    classic = [virtual_run(n) for n in sizes]
    consumer = [consumer_run(n) for n in sizes]
    report = {
        "virtual": classic,
        "consumer": consumer,
        "consumer_over_classic": ratios(classic, consumer),
        "wire": None if args.no_wire else wire_run(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        "protocol  members  stable at (virtual ms)  rebalance after a leave (virtual ms)  "
        "CPU to stable (ms)  CPU/rebalance (ms)"
    )
    for name, rows in (("classic", classic), ("consumer", consumer)):
        for row in rows:
            print(
                f"{name:<8}  {row['members']:>7}  {row['stable_ms']:>22,}  {row['rebalance_ms']:>36,}  "
                f"{row['cpu_ms_to_stable']:>18,.1f}  {row['cpu_ms_per_rebalance']:>18,.1f}"
            )
    for row in report["consumer_over_classic"]:
        print(
            f"consumer ÷ classic, {row['members']} members: CPU to stable {row['cpu_to_stable']}, "
            f"CPU per rebalance {row['cpu_per_rebalance']}"
        )
    if report["wire"] is not None:
        wire = report["wire"]
        print(
            f"{wire['client']}: SIGKILL of one member -> the survivor owns its partition after "
            f"{wire['kill_to_takeover_ms']:,} ms (session.timeout.ms {wire['session_timeout_ms']:,})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
