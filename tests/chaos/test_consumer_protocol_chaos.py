"""Chaos with KIP-848 consumer protocol members: the profile's runs have them, the live check sees a
partition owned by two members and a commit at an epoch its member never had, and runs hold."""

from __future__ import annotations

from minibroker.chaos import PROFILES, compile_schedule, generate, run_index
from minibroker.chaos.groups import GroupChecks
from minibroker.chaos.live_run import LiveRun
from minibroker.chaos.schedule import CONSUMER_GROUP_CLUSTER_CONFIG, GROUP_CLUSTER_CONFIG


def _member(member: str, epoch: int, assigned: list[str], revoking: list[str], at: int) -> dict:
    return {
        "kind": "group.consumer.member",
        "group": "g",
        "member": member,
        "member_epoch": epoch,
        "assigned": assigned,
        "pending_revocation": revoking,
        "time_ms": at,
    }


def test_every_run_of_the_profile_has_consumer_protocol_members_and_the_brokers_timeouts():
    for index in range(20):
        schedule = generate(PROFILES["consumer-protocol"], 0, index, 1000)
        assert schedule.members
        assert {m.config["group.protocol"] for m in schedule.members} == {"consumer"}
    config = compile_schedule(schedule).cluster.config
    assert {k: config[k] for k in CONSUMER_GROUP_CLUSTER_CONFIG} == CONSUMER_GROUP_CLUSTER_CONFIG
    assert {k: config[k] for k in GROUP_CLUSTER_CONFIG} == GROUP_CLUSTER_CONFIG


def test_the_other_profiles_keep_classic_members():
    for name in ("default", "unclean", "acks1"):
        for index in range(10):
            schedule = generate(PROFILES[name], 0, index, 1000)
            assert all("group.protocol" not in m.config for m in schedule.members)


def test_a_partition_handed_on_before_its_owner_released_it_is_a_violation():
    live = LiveRun()
    checks = GroupChecks(live)
    checks("group.consumer.member", _member("a", 1, ["t-0", "t-1"], [], 0))
    checks("group.consumer.member", _member("a", 1, ["t-0"], ["t-1"], 10))
    checks("group.consumer.member", _member("b", 2, [], [], 10))
    assert live.violations == []
    checks("group.consumer.member", _member("b", 2, ["t-1"], [], 20))  # a still revoking t-1
    [violation] = live.violations
    assert (violation.invariant, violation.partition, violation.time_ms) == (7, "t-1", 20)
    assert violation.message == "group g: t-1 owned by b (epoch 2) and by a at once"


def test_after_a_fence_the_partition_is_free_and_a_commit_at_an_unknown_epoch_is_a_violation():
    live = LiveRun()
    checks = GroupChecks(live)
    checks("group.consumer.member", _member("a", 1, ["t-0"], [], 0))
    checks("group.consumer.fence", {"group": "g", "member": "a", "time_ms": 5})
    checks("group.consumer.member", _member("b", 2, ["t-0"], [], 6))
    commit = {
        "group": "g",
        "member": "b",
        "generation": 2,
        "group_generation": 2,
        "error": "NONE",
        "offsets": {},
        "time_ms": 7,
    }
    checks("group.commit", commit)
    assert live.violations == []
    checks("group.commit", {**commit, "generation": 5, "time_ms": 8})
    [violation] = live.violations
    assert (
        violation.message == "group g wrote a commit by b at member epoch 5, an epoch that member never had"
    )


def test_runs_with_consumer_protocol_members_hold_every_invariant():
    for index in (0, 2, 7):
        outcome = run_index("consumer-protocol", 0, index, 1000)
        assert outcome.row["members"] >= 1
        assert outcome.row["violations"] == 0, outcome.violations


def test_a_member_fenced_while_it_reads_its_new_partitions_offsets_backs_off_instead_of_spinning():
    # run 12 of seed 1 over 2000 ms: m2's session times out at 802 ms while its reconciliation waits
    # for a committed-offset lookup; the lookup is refused UNKNOWN_MEMBER_ID until the member hears
    # the fence, each retry retry.backoff.ms after the last, so virtual time moves on
    outcome = run_index("consumer-protocol", 1, 12, 2000)
    assert outcome.row["violations"] == 0, outcome.violations
    assert outcome.row["virtual_ms"] > 2000
    assert outcome.row["events"] < 50_000


def test_after_a_revert_the_members_own_what_the_log_says():
    live = LiveRun()
    checks = GroupChecks(live)
    checks("group.consumer.member", _member("a", 1, ["t-0"], [], 0))
    checks("group.consumer.member", _member("b", 2, ["t-1"], [], 5))  # applied, then its write refused
    checks(
        "group.consumer.revert",
        {"group": "g", "group_epoch": 1, "owned": {"a": ["t-0", "t-1"]}, "time_ms": 5},
    )
    checks("group.consumer.member", _member("c", 2, ["t-1"], [], 6))
    [violation] = live.violations
    assert violation.message == "group g: t-1 owned by c (epoch 2) and by a at once"


def test_runs_that_broke_hold():
    # seed 1 run 17: a leave refused by the log (NOT_ENOUGH_REPLICAS); seed 0 run 10: a join sent again
    # in the instant a loading coordinator refused it; seed 0 run 553 (600 ms): a deposed coordinator's
    # unreplicated change; seed 0 run 323 (600 ms): a member that rejoined while its commits waited for
    # the ISR reads its position with a stable OffsetFetch, so it resumes at 58, not at the older 18
    for seed, index, duration in ((1, 17, 1000), (0, 10, 1000), (0, 553, 600), (0, 323, 600)):
        outcome = run_index("consumer-protocol", seed, index, duration)
        assert outcome.row["violations"] == 0, outcome.row["first_violation"]
