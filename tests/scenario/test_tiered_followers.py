"""Tiered storage and followers: a follower behind its leader's local log start starts there."""

from __future__ import annotations

from minibroker.scenario import parse_scenario, run_scenario

# Broker 0 leads t-0, broker 1 follows; broker 1's fetcher is paused at 50, before anything is written.
# Five 100-byte batches (acks=1) at 100..140 make segments [0-5], [6-11] and the active [12-14] on the
# leader. The paused follower stays in the ISR with LEO 0 until the ISR check at 1500 (every
# replica.lag.time.max.ms / 2 = 500; last caught up at 100, out of sync after 1100), so the HW (and
# the LSO) stay 0 until then and the copy run at 1000 finds nothing below it. The HW jumps to 15 at
# 1500; the run at 2000 copies [0-5] (done 2020) and [6-11] (2040); local retention at 3000 deletes
# both on the leader: local log start 12, log start 0.
#
# Broker 1 resumes at 3100. Its fetch from offset 0 is below the leader's local log start: the leader
# answers OFFSET_MOVED_TO_TIERED_STORAGE, and the follower starts empty at 12 with log start 0, then
# fetches 12-14 (LEO 15).
SCENARIO = (
    """\
[scenario]
name = "tiered_follower"
end_ms = 3300

[cluster]
brokers = 2
config = { "remote.log.storage.system.enable" = true, "remote.log.manager.task.interval.ms" = 1000, \
"log.retention.check.interval.ms" = 1000, "minibroker.remote.storage.copy.latency.ms" = 20, \
"replica.lag.time.max.ms" = 1000 }

[[topics]]
name = "t"
partitions = 1
replication_factor = 2
configs = { "remote.storage.enable" = true, "segment.bytes" = 200, "local.retention.bytes" = 0 }

[[clients]]
id = "producer"
type = "producer"
config = { acks = 1 }

[[steps]]
at = 50
action = "pause"
broker = 1
"""
    + "".join(
        f'\n[[steps]]\nat = {at}\naction = "produce"\nclient = "producer"\ntopic = "t"\nrecords = 3\n'
        for at in (100, 110, 120, 130, 140)
    )
    + """
[[steps]]
at = 3100
action = "resume"
broker = 1

[[expect]]
partition = "t-0"
at = 1499
hw = 0
isr = [0, 1]

[[expect]]
partition = "t-0"
at = 1500
hw = 15
isr = [0]

[[expect]]
event = { kind = "remote.copy", start = 6, end = 11, time_ms = 2040 }

[[expect]]
partition = "t-0"
at = 3000
log_start = 0
local_log_start = 12

[[expect]]
partition = "t-0"
at = 3250
replica = 1
log_start = 0
local_log_start = 12
leo = 15

[[expect]]
event = { kind = "truncate", broker = 1, offset = 12 }
"""
)


def test_a_follower_behind_the_local_log_start_starts_there_with_the_leaders_log_start():
    result = run_scenario(parse_scenario(SCENARIO, "tiered_follower.toml"))
    assert [(r.where, r.passed, r.seen) for r in result.results if not r.passed] == []
    assert len(result.results) == 6
